"""Recursions that descend (or climb) a counter to a base case, batched on every backend.

Each program recurses through a vm block that calls itself while one integer counter moves by a
constant step until a comparison with a constant holds: the shape `summarize-descents` turns into
one `vm.descend` block run. The programs vary what that pass must get right: the step (-1, -2, -3,
+1, +3), the base-case predicate (`==`, `<=`, `<`, `>=`, `>`, `!=`, a constant offset, the constant
on the left), the base case tested before or after the update, the counter or invariant parameters
pushed, one or two recursive calls, int64 and int32 counters.

Every batched result equals the plain Python run per member (`dry_run=True`), on NumPy, JAX and
TensorFlow, for members at the base case and members far from it. Members that never reach their
base case raise `abir.StackOverflowError` naming the function, with the message the program gives
with the pass disabled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.utils.arg_spec import parse_pipeline

import abir
from abir.dialects import vm
from abir.passes import pipeline

SUMMARIZE_DESCENTS = "summarize-descents"

# ----- programs ---------------------------------------------------------------------------------


def fib(n):
    if n <= 1:
        return n
    return fib(n - 1) + fib(n - 2)


def leaves(depth, x):
    if depth == 0:
        return x
    return leaves(depth - 1, x) * 2 + leaves(depth - 1, x + 1)


def build_tree(depth, direction, theta, step):
    """The shape of NUTS' tree doubling: two subtrees of depth - 1, the second starting where the
    first ended; `direction` is passed down unchanged and read after the calls return."""
    if depth == 0:
        return theta + direction * step, 1
    left, n_left = build_tree(depth - 1, direction, theta, step)
    right, n_right = build_tree(depth - 1, direction, left, step)
    return right, n_left + n_right + (1 if direction > 0 else 0)


def even_sum(n):
    if n == 0:
        return 0
    return n + even_sum(n - 2)


def below_three(n):
    if n < 3:
        return n * 10
    return 1 + 2 * below_three(n - 3)


def ascend(i):
    if i >= 10:
        return i
    return i + 3 * ascend(i + 1)


def squares_by_three(i):
    if i > 12:
        return 0
    return squares_by_three(i + 3) + i * i


def climb(i):
    if i != 9:
        return 1 + 2 * climb(i + 3)
    return 100


def nonzero(n):
    if n != 0:
        return nonzero(n - 1) + 3 * n
    return 7


def offset_floor(n):
    if n - 3 <= 0:
        return n
    return n * offset_floor(n - 1) % 1000


def reversed_compare(n, scale):
    if 0 >= n + 1:  # noqa: SIM300 (the constant on the left is the case under test)
        return scale
    return reversed_compare(n - 1, scale) + scale * n


def power_sum(n, x, k):
    if n == 0:
        return 0.0
    s = power_sum(n - 1, x, k)
    return s * x + k


def taylor_exp(k, x):
    if k == 0:
        return 1.0
    return 1.0 + taylor_exp(k - 1, x) * x / k


def depth_then_test(depth, x):
    d = depth - 1
    if d < 0:
        return x
    return depth_then_test(d, x) * 2 - x + d


# ----- cases --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """A program, a batch whose members all finish (some at the base case, some far from it) and,
    where some start never reaches the base case or goes deeper than `MAX_DEPTH`, a batch of the
    same size (so that it reuses the compiled program) with such members (`overflowing`: their
    indices)."""

    program: Callable[..., Any]
    args: tuple[Any, ...]
    overflow_args: tuple[Any, ...] | None = None
    overflowing: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return self.program.__name__


MAX_DEPTH = 15  # abir's default max_stack_depth, passed explicitly

CASES = [
    Case(fib, (np.array([0, 1, 2, 5, 9, 3]),)),
    Case(
        leaves,
        (np.array([0, 1, 4, 2]), np.array([5, -3, 2, 7])),
        (np.array([2, -1, 0, 3]), np.array([1, 1, 1, 2])),
        (1,),
    ),
    Case(
        build_tree,
        (
            np.array([0, 3, 1, 4]),
            np.array([1, -1, -1, 1]),
            np.array([0.5, 0.0, 2.0, -1.0]),
            np.array([0.1, 0.2, 0.3, 0.25]),
        ),
        (np.array([2, 0, -2, 1]), np.array([1, 1, -1, -1]), np.array([0.0, 1.0, 2.0, 3.0]), np.full(4, 0.5)),
        (2,),
    ),
    Case(even_sum, (np.array([0, 2, 10, 24, 6]),), (np.array([4, 7, 0, -2, 2]),), (1, 3)),
    Case(below_three, (np.array([-4, 0, 2, 3, 17, 40]),)),
    Case(ascend, (np.array([10, 25, 9, 0, -3]),), (np.array([8, -6, 12, 10, 0]),), (1,)),
    Case(squares_by_three, (np.array([13, 12, 0, -20, 5]),), (np.array([4, -40, 13, 0, 12]),), (1,)),
    Case(climb, (np.array([9, 6, 0, -27]),), (np.array([0, 10, 9, 7]),), (1, 3)),
    Case(nonzero, (np.array([0, 1, 6, 13]),), (np.array([3, -1, 0, 5]),), (1,)),
    Case(offset_floor, (np.array([-5, 3, 4, 9, 14]),)),
    Case(reversed_compare, (np.array([-3, -1, 0, 5, 12]), np.array([2, 3, -1, 4, 7]))),
    Case(
        power_sum,
        (np.array([0, 1, 3, 8]), np.array([0.5, 2.0, -1.5, 1.1]), np.array([1.0, 0.25, 3.0, -2.0])),
        (np.array([2, -3, 0, 1]), np.full(4, 0.5), np.ones(4)),
        (1,),
    ),
    Case(
        taylor_exp,
        (np.array([0, 1, 4, 12]), np.array([0.3, -1.0, 2.0, 1.5])),
        (np.array([-1, 5, 0, 2]), np.ones(4)),
        (0,),
    ),
    Case(depth_then_test, (np.array([0, -4, 1, 6, 11]), np.array([3, 1, -2, 5, 0]))),
]
INT32_CASES = [
    Case(fib, (np.array([0, 4, 8, 1], dtype=np.int32),)),
    Case(climb, (np.array([9, -18, 3], dtype=np.int32),), (np.array([8, 3, 9], dtype=np.int32),), (0,)),
]
OVERFLOW_CASES = [case for case in [*CASES, *INT32_CASES] if case.overflow_args is not None]
BACKENDS = ["numpy", "jax", "tf"]
TF_CASES = [case for case in CASES if case.name in ("fib", "build_tree")]
TF_OVERFLOW_CASE = next(case for case in OVERFLOW_CASES if case.name == "climb")
"""The cases `make test` runs on TF (`make test-full` all): TF's vm program is JAX's (both have
superblocks); on compiled backends `make test` runs an overflow of this case only."""


def case_id(case: Case) -> str:
    dtypes = {str(np.asarray(arg).dtype) for arg in case.args}
    return case.name + ("-int32" if "int32" in dtypes else "")


def make_backend(name: str) -> abir.Backend:
    if name == "numpy":
        return abir.NumpyBackend()
    if name == "jax":
        return abir.JaxBackend()
    return abir.TensorFlowBackend()


@dataclass
class Batched:
    """Every program, batched in one Context."""

    context: abir.Context
    functions: dict[str, Any]

    def __getitem__(self, name: str) -> Any:
        return self.functions[name]


def batched_functions() -> Batched:
    context = abir.Context(cache_size=4 * len(CASES) * len(BACKENDS))  # every compiled program stays
    return Batched(context, {case.name: context.batch_uncurried(case.program) for case in CASES})


@pytest.fixture(scope="module")
def batched() -> Batched:
    """Every program, batched in one Context (the pipeline as it stands)."""
    return batched_functions()


@contextmanager
def without_descents(monkeypatch: pytest.MonkeyPatch) -> Iterator[Batched]:
    """Every program, batched in a fresh Context whose programs are compiled in this `with`
    without the `summarize-descents` pass (the pipeline's other vm passes unchanged)."""
    without = ",".join(str(spec) for spec in parse_pipeline(pipeline.VM_STAGE) if spec.name != SUMMARIZE_DESCENTS)
    with monkeypatch.context() as patch:
        patch.setattr(pipeline, "VM_STAGE", without)
        yield batched_functions()


# ----- helpers ------------------------------------------------------------------------------------


def leaves_of(value: Any) -> list[np.ndarray]:
    if isinstance(value, tuple | list):
        return [leaf for item in value for leaf in leaves_of(item)]
    return [np.asarray(value)]


def assert_same_results(got: Any, expected: Any, what: str) -> None:
    """Same structure, dtypes and values; floats to rounding (XLA may fuse or reorder)."""
    got_leaves, expected_leaves = leaves_of(got), leaves_of(expected)
    assert len(got_leaves) == len(expected_leaves), what
    for g, e in zip(got_leaves, expected_leaves, strict=True):
        assert g.dtype == e.dtype, f"{what}: dtype {g.dtype}, plain Python per member gives {e.dtype}"
        if np.issubdtype(e.dtype, np.floating):
            np.testing.assert_allclose(g, e, rtol=1e-12, err_msg=what)
        else:
            np.testing.assert_array_equal(g, e, err_msg=what)


def assert_matches_python(function: Any, args: Sequence[Any], backend: str, **options: Any) -> None:
    """The batched result equals the plain Python run per member (`dry_run=True`)."""
    expected = function(*args, dry_run=True)
    got = function(*args, backend=make_backend(backend), **options)
    assert_same_results(got, expected, f"{function!r} on {backend} with arguments {args}")


def overflow_message(function: Any, args: Sequence[Any], backend: str) -> str:
    with pytest.raises(abir.StackOverflowError) as info:
        function(*args, backend=make_backend(backend), max_stack_depth=MAX_DEPTH)
    return str(info.value)


def blocks_of(module: Any, function: str) -> list[vm.BlockOp]:
    """The vm blocks of the Python function `function`."""
    return [
        op
        for op in module.walk()
        if isinstance(op, vm.BlockOp) and getattr(op.attributes.get("function"), "data", None) == function
    ]


def calls_itself(block: vm.BlockOp) -> bool:
    last = block.body.block.last_op
    return isinstance(last, vm.CallOp) and last.target.value.data == block.number


def descends(block: vm.BlockOp) -> bool:
    return any(isinstance(op, vm.DescendOp) for op in block.body.block.ops)


def require_descend_op() -> None:
    if not hasattr(vm, "DescendOp"):
        pytest.skip("abir.dialects.vm has no DescendOp yet: the summarize-descents pass has not landed")


# ----- batched == plain Python per member -------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.make_test_keeps({"backend": "numpy"}, {"backend": "jax"}, *({"case": case} for case in TF_CASES))
def test_descent_matches_python(batched, case: Case, backend: str) -> None:
    assert_matches_python(batched[case.name], case.args, backend, max_stack_depth=MAX_DEPTH)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", INT32_CASES, ids=case_id)
def test_int32_counter_matches_python(batched, case: Case, backend: str) -> None:
    assert_matches_python(batched[case.name], case.args, backend, max_stack_depth=MAX_DEPTH)


def test_cases_reach_base_cases_and_go_deep() -> None:
    """The inputs exercise both ends: a member returning at once and one recursing several times."""
    for case in [*CASES, *INT32_CASES]:
        depths = member_depths(case.program, case.args)
        assert min(depths) == 1, f"{case.name}: no member starts at its base case ({depths})"
        assert max(depths) >= 4, f"{case.name}: no member recurses at least 3 times ({depths})"
        assert max(depths) <= MAX_DEPTH, (
            f"{case.name}: a member recurses too deep for max_stack_depth ({depths})"
        )


@pytest.mark.parametrize("case", OVERFLOW_CASES, ids=case_id)
def test_overflow_cases_overflow_exactly_their_members(case: Case) -> None:
    """In plain Python the `overflowing` members recurse past max_stack_depth, the others finish
    within it; and the batch has the size of the case's other batch."""
    assert case.overflow_args is not None
    assert batch_size(case.overflow_args) == batch_size(case.args)
    depths = member_depths(case.program, case.overflow_args)
    deep = tuple(i for i, depth in enumerate(depths) if depth > MAX_DEPTH + 1)
    assert deep == case.overflowing, f"{case.name}: members {deep} recurse past max_stack_depth ({depths})"
    assert all(depths[i] <= MAX_DEPTH for i in range(len(depths)) if i not in deep), depths


def member_depths(program: Callable[..., Any], args: Sequence[Any]) -> list[int]:
    return [recursion_depth(program, [np.asarray(arg)[i] for arg in args]) for i in range(batch_size(args))]


def batch_size(args: Sequence[Any]) -> int:
    return len(np.asarray(args[0]))


class DeeperThanTheCap(Exception):
    """Raised by `recursion_depth` to stop a recursion that never reaches its base case."""


def recursion_depth(program: Callable[..., Any], args: Sequence[Any], cap: int = 4 * MAX_DEPTH) -> int:
    """How deep the plain Python `program` recurses on one member's `args` (1: no recursive call),
    at most `cap + 1`."""
    depth = deepest = 0
    original = globals()[program.__name__]

    def counting(*call_args: Any) -> Any:
        nonlocal depth, deepest
        depth += 1
        deepest = max(deepest, depth)
        if depth > cap:
            raise DeeperThanTheCap
        try:
            return original(*call_args)
        finally:
            depth -= 1

    globals()[program.__name__] = counting
    try:
        counting(*args)
    except DeeperThanTheCap:
        pass
    finally:
        globals()[program.__name__] = original
    return deepest


# ----- members that never reach the base case -------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", OVERFLOW_CASES, ids=case_id)
# compiled backends: the climb case (NumPy runs every case through the same vm program; the compiled
# backends' vm.descend is checked on every case by test_descent_matches_python)
@pytest.mark.make_test_keeps({"backend": "numpy"}, {"case": TF_OVERFLOW_CASE})
def test_runaway_members_overflow_as_without_the_pass(
    batched, monkeypatch: pytest.MonkeyPatch, case: Case, backend: str
) -> None:
    message = overflow_message(batched[case.name], case.overflow_args, backend)
    members = ", ".join(str(m) for m in case.overflowing)
    assert f"function '{case.name}'" in message, message
    assert f"member{'s' if len(case.overflowing) > 1 else ''} {members} recursed deeper" in message, message
    assert f"max_stack_depth={MAX_DEPTH}" in message, message
    with without_descents(monkeypatch) as unsummarized:
        assert message == overflow_message(unsummarized[case.name], case.overflow_args, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_members_that_finish_do_not_hide_an_overflow(batched, backend: str) -> None:
    """A member far from its base case that needs more than max_stack_depth frames overflows even
    though it would finish: ascend(-20) needs 30 nested calls."""
    with pytest.raises(abir.StackOverflowError, match=r"function 'ascend' .*batch member 0 recursed deeper"):
        batched["ascend"](
            np.array([-20, 10, 3, 9, 0]), backend=make_backend(backend), max_stack_depth=MAX_DEPTH
        )
    assert_matches_python(batched["ascend"], (np.array([-20, 10, 3, 9, 0]),), backend, max_stack_depth=40)


# ----- the vm program ---------------------------------------------------------------------------


SUPERBLOCK_BACKENDS = ["jax", "tf"]
"""The backends whose vm programs have superblocks: there the descent is a block with a side exit
that calls itself. NumPy's program branches to a block that makes the call instead."""


def lowered(batched: Batched, case: Case, backend: str) -> Any:
    machine_backend = make_backend(backend)
    assert machine_backend.superblocks, f"{backend} lowers without superblocks"
    return batched.context.lowered_for_args(case.name, case.args, backend=machine_backend)


@pytest.mark.parametrize("backend", SUPERBLOCK_BACKENDS)
@pytest.mark.parametrize("case", [*CASES, *INT32_CASES], ids=case_id)
def test_the_recursion_is_a_self_calling_or_descend_block(batched, case: Case, backend: str) -> None:
    """Each program has the shape the pass looks for (or the pass has already summarized it)."""
    module = lowered(batched, case, backend)
    summarized = hasattr(vm, "DescendOp") and any(descends(block) for block in blocks_of(module, case.name))
    assert summarized or any(calls_itself(block) for block in blocks_of(module, case.name)), str(module)


@pytest.mark.parametrize("backend", SUPERBLOCK_BACKENDS)
@pytest.mark.parametrize("case", [*CASES, *INT32_CASES], ids=case_id)
def test_the_descent_is_summarized(batched, case: Case, backend: str) -> None:
    require_descend_op()
    module = lowered(batched, case, backend)
    assert any(descends(block) for block in blocks_of(module, case.name)), (
        f"no vm.descend in the vm blocks of {case.name}:\n{module}"
    )


@pytest.mark.parametrize("backend", SUPERBLOCK_BACKENDS)
def test_disabling_the_pass_leaves_the_self_call(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """The pass-disabled runs above really run without the pass."""
    require_descend_op()
    case = CASES[0]
    with without_descents(monkeypatch) as unsummarized:
        blocks = blocks_of(lowered(unsummarized, case, backend), case.name)
    assert not any(descends(block) for block in blocks), (
        f"VM_STAGE without {SUMMARIZE_DESCENTS!r} still summarizes"
    )
    assert any(calls_itself(block) for block in blocks)


# ----- property -----------------------------------------------------------------------------------


def fixed_lists(elements: st.SearchStrategy[Any], size: int) -> st.SearchStrategy[list[Any]]:
    return st.lists(elements, min_size=size, max_size=size)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    fixed_lists(st.integers(0, 9), 6),
    fixed_lists(st.integers(0, 12), 5),
    fixed_lists(st.integers(-20, 14), 5),
    fixed_lists(st.integers(0, 6), 4),
    fixed_lists(st.tuples(st.integers(0, 5), st.integers(-3, 3)), 4),
)
def test_random_descents_match_python(batched, fibs, halves, starts, climbs, trees) -> None:
    """Random members on NumPy and on JAX (whose programs summarize the descents), in batches of
    the cases' sizes so that the programs compiled for them are reused."""
    depths, xs = (np.array(column) for column in zip(*trees, strict=True))
    for backend in ["numpy", "jax"]:
        options = {"max_stack_depth": MAX_DEPTH}
        assert_matches_python(batched["fib"], (np.array(fibs),), backend, **options)
        assert_matches_python(batched["even_sum"], (2 * np.array(halves),), backend, **options)
        assert_matches_python(batched["squares_by_three"], (np.array(starts),), backend, **options)
        assert_matches_python(batched["climb"], (9 - 3 * np.array(climbs),), backend, **options)
        assert_matches_python(batched["leaves"], (depths, xs), backend, **options)


def scaled_sum(depth, v, k):
    """A vector passed down unchanged but saved at every level (`doubled` calls back with
    another vector), so the descent would push it: not a `vm.descend`, which pushes per-member
    scalars (the fuzzer found the pass summarizing such a block once, seed 30, program 24)."""
    if depth <= 0:
        return v * k
    inner = scaled_sum(depth - 1, v, k)
    return inner + v + doubled(v)


def doubled(v):
    return scaled_sum(0, v * 2.0, 1.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_vector_pushed_down_the_descent_keeps_the_self_call(backend: str) -> None:
    context = abir.Context()
    batched = context.batch_uncurried(scaled_sum)
    context.batch_uncurried(doubled)
    args = (np.array([0, 3, 5]), np.arange(9.0).reshape(3, 3), np.array([2.0, -1.0, 0.5]))
    assert_matches_python(batched, args, backend)
    if backend != "numpy":
        module = context.lowered_for_args("scaled_sum", list(args), make_backend(backend))
        assert not [op for op in module.walk() if isinstance(op, vm.DescendOp)]
        assert any(calls_itself(block) for block in blocks_of(module, "scaled_sum"))
