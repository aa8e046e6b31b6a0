"""The split between `make test` and `make test-full` (test/unit/conftest.py's rule 2): a test
parametrized over compiled backends keeps one of them, NumPy always, and a misspelt
`about_backend` marker is a usage error rather than a silent choice."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()
INI = """
[pytest]
addopts = -m "not full" --strict-markers
markers =
    full: make test-full only
"""


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(INI)
    return pytester


def kept(pytester: pytest.Pytester, source: str, *args: str) -> list[str]:
    pytester.makepyfile(test_split=source)
    result = pytester.runpytest_inprocess("--collect-only", "-q", *args)
    assert result.ret == 0, result.stdout.str()
    return sorted(line.partition("::")[2] for line in result.outlines if "::" in line)


def test_numpy_and_one_compiled_backend_are_kept_and_full_runs_the_rest(inner: pytest.Pytester) -> None:
    source = """
import pytest

@pytest.mark.parametrize("backend", ["numpy", "jax", "tf", "tf-xla"])
@pytest.mark.parametrize("case", ["a", "b"])
def test_program(case, backend):
    pass
"""
    quick = kept(inner, source)
    full = kept(inner, source, "-m", "full")
    assert len(quick) + len(full) == 8
    assert {"test_program[a-numpy]", "test_program[b-numpy]"} <= set(quick)
    compiled = {name.partition("-")[2].rstrip("]") for name in quick} - {"numpy"}
    assert len(compiled) == 1  # one variant, the same for every case
    assert len(quick) == 4


def test_about_backend_names_the_variant_kept(inner: pytest.Pytester) -> None:
    source = """
import pytest

@pytest.mark.about_backend("tf-xla")
@pytest.mark.parametrize("backend", ["numpy", "jax", "tf", "tf-xla"])
def test_program(backend):
    pass
"""
    assert kept(inner, source) == ["test_program[numpy]", "test_program[tf-xla]"]


def test_a_file_about_a_backend_keeps_that_backend(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_jax_thing="""
import pytest

@pytest.mark.parametrize("backend", ["jax", "tf"])
def test_program(backend):
    pass
""")
    result = inner.runpytest_inprocess("--collect-only", "-q")
    assert [line for line in result.outlines if "::" in line] == ["test_jax_thing.py::test_program[jax]"]


@pytest.mark.parametrize("marker", ['"tensorflw"', '"jax-xla-fast"', "3"])
def test_a_misspelt_about_backend_is_a_usage_error(inner: pytest.Pytester, marker: str) -> None:
    inner.makepyfile(test_split=f"""
import pytest

@pytest.mark.about_backend({marker})
@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_program(backend):
    pass
""")
    result = inner.runpytest_inprocess("--collect-only", "-q")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*about_backend*"])


def test_a_misspelt_marker_name_is_an_error(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_split="""
import pytest

@pytest.mark.about_backnd("jax")
def test_program():
    pass
""")
    result = inner.runpytest_inprocess("--collect-only", "-q")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*about_backnd*"])
