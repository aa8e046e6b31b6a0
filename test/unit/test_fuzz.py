"""The differential fuzzer (abir.testing): a fixed sample of random programs, batched on every
backend, must equal plain Python member by member; the fuzzer itself must generate valid,
deterministic programs, find an injected miscompilation and shrink it to a small program.
Programs making library calls on per-member arrays are part of the samples: abir refusing to
compile one is tolerated (and counted), a result different from plain Python is a failure.

`make fuzz` runs the large form (1,000 programs); `make test-full` (the `full` marker) adds the rest
of the fixed samples, the shrinking of an injected miscompilation, and a larger sample: 8 programs
on NumPy, or 200 on every backend with ABIR_FULL=1.
"""

from __future__ import annotations

import ast
import os
import time

import numpy as np
import pytest

from abir import errors
from abir.testing import differential, fuzz, gradients
from abir.testing.differential import REFUSED, check, counts_as_failure, load, run_reference, time_limit
from abir.testing.generate import (
    BOOL,
    DEFAULT_FEATURES,
    FLOAT,
    INT,
    LIBRARY_CALLS,
    array_shape,
    parse_calls,
    parse_features,
    signatures,
    type_of,
)

SEED = 0
SAMPLE = {"numpy": range(12), "jax": range(4), "tf": range(4)}
"""Program indices of seed 0 each backend checks: the first `QUICK_SHARE` of them in every test
run, the others under `make test-full`."""
LIBRARY_SEED = 11
LIBRARY_SAMPLE = {"numpy": range(4), "jax": range(2), "tf": range(2)}
"""Program indices of `LIBRARY_SEED`, all making library calls, each backend checks (split as
`SAMPLE` is)."""
QUICK_SHARE = 0.25
KNOWN_WRONG = ""
"""Library calls abir gets wrong today (computed across the batch or along the wrong axis, or
failing with an error not its own on a backend): the tests draw programs without them, so that
they check the other calls; `python -m abir.testing.fuzz` draws them and reports each. A call
drops out of this list once abir computes it right."""
TEST_CALLS = parse_calls(KNOWN_WRONG)
FULL = os.environ.get("ABIR_FULL") == "1"


@pytest.fixture(scope="module")
def directory(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("fuzz"))


def reproduction_hint(seed: int, index: int, backend: str) -> str:
    return (f"shrink it with: python -m abir.testing.fuzz --seed {seed} --start {index} --count 1 "
            f"--backends {backend} --calls={KNOWN_WRONG} (with --library-share 1 for a library sample)")  # fmt: skip


def check_programs(seed: int, indices: range, backend: str, directory: str,
                   library_share: float = fuzz.LIBRARY_SHARE) -> list[fuzz.Generated]:  # fmt: skip
    """Check the programs (refusals tolerated); return them."""
    checked = []
    for index in indices:
        generated = fuzz.generate(seed, index, DEFAULT_FEATURES, directory, TEST_CALLS, library_share)
        found = check(generated.program, (backend,), generated.namespace, generated.reference)
        failures = [f for f in found if counts_as_failure(f)]
        report = fuzz.Report(generated.program.label, generated.program, failures, generated.program, failures,
                             generated.reference, 0)  # fmt: skip
        assert not failures, fuzz.format_report(report, 1) + reproduction_hint(seed, index, backend)
        checked.append(generated)
    return checked


def split_sample(sample: dict[str, range]) -> list:
    """(backend, index) cases: the first `QUICK_SHARE` of each backend's indices (at least one) in
    every run, the others marked `full`."""
    cases = []
    for backend, indices in sample.items():
        quick = max(1, round(len(indices) * QUICK_SHARE))
        cases += [(backend, i) if n < quick else pytest.param(backend, i, marks=pytest.mark.full)
                  for n, i in enumerate(indices)]  # fmt: skip
    return cases


@pytest.mark.parametrize(("backend", "index"), split_sample(SAMPLE), ids=lambda v: str(v))
def test_fixed_sample_matches_plain_python(backend, index, directory):
    check_programs(SEED, range(index, index + 1), backend, directory)


@pytest.mark.parametrize(("backend", "index"), split_sample(LIBRARY_SAMPLE), ids=lambda v: str(v))
def test_library_sample_matches_plain_python(backend, index, directory):
    """Programs computing on per-member arrays with library calls (a share of every sample; here
    all of them) equal plain Python, or abir refuses them."""
    (generated,) = check_programs(LIBRARY_SEED, range(index, index + 1), backend, directory, library_share=1.0)
    assert generated.program.library_calls()


@pytest.mark.full
@pytest.mark.parametrize("backend", ["numpy", "jax", "tf"] if FULL else ["numpy"])
def test_larger_sample_matches_plain_python(backend, directory):
    check_programs(1, range(200 if FULL else 8), backend, directory)


# ----- the fuzzer itself ------------------------------------------------------------------------


def test_programs_are_deterministic(directory):
    first, second = (fuzz.generate(3, 7, DEFAULT_FEATURES, directory) for _ in range(2))
    assert first.program.source() == second.program.source()
    for a, b in zip(first.program.inputs, second.program.inputs, strict=True):
        np.testing.assert_array_equal(np.asarray(a, dtype=object), np.asarray(b, dtype=object))
    other = fuzz.generate(3, 8, DEFAULT_FEATURES, directory)
    assert other.program.source() != first.program.source()


def test_programs_are_valid_and_cover_the_subset(directory):
    """Nearly every draw is valid plain Python within the bounds, and the sample as a whole uses
    every construct of the subset the generator knows."""
    modules = []
    draws = 0
    for index in range(40):
        generated = fuzz.generate(5, index, DEFAULT_FEATURES, directory)
        draws += generated.attempts
        modules.append(generated.program.module)
    assert draws <= 60
    nodes = [node for module in modules for node in ast.walk(module)]
    kinds = {type(node).__name__ for node in nodes}
    assert {"If", "While", "For", "Break", "Continue", "Return", "IfExp", "BoolOp", "NamedExpr", "AugAssign",
            "Compare", "Subscript", "Tuple"} <= kinds  # fmt: skip
    loops = [node for node in nodes if isinstance(node, ast.While | ast.For)]
    assert any(loop.orelse for loop in loops)
    assert {type(loop.iter).__name__ for loop in loops if isinstance(loop, ast.For)} == {"Call", "Tuple"}
    functions = {node.name for node in nodes if isinstance(node, ast.FunctionDef)}
    assert {"f", "r1", "r2", "h1", "h2", "o1", "o2"} <= functions
    text = "\n".join(ast.unparse(module) for module in modules)
    for construct in ("r1(d - 1", "r2(d - 1", "._replace(", "P(", "np.dot(", "len(", ".sum()", "C[", "elif "):
        assert construct in text, construct


def test_library_programs_use_arrays_of_several_shapes_and_most_calls(directory):
    """Programs with library calls take and compute arrays of several shapes, matrices among
    them, test their reductions in conditions, and the sample uses most calls of the table."""
    calls: set[str] = set()
    shapes: set[tuple[int, ...]] = set()
    conditions = 0
    for index in range(30):
        program = fuzz.generate(9, index, DEFAULT_FEATURES, directory, library_share=1.0).program
        calls |= set(program.library_calls())
        types = [type_of(node) for node in ast.walk(program.module)] + program.input_types
        shapes |= {array_shape(t, program.vector_size) for t in types if array_shape(t, program.vector_size)}
        conditions += sum(any(hasattr(node, "fz_call") for node in ast.walk(statement.test))
                          for statement in ast.walk(program.module) if isinstance(statement, ast.If | ast.While))  # fmt: skip
    assert len(calls) >= 0.8 * len(LIBRARY_CALLS), sorted({c.name for c in LIBRARY_CALLS} - calls)
    assert {(2, 3), (3, 2), (3,), (4,)} <= shapes
    assert conditions >= 10
    plain = [fuzz.generate(9, index, DEFAULT_FEATURES, directory, library_share=0.0).program for index in range(5)]
    assert not any(program.library_calls() for program in plain)


def test_the_library_table_is_well_formed():
    """Names are unique, and every call has instances at some program's shapes."""
    assert len({c.name for c in LIBRARY_CALLS}) == len(LIBRARY_CALLS)
    layouts = [(2, 3), (2, 4), (3, 4), (3,)]
    for library_call in LIBRARY_CALLS:
        found = [s for lengths in layouts
                 for s in signatures(library_call, (*((k,) for k in lengths), *((i, j) for i in lengths for j in lengths)),
                                     lengths[0])]  # fmt: skip
        assert found, library_call.name
    assert [c.name for c in parse_calls("flip,roll")] == ["flip", "roll"]
    assert {c.name for c in parse_calls("-flip")} == {c.name for c in LIBRARY_CALLS} - {"flip"}
    assert parse_calls("") == LIBRARY_CALLS
    with pytest.raises(ValueError, match="unknown library call 'bogus'"):
        parse_calls("-bogus")


def test_refusals_are_tolerated_and_counted_unless_strict(monkeypatch, directory):
    """abir's own compile-time error on a program with library calls is a refusal: tolerated
    and counted by call, or a failure under the strict policy; a member's run-time error and an
    error not abir's stay failures."""

    monkeypatch.setattr(differential, "run_batched", raising(errors.TypeInferenceError("'np.trace(x)' is refused")))
    tolerant = fuzz.run_campaign(3, 4, ("numpy",), out=lambda text: None, directory=directory, library_share=1.0)
    assert not tolerant.reports and tolerant.refused_programs["numpy"] == 3
    assert "numpy refused 3" in tolerant.summary()
    strict = fuzz.run_campaign(1, 4, ("numpy",), out=lambda text: None, directory=directory, library_share=1.0,
                               tolerate_refusals=False, shrink_failures=False)  # fmt: skip
    assert [f.kind for f in strict.reports[0].failures] == [REFUSED]
    generated = fuzz.generate(4, 0, DEFAULT_FEATURES, directory, library_share=1.0)
    for error in (errors.MemberRunError("members failed", members=[0]), ValueError("not abir's")):
        monkeypatch.setattr(differential, "run_batched", raising(error))
        (failure,) = check(generated.program, ("numpy",), generated.namespace, generated.reference)
        assert failure.kind == "error" and counts_as_failure(failure)


def raising(error: Exception):
    """A stand-in for `differential.run_batched` that raises `error`."""

    def run_batched(*args, **kwargs):
        raise error

    return run_batched


def test_finds_a_library_call_computed_wrongly(monkeypatch, directory):
    """Programs calling `np.tanh` on arrays, their plain Python results computed, then batched
    with `np.tanh` standing for `np.sinh`: the check reports mismatches."""
    programs = [fuzz.generate(5, index, DEFAULT_FEATURES, directory, parse_calls("tanh"), 1.0) for index in range(4)]
    assert all(generated.program.library_calls() == ["tanh"] for generated in programs)
    monkeypatch.setattr(np, "tanh", np.sinh)
    kinds = [f.kind for g in programs for f in check(g.program, ("numpy",), g.namespace, g.reference)]
    assert "mismatch" in kinds, kinds


def test_features_can_be_turned_off_and_on(directory):
    assert parse_features("-arrays,+item_assignment") == (DEFAULT_FEATURES - {"arrays"}) | {"item_assignment"}
    with pytest.raises(ValueError, match="unknown fuzz feature 'bogus'"):
        parse_features("+bogus")
    scalar_only = parse_features("-arrays,-item_assignment,-namedtuples,-tuples,-recursion,-loops")
    for index in range(10):
        program = fuzz.generate(2, index, scalar_only, directory).program
        types = {type_of(node) for node in ast.walk(program.module)} | set(program.input_types)
        assert types <= {None, INT, FLOAT, BOOL}, types
        assert "while" not in program.source() and "def r1" not in program.source()
    writes = parse_features("+item_assignment")
    sources = [fuzz.generate(2, index, writes, directory).program.source() for index in range(10)]
    assert any(isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript)
               for source in sources for node in ast.walk(ast.parse(source)))  # fmt: skip


def test_range_membership_is_off_by_default_and_matches_plain_python_on(directory):
    """`+range_membership` adds `a in range(...)` tests (off by default, so that the programs of
    the seeds run so far stay the same); a few such programs on NumPy equal plain Python."""
    assert "range_membership" not in DEFAULT_FEATURES
    features = parse_features("+range_membership")
    found = 0
    for index in range(6):
        generated = fuzz.generate(25, index, features, directory)
        found += any(isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn)
                     and isinstance(node.comparators[0], ast.Call) and ast.unparse(node.comparators[0].func) == "range"
                     for node in ast.walk(generated.program.module))  # fmt: skip
        assert not check(generated.program, ("numpy",), generated.namespace, generated.reference)
    assert found >= 3


DESCENTS_SEED = 30
DESCENTS_QUICK = (1, 7)
"""The programs of `DESCENTS_SEED` with `+descents` whose recursion summarize-descents turns into a
`vm.descend` (found by listing the first eight): every test run checks these; `make test-full`
checks the other six of the first eight, which keep their recursion as calls."""
DESCENTS_REST = [i for i in range(8) if i not in DESCENTS_QUICK]


def check_descent_programs(indices, directory) -> list:
    """Check the `+descents` programs of `DESCENTS_SEED` at `indices` on JAX against plain Python;
    return the `vm.descend` ops summarize-descents made while compiling them (None for a block it
    left alone)."""
    from abir.passes import summarize_descents

    summarized = []
    original = summarize_descents.summarize
    features = parse_features("+descents")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(summarize_descents, "summarize", lambda block: summarized.append(original(block)) or summarized[-1])
        for index in indices:
            generated = fuzz.generate(DESCENTS_SEED, index, features, directory)
            assert not check(generated.program, ("jax",), generated.namespace, generated.reference), index
    return summarized


def test_descents_give_programs_whose_recursion_is_one_vm_descend_on_jax(directory):
    """`+descents` (off by default) makes a lone recursive function call itself first, with
    `d - 1` and its other parameters unchanged: `summarize-descents` turns that into one
    `vm.descend`, and the batched programs still equal plain Python."""
    pytest.importorskip("jax")
    assert "descents" not in DEFAULT_FEATURES
    summarized = check_descent_programs(DESCENTS_QUICK, directory)
    assert sum(op is not None for op in summarized) >= 2


@pytest.mark.full
def test_other_descent_programs_equal_plain_python_on_jax(directory):
    pytest.importorskip("jax")
    check_descent_programs(DESCENTS_REST, directory)


@pytest.mark.full  # make test: test_finds_a_library_call_computed_wrongly (the check finds a wrong result)
def test_finds_and_shrinks_an_injected_miscompilation(monkeypatch, directory):
    """With the NumPy backend's `%` replaced by C's `fmod` (sign of the dividend), the fuzzer
    reports a program, shrinks it to a few lines that still fail, and the same small program
    passes once `%` is right again: the shrinking kept the bug, not another one. The shrinking's
    time budget is several times what it needs to reach its fixpoint, so that a loaded machine
    (a run of the whole suite beside other work) does not cut it short."""
    from abir.backends import numpy_backend

    monkeypatch.setitem(numpy_backend._FUNCTIONS, "remainder", np.fmod)
    result = fuzz.run_campaign(30, 3, ("numpy",), shrink_seconds=120, out=lambda text: None, directory=directory,
                               stop_after=1, library_share=0.0)  # fmt: skip
    assert result.reports, "no program failed with `%` computed as fmod"
    report = result.reports[0]
    assert report.minimal_failures[0].kind == "mismatch"
    minimal = report.minimal
    assert len(minimal.source().splitlines()) < min(20, len(report.original.source().splitlines()))
    assert "%" in minimal.source()
    text = fuzz.format_report(report, 1)
    assert "batched_f(*args, backend=abir.NumpyBackend()" in text and "plain Python, member 0" in text
    monkeypatch.undo()
    namespace = load(minimal, directory)
    assert check(minimal, ("numpy",), namespace, run_reference(minimal, directory)) == []


def test_an_error_naming_its_program_file_has_one_shape_for_every_candidate():
    """The shrinker's candidates are files of their own: an error naming its line keeps its
    shape (an underflow at `abir_fuzz_<hash>.py:47` once kept a program from shrinking)."""
    def located(path: str, line: int) -> str:
        return f"stack underflow in function 'r1' at {path}:{line} (vm block 9 of IR function @r1): members 0, 1"

    shapes = {differential.message_shape(located(path, line)) for path, line in
              [("/tmp/abir_fuzz_d6b/abir_fuzz_b3c95b4557cc336d.py", 47), ("/tmp/x/abir_fuzz_a3e.py", 12)]}
    assert len(shapes) == 1
    assert differential.message_shape("at /tmp/a.py:3:14 got 2") == differential.message_shape("at /b.py:9:1 got 5")


def test_command_line(capsys):
    assert fuzz.main(["--count", "2", "--seed", str(SEED), "--backends", "numpy"]) == 0
    out = capsys.readouterr().out
    assert "2 programs (seed 0" in out and "no failures" in out
    assert fuzz.main(["--count", "1", "--backends", "cuda"]) == 2
    assert fuzz.main(["--count", "1", "--calls=-bogus"]) == 2
    assert fuzz.main(["--count", "1", "--show", "--seed", "4"]) == 0
    assert "def f(" in capsys.readouterr().out


def test_the_time_limit_counts_cpu_time_not_waiting():
    """A run waiting for a shared core is not hanging: only the CPU time it uses counts."""
    with time_limit(0.2):
        time.sleep(0.4)
    began = time.process_time()
    with pytest.raises(TimeoutError, match="CPU time"), time_limit(0.2):
        while time.process_time() - began < 5.0:
            pass
    assert time.process_time() - began < 1.0


# ----- reverse mode on float programs (abir.testing.gradients) -----------------------------------

GRADIENT_SAMPLE = range(6)
"""Float programs of seed 0 whose batched vjp is checked under `make test-full` (each compiles a
reverse-mode machine); `make test` checks the first through the command line
(`test_gradient_command_line`)."""


@pytest.mark.full
@pytest.mark.parametrize("index", GRADIENT_SAMPLE)
def test_gradient_sample_equals_jax_vjp_per_member(index, directory):
    pytest.importorskip("jax")
    program = gradients.generate(SEED, index)
    failures = gradients.check_program(program, directory, f"grad_sample_{index}")
    assert not failures, "\n".join(f.describe() for f in failures) + "\n" + gradients.repro(program)


def test_gradient_programs_are_deterministic_and_cover_branches_loops_and_recursion():
    programs = [gradients.generate(2, index) for index in range(40)]
    assert gradients.generate(2, 7).source == programs[7].source
    np.testing.assert_array_equal(gradients.generate(2, 7).x, programs[7].x)
    modules = [ast.parse(program.source) for program in programs]
    kinds = {type(node).__name__ for module in modules for node in ast.walk(module)}
    assert {"If", "While", "For", "Return", "Compare", "BoolOp", "AugAssign"} <= kinds
    recursive = [program.source for program in programs if "def r(" in program.source]
    assert len(recursive) >= 10
    assert all("r(min(" in source for source in recursive)  # the entry calls the recursion
    assert any("r(d - 2" in source for source in recursive)  # trees, not only chains
    assert all(set(program.n) <= set(range(gradients.MAX_N + 1)) for program in programs)
    assert any("np.maximum" in program.source or "np.abs" in program.source for program in programs)


def test_gradient_check_finds_a_wrong_derivative(monkeypatch, directory):
    """A reference whose d/dy is off by a factor of 2 is reported; the right one is not."""
    pytest.importorskip("jax")
    program = gradients.GradientProgram(
        "hand-written", "import numpy as np\n\n\ndef f(x, y, n, w):\n    for _ in range(n):\n        x = np.sin(x * y) + w\n    return x\n",
        np.linspace(-1, 1, gradients.BATCH), np.linspace(0.5, 1.5, gradients.BATCH), np.arange(gradients.BATCH) % 4, 0.3,
    )  # fmt: skip
    assert gradients.check_program(program, directory, "grad_right") == []
    right = gradients.per_member_vjp

    def wrong(program, cotangent):
        values, dx, dy, dw = right(program, cotangent)
        return values, dx, 2 * dy, dw

    monkeypatch.setattr(gradients, "per_member_vjp", wrong)
    failures = gradients.check_program(program, directory, "grad_wrong")
    assert [failure.what for failure in failures] == ["d/dy"]


def test_gradient_command_line(capsys):
    pytest.importorskip("jax")
    assert fuzz.main(["--grad", "--count", "1", "--seed", str(SEED), "--start", "0"]) == 0
    assert "1/1 gradient programs, 0 failing" in capsys.readouterr().out
