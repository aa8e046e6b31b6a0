"""Malformed IR text is a located diagnostic, never a traceback: every prefix of a few of the lit
inputs cut after a token (what an interrupted write or a bad copy leaves) and every input with
one line removed, read by `abir-opt`, either parses or fails with exit status 1 and a message
that names the file, a line of the text and a column (or, from a verifier, the op when it is not
in the text). A verifier's error points at the line and column of the op it rejects, the op
xDSL marks under `--verify-diagnostics` (checked on every chunk of the dialects' `invalid.mlir`);
a per-member type too large to allocate is refused while parsing, at the type.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from xdsl.dialects.builtin import i64
from xdsl.utils.exceptions import VerifyException

from abir.dialects import functional, make_context, verify_error_text, verify_module
from abir.dialects.parsing import AbirParser, located_error_text
from abir.tools import abir_opt
from abir.types import MAX_MEMBER_ELEMENTS

LIT_DIR = Path(__file__).resolve().parents[1] / "lit"
INPUTS = ["dialects/functional/fibonacci.mlir", "dialects/vm/ops.mlir", "passes/stack-to-vm.mlir"]
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[%@^#!]?[\w.$-]+|->|[^\s\w]')
LOCATION = re.compile(r"m\.mlir:(\d+):(\d+)")


def source(name: str) -> str:
    """The first `// -----` chunk of a lit input, without its comment lines."""
    chunk = (LIT_DIR / name).read_text().split("// -----")[0]
    return "\n".join(line for line in chunk.splitlines() if not line.lstrip().startswith("//"))


def prefixes(name: str, count: int = 12) -> list[str]:
    """`count` prefixes of the input, each ending after a token, spread over the whole text."""
    text = source(name)
    ends = [m.end() for m in TOKEN.finditer(text)]
    return [text[: ends[i * len(ends) // count]] for i in range(count)]


def without_line(name: str, count: int = 8) -> list[str]:
    lines = source(name).splitlines()
    picked = [i * len(lines) // count for i in range(count)]
    return ["\n".join(lines[:i] + lines[i + 1 :]) for i in picked if lines[i].strip()]


CASES = [(name, i, text) for name in INPUTS for i, text in enumerate(prefixes(name) + without_line(name))]


@pytest.mark.parametrize(("name", "index", "text"), CASES, ids=[f"{n}-{i}" for n, i, _ in CASES])
def test_malformed_input_is_a_located_diagnostic(
    name: str, index: int, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.mlir"
    path.write_text(text)
    try:
        abir_opt.main([str(path)])
        return  # this cut happens to be a valid module
    except SystemExit as e:
        assert e.code == 1
    err = capsys.readouterr().err
    assert err.startswith("abir-opt: error: ")
    if (location := LOCATION.search(err)) is not None:
        line = int(location.group(1))
        assert 1 <= line <= text.count("\n") + 1
        assert text.splitlines()[line - 1].strip(), f"the error points at a blank line: {err}"
    else:
        assert "\n  at: " in err, f"no location in: {err}"


INVALID = ["dialects/functional/invalid.mlir", "dialects/stack/invalid.mlir", "dialects/vm/invalid.mlir"]
MARKER = re.compile(r"\s*\^+-*")
GENERIC_NAME = re.compile(r'"([\w.]+)"\(')


def chunks(name: str) -> list[str]:
    """The `// -----` chunks of a lit input, each keeping its lines (comments blanked) so that a
    diagnostic's line number is the chunk's."""
    parts = (LIT_DIR / name).read_text().split("// -----")
    return ["\n".join("" if line.lstrip().startswith("//") else line for line in part.splitlines()) for part in parts]


INVALID_CASES = [(name, i, text) for name in INVALID for i, text in enumerate(chunks(name))]


def marked_op_name(out: str) -> str | None:
    """The name of the op xDSL's `--verify-diagnostics` output marks, if it marks one."""
    lines = out.splitlines()
    for i in range(1, len(lines) - 1):
        # The marker under the op, then the message (a parse error's carets have no message bar).
        marked = MARKER.fullmatch(lines[i]) and lines[i + 1].lstrip().startswith("| ")
        if marked and (match := GENERIC_NAME.search(lines[i - 1])) is not None:
            return match.group(1)
    return None


@pytest.mark.parametrize(("name", "index", "text"), INVALID_CASES, ids=[f"{n}-{i}" for n, i, _ in INVALID_CASES])
def test_a_verifier_error_points_at_the_op_it_rejects(
    name: str, index: int, text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.mlir"
    path.write_text(text)
    abir_opt.main([str(path), "--verify-diagnostics", "--parsing-diagnostics"])
    op_name = marked_op_name(capsys.readouterr().out)
    if op_name is None:
        pytest.skip("a parse error, not a verifier's")
    with pytest.raises(SystemExit):
        abir_opt.main([str(path)])
    err = capsys.readouterr().err
    location = LOCATION.search(err)
    assert location is not None, f"no location in: {err}"
    line, column = int(location.group(1)), int(location.group(2))
    source_line = text.splitlines()[line - 1]
    assert op_name in source_line, f"{op_name} is not on line {line}: {err}"
    assert source_line[column - 1] in '%"' or source_line[column - 1 :].startswith(op_name), err
    assert source_line in err.splitlines(), f"the op's line is not shown: {err}"


def test_most_invalid_chunks_fail_a_verifier(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The test above skips the chunks that fail to parse instead: they are few."""
    verifier_errors = 0
    for _, _, text in INVALID_CASES:
        path = tmp_path / "m.mlir"
        path.write_text(text)
        abir_opt.main([str(path), "--verify-diagnostics", "--parsing-diagnostics"])
        verifier_errors += marked_op_name(capsys.readouterr().out) is not None
    assert verifier_errors >= 90


def test_an_op_made_after_parsing_is_named_not_located() -> None:
    parser = AbirParser(make_context(), "functional.func @f(%x: i64) -> i64 {\n  functional.return %x : i64\n}", "m.mlir")
    module = parser.parse_module()
    func = next(iter(module.ops))
    assert isinstance(func, functional.FuncOp)
    (argument,) = func.body.block.args
    func.body.block.insert_op_before(functional.PrimOp("add", [argument], [i64]), func.body.block.last_op)
    with pytest.raises(VerifyException) as info:
        verify_module(module)
    assert located_error_text(info.value, parser.op_spans) is None
    assert '\n  at: %0 = "functional.prim"' in verify_error_text(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "functional.func @f(%x: f64) -> f64 {\n  %c = functional.constant dense<0.0> : tensor<100000x100000xf64>\n"
        "  functional.return %x : f64\n}",
        "functional.func @f(%x: f64) -> f64 {\n  %c = functional.constant dense<1> : tensor<100000x100000xi64>\n"
        "  functional.return %x : f64\n}",
        "vm.var @x : tensor<4096x4096x4096xf32> register",
    ],
)
def test_abir_opt_refuses_a_huge_type_before_allocating_it(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.mlir"
    path.write_text(text)
    with pytest.raises(SystemExit) as info:
        abir_opt.main([str(path)])
    assert info.value.code == 1
    err = capsys.readouterr().err
    location = LOCATION.search(err)
    assert location is not None, err
    line, column = int(location.group(1)), int(location.group(2))
    assert text.splitlines()[line - 1][column - 1 :].startswith("tensor<"), err
    assert f"elements, more than {MAX_MEMBER_ELEMENTS} per member" in err
