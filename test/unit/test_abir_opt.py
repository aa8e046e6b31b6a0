"""`abir-opt` as a tool: every lit input round-trips through print and parse, and the CLI runs.

For each `// -----` chunk of each `test/lit/**/*.mlir` file, parsing the chunk and printing it
gives a text that parses back and prints identically (what `abir-opt X | abir-opt` relies on),
and the generic form parses back to the same custom text. Files whose RUN lines check
diagnostics (`--verify-diagnostics`, `--parsing-diagnostics`, `not abir-opt`) hold invalid IR on
purpose and are skipped.
"""

from __future__ import annotations

import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError

from abir.dialects import make_context

ROOT = Path(__file__).resolve().parents[2]
LIT_DIR = ROOT / "test" / "lit"
ABIR_OPT = Path(sys.executable).parent / "abir-opt"
LIT_FILES = sorted(p for p in LIT_DIR.rglob("*.mlir") if "Output" not in p.relative_to(LIT_DIR).parts)
"""The lit inputs, without the files lit's RUN lines write into its `Output/` directories."""

_RUN_LINE = re.compile(r"^\s*//\s*RUN:(.*)$", re.MULTILINE)
_SPLIT = "// -----"


def run_lines(text: str) -> list[str]:
    """The commands of a lit file's `// RUN:` lines."""
    return [m.group(1).strip() for m in _RUN_LINE.finditer(text)]


def checks_diagnostics(run: str) -> bool:
    """Whether a RUN line checks the diagnostics of invalid input: xdsl-opt's diagnostic flags, or
    a command expected to fail that runs no pass (a failing pass may have a valid input)."""
    flags = "--verify-diagnostics" in run or "--parsing-diagnostics" in run
    return flags or (run.startswith("not ") and not uses_passes([run]))


def uses_passes(runs: list[str]) -> bool:
    """Whether a RUN line runs passes (`-p name` or `--passes name`) on the file."""
    return any(re.search(r"(^|\s)(-p|--passes)(\s|=|$)", run) for run in runs)


def parse(text: str, name: str, allow_unregistered: bool = False) -> ModuleOp:
    ctx = make_context()
    ctx.allow_unregistered = allow_unregistered
    return Parser(ctx, text, name).parse_module()


def render(module: ModuleOp, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()


def test_lit_files_are_collected() -> None:
    """The walk below is not vacuous: the dialect tests are among the files it checks."""
    names = {path.relative_to(LIT_DIR).as_posix() for path in LIT_FILES}
    for dialect in ("functional", "stack", "vm"):
        assert f"dialects/{dialect}/ops.mlir" in names


@pytest.mark.parametrize("path", LIT_FILES, ids=lambda p: p.relative_to(LIT_DIR).as_posix())
def test_print_parse_round_trip(path: Path) -> None:
    text = path.read_text()
    runs = run_lines(text)
    if any(checks_diagnostics(run) for run in runs):
        pytest.skip("holds invalid IR on purpose (its RUN lines check diagnostics)")
    allow_unregistered = any("--allow-unregistered-dialect" in run for run in runs)
    rel = path.relative_to(LIT_DIR).as_posix()
    for index, chunk in enumerate(text.split(_SPLIT)):
        where = f"{rel}, chunk {index}"
        try:
            module = parse(chunk, where, allow_unregistered)
        except ParseError as error:
            if uses_passes(runs):
                pytest.skip(f"a pass input that does not parse on its own ({where}): {error}")
            raise
        if not any("--disable-verify" in run for run in runs):
            module.verify()  # abir-opt verifies what it parses: a valid input must verify here too
        printed = render(module)
        reprinted = render(parse(printed, f"{where}, printed", allow_unregistered))
        assert reprinted == printed, f"{where}: printing the re-parsed text changes it"
        generic = render(module, generic=True)
        from_generic = render(parse(generic, f"{where}, generic", allow_unregistered))
        assert from_generic == printed, f"{where}: the generic form parses back to different IR"


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ABIR_OPT), *args], input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


def test_help() -> None:
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    assert "abir modular optimizer driver" in result.stdout
    assert "--split-input-file" in result.stdout


def test_version() -> None:
    result = _run("--version")
    assert result.returncode == 0, result.stderr
    assert re.search(r"abir-opt built from xdsl version \d+\.\d+", result.stdout), result.stdout


def test_pipe_reproduces_output() -> None:
    """`abir-opt X | abir-opt` prints X's canonical text again, through real processes."""
    source = LIT_DIR / "dialects" / "functional" / "ops.mlir"
    first = _run(str(source))
    assert first.returncode == 0, first.stderr
    second = _run(stdin=first.stdout)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


def test_invalid_input_fails() -> None:
    """A verifier error makes abir-opt fail and names the problem."""
    result = _run(
        stdin="functional.func @f() {\n  %r = functional.call @g() : () -> i64\n  functional.return\n}\n"
    )
    assert result.returncode != 0
    assert "no function @g is defined" in result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.startswith("abir-opt: error:")


FIB_UNTYPED = """functional.func @fib(%n: !functional.unknown) -> !functional.unknown {
  %c2 = functional.constant weak 2 : i64
  %c = functional.prim "less"(%n, %c2) : (!functional.unknown, i64) -> i1
  cf.cond_br %c, ^base, ^rec
^base:
  %one = functional.constant weak 1 : i64
  functional.return %one : i64
^rec:
  %a = functional.prim "subtract"(%n, %c2) : (!functional.unknown, i64) -> !functional.unknown
  %r = functional.call @fib(%a) : (!functional.unknown) -> !functional.unknown
  functional.return %r : !functional.unknown
}
"""


def test_list_abir_passes_says_what_each_does() -> None:
    from abir.passes import PASSES

    result = _run("--list-abir-passes")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(PASSES)
    assert all(len(line.split(maxsplit=1)) == 2 for line in lines)
    assert "infer-types, simplify-functional" in _run("--help").stdout


def test_abir_lower_takes_the_only_function_and_a_failing_pass_is_a_diagnostic() -> None:
    lowered = _run("-p", 'abir-lower{arg-types="i64"}', stdin=FIB_UNTYPED)
    assert lowered.returncode == 0, lowered.stderr
    assert "vm.program @fib" in lowered.stdout
    failed = _run("-p", "abir-lower", stdin=FIB_UNTYPED)
    assert failed.returncode == 1
    assert failed.stderr.startswith("abir-opt: error: @fib has untyped parameters") and "Traceback" not in failed.stderr
    two_quoted = _run("-p", 'abir-lower{arg-types="i64,i64"}', stdin=RPOW_UNTYPED)
    assert two_quoted.returncode == 0 and "vm.program @rpow" in two_quoted.stdout, two_quoted.stderr
    bad_spec = _run("-p", 'abir-lower{arg-types="f64x"}', stdin=FIB_UNTYPED)
    assert bad_spec.returncode == 1 and "type expected" in bad_spec.stderr and "Traceback" not in bad_spec.stderr


RPOW_UNTYPED = """functional.func @rpow(%x: !functional.unknown, %n: !functional.unknown) -> !functional.unknown {
  %y = functional.prim "pow"(%x, %n) : (!functional.unknown, !functional.unknown) -> !functional.unknown
  functional.return %y : !functional.unknown
}
"""


def assert_cli_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """abir-opt failed with exit status 1 and one diagnostic holding every fragment, no traceback."""
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert result.stderr.startswith("abir-opt: error: "), result.stderr
    assert "Traceback" not in output, output
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_a_misspelt_pass_names_the_closest_abir_passes_and_how_to_list_them() -> None:
    source = str(LIT_DIR / "dialects" / "functional" / "fibonacci.mlir")
    assert_cli_error(
        _run("-p", "infer-type", source), "unknown pass 'infer-type'", "did you mean infer-types?", "--list-abir-passes"
    )
    assert_cli_error(_run("-p", "canonicalize,abir-lowr", source), "unknown pass 'abir-lowr'", "did you mean abir-lower")


@pytest.mark.parametrize(
    ("file", "fragment"),
    [
        ("missing.mlir", "cannot read the input file {dir}/missing.mlir: No such file or directory"),
        ("subdir", "cannot read the input file {dir}/subdir: Is a directory"),
        ("prog.txt", "{dir}/prog.txt: Unrecognized file extension 'txt'; abir-opt reads MLIR text"),
        ("latin1.mlir", "{dir}/latin1.mlir is not UTF-8 text"),
    ],
)
def test_an_unreadable_input_file_is_named(tmp_path: Path, file: str, fragment: str) -> None:
    (tmp_path / "subdir").mkdir()
    (tmp_path / "prog.txt").write_text(FIB_UNTYPED)
    (tmp_path / "latin1.mlir").write_bytes("// caf\xe9\n".encode("latin-1"))
    assert_cli_error(_run(str(tmp_path / file)), fragment.format(dir=tmp_path))


def test_an_unwritable_output_file_is_named(tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "out.mlir"
    assert_cli_error(_run("-o", str(target), stdin=FIB_UNTYPED), f"cannot write the output file {target}")


@pytest.mark.parametrize(
    ("passes", "fragments"),
    [
        ("infer-types{entry=f arg-types=}", ["infer-types{entry=f arg-types=}", "Unknown argument value", "separated by commas"]),
        ("infer-types{entry=fib", ["expected either a space or `}`", "Pass options:"]),
        ("infer-types{entry=fib}}", ["Expected a comma after pass argument dict"]),
        ("infer-types{foo=f}", ["pass infer-types has no option 'foo'; its options: entry, arg-types"]),
        ("infer-types{entyr=fib}", ["has no option 'entyr'; did you mean entry?"]),
        ("infer-types{arg-types=i64 i64}", ["has no option 'i64'", "the values of a list option", "separated by commas"]),
        ("infer-types{entry=3}", ["-p 'infer-types{entry=3}': Incompatible types", "entry (str | None)"]),
        ("cse{aggressive=true}", ["pass cse takes no options, got 'aggressive'; write -p cse"]),
    ],
)
def test_malformed_pass_options_are_diagnostics(passes: str, fragments: list[str]) -> None:
    assert_cli_error(_run("-p", passes, stdin=FIB_UNTYPED), *fragments)


def test_pass_options_take_kebab_or_snake_case_and_several_types_separated_by_commas() -> None:
    typed = _run("-p", 'infer-types{entry=rpow arg_types=f64,i64}', stdin=RPOW_UNTYPED)
    assert typed.returncode == 0, typed.stderr
    assert "functional.func @rpow(%x: f64, %n: i64) -> f64" in typed.stdout


def test_the_hint_for_untyped_parameters_gives_one_type_per_parameter() -> None:
    assert_cli_error(
        _run("-p", "infer-types", stdin=RPOW_UNTYPED),
        "@rpow has untyped parameters",
        "-p 'infer-types{entry=rpow arg-types=i64,i64}' (one type per parameter, separated by commas)",
    )
    partly_typed = RPOW_UNTYPED.replace("%x: !functional.unknown", "%x: tensor<3xf64>").replace(
        '"pow"(%x, %n) : (!functional.unknown,', '"pow"(%x, %n) : (tensor<3xf64>,'
    )
    assert_cli_error(_run("-p", "abir-lower", stdin=partly_typed), 'arg-types="tensor<3xf64>",i64}')


def test_help_lists_abirs_passes_and_the_option_syntax_before_xdsls_passes() -> None:
    from abir.passes.infer_types import InferTypesPass

    text = _run("--help").stdout
    top = text[: text.index("positional arguments:")]
    assert "abir's passes (abir-opt --list-abir-passes says what each does):" in top
    assert "infer-types, simplify-functional" in top and "canonicalize" not in top
    assert "arg-types=i64,f64" in top and "separated by commas" in " ".join(top.split())
    assert text.index("xDSL's passes, which -p takes too:") > text.index("--list-abir-passes  ")
    assert "separated by commas" in " ".join((InferTypesPass.__doc__ or "").split())
