"""Every program of the frontend's lit tests lowers through the named pipeline to a verified vm
module: from Python (`Context.program_lowered`) and from `abir-opt -p abir-lower` on the printed
functional IR (programs without opaque callables: a separate process cannot see those)."""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import abir
from abir.dialects import vm
from abir.tools import abir_opt

FRONTEND = Path(__file__).parents[1] / "lit" / "frontend"
ABIR_OPT = str(Path(sys.executable).parent / "abir-opt")

i64 = abir.TensorType(np.int64, ())
f64 = abir.TensorType(np.float64, ())
vec3 = abir.TensorType(np.float64, (3,))
State = collections.namedtuple("State", ["x", "n"])

# (lit file, function) -> (signature for Context.program_lowered, arg-types for abir-opt or None)
PROGRAMS = {
    ("fib.py", "fib"): ([i64], "i64"),
    ("mutual_recursion.py", "is_even"): ([i64], "i64"),
    ("mutual_recursion.py", "is_odd"): ([i64], "i64"),
    ("while_loop.py", "collatz"): ([i64], "i64"),
    ("for_range.py", "triangle"): ([i64], "i64"),
    ("for_range.py", "stepped"): ([i64, i64, i64], "i64,i64,i64"),
    ("expressions.py", "operators"): ([i64, i64], "i64,i64"),
    ("combined.py", "power_sum"): ([i64, i64], "i64,i64"),
    ("combined.py", "find"): ([i64, i64], "i64,i64"),
    ("combined.py", "flag"): ([i64], "i64"),
    ("structures.py", "pairs"): ([i64], "i64"),
    ("structures.py", "main"): ([i64], "i64"),
    ("structures.py", "step"): ([State(i64, i64)], None),
    ("opaque_and_closures.py", "clip"): ([vec3], None),
    ("arrays.py", "arrays"): ([vec3, i64], None),
    ("ternary_recursion.py", "fib"): ([i64], "i64"),
    ("ternary_recursion.py", "clamp_div"): ([i64, i64], "i64,i64"),
    ("item_assignment.py", "histogram"): ([abir.TensorType(np.int64, (8,)), i64], None),
}


def load(lit_file: str) -> dict:
    """Run a frontend lit program (it prints its module) and return its globals."""
    with contextlib.redirect_stdout(io.StringIO()):
        return runpy.run_path(str(FRONTEND / lit_file))


def test_every_frontend_program_is_listed():
    listed = {(f, name) for f, name in PROGRAMS}
    for path in sorted(FRONTEND.glob("*.py")):
        for name in load(path.name)["ctx"].function_names():
            assert (path.name, name) in listed, f"{path.name}: {name} has no signature in PROGRAMS"


@pytest.mark.parametrize(("lit_file", "name"), list(PROGRAMS), ids=[f"{f}:{n}" for f, n in PROGRAMS])
def test_lowers_from_python(lit_file: str, name: str):
    sig, _ = PROGRAMS[(lit_file, name)]
    lowered = load(lit_file)["ctx"].program_lowered(name, sig)
    lowered.verify()
    assert any(isinstance(op, vm.ProgramOp) for op in lowered.ops)


@functools.cache
def printed_functional_ir(lit_file: str) -> str:
    """What a frontend lit program prints run as a script, in a separate process: its functional
    IR (one process per file, shared by the file's functions)."""
    return subprocess.run([sys.executable, str(FRONTEND / lit_file)], capture_output=True, text=True, check=True).stdout


@pytest.mark.parametrize(
    ("lit_file", "name"),
    [key for key, (_, types) in PROGRAMS.items() if types is not None],
    ids=[f"{f}:{n}" for (f, n), (_, t) in PROGRAMS.items() if t is not None],
)
# Each program's lowering is test_lowers_from_python's, the printed text's parsing lit's (each
# frontend lit test reads it with abir-opt): `make test` keeps the text path's kinds of entry
# (recursion, several arg-types, a callee's structures), `full` the other programs.
@pytest.mark.make_test_keeps(
    {"lit_file": "fib.py", "name": "fib"},
    {"lit_file": "for_range.py", "name": "stepped"},
    {"lit_file": "structures.py", "name": "main"},
)
def test_lowers_through_abir_opt(lit_file: str, name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """abir-opt's `main`, in this process, on the text the program printed in its own (the
    console script in a process of its own: the next test and the lit suite)."""
    _, arg_types = PROGRAMS[(lit_file, name)]
    text = tmp_path / f"{name}.mlir"
    text.write_text(printed_functional_ir(lit_file))
    abir_opt.main([str(text), "-p", f"abir-lower{{entry={name} arg-types={arg_types}}}"])
    lowered = capsys.readouterr()
    assert f"vm.program @{name}(" in lowered.out, lowered.err[-2000:]


def test_abir_opt_asks_for_entry_types():
    result = subprocess.run([ABIR_OPT, "-p", "abir-lower{entry=fib}"], input=printed_functional_ir("fib.py"),
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "arg-types=i64" in result.stderr
