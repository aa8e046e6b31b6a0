"""Python's meaning, every time: what the batched run shows equals the plain Python run of every
member, or the program is rejected with an error naming the user's line and what to write.

* conditional expressions, `and` and `or` evaluate an operand only for the members Python
  evaluates it for (a recursion guarded by the condition terminates), and their recursive arms
  do not hide the base case from result-structure analysis;
* item assignment (`x[i] = v`, `x[i] += v`, `x[a:b] = w`, `x[i, j] = v`) updates the member's own
  array as NumPy does, aliases included, or is rejected where NumPy would change an array that
  abir cannot follow (an argument, a view, a module-level array);
* `x in (a, b)` compares `x` with each element as Python does (a bool per member);
* `np.random` / `random`, `print` and float `range()` bounds, which would silently differ, are errors;
* values of different types meeting where paths join (an `if`, a loop, two returns) are errors
  naming the variable, both types and the lines of both paths.

Every program runs on NumPy, JAX and TensorFlow and is checked against plain Python per member.
"""

from __future__ import annotations

import collections
import inspect
import os
import random
import subprocess
import sys

import numpy as np
import pytest

import abir
from abir.context import Context
from abir.errors import AbirError, TypeInferenceError, UnsupportedSyntaxError

# -- programs (plain module-level Python, written for one member) ------------------------------


def fib_ternary(n):
    return n if n < 2 else fib_ternary(n - 1) + fib_ternary(n - 2)


def fib_joined_if(n):
    if n < 2:
        result = n
    else:
        result = fib_joined_if(n - 1) + fib_joined_if(n - 2)
    return result


def steps_or(n):
    return (n <= 0 and -1) or 1 + steps_or(n - 1)


def runaway(n):
    """Terminates for n >= 0 only: called for a negative n it recurses until the stack overflows."""
    if n == 0:
        return 0
    return 1 + runaway(n - 1)


def guarded_ternary(n):
    return runaway(n) if n >= 0 else -1


def guarded_and(n):
    return n >= 0 and runaway(n) > 2


def guarded_or(n):
    return n < 0 or runaway(n) > 2


def eager_arms(x, d, i):
    """Cheap operands that may misbehave on the members not choosing them: both are computed and
    selected (integer division by zero gives 0, indices are clipped), the result is Python's."""
    quotient = x // d if d != 0 else -1
    item = np.array([10, 20, 30])[i] if 0 <= i < 3 else 0
    return quotient, item, d != 0 and x % d == 0


def insertion_sort(x):
    x = x.copy()
    for i in range(1, len(x)):
        key = x[i]
        j = i - 1
        while j >= 0 and x[j] > key:
            x[j + 1] = x[j]
            j -= 1
        x[j + 1] = key
    return x


def histogram(values, n):
    counts = np.zeros(4, dtype=np.int64)
    for k in range(n):
        counts[values[k] // 25] += 1
    return counts


def slices_and_pairs(m, i, j, v):
    m = m.copy()
    m[i, j] = v
    m[0, 1:] = m[1, :2] * 2
    m[:, j] = v / 2
    m[1] = [7, 8, 9]
    m[-1] += 1.5
    m[i] -= m[-1 - i, 0]
    return m


def aliases_follow(x, k):
    x = x.astype(np.float64)
    y = x
    pair = (x, k)
    x[k] = 100.0
    if k > 1:
        x[0] = -1.0
    return y, pair[0], x


Point = collections.namedtuple("Point", ["position", "steps"])


def namedtuple_field(x, k):
    state = Point(x.copy(), 0)
    start = state
    for i in range(k):
        state.position[i] *= 2
        state = state._replace(steps=state.steps + 1)
    before = state
    state.position[0] = -state.steps
    return before.position, start, state


def swap_and_constants(x, i):
    table = np.arange(5) * 10
    table[i] = x[0]
    x = x.copy()
    x[0], x[1] = x[1], x[0]
    return table, x


def twice(n):
    return n * 2


def flag_and_call(n):
    return n > 3 and twice(n)


def call_or_flag(n):
    return twice(n) - 6 or n < 0


def call_if_else_flag(n):
    return twice(n) if n % 2 == 0 else n > 2


def flag_or_number_returned(n):
    if n < 0:
        return n < -3
    return n


def flag_becomes_float(n):
    x = n > 1
    for _ in range(n % 3):
        x = x * 1.5 + 0.5
    return x


SMALL_PRIMES = {2, 3, 5, 7}
EVENS = range(0, 10, 2)


def membership(n, x):
    """`in` and `not in` over literal tuples and lists, module-level sets and ranges, with
    per-member elements too; a bool per member, as Python gives."""
    if n in (1, 2):
        kind = 10
    elif n not in [3, 4.5, x]:
        kind = 20
    else:
        kind = 30
    return kind, n in SMALL_PRIMES, n in EVENS, x in (n, 2 * n), n in ()


def membership_of_itself(x):
    """An element that is the very object `x` matches by identity, NaN included."""
    y = x
    return x in (y,), x in (x + 0.0,), x not in (1.0, x * 2)


PROGRAMS = [fib_ternary, fib_joined_if, steps_or, runaway, guarded_ternary, guarded_and, guarded_or,
            eager_arms, insertion_sort, histogram, slices_and_pairs, aliases_follow, namedtuple_field,
            swap_and_constants, twice, flag_and_call, call_or_flag, call_if_else_flag,
            flag_or_number_returned, flag_becomes_float, membership, membership_of_itself]  # fmt: skip


@pytest.fixture(scope="module")
def batched() -> dict[str, object]:
    context = abir.Context()
    return {program.__name__: context.batch_uncurried(program) for program in PROGRAMS}


@pytest.fixture(params=["numpy", "jax", "tf"])
def backend(request):
    return {"numpy": abir.NumpyBackend, "jax": abir.JaxBackend, "tf": abir.TensorFlowBackend}[request.param]()


def member(value, i):
    """Member i of a batched argument, as the plain Python run gets it (size-1 batches shared)."""
    array = np.asarray(value)
    if array.ndim == 0:
        return array.item()
    row = array[0] if array.shape[0] == 1 else array[i]
    return row.item() if row.ndim == 0 else row.copy()


def assert_same(got, expected, what):
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected), what
        for g, e in zip(got, expected, strict=True):
            assert_same(g, e, what)
        return
    np.testing.assert_array_equal(np.asarray(got, dtype=float), np.asarray(expected, dtype=float), err_msg=what)


def run_rows(value, i):
    """Member i of a batched result."""
    if isinstance(value, tuple):
        return type(value)(*(run_rows(v, i) for v in value)) if hasattr(value, "_fields") else tuple(
            run_rows(v, i) for v in value
        )
    return np.asarray(value)[i]


def assert_matches_python(batched, program, args, backend, **options):
    result = batched[program.__name__](*args, backend=backend, **options)
    size = max(np.shape(a)[0] for a in args if np.ndim(a) > 0)
    for i in range(size):
        expected = program(*(member(a, i) for a in args))
        assert_same(run_rows(result, i), expected, f"{program.__name__} member {i}")


# -- 1. conditional expressions, `and`, `or` -----------------------------------------------------


@pytest.mark.parametrize("program", [fib_ternary, fib_joined_if, steps_or])
@pytest.mark.make_test_keeps({"backend": "numpy"}, {"backend": "jax"}, {"program": steps_or})
def test_recursive_arm_joins_the_base_case(batched, backend, program):
    assert_matches_python(batched, program, [np.array([0, 1, 5, 9, 3])], backend, max_stack_depth=20)


@pytest.mark.parametrize("program", [guarded_ternary, guarded_and, guarded_or])
@pytest.mark.make_test_keeps({"backend": "numpy"}, {"backend": "jax"}, {"program": guarded_ternary})
def test_only_the_operand_python_evaluates_runs(batched, backend, program):
    # runaway(-4) never returns: the members with n < 0 must not call it
    assert_matches_python(batched, program, [np.array([3, -4, 0, 5, -1])], backend)


def test_runaway_really_overflows_when_called(batched, backend):
    with pytest.raises(abir.StackOverflowError):
        batched["runaway"](np.array([2, -4]), backend=backend)


def test_cheap_operands_are_selected_with_pythons_result(batched, backend):
    args = [np.array([7, 8, 9, -6]), np.array([2, 0, -3, 4]), np.array([0, 2, 7, -1])]
    assert_matches_python(batched, eager_arms, args, backend)


@pytest.mark.parametrize(
    "program", [flag_and_call, call_or_flag, call_if_else_flag, flag_or_number_returned, flag_becomes_float]
)
def test_a_bool_joined_with_a_number_is_that_number(batched, backend, program):
    # Python gives some members a bool and others a number; stacked, NumPy makes them all numbers
    n = np.array([-5, -1, 0, 1, 2, 3, 4, 5, 6, 7])
    assert_matches_python(batched, program, [n], backend)
    result = np.asarray(batched[program.__name__](n, backend=backend))
    stacked = np.array([program(int(k)) for k in n])
    assert result.dtype.kind == stacked.dtype.kind


# -- 2. item assignment ----------------------------------------------------------------------------


def test_insertion_sort(batched, backend):
    x = np.random.default_rng(0).integers(-50, 50, size=(6, 7))
    assert_matches_python(batched, insertion_sort, [x], backend)
    np.testing.assert_array_equal(x, np.random.default_rng(0).integers(-50, 50, size=(6, 7)))  # input untouched


def test_histogram(batched, backend):
    values = np.random.default_rng(1).integers(0, 100, size=(5, 8))
    assert_matches_python(batched, histogram, [values, np.array([8, 3, 0, 5, 8])], backend)


def test_slices_pairs_and_augmented_items(batched, backend):
    m = np.arange(30, dtype=np.float64).reshape(5, 2, 3)
    args = [m, np.array([0, 1, -1, 1, 0]), np.array([2, 0, 1, -2, 1]), np.array([9.5, -1.0, 3.0, 0.5, 2.0])]
    assert_matches_python(batched, slices_and_pairs, args, backend)


def test_every_name_for_the_array_sees_the_change(batched, backend):
    x = np.arange(12).reshape(4, 3)
    assert_matches_python(batched, aliases_follow, [x, np.array([0, 2, 1, 2])], backend)


def test_namedtuple_fields_and_their_aliases(batched, backend):
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    assert_matches_python(batched, namedtuple_field, [x, np.array([0, 1, 3, 2])], backend)


def test_tuple_swap_and_compile_time_arrays(batched, backend):
    x = np.arange(8).reshape(4, 2)
    assert_matches_python(batched, swap_and_constants, [x, np.array([0, 4, 2, -1])], backend)


def test_per_member_index_is_clipped_like_a_read(backend):
    def clipped(x, i):
        x = x.copy()
        x[i] = -1
        return x

    ctx = Context()
    result = ctx.batch()(clipped)(np.zeros((3, 4), np.int64), np.array([1, 9, -9]), backend=backend)
    np.testing.assert_array_equal(np.asarray(result), [[0, -1, 0, 0], [0, 0, 0, -1], [-1, 0, 0, 0]])


# -- errors ------------------------------------------------------------------------------------------


def line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(offset for offset, line in enumerate(lines) if text in line)


def expect_error(function, marker: str, message: str, *args, error=UnsupportedSyntaxError):
    """Lowering (and, for errors that need types, calling) `function` fails at `marker`'s line."""
    ctx = Context()
    batched = ctx.batch()(function)
    with pytest.raises(error) as info:
        ctx.module()
        batched(*args)
    text = str(info.value)
    assert message in text, text
    assert f"{inspect.getsourcefile(function)}:{line_of(function, marker)}:" in text, text
    assert "Instead:" in text, text
    return info.value


def test_assigning_into_an_argument():
    def f(x):
        x[0] = 1  # here
        return x

    error = expect_error(f, "# here", "item assignment into `x` is not supported here: `x` holds the argument 'x'")
    assert "x = x.copy()" in str(error)


def one_of_five_arguments(a, b, c, d, e, k):
    x = a
    if k > 0:
        x = b
    elif k > 1:
        x = c
    elif k > 2:
        x = d
    elif k > 3:
        x = e
    x[0] = 1.0  # here
    return x


def named_argument() -> str:
    """The argument the item assignment error of `one_of_five_arguments` names."""
    ctx = Context()
    ctx.batch()(one_of_five_arguments)
    with pytest.raises(UnsupportedSyntaxError) as info:
        ctx.module()
    return str(info.value).split("`x` holds the argument ")[1][:3]


def test_an_item_assignment_error_names_the_first_argument_in_source_order():
    # `x` may be any of five arguments: the error names `a` in every run, not whichever root a
    # set of roots (ordered by object address) yields first
    assert {named_argument() for _ in range(20)} == {"'a'"}
    script = f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import test_python_semantics as t; print(t.named_argument())"
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        assert run.stdout.strip() == "'a'", run.stderr


def test_assigning_into_a_module_level_array():
    def f(x):
        table = TABLE
        table[0] = x  # here
        return table

    expect_error(f, "# here", "`table` holds an array from outside the function")


def test_assigning_into_a_helper_result():
    def f(x):
        z = identity_helper(x.copy())
        z[0] = 1  # here
        return z

    expect_error(f, "# here", "`z` holds the result of a call, which may be one of its arguments")


def test_a_slice_view_would_change_too():
    def f(x):
        x = x.copy()
        tail = x[1:]
        x[1] = 5  # here
        return tail

    expect_error(f, "# here", "variable 'tail' may share its array with `x`")


def test_a_row_view_is_found_once_types_are_known():
    def f(m, i):
        m = m.copy()
        row = m[i]
        m[0, 0] = 5.0  # here
        return row

    expect_error(f, "# here", "variable 'row' is an item of `m` with axes of its own", np.zeros((2, 3, 3)),
                 np.array([0, 1]))


def test_a_scalar_read_is_a_copy():
    def f(x, i):
        x = x.copy()
        old = x[i]
        x[i] = 0.0
        return old, x

    ctx = Context()
    old, x = ctx.batch()(f)(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1, 0]))
    np.testing.assert_array_equal(old, [2.0, 3.0])
    np.testing.assert_array_equal(x, [[1.0, 0.0], [0.0, 4.0]])


def test_a_scalar_read_before_a_loop_is_a_copy_for_assignments_after_it(backend):
    # found by the fuzzer (seed 7, program 39): the loop carries `w`, `v` holds w[i] as it starts
    def f(i):
        w = np.zeros(3)
        v = w[i]
        while False:
            w = np.zeros(3)
        w[i] = 5.0
        return v + w.sum()

    got = Context().batch()(f)(np.array([0, 2]), backend=backend)
    np.testing.assert_array_equal(got, [f(0), f(2)])


def test_a_row_read_before_a_loop_is_a_view_for_assignments_after_it():
    def f(m, i):
        w = m.copy()
        row = w[i]
        while False:  # here
            w = m.copy()
        w[0, 0] = 5.0
        return row

    expect_error(f, "# here", "variable 'row' is an item of `w` with axes of its own", np.zeros((2, 3, 3)),
                 np.array([0, 1]))


Pair = collections.namedtuple("Pair", ["a", "b"])


def pair_of(x):
    return Pair(0, x * 2.0)


def same_value(x):
    return x


def test_a_call_given_a_join_of_a_scalar_read_shares_nothing(backend):
    # found by the fuzzer (seed 7, program 158): `v` is w[i] on one path, an argument on the other
    def f(i, y):
        w = np.zeros(2)
        v = y
        if 0 <= i < 1:
            v = w[i]
        r = pair_of(v)
        w[0] = 5.0
        return r.b + w.sum()

    ctx = Context()
    batched = ctx.batch()(f)
    ctx.batch()(pair_of)
    i, y = np.array([0, 3]), np.array([1.5, 2.5])
    got = batched(i, y, backend=backend)
    np.testing.assert_array_equal(got, [f(0, 1.5), f(3, 2.5)])


def test_a_call_given_a_join_of_a_row_read_is_a_view_error():
    def f(m, i):
        w = m.copy()
        v = m[1]
        if i < 1:
            v = w[i]
        r = same_value(v)
        w[0, 0] = 5.0  # here
        return r

    ctx = Context()
    batched = ctx.batch()(f)
    ctx.batch()(same_value)
    with pytest.raises(UnsupportedSyntaxError, match="a view of `w`'s array"):
        batched(np.zeros((2, 2, 3)), np.array([0, 3]))


def test_arrays_shared_across_loop_iterations():
    def f(x):
        a = x.copy()
        b = x.copy()
        for i in range(3):  # here
            a[i] = 1.0
            b = a
        return b

    expect_error(f, "# here", "at the end of an iteration of this loop 'b' may share its array with 'a'",
                 np.zeros((2, 3)))  # an error for arrays only: found once types are known


def test_an_alias_carried_separately_by_a_loop():
    def f(x):
        a = x.copy()
        b = a
        for i in range(2):
            a[i] = 0.0  # here
            b = b * 1.0
        return b

    expect_error(f, "# here", "`a` holds an array that 'a' and 'b' may share when the loop at line")


def test_a_join_of_two_arrays_is_a_possible_alias():
    def f(x, c):
        a = x.copy()
        b = x * 2
        y = a if c > 0 else b
        y[0] = 100.0  # here
        return a

    expect_error(f, "# here", "variable 'a' may share its array with `y`")


def test_item_assignment_into_tuples_keeps_its_message():
    def f(x):
        t = (x, x)
        t[0] = 1  # here
        return t

    expect_error(f, "# here", "item assignment is not supported (values are immutable)")


def test_assigning_into_an_item_of_an_item():
    def f(x):
        x = x.copy()
        x[0][1] = 1  # here
        return x

    expect_error(f, "# here", "assigning into an item of `x[0]` is not supported")


def test_print_is_an_error_at_its_line():
    def f(x):
        print(x)  # here
        return x

    error = expect_error(f, "# here", "print() inside a batched function")
    assert "dry_run=True" in str(error)


@pytest.mark.parametrize("draw", ["numpy", "generator", "stdlib"])
def test_global_random_generators_are_errors(draw):
    def with_numpy(x):
        return x + np.random.normal()  # here

    def with_generator(x):
        return x + GENERATOR.uniform(x, 1.0)  # here

    def with_stdlib(x):
        return x + random.random()  # here

    function = {"numpy": with_numpy, "generator": with_generator, "stdlib": with_stdlib}[draw]
    error = expect_error(function, "# here", "draws from a global random generator")
    assert "abir.random" in str(error)


def test_float_range_bound_is_an_error_at_its_line(backend):
    def stop(n):
        total = 0
        for i in range(n):  # here
            total += i
        return total

    def start(x):
        total = 0
        for i in range(x, 10):  # here
            total += i
        return total

    for function, arg in ((stop, np.array([3.0, 2.0])), (start, np.array([1.5, 2.0]))):
        ctx = Context()
        with pytest.raises(AbirError) as info:
            ctx.batch()(function)(arg, backend=backend)
        text = str(info.value)
        assert f"{__file__}:{line_of(function, '# here')}:" in text, text
        assert "range() arguments must be integers" in text and "per-member float" in text, text


def test_integer_range_bounds_need_no_check():
    def f(x):
        total = 0
        for i in range(len(x) - 1):
            total += x[i]
        return total

    ctx = Context()
    batched = ctx.batch()(f)
    assert "abir.integer_operands" not in str(ctx.module())
    np.testing.assert_array_equal(batched(np.arange(6).reshape(2, 3)), [1, 7])


# -- `in` -------------------------------------------------------------------------------------------


def test_membership_in_tuples_lists_sets_and_ranges(batched, backend):
    n = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8])
    x = np.array([0, 5, 1, 6, 4, 9, 3, 14, 8])
    assert_matches_python(batched, membership, [n, x], backend)
    result = batched["membership"](n, x, backend=backend)
    assert all(np.asarray(leaf).dtype == np.bool_ for leaf in result[1:])


def test_membership_of_the_value_itself(batched, backend):
    assert_matches_python(batched, membership_of_itself, [np.array([np.nan, 1.0, 2.0, -0.0])], backend)


def test_membership_of_an_array_is_an_error():
    def f(v):
        return 1 in (v, 2)  # here

    expect_error(f, "# here", "`1 in (v, 2)` compares `1` with each element, and here a comparison gives a "
                 "per-member array", np.ones((2, 3)), error=AbirError)


def test_membership_in_an_array_is_an_error():
    def f(n):
        return n in TABLE  # here

    expect_error(f, "# here", "`in` with per-member values is supported over a tuple, list or set", np.array([1]))


# -- types meeting at joins ---------------------------------------------------------------------


def test_an_int_and_a_float_meeting_after_an_if():
    def f(n, x):
        y = n * 2
        if n > 1:
            y = x * 0.5  # here
        return y

    error = expect_error(f, "# here", "variable 'y' is an int64 on the path from line", np.array([1, 2]),
                         np.array([0.5, 1.0]), error=TypeInferenceError)
    assert f"and a float64 on the path from line {line_of(f, '# here')};" in str(error)
    assert "`float(...)`" in str(error) and "in batched function 'f'" in str(error)


def test_a_loop_changing_the_dtype_of_a_variable():
    def f(n, x):
        acc = n
        i = 0
        while i < n:  # here
            acc = acc * x
            i += 1
        return acc

    error = expect_error(f, "# here", "variable 'acc' is an int64 when the loop at line", np.array([1, 2]),
                         np.array([0.5, 1.0]), error=TypeInferenceError)
    assert f"a float64 at the end of an iteration (line {line_of(f, 'i += 1')})" in str(error)


def test_a_number_meeting_an_array_is_an_error():
    """Members whose loop never ran would hold a number, the others an array (it used to crash
    when a weak literal took the array's type)."""

    def f(v, n):
        acc = 0.0
        for i in range(n):  # here
            acc = acc + v * i
        return acc

    error = expect_error(f, "# here", "variable 'acc' is a float64 when the loop at line", np.ones((2, 3)),
                         np.array([0, 2]), error=TypeInferenceError)
    assert "a float64 array of shape (3,) at the end of an iteration" in str(error)
    assert "`np.zeros(3)`" in str(error)


def test_returns_of_two_dtypes():
    def f(n, x):
        if n > 0:
            return n
        return x  # here

    error = expect_error(f, "# here", "function 'f' returns an int64 at line", np.array([1, 2]),
                         np.array([0.5, 1.0]), error=TypeInferenceError)
    assert f"and a float64 at line {line_of(f, '# here')};" in str(error)


TABLE = np.arange(4)
GENERATOR = np.random.default_rng(0)


def identity_helper(a):
    return a
