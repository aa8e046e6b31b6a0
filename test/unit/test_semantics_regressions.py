"""Regressions of "Python's meaning, every time": each program's batched run equals its per-member
plain Python run (`dry_run=True`) on NumPy, JAX and TensorFlow, or the program is rejected with an
error naming the user's line.

* A call taking the result of a primitive (`ctx.primitive`) whose result structure type inference has
  not learned yet is lowered with a placeholder; the program must be lowered again once the
  structure is known, also when it is a single array (the call used to stay the placeholder:
  `r(x, helper(x))` became `helper(x)`).
* `x op= v` updates an array `x` in place as NumPy does (every variable holding the array sees
  the change, dtype and shape stay), rebinds a per-member scalar, and is rejected where abir
  cannot follow the array (an argument, a view, arrays shared across loop iterations).
* A loop no longer makes a variable holding the array another variable holds follow that
  variable when the loop gives it new arrays (it did in functions with item assignment), and
  scalars sharing a value across iterations, or joining an integer-index read with a number,
  are not taken for shared arrays.
* An integer power with a negative exponent never raises on the junk rows of inactive members.
* A scalar read of an array carried into or out of a loop is a copy, not a second name for the
  array (the array is item-assigned later); a row or slice carried so still shares its array.
* A function entered by a tail call returns where its caller's call does: a return there is not
  bound to the one call of the function itself, and its caller's values stay live through it.
"""

from __future__ import annotations

import collections
import inspect

import numpy as np
import pytest

import abir
from abir.backends.jax import JaxBackend
from abir.backends.numpy_backend import NumpyBackend
from abir.backends.tf import TensorFlowBackend
from abir.errors import AbirError, UnsupportedSyntaxError

# -- programs: helper results whose structure is learned at type inference ---------------------


def doubled(a):
    """A primitive returning one array."""
    return a * 2


def pair_of(a):
    """A primitive returning a tuple."""
    return a + 1, a * 2


def two_vector(a):
    """A primitive returning one array with an axis of 2 per member."""
    return np.stack([a, a + 1], axis=-1)


def countdown(n, v):
    if n <= 0:
        return v
    return countdown(n - 1, v) + 1


def call_with_helper_result(x):
    v = doubled(x)
    return countdown(x, v)


def call_in_conditional_expression(x):
    v = doubled(x)
    return countdown(x, v) if x > 2 else 7


def call_in_and(x):
    v = doubled(x)
    return x > 2 and countdown(x, v) > 7


def call_in_or(x):
    v = doubled(x)
    return x > 2 or countdown(x, v) > 2


def call_with_helper_field(x):
    t = pair_of(x)
    return countdown(x, t[0]) if x > 2 else t[1]


def unpack_single_array(x):
    t = two_vector(x)
    a, b = t
    return a


def different_arm_structures(x):
    t = pair_of(x)
    return countdown(x, x) if x > 2 else t


# -- programs: augmented assignment ------------------------------------------------------------


def alias_sees_update(x, k):
    x = x.astype(np.float64)
    y = x
    pair = (x, 0)
    x += k
    x *= 2
    return y, pair[0], x


def scalar_is_rebound(n):
    x = n * 1
    y = x
    x += 5
    return y, x


def alias_in_loop(x, n):
    x = x * 1.0
    y = x
    i = 0
    while i < n:
        x += 1.0
        i += 1
    return y, x


def scalar_alias_in_loop(n):
    x = n * 1
    y = x
    i = 0
    while i < 3:
        x += 1
        i += 1
    return y, x


def compile_time_array(k):
    x = np.zeros(3)
    y = x
    x += 1
    x += k
    return y, x


def scalar_argument_accumulates(n, acc):
    while n > 0:
        acc += n
        n -= 1
    return acc


def array_update_then_item(x, k):
    x = x.copy()
    y = x
    x += k
    x[0] = -1
    return y


def rebinding_loop_keeps_alias(n):
    a = np.zeros(3)
    a[0] = 1.0
    x = n * 1
    y = x
    i = 0
    while i < 3:
        x = x + 1
        i += 1
    return y, x, a


def scalar_copies_in_item_loop(n):
    w = np.zeros(3)
    k = n * 1
    prev = k
    i = 0
    while i < 3:
        k += 1
        w[i] = k
        prev = k
        i += 1
    return w, prev


def scalar_read_on_some_paths(p0):
    v = np.zeros(4)
    read = 0.0
    if 0 <= p0 < 2:
        read = v[p0]
    v[0] = 5.0
    return read, v


# -- programs: integer powers ------------------------------------------------------------------


def guarded_power(b, n):
    if n >= 0:
        return b**n
    return -1


def power_in_arm(b, n):
    return b**n if n >= 0 else 0


PROGRAMS = [
    doubled, pair_of, two_vector, countdown, call_with_helper_result, call_in_conditional_expression, call_in_and,
    call_in_or, call_with_helper_field, alias_sees_update, scalar_is_rebound, alias_in_loop, scalar_alias_in_loop,
    compile_time_array, scalar_argument_accumulates, array_update_then_item, rebinding_loop_keeps_alias,
    scalar_copies_in_item_loop, scalar_read_on_some_paths, guarded_power, power_in_arm,
]  # fmt: skip
PRIMITIVES = (doubled, pair_of, two_vector)
"""Declared `ctx.primitive`: called on whole batches, their result structures learned at type inference."""


def context_with_primitives() -> abir.Context:
    context = abir.Context()
    for primitive in PRIMITIVES:
        context.primitive(primitive)
    return context


@pytest.fixture(scope="module")
def batched() -> dict[str, object]:
    context = context_with_primitives()
    return {p.__name__: context.batch_uncurried(p) for p in PROGRAMS if p not in PRIMITIVES}


@pytest.fixture(scope="module", params=["numpy", "jax", "tf"])
def backend(request: pytest.FixtureRequest):
    """Each backend under its `scope()`, as a call runs it (JAX: 64-bit types for the tests
    that use its operations directly)."""
    backend = {"numpy": NumpyBackend, "jax": JaxBackend, "tf": TensorFlowBackend}[request.param]()
    with backend.scope():
        yield backend


def assert_matches_python(function, args, backend) -> None:
    """The batched run equals the per-member plain Python run, leaf by leaf, dtypes included."""
    got = function(*args, backend=backend)
    expected = function(*args, dry_run=True)
    got_leaves = got if isinstance(got, tuple) else (got,)
    expected_leaves = expected if isinstance(expected, tuple) else (expected,)
    assert len(got_leaves) == len(expected_leaves)
    for g, e in zip(got_leaves, expected_leaves, strict=True):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype, (g.dtype, e.dtype)
        np.testing.assert_array_equal(g, e)


# -- 1. a call taking a helper result of unknown structure --------------------------------------


@pytest.mark.parametrize(
    "program",
    [call_with_helper_result, call_in_conditional_expression, call_in_and, call_in_or, call_with_helper_field],
)
# The lowering again is the frontend's, the same on every backend: `make test` runs every program
# on NumPy and the first on the compiled backend (conftest.py, rule 4), `full` the others.
@pytest.mark.make_test_keeps({"backend": "numpy"}, {"program": call_with_helper_result})
def test_call_taking_a_helper_result_is_lowered_again(batched, backend, program):
    assert_matches_python(batched[program.__name__], [np.array([0, 1, 3, 5])], backend)


def test_unpacking_a_helper_array_is_an_error_not_a_copy():
    error = expect_error(unpack_single_array, "a, b = t", "cannot unpack a single array into 2 names",
                         np.array([0, 1]))
    assert isinstance(error, UnsupportedSyntaxError)


def test_arms_of_different_structures_name_the_expression_not_a_hidden_variable():
    error = expect_error(different_arm_structures, "return countdown",
                         "the two arms of this conditional expression have different structures", np.array([0, 3]))
    assert ".value" not in str(error)


# -- 2. augmented assignment ---------------------------------------------------------------------


def test_every_variable_holding_the_array_sees_the_update(batched, backend):
    assert_matches_python(batched["alias_sees_update"], [np.arange(6).reshape(2, 3), np.array([1, 2])], backend)


def test_a_scalar_is_rebound(batched, backend):
    assert_matches_python(batched["scalar_is_rebound"], [np.array([1, 2])], backend)


def test_a_variable_holding_the_array_follows_it_through_a_loop(batched, backend):
    assert_matches_python(batched["alias_in_loop"], [np.arange(6).reshape(2, 3), np.array([1, 3])], backend)


def test_a_scalar_alias_keeps_its_value_through_a_loop(batched, backend):
    assert_matches_python(batched["scalar_alias_in_loop"], [np.array([1, 2])], backend)


def test_compile_time_arrays_are_updated_in_place(batched, backend):
    assert_matches_python(batched["compile_time_array"], [np.array([1, 2])], backend)


def test_scalar_arguments_accumulate(batched, backend):
    assert_matches_python(batched["scalar_argument_accumulates"], [np.array([3, 4]), np.array([1, 2])], backend)


def test_an_alias_of_an_updated_array_sees_later_item_assignments(batched, backend):
    assert_matches_python(batched["array_update_then_item"], [np.arange(6).reshape(2, 3), np.array([1, 2])], backend)


def test_a_loop_giving_a_variable_new_values_leaves_its_aliases_alone(batched, backend):
    assert_matches_python(batched["rebinding_loop_keeps_alias"], [np.array([1, 2])], backend)


def test_scalar_copies_in_a_loop_assigning_items_are_not_shared_arrays(batched, backend):
    assert_matches_python(batched["scalar_copies_in_item_loop"], [np.array([1, 2])], backend)


def test_a_join_of_a_scalar_read_and_a_number_is_a_copy(batched, backend):
    assert_matches_python(batched["scalar_read_on_some_paths"], [np.array([0, 1, 3])], backend)


def line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(offset for offset, line in enumerate(lines) if text in line)


def expect_error(function, marker: str, message: str, *args) -> AbirError:
    """Calling `function` batched fails at `marker`'s line with `message` and a suggestion."""
    context = context_with_primitives()
    context.batch()(countdown)
    with pytest.raises(AbirError) as info:
        context.batch()(function)(*args, backend=NumpyBackend())
    text = str(info.value)
    assert message in text, text
    assert f"{__file__}:{line_of(function, marker)}:" in text, text
    assert "Instead:" in text, text
    return info.value


def test_updating_an_argument_array_in_place_is_an_error():
    def f(x):
        x += 1  # here
        return x

    expect_error(f, "# here", "`x += 1` updates the array `x` holds in place (in NumPy), but `x` holds the argument",
                 np.zeros((2, 3)))
    np.testing.assert_array_equal(abir.Context().batch()(f)(np.array([1, 2])), [2, 3])  # a scalar is fine


def test_updating_an_array_a_view_shares_is_an_error():
    def f(x):
        x = x.copy()
        v = x[1:]
        x -= 1  # here
        return v

    expect_error(f, "# here", "variable 'v' may share that array", np.zeros((2, 3)))


def test_updating_an_array_possibly_held_by_a_join_is_an_error():
    def f(x, c):
        a = x.copy()
        b = a if c > 0 else x * 2
        a += 1  # here
        return b

    expect_error(f, "# here", "variable 'b' may share that array", np.zeros((2, 3)), np.array([1, -1]))


def test_an_in_place_update_keeps_the_dtype():
    def f(x):
        y = x.copy()
        y += 0.5  # here
        return y

    error = expect_error(f, "# here", "keeping its dtype and shape", np.zeros((2, 3), np.int64))
    assert "`y = y + 0.5`" in str(error)


MODULE_ARRAY = np.ones(3)


def test_updating_a_module_level_array_is_an_error():
    def f(k):
        x = MODULE_ARRAY
        x += k  # here
        return x

    expect_error(f, "# here", "`x` holds an array from outside the function", np.array([1, 2]))
    np.testing.assert_array_equal(MODULE_ARRAY, np.ones(3))


def test_arrays_shared_across_iterations_of_an_updating_loop():
    def f(x, n):
        a = x.copy()
        b = x.copy()
        i = 0
        while i < n:  # here
            a += 1
            b = a
            i += 1
        return b

    expect_error(f, "# here", "at the end of an iteration of this loop 'a' may share its array with 'b'",
                 np.zeros((2, 3)), np.array([1, 2]))


def test_an_alias_left_behind_by_a_loop_is_an_error_for_arrays():
    def f(x, n):
        a = x.copy()
        b = a
        i = 0
        while i < n:  # here
            a += 1
            a = a * 2
            i += 1
        return b

    expect_error(f, "# here", "'b' holds the array 'a' holds when this loop starts", np.zeros((2, 3)),
                 np.array([1, 2]))
    result = abir.Context().batch()(f)(np.array([1, 2]), np.array([1, 2]), backend=NumpyBackend())
    np.testing.assert_array_equal(result, [1, 2])  # scalars: b keeps its value


def test_known_scalars_keep_their_plain_lowering():
    """`count += 1` on a value that is a scalar by construction is a plain rebinding: no
    requirement for type inference, no extra operation."""

    def f(n):
        count = 0
        while count < n:
            count += 1
        return count

    context = abir.Context()
    context.batch()(f)
    text = str(context.program("f"))
    assert "abir.in_place_result" not in text and "after_in_place" not in text, text


# -- 3. integer powers --------------------------------------------------------------------------


@pytest.mark.parametrize("program", [guarded_power, power_in_arm])
def test_negative_exponents_of_inactive_members_never_raise(batched, backend, program):
    assert_matches_python(batched[program.__name__], [np.array([2, 3, -1, 0]), np.array([3, -1, -2, 2])], backend)


def test_integer_powers_with_negative_exponents_truncate_on_every_backend(backend):
    base = np.array([2, 1, -1, -1, 0, 3, -2], dtype=np.int64)
    exponent = np.array([-1, -3, -3, -2, -1, 2, 3], dtype=np.int64)
    expected = [0, 1, -1, 1, 0, 9, -8]  # int(b ** n) of Python numbers; 0 ** -1 gives 0
    result = backend.builtin_prim("pow", [backend.asarray(base), backend.asarray(exponent)], np.dtype(np.int64))
    np.testing.assert_array_equal(backend.to_numpy(result), expected)


# -- 4. a recursive call in a returned short-circuit arm ----------------------------------------


def test_a_call_in_a_returned_and_compiles_to_a_few_blocks(backend):
    """`return n > 0 and f(n - 1)`: the call's continuation only returns. fuse-blocks used to
    unroll the recursion through trampoline after trampoline (124 vm blocks, ~30 s of XLA
    compilation); now the program is as small as its if/return form."""

    def f(n):
        return n > 0 and f(n - 1)

    context = abir.Context()
    batched = context.batch()(f)
    module = context.lowered_for_args("f", (np.arange(4),), backend=backend)
    assert sum(op.name == "vm.block" for op in module.walk()) <= 8
    assert_matches_python(batched, [np.arange(6)], backend)


# -- 5. differential fuzzing findings ------------------------------------------------------------
# W6: a helper call with compile-time arguments computed anew in each lowering (`-58`,
# `np.zeros(2) + 1`) was registered as a new helper in each lowering, which never knew the
# structure the previous one had learned: lowering never settled. W4: writing a batched value into
# an array made from a compile-time constant broadcast the value to the constant's batch of 1.
# W5: a call given an integer-index read (`f(w[j])`) counted as a view of `w`.


def minus_zero_times(k, a):
    """A primitive (declared `ctx.primitive`) taking a compile-time number or array."""
    return a - 0 * np.max(k)


def returns_nothing(a):
    pass


def plus_one(a):
    return a + 1


def helper_result_into_a_call_returning_nothing(x):
    _unused = returns_nothing(minus_zero_times(-58, x))


def helpers_with_computed_compile_time_arguments(x):
    returns_nothing(minus_zero_times(np.zeros(2) + 1, x))
    return minus_zero_times(2.5 * 2, x), minus_zero_times(-58, x) * 2


def batched_value_into_a_constant(x):
    w = np.zeros(3)
    w[0] = x * 0.0 + x
    return w


def per_member_index_into_a_constant(i):
    w = np.zeros((2, 3))
    w[i % 2] = 5.0
    w[:, 1] = np.ones(2) * i
    w[1, i % 3] += i
    return w


def call_on_an_element_then_write(i):
    w = np.zeros(3)
    v = plus_one(w[i % 3])
    w[0] = 5.0
    return v, w


def calls_on_elements_in_a_loop(n):
    w = np.zeros(3)
    total = 0.0
    i = 0
    while i < n:
        t = plus_one(w[i % 3])
        total = plus_one(w[0]) + total
        w[i % 3] = t + i
        i += 1
    return w, total


def call_on_an_element_then_update(n):
    w = np.zeros(3)
    t = plus_one(w[n % 3])
    w += t
    return w, t


def element_or_call_result_into_a_loop(d):
    v1 = np.zeros(4)
    v4 = plus_one(d * 1.0)
    if 0 <= d < 3:
        v4 = v1[d]
    i = 0
    while i < d % 4:
        v1[i] = 1.0 + v4
        i += 1
    return v4, v1


def element_carried_by_an_inner_loop():
    """Seed 12, program 20 (shrunk, with a return): the inner loop carries `v6`, a scalar read of
    `w1`, and the next unrolled iteration assigns into `w1`. The read counted as sharing `w1`'s
    array, which made `w1` foreign to the function."""
    w1 = np.zeros(3)
    for i5 in (0, 0, 0):
        w1[0] = 0.0
        v6 = w1[i5]
        for _i7 in range(0, 0, 1):
            v6 = 0.0
    return w1, v6


def elements_carried_by_inner_loops(n):
    w = np.zeros(3)
    for j in (0, 1, 2):
        w[j] = n * 1.0 + j
        v = w[j]
        for _ in range(n % 3):
            v = v + w[(j + 1) % 3]
        w[(j + 2) % 3] = v
    return w, v


def element_read_in_a_loop_then_write(n):
    w = np.zeros(3) + n
    v = 0.0
    for i in range(n % 4):
        v = w[i % 3]
    w[0] = -1.0
    return w, v


def element_carried_then_write(n):
    w = np.arange(3.0) + n
    v = w[1]
    i = 0
    while i < n:
        v = v + 1.0
        i += 1
    w[1] = -1.0
    return w, v


FUZZ_PROGRAMS = [
    returns_nothing, plus_one, helper_result_into_a_call_returning_nothing,
    helpers_with_computed_compile_time_arguments, batched_value_into_a_constant, per_member_index_into_a_constant,
    call_on_an_element_then_write, calls_on_elements_in_a_loop, call_on_an_element_then_update,
    element_or_call_result_into_a_loop, element_carried_by_an_inner_loop, elements_carried_by_inner_loops,
    element_read_in_a_loop_then_write, element_carried_then_write,
]  # fmt: skip


@pytest.fixture(scope="module")
def fuzz_batched() -> dict[str, object]:
    context = abir.Context()
    context.primitive(minus_zero_times)
    return {p.__name__: context.batch_uncurried(p) for p in FUZZ_PROGRAMS}


@pytest.mark.parametrize("program", [helper_result_into_a_call_returning_nothing,
                                     helpers_with_computed_compile_time_arguments])
def test_helper_calls_with_computed_compile_time_arguments_settle(fuzz_batched, backend, program):
    assert_matches_python(fuzz_batched[program.__name__], [np.array([0, 1, 3])], backend)


def test_a_helper_call_is_the_same_helper_in_every_lowering():
    """Lowering again (as a Context does once type inference learned a helper's structure) finds
    the helper registered for the same call and compile-time argument values."""
    context = abir.Context()
    context.primitive(minus_zero_times)
    context.batch()(helpers_with_computed_compile_time_arguments)
    name = helpers_with_computed_compile_time_arguments.__name__
    first = str(context.build_program(name).module)
    context.forget_programs()
    assert str(context.build_program(name).module) == first


@pytest.mark.parametrize("args", [[np.array([1.0, 2.0])], [np.array([3.0])], [3.0]])
def test_a_batched_value_written_into_a_constant_array(fuzz_batched, backend, args):
    assert_matches_python(fuzz_batched["batched_value_into_a_constant"], args, backend)


@pytest.mark.parametrize("args", [[np.array([0, 1, 2, 5])], [np.array([4])], [1]])
def test_per_member_indices_into_a_constant_array(fuzz_batched, backend, args):
    assert_matches_python(fuzz_batched["per_member_index_into_a_constant"], args, backend)


def test_a_sequence_into_one_element_is_numpys_error():
    def f(x):
        w = np.zeros(3)
        w[0] = x  # here
        return w

    with pytest.raises(ValueError):
        f(np.array([1.0]))  # NumPy 2 raises, so must abir
    expect_error(f, "# here", "the index reaches one element, and the value has shape [1]", np.array([[1.0], [2.0]]))


@pytest.mark.parametrize("program", [call_on_an_element_then_write, calls_on_elements_in_a_loop,
                                     call_on_an_element_then_update, element_or_call_result_into_a_loop])
def test_a_call_given_an_element_is_not_a_view(fuzz_batched, backend, program):
    assert_matches_python(fuzz_batched[program.__name__], [np.array([0, 1, 4])], backend)


def test_an_element_carried_by_a_loop_is_a_copy(fuzz_batched, backend):
    assert_matches_python(fuzz_batched["element_carried_by_an_inner_loop"], [], backend)
    for program in ["elements_carried_by_inner_loops", "element_read_in_a_loop_then_write",
                    "element_carried_then_write"]:
        assert_matches_python(fuzz_batched[program], [np.array([0, 1, 2, 5])], backend)


def row_carried_then_write(n):
    m = np.zeros((2, 3)) + n
    v = m[1]
    i = 0
    while i < n:  # here
        v = v + 1.0
        i += 1
    m[1, 1] = -1.0
    return m, v


def row_read_in_a_loop_then_write(n):
    m = np.zeros((2, 3)) + n
    v = np.zeros(3)
    for i in range(n):
        v = m[i % 2]
    m[1, 1] = -1.0  # here
    return m, v


def slice_carried_then_write(n):
    a = np.zeros(3) + n
    b = a
    v = b[1:]
    i = 0
    while i < n:
        v = v * 2.0
        i += 1
    a[1] = -1.0  # here
    return a, v


def test_a_view_carried_by_a_loop_still_shares_its_array():
    """A row or a slice carried into or out of a loop is a view: NumPy would change it when
    its array changes in place (for the members whose loop did not rebind it)."""
    expect_error(row_carried_then_write, "# here", "variable 'v' is an item of `m` with axes of its own",
                 np.array([0, 1]))
    expect_error(row_read_in_a_loop_then_write, "# here", "variable 'v' is an item of `m` with axes of its own",
                 np.array([0, 1]))
    expect_error(slice_carried_then_write, "# here",
                 "`a` holds an array that 'v' and 'a' may share when the loop at line", np.array([0, 1]))


def call_on_a_row_then_write(x):
    m = np.ones((2, 3))
    v = countdown(x, m[x % 2])
    m[0, 0] = 7.0  # here
    return v


def test_a_call_given_a_row_may_return_it():
    """`countdown(0, row)` returns the row itself, a view of `m`: NumPy would change `v` too."""
    expect_error(call_on_a_row_then_write, "# here",
                 "variable 'v' holds the result of a call given an item of `m` with axes", np.array([0, 1]))


def row_or_new_array(d):
    m = np.ones((2, 3))
    v = np.zeros(3) + d
    if d > 0:
        v = m[d % 2]
    m[0, 0] = 7.0  # here
    return v


def test_a_join_of_a_row_and_a_new_array_is_a_view():
    """Only a join whose members are scalars is a copy of the elements it read."""
    expect_error(row_or_new_array, "# here", "variable 'v' is an item of `m` with axes of its own", np.array([0, 1]))


# -- a parameter saved around a call, then returned (found by the fuzzer: seed 7, program 232) --

Tag = collections.namedtuple("Tag", ["a", "b"])


def saved_then_returned(x):
    return x[outer_of(1, Tag(1, 0.0))]


def outer_of(d, tag):
    """Returns its parameter's field after a call that calls it again with another tag: the
    field must be saved around the call. Once copies are coalesced the field is also the
    result, which dead-save removal (its liveness ends at the return) took for dead."""
    inner_of(d - 1)
    return tag.a


def inner_of(d):
    if d < 0:
        return 0.0
    outer_of(0, Tag(0, 0.0))
    return 0.0


@pytest.mark.parametrize("backend", [NumpyBackend(), JaxBackend(), TensorFlowBackend()], ids=["numpy", "jax", "tf"])
def test_a_parameter_saved_around_a_call_and_returned(backend):
    ctx = abir.Context()
    batched = ctx.batch()(saved_then_returned)
    ctx.batch()(outer_of)
    ctx.batch()(inner_of)
    x = np.array([[0.0, 1.0], [2.0, 3.0]])
    np.testing.assert_array_equal(batched(x, backend=backend), [saved_then_returned(row) for row in x])


# -- loops whose only in-place updates change other arrays (the fuzzer: seed 0, programs 94, 194) --


def zero_and_ones():
    return 0.0, np.ones(2)


def call_result_carried_by_a_loop_updating_a_counter(n):
    """Seed 0, program 94 (shrunk, with a return): `k -= 1` may update an array in place (types
    tell), so the loop counted as updating arrays, and `v` getting a call's result at the end of
    an iteration was an error, though nothing in the loop can change `v`'s array."""
    v = np.zeros(2)
    _, w = zero_and_ones()
    k = max(0, n)
    while k > 0:
        k -= 1
        v = w
    return v


def argument_carried_by_a_loop_updating_counters(n, p):
    """Seed 0, program 194 (shrunk, with a return): the same with a tuple getting an argument."""
    acc = (0, np.zeros(2))
    k = n
    while k > 0:
        k -= 1
        j = max(k, k)
        j -= 1
        acc = (j, p)
    return acc


def argument_carried_by_a_loop_updating_it(n, p):
    x = np.ones(2)
    i = 0
    while i < n:  # here
        x += 1.0
        x = p
        i += 1
    return x


def argument_carried_by_a_loop_whose_inner_loop_updates_it(n, p):
    x = np.ones(2)
    i = 0
    while i < n:  # here
        j = 0
        while j < 2:
            x += 1.0
            j += 1
        x = p
        i += 1
    return x


def array_shared_with_one_updated_through_a_name_for_it(n):
    z = np.zeros(2)
    x = np.ones(2)
    i = 0
    while i < n:  # here
        w = z
        w[0] += 1.0
        x = z
        i += 1
    return x


@pytest.mark.parametrize("backend", [NumpyBackend(), JaxBackend(), TensorFlowBackend()], ids=["numpy", "jax", "tf"])
def test_a_loop_updating_other_arrays_may_carry_a_foreign_array(backend):
    ctx = abir.Context()
    ctx.batch()(zero_and_ones)
    carried_call_result = ctx.batch()(call_result_carried_by_a_loop_updating_a_counter)
    carried_argument = ctx.batch()(argument_carried_by_a_loop_updating_counters)
    n = np.array([0, 1, 3])
    p = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert_matches_python(carried_call_result, [n], backend)
    assert_matches_python(carried_argument, [n, p], backend)


@pytest.mark.parametrize("program", [argument_carried_by_a_loop_updating_it,
                                     argument_carried_by_a_loop_whose_inner_loop_updates_it])
def test_a_loop_updating_a_carried_array_may_not_carry_a_foreign_one(program):
    """The next iteration would update the argument in place: an error, also when the update is
    in an inner loop (whose own header argument is the outer one's array on entry)."""
    expect_error(program, "# here", "at the end of an iteration of this loop 'x' holds the argument 'p'",
                 np.array([0, 1]), np.ones((2, 2)))


def test_a_loop_updating_an_array_through_another_name_may_not_share_it():
    expect_error(array_shared_with_one_updated_through_a_name_for_it, "# here",
                 "at the end of an iteration of this loop 'x' may share its array with 'z'", np.array([0, 1]))


# -- tail calls into a function called elsewhere --------------------------------------------------


def loops_then_tail_calls(n):
    k = 0
    while k < n % 2:
        k += 1
    return descends(n)


def descends(d):
    k = 0
    if d > 2:
        k = 1
    while k > 0:
        k -= 1
        d = d - descends(d - 1)
    return d


def calls_a_tail_caller(x):
    z = counts_down_then_tail_calls(2, x)
    return z + x


def counts_down_then_tail_calls(n, x):
    if n > 0:
        return counts_down_then_tail_calls(n - 1, x) + 1
    return grows(x)


def grows(d):
    if d > 100:
        return grows(d - 50) - 1
    while d < 10:
        d = d + 3
    return d


def test_a_tail_called_function_called_from_itself_returns_through_the_stack(backend):
    """`descends` is entered by the entry's tail call and called from itself: its returns go back
    to either call's return block, not always to its own call's (that took a return block from
    the program-counter stack it did not keep, and restored values never saved)."""
    ctx = abir.Context()
    ctx.batch()(descends)
    assert_matches_python(ctx.batch()(loops_then_tail_calls), [np.array([0, 1, 3, 6])], backend)


def test_values_live_across_a_call_stay_live_through_the_function_it_tail_calls(backend):
    """`calls_a_tail_caller` reads `x` after its call, whose callee tail-calls `grows`: `x` is
    live through `grows` (it shared a variable with `grows`'s `d`, which the loop overwrote)."""
    ctx = abir.Context()
    for helper in (counts_down_then_tail_calls, grows):
        ctx.batch()(helper)
    assert_matches_python(ctx.batch()(calls_a_tail_caller), [np.array([1, 2, 200])], backend)
