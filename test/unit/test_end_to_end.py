"""End-to-end: decorated Python run over a batch, checked against plain Python per member.

Each program is a plain module-level Python function; the tests batch it with
`Context.batch_uncurried`, so the same source runs unbatched (the reference) and batched (abir).
Every test runs on every backend.
"""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import abir
from abir.backend_registry import spec_named

pytestmark = pytest.mark.about_backend("jax", "tf")  # every program family on every backend (conftest.py, rule 3)

# ----- programs -------------------------------------------------------------------------------


def fib(n):
    if n > 1:
        return fib(n - 1) + fib(n - 2)
    return 1


def is_even(n):
    if n <= 0:
        return True
    return is_odd(n - 1)


def is_odd(n):
    if n <= 0:
        return False
    return is_even(n - 1)


def rec_sum(n):
    if n <= 0:
        return 0
    return n + rec_sum(n - 1)


def iota_sum(n, acc):
    if n <= 0:
        return acc
    return iota_sum(n - 1, acc + n)


def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def gcd_loop(a, b):
    while b != 0:
        a, b = b, a % b
    return a


def gcd_rec(a, b):
    if a == 0:
        return b
    if a <= b:
        return gcd_rec(a, b - a)
    return gcd_rec(b, a)


def nested_loops(n):
    total = 0
    i = 0
    while i < n:
        j = 0
        while j < i:
            total += i * j
            j += 1
        i += 1
    return total


def for_break_continue(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        if total > 40:
            break
        total += i
    return total


def for_range_three(start, stop):
    total = 0
    for i in range(start, stop, 2):
        total += i
    return total


def first_divisor(n):
    d = 2
    while d * d <= n:
        if n % d == 0:
            return d
        d += 1
    return n


def early_return_nested(n):
    i = 0
    while i < n:
        j = 0
        while j < n:
            if i * j == 12:
                return i + 100 * j
            j += 1
        i += 1
    return -1


def one_armed_nested_if(x):
    ans = 1
    if x > 4:
        if x > 10:
            ans = 5
        else:
            ans = 3
    return ans


def chained_and_bool(x):
    if 0 < x < 10 and not x == 5:
        return x * 2
    elif x >= 10 or x < -10:
        return -x
    return x if x > 0 else 0


Pair = collections.namedtuple("Pair", ["x", "y"])


def pair_step(t):
    return Pair(t.x + 1, t.y + 2)


def pair_twice(t):
    return pair_step(pair_step(t))


def pair_caller(t):
    return pair_twice(pair_twice(t))


def pair_countdown(n, t):
    if n <= 0:
        return t
    return pair_countdown(n - 1, Pair(t.y, t.x + n))


def pair_depth(t):
    if t.x <= 0:
        return t.y
    return pair_depth(Pair(t.x - 1, t.y + 1)) + 1


def consume_emit(inp):
    x, y = inp
    return x + 1, y + 2


def restructure(x):
    (a, b), (c, d) = helper_structure(x)
    return a + b + c + d


def helper_structure(x):
    return (x + 1, x + 2), (x + 3, x + 4)


def seven_args(a, b, c, d, e, f, g):
    return a + b + c + d + e + f + g


def vector_state(v, n):
    while n > 0:
        v = v * 2.0 + 1.0
        n -= 1
    return v


class Config:
    limit = 5


FOO = Pair(0, 5)


def field_reference(x):
    y = x + FOO.y
    foo2 = Pair(y, y + 5)
    return foo2.y


def calls_numpy(x):
    y = np.sum(x, axis=-1, keepdims=True)
    return x + y


def enclosing_scope(x):
    return x + len("four") + Config.limit


def counter_plus(x):
    count = 0
    while count < 3:
        count += 1
    return x + count, count


def float_newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-6 * a:
        x = 0.5 * (x + a / x)
    return x


PROGRAMS = [fib, is_even, is_odd, rec_sum, iota_sum, collatz, gcd_loop, gcd_rec, nested_loops,
            for_break_continue, for_range_three, first_divisor, early_return_nested, one_armed_nested_if,
            chained_and_bool, pair_step, pair_twice, pair_caller, pair_countdown, pair_depth, consume_emit, restructure,
            helper_structure, seven_args, vector_state, field_reference, calls_numpy, enclosing_scope,
            float_newton_sqrt, counter_plus]  # fmt: skip


@pytest.fixture(scope="module")
def ctx() -> dict[str, object]:
    """The batched version of every program, all decorated in one Context."""
    context = abir.Context()
    return {program.__name__: context.batch_uncurried(program) for program in PROGRAMS}


@pytest.fixture
def backend(backend_name):
    return spec_named(backend_name).new_backend()


def batched(ctx: dict[str, object], program, *args, **kwargs):
    return ctx[program.__name__](*args, **kwargs)


def member(value, i):
    """Member i of a batched (possibly nested) argument, as plain Python/NumPy scalars."""
    if isinstance(value, tuple):
        return type(value)(*(member(v, i) for v in value)) if hasattr(value, "_fields") else tuple(
            member(v, i) for v in value
        )
    array = np.asarray(value)
    if array.ndim == 0 or array.shape[0] == 1:
        row = array if array.ndim == 0 else array[0]
    else:
        row = array[i]
    return row.item() if row.ndim == 0 else row


def assert_matches_python(ctx, program, args, backend, **kwargs):
    result = batched(ctx, program, *args, backend=backend, **kwargs)
    sizes = [np.shape(leaf)[0] for arg in args for leaf in _leaves(arg) if np.ndim(leaf) > 0]
    batch = max(sizes, default=1)
    for i in range(batch):
        expected = program(*(member(a, i) for a in args))
        got = member(result, i)
        _assert_same(got, expected, f"{program.__name__} member {i}")
    return result


def _leaves(value):
    if isinstance(value, tuple | list):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


def _assert_same(got, expected, what):
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected), what
        if hasattr(expected, "_fields"):
            assert type(got).__name__ == type(expected).__name__, what
        for g, e in zip(got, expected, strict=True):
            _assert_same(g, e, what)
        return
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(expected, dtype=float), rtol=1e-6,
                               err_msg=what)  # fmt: skip


# ----- the reference's end-to-end cases ----------------------------------------------------------


def test_fibonacci_reference_case(ctx, backend):
    result = batched(ctx, fib, np.array([5, 6, 8, 9]), backend=backend)
    np.testing.assert_array_equal(np.asarray(result), [8, 13, 34, 55])


def test_even_odd(ctx, backend):
    result = batched(ctx, is_even, np.array([5, 6, 8, 9, 0]), backend=backend, max_stack_depth=15)
    np.testing.assert_array_equal(np.asarray(result), [False, True, True, False, True])


def test_self_tail_call_runs_in_constant_stack(ctx, backend):
    result = batched(ctx, iota_sum, np.array([12, -13, 100]), np.array([0, 0, 0]), backend=backend, max_stack_depth=3)
    np.testing.assert_array_equal(np.asarray(result), [78, 0, 5050])


def test_parameter_swapping_gcd(ctx, backend):
    result = batched(ctx, gcd_rec, np.array([7, 12, 49]), np.array([9, 9, 56]), backend=backend, max_stack_depth=3)
    np.testing.assert_array_equal(np.asarray(result), [1, 3, 7])


def test_named_tuples(ctx, backend):
    result = batched(ctx, pair_caller, Pair(np.array([6, 7, 8]), np.array([60, 70, 80])), backend=backend)
    assert type(result).__name__ == "Pair"
    np.testing.assert_array_equal(np.asarray(result.x), [10, 11, 12])
    np.testing.assert_array_equal(np.asarray(result.y), [68, 78, 88])


def test_broadcast_seven_arguments(ctx, backend):
    args = (np.array([12, 13, 14]), np.array([2]), np.array([3]), np.array([4]), 5, 6, 7)
    for _ in range(3):
        result = batched(ctx, seven_args, *args, backend=backend)
        np.testing.assert_array_equal(np.asarray(result), [39, 40, 41])


def test_one_armed_and_nested_if(ctx, backend):
    result = batched(ctx, one_armed_nested_if, np.array([1, 5, 60, 3, 7]), backend=backend)
    np.testing.assert_array_equal(np.asarray(result), [1, 3, 5, 1, 3])


def test_field_reference(ctx, backend):
    result = batched(ctx, field_reference, np.array([1, 5, 60, 3, 7]), backend=backend)
    np.testing.assert_array_equal(np.asarray(result), [11, 15, 70, 13, 17])


def test_calling_untagged_functions(ctx, backend):
    result = batched(ctx, calls_numpy, np.array([[1, 2], [5, 6], [60, 61]]), backend=backend)
    np.testing.assert_array_equal(np.asarray(result), [[4, 5], [16, 17], [181, 182]])


def test_consume_emit_multiple_values(ctx, backend):
    result = batched(ctx, consume_emit, (np.array([12, -13, 14]), np.array([[4, 3], [3, 2], [2, 1]])), backend=backend)
    np.testing.assert_array_equal(np.asarray(result[0]), [13, -12, 15])
    np.testing.assert_array_equal(np.asarray(result[1]), [[6, 5], [5, 4], [4, 3]])


def test_restructure_on_function_return(ctx, backend):
    result = batched(ctx, restructure, np.array([12, -13, 14]), backend=backend, max_stack_depth=5)
    np.testing.assert_array_equal(np.asarray(result), [58, -42, 66])


# ----- every construct against plain Python ------------------------------------------------------

CASES = [
    (fib, (np.array([0, 1, 3, 7, 10, 4]),)),
    (rec_sum, (np.array([0, 3, 9, 1]),)),
    (collatz, (np.array([1, 7, 27, 97, 12]),)),
    (gcd_loop, (np.array([12, 17, 100, 0]), np.array([18, 5, 75, 9]))),
    (nested_loops, (np.array([0, 1, 4, 7]),)),
    (for_break_continue, (np.array([0, 4, 10, 30]),)),
    (for_range_three, (np.array([0, 3, -4]), np.array([10, 4, 9]))),
    (first_divisor, (np.array([2, 9, 35, 97, 1]),)),
    (early_return_nested, (np.array([2, 5, 13]),)),
    (chained_and_bool, (np.array([-20, -3, 0, 3, 5, 9, 10, 20]),)),
    (pair_countdown, (np.array([0, 1, 4]), Pair(np.array([1, 2, 3]), np.array([10, 20, 30])))),
    (enclosing_scope, (np.array([12, -13, 14]),)),
    (float_newton_sqrt, (np.array([2.0, 9.0, 1e6, 0.25]),)),
    (vector_state, (np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 0.5]]), np.array([3, 0]))),
]


@pytest.mark.parametrize(("program", "args"), CASES, ids=[c[0].__name__ for c in CASES])
@pytest.mark.make_test_keeps(
    {"backend_name": "numpy"},
    {"backend_name": "jax"},
    *({"program": program} for program in (fib, collatz, for_break_continue, pair_countdown, vector_state)),
)
def test_against_plain_python(ctx, backend, program, args):
    assert_matches_python(ctx, program, args, backend, max_stack_depth=40)


def test_result_dtypes_follow_numpy(ctx):
    # A returned Python literal is weak (NEP 50): joined with int32 values it stays int32.
    result = batched(ctx, rec_sum, np.array([3, 4], dtype=np.int32))
    assert np.asarray(result).dtype == np.int32
    # Only literals reach fib's result: Python ints, i.e. int64.
    assert np.asarray(batched(ctx, fib, np.array([3, 4], dtype=np.int32))).dtype == np.int64
    # A counter computed from literals only stays a Python int, converted where it meets int32.
    total, count = batched(ctx, counter_plus, np.array([1, 2], dtype=np.int16))
    assert np.asarray(total).dtype == np.int16 and np.asarray(count).dtype == np.int64
    np.testing.assert_array_equal(total, [4, 5])
    result = batched(ctx, float_newton_sqrt, np.array([2.0], dtype=np.float32))
    assert np.asarray(result).dtype == np.float32


def test_scheduling_batches_fibonacci_additions():
    calls: list[int] = []
    ctx = abir.Context()

    @ctx.primitive  # called on whole batches: counts the calls that carry all 4 members
    def count(x):
        if np.shape(x)[0] == 4:
            calls.append(1)
        return x

    def fib_counted(n):
        if n > 1:
            return count(fib_counted(n - 1) + fib_counted(n - 2))
        return 1

    batched_fib = ctx.batch_uncurried(fib_counted)
    result = batched_fib(np.array([3, 7, 4, 5]), backend=abir.NumpyBackend())
    np.testing.assert_array_equal(result, [3, 21, 5, 8])
    assert len(calls) == 20  # fib(7) - 1: every other member's additions ride along


# ----- modes ------------------------------------------------------------------------------------------


def test_dry_run_runs_plain_python(ctx):
    result = batched(ctx, fib, np.array([7]), dry_run=True)
    np.testing.assert_array_equal(np.asarray(result), [21])


def test_stackless_matches(ctx):
    result = batched(ctx, fib, np.array([3, 7, 4, 5]), stackless=True)
    np.testing.assert_array_equal(np.asarray(result), [3, 21, 5, 8])
    result = batched(ctx, collatz, np.array([1, 7, 27]), stackless=True)
    np.testing.assert_array_equal(np.asarray(result), [collatz(1), collatz(7), collatz(27)])


def test_stack_overflow_names_function_and_depth(ctx, backend):
    with pytest.raises(abir.StackOverflowError, match=r"rec_sum.*max_stack_depth.*5|max_stack_depth.*5.*rec_sum") as raised:
        batched(ctx, rec_sum, np.array([3, 50, 1, 60]), backend=backend, max_stack_depth=5)
    assert "batch members 1, 3 recursed" in str(raised.value)
    assert (raised.value.members, raised.value.vmap_indices) == ([1, 3], [(), ()])


def test_stack_overflow_names_the_python_function_of_a_specialization(ctx):
    # pair_depth takes a namedtuple, so its IR function is a specialization (pair_depth.s1).
    with pytest.raises(abir.StackOverflowError, match=r"function 'pair_depth' .*max_stack_depth=4"):
        batched(ctx, pair_depth, Pair(np.array([1, 30]), np.array([0, 0])), max_stack_depth=4)


def test_mismatched_batch_sizes(ctx):
    with pytest.raises(ValueError, match="batch"):
        batched(ctx, gcd_loop, np.array([1, 2, 3]), np.array([1, 2]))


def test_non_array_argument(ctx):
    with pytest.raises(TypeError, match="argument"):
        batched(ctx, fib, "seven")


def test_unknown_keyword_argument(ctx):
    with pytest.raises(TypeError, match="max_depth"):
        batched(ctx, fib, np.array([3]), max_depth=3)


# ----- property tests -----------------------------------------------------------------------------


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 300), min_size=1, max_size=12))
def test_collatz_property(ctx, values):
    assert_matches_python(ctx, collatz, (np.array(values),), abir.NumpyBackend())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)), min_size=1, max_size=12))
def test_gcd_property(ctx, pairs):
    a, b = (np.array(column) for column in zip(*pairs, strict=True))
    assert_matches_python(ctx, gcd_loop, (a, b), abir.NumpyBackend())
    assert_matches_python(ctx, gcd_rec, (a % 50, b % 50), abir.NumpyBackend(), max_stack_depth=60)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 12), min_size=1, max_size=10))
def test_fib_property(ctx, values):
    assert_matches_python(ctx, fib, (np.array(values),), abir.NumpyBackend())


MATRIX = np.arange(6.0).reshape(2, 3)


def matvec(x):
    return x @ MATRIX + MATRIX[1]


def test_matrix_closure_constant(backend):
    # A rank-2 constant from the enclosing scope keeps its shape on every backend.
    batched_matvec = abir.Context().batch_uncurried(matvec)
    x = np.array([[1.0, 2.0], [0.5, -1.0], [0.0, 0.0], [3.0, 1.0]])
    np.testing.assert_allclose(np.asarray(batched_matvec(x, backend=backend)), x @ MATRIX + MATRIX[1])
