"""`x in range(...)` and `x not in range(...)` written inline: Python's meaning per member.

An integer `x` is in the range when it is one of its elements; a float `x` when it equals one
(`2.0 in range(3)` is True, `2.5 in range(3)` False). Bounds are compile-time or per-member
integers, steps positive or negative, ranges possibly empty. Every program runs on NumPy, JAX and
TensorFlow against plain Python member by member; float bounds, a zero step, array operands and
chained comparisons are errors at the user's line.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from test_python_semantics import assert_same, expect_error, member, run_rows

import abir
from abir.errors import AbirError, TypeInferenceError

MULTIPLES_OF_7 = range(0, 1000, 7)
"""Longer than the 64 elements `in` compares one by one: tested arithmetically too."""


def per_member_bounds(x, start, stop, step):
    """Every bound per member: one-, two- and three-argument ranges, `in` and `not in`."""
    return x in range(start, stop, step), x not in range(stop), x in range(start, stop)


def constant_bounds(x):
    """Compile-time bounds: negative steps, an empty range, a module-level range."""
    return (
        x in range(10, -10, -3),
        x not in range(-2, 7, 2),
        x in range(5, 5),
        x in range(3, 0),
        x in MULTIPLES_OF_7,
        x not in range(-1, -9, -1),
    )


def mixed_bounds(x, n):
    """Some bounds per member, some constant; a constant `x` with per-member bounds."""
    count = 0
    if x in range(n):
        count += 1
    if x in range(-n, n, 2):
        count += 10
    if 3 in range(1, n, 2):
        count += 100
    return count


def membership_in_a_loop(n):
    """`in range` as a loop condition, as the while loop of a sieve would use it."""
    hits = 0
    k = 0
    while k in range(n):
        if k in range(0, n, 3):
            hits += 1
        k += 1
    return hits


PROGRAMS = [per_member_bounds, constant_bounds, mixed_bounds, membership_in_a_loop]


@pytest.fixture(scope="module")
def batched() -> dict[str, object]:
    context = abir.Context()
    return {program.__name__: context.batch_uncurried(program) for program in PROGRAMS}


@pytest.fixture(params=["numpy", "jax", "tf"])
def backend(request):
    return {"numpy": abir.NumpyBackend, "jax": abir.JaxBackend, "tf": abir.TensorFlowBackend}[request.param]()


def assert_matches_python(batched, program, args, backend):
    result = batched[program.__name__](*args, backend=backend)
    size = max(np.shape(a)[0] for a in args if np.ndim(a) > 0)
    for i in range(size):
        expected = program(*(member(a, i) for a in args))
        assert_same(run_rows(result, i), expected, f"{program.__name__} member {i}")
    return result


def every_bound() -> list[np.ndarray]:
    """x in [-12, 12] against starts, stops and steps of both signs (empty ranges included)."""
    rows = list(itertools.product(range(-12, 13), [-3, 0, 2], [-7, 0, 4, 11], [-3, -1, 1, 2, 5]))
    return [np.array(column) for column in zip(*rows, strict=True)]


def test_per_member_bounds_of_both_signs(batched, backend):
    x, start, stop, step = every_bound()
    result = assert_matches_python(batched, per_member_bounds, [x, start, stop, step], backend)
    assert np.asarray(result[0]).dtype == np.bool_
    assert np.asarray(result[0]).any() and not np.asarray(result[0]).all()


def test_float_members_equal_to_an_element_are_in(batched, backend):
    # 2.0 in range(3) is True, 2.5 in range(3) False; NaN and infinities are in no range
    x, start, stop, step = every_bound()
    floats = np.concatenate([x * 0.5, [np.nan, np.inf, -np.inf]])
    start, stop, step = (np.concatenate([v, [0, 0, 0]]) for v in (start, stop, step))
    stop[-3:] = 5
    step[-3:] = 1
    assert_matches_python(batched, per_member_bounds, [floats, start, stop, step], backend)


def test_integer_dtypes_and_constant_bounds(batched, backend):
    for x in (np.arange(-12, 1000, 3, dtype=np.int32), np.arange(-12, 40, dtype=np.int64), np.arange(-12, 20) / 2):
        assert_matches_python(batched, constant_bounds, [x], backend)


def test_some_bounds_per_member(batched, backend):
    assert_matches_python(batched, mixed_bounds, [np.array([0, 1, 2, 3, -2, 5, 4]), np.array([0, 2, 3, 5, 3, 1, 7])],
                          backend)


def test_membership_as_a_loop_condition(batched, backend):
    assert_matches_python(batched, membership_in_a_loop, [np.array([0, 1, 4, 9])], backend)


def test_constant_operands_are_evaluated_at_compile_time():
    def f(x):
        return x + (3 in range(1, 5, 2)) + (4 not in range(8))

    ctx = abir.Context()
    batched = ctx.batch()(f)
    assert "remainder" not in str(ctx.module())
    np.testing.assert_array_equal(batched(np.array([1, 2])), [f(1), f(2)])


def test_a_per_member_zero_step_gives_an_empty_range():
    # Python raises ValueError for range(0, 5, 0); a member cannot raise, so the range is empty,
    # as a `for` loop over it runs no iteration
    def f(x, step):
        return x in range(0, 5, step)

    result = abir.Context().batch()(f)(np.array([0, 2, 3, 0]), np.array([1, 0, 0, -1]))
    np.testing.assert_array_equal(result, [True, False, False, False])


# -- errors ------------------------------------------------------------------------------------------


def test_a_per_member_float_bound_is_an_error():
    def f(x, n):
        return x in range(1, n)  # here

    expect_error(f, "# here", "range() arguments must be integers, but an argument of `range(1, n)` is a "
                 "per-member float", np.array([1, 2]), np.array([3.0, 4.0]), error=TypeInferenceError)


def test_a_per_member_float_step_is_an_error():
    def f(x, s):
        return x not in range(0, 9, s)  # here

    expect_error(f, "# here", "range() arguments must be integers", np.array([1, 2]), np.array([3.0, 4.0]),
                 error=TypeInferenceError)


def test_a_constant_float_bound_is_an_error():
    def f(x):
        return x in range(2.0)  # here

    expect_error(f, "# here", "range() arguments must be integers, got 2.0", np.array([1]))


def test_a_zero_step_is_an_error():
    def f(x):
        return x in range(0, 9, 0)  # here

    expect_error(f, "# here", "range() step must not be zero", np.array([1]))


def test_an_array_member_is_an_error():
    def f(v):
        return v in range(3)  # here

    expect_error(f, "# here", "`v in range(3)` needs single numbers, but here `v` or a bound of range() is a "
                 "per-member array", np.ones((2, 3)), error=AbirError)


def test_a_chained_membership_is_an_error():
    def f(x):
        return 0 < x in range(3)  # here

    expect_error(f, "# here", "`in range(...)` in a chained comparison is not supported", np.array([1]))


def test_unpacked_arguments_of_range_are_an_error():
    def f(x):
        return x in range(*(1, 2))  # here

    expect_error(f, "# here", "range() takes 1 to 3 positional arguments", np.array([1]))


def test_narrow_integer_members_do_not_wrap_around(batched, backend):
    # int8: -128 - 125 would wrap to 3 (in range(125, 135) by accident); uint8: 250 + 10 to 4
    x = np.array([-128, -100, 120, 127, 0, 5], dtype=np.int8)
    start, stop, step = (np.array([125, 50, -10, 120, -3, 5]), np.array([135, 60, 5, 128, 3, 6]),
                         np.array([1, 1, 1, 7, 1, 1]))  # fmt: skip
    assert_matches_python(batched, per_member_bounds, [x, start, stop, step], backend)
    assert_matches_python(batched, constant_bounds, [np.array([250, 3, 9, 0, 255], dtype=np.uint8)], backend)
    assert_matches_python(batched, per_member_bounds, [np.array([True, False, True]), np.array([0, 1, -2]),
                                                       np.array([2, 2, 2]), np.array([1, 1, 3])], backend)
