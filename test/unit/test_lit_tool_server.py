"""The lit suite's tool server (test/lit/tool_server) runs a command as the tool's own process does:
the same standard output, standard error and exit status, reading standard input, in the command's
working directory and environment; and the shims do hand commands to the server."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIT_DIR = ROOT / "test" / "lit"
BIN_DIR = str(Path(sys.executable).parent)

SCRIPT = """\
import os, sys
print(sys.argv[1:], os.getcwd() == os.environ["EXPECTED_CWD"], os.environ["ONLY_HERE"])
print(sys.stdin.read().upper(), end="")
print("to stderr", file=sys.stderr)
with open("parent", "w") as file:
    file.write(str(os.getppid()))
sys.exit(3)
"""


def load_launch() -> ModuleType:
    """launch.py, imported as lit.cfg.py imports it (its directory on sys.path)."""
    sys.path.insert(0, str(LIT_DIR / "tool_server"))
    return importlib.import_module("launch")


def without_server(environment: dict[str, str]) -> dict[str, str]:
    """`environment` without the server's socket: the shims run the real tools."""
    variable = importlib.import_module("tool_client").SERVER_VARIABLE
    return {name: value for name, value in environment.items() if name != variable}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[object, dict[str, str]]]:
    """A running server and the environment whose PATH puts its shims first."""
    environment = dict(os.environ)
    environment["PATH"] = BIN_DIR + os.pathsep + environment.get("PATH", "")
    running = load_launch().start(environment, BIN_DIR)
    yield running, environment
    running.stop()


def run(command: list[str], environment: dict[str, str], cwd: Path, stdin: str = "") -> tuple[int, str, str]:
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, env=environment, cwd=cwd, timeout=300)
    return done.returncode, done.stdout, done.stderr


def served_and_real(server, command: list[str], tmp_path: Path, stdin: str = "") -> tuple[tuple, tuple]:
    """The command run through the shims, and run with the tool's own process."""
    _, environment = server
    return run(command, environment, tmp_path, stdin), run(command, without_server(environment), tmp_path, stdin)


@pytest.mark.parametrize(
    "arguments",
    [
        [str(LIT_DIR / "dialects" / "functional" / "ops.mlir")],
        ["--print-op-generic", str(LIT_DIR / "dialects" / "vm" / "ops.mlir")],
        ["-p", "no-such-pass", str(LIT_DIR / "dialects" / "functional" / "ops.mlir")],
        ["--no-such-option"],
    ],
    ids=["print", "generic", "unknown-pass", "unknown-option"],
)
def test_abir_opt_prints_and_fails_as_its_own_process(server, tmp_path, arguments):
    served, real = served_and_real(server, ["abir-opt", *arguments], tmp_path)
    assert served == real


def test_abir_opt_reads_standard_input_and_filecheck_checks_it(server, tmp_path):
    source = (LIT_DIR / "dialects" / "functional" / "fibonacci.mlir").read_text()
    served, real = served_and_real(server, ["abir-opt"], tmp_path, stdin=source)
    assert served == real and served[0] == 0
    checks = tmp_path / "checks.txt"
    checks.write_text("CHECK: functional.func\nCHECK-NOT: no such text\n")
    assert served_and_real(server, ["filecheck", str(checks)], tmp_path, stdin=served[1]) == (
        (0, "", ""), (0, "", ""))
    checks.write_text("CHECK: no such text\n")
    failed, real_failed = served_and_real(server, ["filecheck", str(checks)], tmp_path, stdin=served[1])
    assert failed == real_failed and failed[0] == 1


def test_abir_run_runs_as_its_own_process(server, tmp_path):
    program = LIT_DIR / "run" / "tail-call-returns.mlir"
    served, real = served_and_real(server, ["abir-run", str(program), "--arg", "[1, 2, 102]"], tmp_path)
    assert served == real and served[0] == 0


def test_a_python_script_gets_its_arguments_directory_environment_and_streams(server, tmp_path):
    running, environment = server
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    environment = {**environment, "EXPECTED_CWD": str(tmp_path), "ONLY_HERE": "set by the command"}
    served = run(["python", str(script), "a b", "c"], environment, tmp_path, stdin="read\n")
    served_parent = int((tmp_path / "parent").read_text())
    real = run(["python", str(script), "a b", "c"], without_server(environment), tmp_path, stdin="read\n")
    assert served == real == (3, "['a b', 'c'] True set by the command\nREAD\n", "to stderr\n")
    assert served_parent == running.process.pid, "the shim ran the script itself, not through the server"
