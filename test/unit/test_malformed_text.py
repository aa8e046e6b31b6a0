"""Malformed IR text is a located diagnostic, never a traceback: every prefix of a few of the lit
inputs cut after a token (what an interrupted write or a bad copy leaves) and every input with
one line removed, read by `abir-opt`, either parses or fails with exit status 1 and a message
that names the file, a line of the text and a column (or, from a verifier, the op).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from abir.tools import abir_opt

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
