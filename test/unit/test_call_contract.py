"""The contract of a call to a batched function, checked against plain Python run per member.

* An undecorated function of the user's is compiled per member, as if it were decorated (an `if`,
  `np.sum(v)`, recursion mean what they mean for one member); one abir cannot compile is refused
  at compile time with the reason and both fixes. A function declared `ctx.primitive` is called
  once on whole-batch arrays; when one fails (at type inference or at run time, on any backend)
  the error names it, its line and the ways out. A library callable other than NumPy's and
  abir's is refused unless declared `ctx.primitive(fn)`.
* `dry_run=True` runs the plain Python function member by member and stacks the results.
* Bad arguments fail clearly at the call; an empty batch returns empty results of the inferred
  types; backends may be named.
* `type_inference` takes and returns the reference's patterns, a declared type wins over weak
  literals, helpers may return structures, and Python number arguments are weak (NEP 50).

Every batched result is compared with the plain function run on each member's own values.
"""

from __future__ import annotations

import collections
import math

import numpy as np
import optree
import pytest
import scipy.special

import abir
from abir import TensorType
from abir.calling import resolve_backend
from abir.errors import HelperError, TypeInferenceError
from abir.numpy_calls.templates import NotCompilableError
from abir.opaque import UncompilableHelperError

Point = collections.namedtuple("Point", "x y")

# ----- undecorated helpers ------------------------------------------------------------------------


def high_byte(x):
    return (x >> 8) & 255


def uses_high_byte(x):
    return high_byte(x) + 1


def sign_of(x):
    if x > 0:
        return 1
    return -1


def uses_sign_of(x):
    return sign_of(x) * x


def numpy_sine(x):
    return np.sin(x)


def uses_numpy_sine(x):
    return numpy_sine(x) * 2.0


def reject_negative(x):
    if np.any(x < 0):
        raise ValueError("negative input")
    return x


def uses_reject_negative(x):
    return reject_negative(x) + 1


def raises_abir_error(x):
    raise abir.StackOverflowError("raised by abir code the helper calls")


def uses_raises_abir_error(x):
    return raises_abir_error(x)


def member_sum(v):
    return np.sum(v)


def first_column_total(m):
    return np.sum(m, axis=0)[0]


def uses_member_sums(v, m):
    return member_sum(v) * 10 + first_column_total(m)


def helper_fib(n):
    if n < 2:
        return n
    return helper_fib(n - 1) + helper_fib(n - 2)


def uses_helper_fib(n):
    return helper_fib(n) + 1


def helper_even(n):
    if n == 0:
        return True
    return batched_odd(n - 1)


def batched_odd(n):
    if n == 0:
        return False
    return helper_even(n - 1)


def scale_by(x, factor):
    return x * factor


def uses_keywords(x):
    return scale_by(factor=3, x=x) + scale_by(x, factor=2)


def row_count(x):
    return x * 0 + np.size(x)  # 1 for one member, B for a whole batch


def uses_row_count(x):
    return row_count(x)


def prints(x):
    print(x)
    return x


def uses_prints(x):
    return prints(x) * 2


def apply_to(fn, x):
    return fn(x)


def uses_apply_to(x):
    return apply_to(np.sin, x)


def uses_logsumexp(v):
    return scipy.special.logsumexp(v, axis=-1)


def uses_lgamma(x):
    return math.lgamma(x)


def uses_round(x):
    return round(x)


class Doubler:
    def __call__(self, x):
        return x * 2


doubler = Doubler()


def uses_doubler(x):
    return doubler(x)


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x * self.k


scaler = Scaler(3)


def uses_scaler(x):
    return scaler.apply(x)


shift_by_one = lambda x: x + 1  # noqa: E731


def uses_lambda(x):
    return shift_by_one(x)


# ----- helpers returning structures ---------------------------------------------------------------


def halves(x):
    return x // 2, x % 2


def as_list(x):
    return [x + 1, x - 1]


def as_point(x):
    return Point(x * 2, x + 3)


def nested(x):
    return (x, x + 1), Point(x * 2, x * 3)


def unpack_later(x):
    pair = halves(x)
    q, r = pair
    return q * 10 + r


def index_result(x):
    pair = as_list(x)
    return pair[0] * pair[1]


def read_fields(x):
    p = as_point(x)
    return p.x - p.y


def pass_to_batched(x):
    return point_norm1(as_point(x))


def point_norm1(p):
    return abs(p.x) + abs(p.y)


def return_helper_structure(x):
    return nested(x)


def unpack_nested(x):
    (a, b), p = nested(x)
    return a + b + p.x + p.y


def helper_or_tuple(x):
    if x > 3:
        return (x, x)
    return halves(x)


def helper_or_tuple_joined(x):
    if x > 3:
        pair = halves(x)
    else:
        pair = (x, -x)
    return pair[0] + 2 * pair[1]


# ----- programs for dry runs, arguments and types -------------------------------------------------


def first_plus_last(v):
    return v[0] + v[-1]


def scaled_point(p, k):
    return Point(p.x * k, p.y + k)


seen_by_inner: list[type] = []


def outer(n):
    return inner(n) + 1


def inner(n):
    seen_by_inner.append(type(n))
    return n * 2


def collatz_steps(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def fib(n):
    if n > 1:
        return fib(n - 1) + fib(n - 2)
    return 1


def sum_and_scale(v, k):
    return v * k, v.sum()


def take(v, i):
    return v[i]


def add(x, k):
    return x + k


def only_k(x, k):
    return k


def sum_pair(t):
    return t[0] + t[1]


def swap(t):
    return t[1], t[0]


def nest_and_flag(x):
    return (x, x * 2), x > 0


def count_up(n):
    ans = 1
    while ans < n:
        ans += 1
    return ans


def literal_or_input(n):
    ans = 1
    if n > 5:
        ans = 2
    return ans


def twice(x):
    return x * 2


def constant_half(x):
    return 0.5


# ----- comparing with plain Python per member ----------------------------------------------------------


@pytest.fixture(params=["numpy", "jax", "tf"])
def backend(request):
    if request.param == "numpy":
        return abir.NumpyBackend()
    if request.param == "jax":
        return abir.JaxBackend()
    return abir.TensorFlowBackend()


def batch_of(args) -> int:
    sizes = [np.shape(leaf)[0] for leaf in optree.tree_leaves(args) if np.ndim(leaf) > 0]
    return max(sizes, default=1)


def member_args(args, i):
    """Member i's arguments: its row of each leaf (NumPy scalars), shared size-1 rows and numbers."""

    def row(leaf):
        if np.ndim(leaf) == 0:
            return leaf
        array = np.asarray(leaf)
        return array[0] if array.shape[0] == 1 else array[i]

    return optree.tree_map(row, args)


def per_member(program, args):
    return [program(*member_args(args, i)) for i in range(batch_of(args))]


def assert_members(result, expected, check_dtype=True):
    """`result` (a batched structure) holds `expected[i]` as member i, leaf by leaf."""
    got_leaves, got_structure = optree.tree_flatten(result)
    for i, member in enumerate(expected):
        want_leaves, want_structure = optree.tree_flatten(member)
        assert want_structure == got_structure, f"member {i}: {got_structure} != {want_structure}"
        for got, want in zip(got_leaves, want_leaves, strict=True):
            row = np.asarray(got)[i]
            np.testing.assert_allclose(row, np.asarray(want), rtol=1e-6, err_msg=f"member {i}")
            if check_dtype:
                assert row.dtype == np.asarray(want).dtype, f"member {i}: {row.dtype} != {np.asarray(want).dtype}"


def batched(program, *others, type_inference=None, primitives=()):
    """`program` decorated in a new Context, with the other functions it calls and the
    primitives it declares."""
    ctx = abir.Context()
    for primitive in primitives:
        ctx.primitive(primitive)
    for other in others:
        ctx.batch_uncurried(other)
    return ctx.batch_uncurried(program, type_inference)


def assert_matches_python(program, args, backend, *others, type_inference=None, check_dtype=True, primitives=()):
    result = batched(program, *others, type_inference=type_inference, primitives=primitives)(*args, backend=backend)
    expected = per_member(program, args)
    assert_members(result, expected, check_dtype)
    return result


def line_of(function, offset=0) -> str:
    return f"{__file__}:{function.__code__.co_firstlineno + offset}"


# ----- undecorated helpers: compiled per member ------------------------------------------------------


def test_undecorated_helper_with_an_if_is_compiled_per_member(backend):
    assert_matches_python(uses_sign_of, (np.array([3, -2, 5, 0]),), backend)


def test_decorating_the_helper_batches_it_per_example(backend):
    assert_matches_python(uses_sign_of, (np.array([3, -2, 5, 0]),), backend, sign_of)


def test_numpy_reductions_in_a_helper_mean_the_members_own(backend):
    v = np.arange(12.0).reshape(4, 3)
    m = np.arange(24.0).reshape(4, 3, 2)
    result = assert_matches_python(uses_member_sums, (v, m), backend)
    np.testing.assert_allclose(np.asarray(result)[1], (3 + 4 + 5) * 10 + (6 + 8 + 10))


def test_recursion_through_an_undecorated_helper(backend):
    assert_matches_python(uses_helper_fib, (np.array([0, 1, 5, 9]),), backend)


def test_mutual_recursion_of_a_helper_and_a_decorated_function(backend):
    assert_matches_python(helper_even, (np.array([0, 1, 4, 7]),), backend, batched_odd)


def test_keyword_arguments_bind_to_a_helpers_parameters(backend):
    assert_matches_python(uses_keywords, (np.array([1.5, -2.0]),), backend)


def test_numpy_function_in_an_undecorated_helper_runs_per_member_on_every_backend(backend):
    assert_matches_python(uses_numpy_sine, (np.array([0.5, 1.0, -2.0]),), backend)


def test_a_helper_is_registered_on_its_first_call_and_not_listed_as_decorated():
    ctx = abir.Context()
    f = ctx.batch_uncurried(uses_helper_fib)
    np.testing.assert_array_equal(f(np.array([3, 6])), [3, 9])
    assert ctx.function_names() == ["uses_helper_fib"]
    assert "@helper_fib" in str(ctx.program("uses_helper_fib"))


# ----- undecorated helpers abir cannot compile: refused at compile time ---------------------------------


def test_an_uncompilable_helper_is_refused_with_the_reason_and_both_fixes(backend):
    f = batched(uses_reject_negative)
    with pytest.raises(UncompilableHelperError) as info:
        f(np.array([4, 1, 2]), backend=backend)
    message = str(info.value)
    assert message.startswith(line_of(uses_reject_negative, 1))
    assert "return reject_negative(x) + 1" in message
    assert f"the helper 'reject_negative' (defined at {line_of(reject_negative)})" in message
    assert f"{line_of(reject_negative, 2)}: " in message and "`raise` is not supported" in message
    assert "compilable per member" in message
    assert "`@ctx.primitive`" in message and "ctx.primitive(reject_negative)" in message
    assert isinstance(info.value, abir.UnsupportedSyntaxError)


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        (uses_prints, "print() inside a batched function"),
        (uses_lambda, "a lambda cannot be a batched function"),
        (uses_apply_to, "but the callable sin is passed to it"),
    ],
    ids=["print", "lambda", "callable-argument"],
)
def test_helpers_abir_cannot_compile_per_member_name_why(program, reason):
    with pytest.raises(UncompilableHelperError, match=r"the helper '.*' \(defined at .*\)") as info:
        batched(program)(np.array([1.0, 2.0]))
    assert reason in str(info.value) and "compiled per member" in str(info.value)
    assert "@ctx.primitive" in str(info.value)


# ----- primitives: declared, called once on the whole batch, failures explained -------------------------


def test_a_primitive_gets_the_whole_batch(backend):
    result = batched(uses_row_count, primitives=(row_count,))(np.array([1, 2, 3, 4, 5]), backend=backend)
    np.testing.assert_array_equal(np.asarray(result), [5] * 5)
    np.testing.assert_array_equal(np.asarray(batched(uses_row_count)(np.array([1, 2, 3]), backend=backend)), [1, 1, 1])


def test_primitive_can_be_declared_as_a_decorator_with_or_without_parentheses():
    ctx = abir.Context()

    @ctx.primitive
    def rows(x):
        return x * 0 + x.shape[0]

    @ctx.primitive()
    def twice_rows(x):
        return x * 0 + 2 * x.shape[0]

    @ctx.batch()
    def uses_both(x):
        return rows(x) + twice_rows(x)

    assert rows(np.zeros(2)).tolist() == [2.0, 2.0]  # the function itself, unchanged
    np.testing.assert_array_equal(uses_both(np.array([1, 2, 3])), [9, 9, 9])


def test_declaring_a_primitive_after_a_call_recompiles():
    ctx = abir.Context()
    f = ctx.batch_uncurried(uses_row_count)
    np.testing.assert_array_equal(f(np.array([1, 2, 3])), [1, 1, 1])
    ctx.primitive(row_count)
    np.testing.assert_array_equal(f(np.array([1, 2, 3])), [3, 3, 3])


def test_a_batched_function_cannot_be_a_primitive_too():
    ctx = abir.Context()
    f = ctx.batch_uncurried(uses_row_count)
    with pytest.raises(TypeError, match="cannot be a primitive too"):
        ctx.primitive(f)
    ctx.primitive(row_count)
    with pytest.raises(abir.UnsupportedSyntaxError, match="declared a primitive"):
        ctx.batch_uncurried(row_count)


def test_batch_aware_primitive_runs_once_on_the_whole_batch(backend):
    assert_matches_python(uses_high_byte, (np.array([0, 255, 256, 70000, 1 << 20]),), backend, primitives=(high_byte,))


def test_primitive_with_an_if_names_itself_its_lines_and_the_ways_out(backend):
    f = batched(uses_sign_of, primitives=(sign_of,))
    with pytest.raises(HelperError) as info:
        f(np.array([3, -2, 5]), backend=backend)
    message = str(info.value)
    assert "the helper 'sign_of'" in message
    assert f"defined at {line_of(sign_of)}" in message
    assert line_of(uses_sign_of, 1) in message and "return sign_of(x) * x" in message
    assert "declared a primitive (`ctx.primitive`)" in message and "[B, ...]" in message
    assert "batch-aware" in message and "drop its `ctx.primitive` declaration" in message
    assert isinstance(info.value.__cause__, ValueError)


def test_numpy_function_in_a_primitive_under_jax_says_to_use_jax_numpy():
    f = batched(uses_numpy_sine, primitives=(numpy_sine,))
    with pytest.raises(HelperError, match=r"(?s)the helper 'numpy_sine'.*jax\.numpy") as info:
        f(np.array([0.5, 1.0]), backend=abir.JaxBackend())
    assert type(info.value.__cause__).__name__ == "TracerArrayConversionError"


@pytest.mark.parametrize("name", ["numpy", "tf"])
def test_numpy_function_in_a_primitive_runs_where_the_backend_allows(name):
    assert_matches_python(uses_numpy_sine, (np.array([0.5, 1.0, -2.0]),), resolve_backend(name), primitives=(numpy_sine,))


def test_primitive_failing_at_run_time_is_explained(backend):
    f = batched(uses_reject_negative, primitives=(reject_negative,))
    with pytest.raises(HelperError, match=r"the helper 'reject_negative'") as info:
        f(np.array([4, -1, 2]), backend=backend)
    assert line_of(uses_reject_negative, 1) in str(info.value)
    assert info.value.__cause__ is not None


def test_primitive_failing_in_the_stackless_executor_is_explained():
    f = batched(uses_reject_negative, primitives=(reject_negative,))
    np.testing.assert_array_equal(f(np.array([4, 1]), stackless=True), [5, 2])
    with pytest.raises(HelperError, match=r"(?s)failed: ValueError: negative input.*\(here \[3\]\)") as info:
        f(np.array([4, -1, 2]), stackless=True)
    assert isinstance(info.value.__cause__, ValueError)


def test_primitive_falling_back_to_numpy_under_xla_is_explained():
    # TF runs NumPy code inside a graph as a `numpy_function`, which XLA cannot compile; forced
    # XLA names the primitive, its call site and the fix on every call (the second call reuses
    # the traced graph), and the default backend runs it without XLA.
    f = batched(uses_reject_negative, primitives=(reject_negative,))
    xla = abir.TensorFlowBackend(jit_compile=True)
    for _ in range(2):
        with pytest.raises(NotCompilableError, match=r"test_call_contract.py:\d+: .*uses_reject_negative(.|\n)*primitive reject_negative(.|\n)*jit_compile=False"):
            f(np.array([4, 1, 2]), backend=xla)
    np.testing.assert_array_equal(f(np.array([4, 1, 2]), backend=abir.TensorFlowBackend()), [5, 2, 3])


def test_abir_errors_raised_in_a_primitive_pass_unchanged():
    with pytest.raises(abir.StackOverflowError, match="raised by abir code") as info:
        batched(uses_raises_abir_error, primitives=(raises_abir_error,))(np.array([1, 2]))
    assert not isinstance(info.value, HelperError)


# ----- library callables: refused unless declared primitives ------------------------------------------


@pytest.mark.parametrize(
    ("program", "args", "fix"),
    [
        (uses_logsumexp, (np.arange(6.0).reshape(2, 3),), "ctx.primitive(scipy.special.logsumexp)"),
        (uses_round, (np.array([1.5, 2.5]),), "ctx.primitive(round)"),
    ],
    ids=["scipy", "builtin"],
)
def test_a_library_callable_is_refused_unless_declared(program, args, fix):
    with pytest.raises(UncompilableHelperError) as info:
        batched(program)(*args)
    message = str(info.value)
    assert message.startswith(line_of(program, 1)) and "whole-batch arrays [B, ...]" in message
    assert fix in message


def test_a_declared_library_callable_gets_the_whole_batch():
    v = np.array([[0.0, 1.0, 2.0], [3.0, -1.0, 0.5]])
    assert_matches_python(uses_logsumexp, (v,), abir.NumpyBackend(), primitives=(scipy.special.logsumexp,))


def test_a_math_function_abir_has_no_prim_for_is_refused():
    with pytest.raises(UncompilableHelperError, match=r"ctx\.primitive\(math\.lgamma\)"):
        batched(uses_lgamma)(np.array([1.5, 2.5]))


def test_a_callable_object_is_refused_with_what_to_do_instead():
    with pytest.raises(UncompilableHelperError, match=r"only plain `def` functions are compiled per member"):
        batched(uses_doubler)(np.array([1.0, 2.0]))
    assert_matches_python(uses_doubler, (np.array([1.0, 2.0]),), abir.NumpyBackend(), primitives=(doubler,))


def test_a_method_is_refused_unless_declared(backend):
    with pytest.raises(UncompilableHelperError, match=r"ctx\.primitive\(Scaler\.apply\)"):
        batched(uses_scaler)(np.array([1.0, 2.0]), backend=backend)
    assert_matches_python(uses_scaler, (np.array([1.0, 2.0]),), backend, primitives=(scaler.apply,))
    assert_matches_python(uses_scaler, (np.array([1.0, 2.0]),), backend, primitives=(Scaler.apply,))


# ----- helpers returning structures ------------------------------------------------------------------

STRUCTURED = [
    (unpack_later, ()),
    (index_result, ()),
    (read_fields, ()),
    (pass_to_batched, (point_norm1,)),
    (return_helper_structure, ()),
    (unpack_nested, ()),
    (helper_or_tuple, ()),
    (helper_or_tuple_joined, ()),
]


STRUCTURE_HELPERS = (halves, as_list, as_point, nested)


@pytest.mark.parametrize("as_primitives", [False, True], ids=["per-member", "primitives"])
@pytest.mark.parametrize(("program", "others"), STRUCTURED, ids=[p.__name__ for p, _ in STRUCTURED])
@pytest.mark.make_test_keeps({"backend": "numpy"}, {"backend": "jax"}, {"as_primitives": True})
def test_helper_structures_stay_structured_through_calls_and_results(backend, program, others, as_primitives):
    primitives = STRUCTURE_HELPERS if as_primitives else ()
    result = assert_matches_python(program, (np.array([-7, 0, 3, 8, 13]),), backend, *others, primitives=primitives)
    if program is return_helper_structure:
        assert type(result[1]) is Point


# ----- dry runs: plain Python per member ----------------------------------------------------------------


def test_dry_run_runs_each_member_on_its_own_values(backend):
    v = np.arange(12.0).reshape(3, 4)
    f = batched(first_plus_last)
    result = f(v, dry_run=True)
    assert isinstance(result, np.ndarray) and result.shape == (3,)
    np.testing.assert_array_equal(result, v[:, 0] + v[:, -1])
    assert_members(f(v, backend=backend), list(result))


def test_dry_run_shares_size_one_rows_and_numbers_and_keeps_structures():
    f = batched(scaled_point)
    result = f(Point(np.array([1, 2, 3]), np.array([10])), 2, dry_run=True)
    assert type(result) is Point
    np.testing.assert_array_equal(result.x, [2, 4, 6])
    np.testing.assert_array_equal(result.y, [12, 12, 12])


def test_dry_run_calls_the_plain_functions_between_batched_functions():
    seen_by_inner.clear()
    f = batched(outer, inner)
    np.testing.assert_array_equal(f(np.array([1, 2, 3]), dry_run=True), [3, 5, 7])
    assert seen_by_inner == [np.int64] * 3  # each call sees one member's NumPy scalar


@pytest.mark.parametrize(
    ("program", "args"),
    [
        (collatz_steps, (np.array([1, 7, 27, 12]),)),
        (fib, (np.array([0, 1, 6, 9], dtype=np.int32),)),
        (sum_and_scale, (np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32), 0.5)),
        (scaled_point, (Point(np.array([1, 2]), np.array([5, 6])), np.array([3, 4]))),
    ],
    ids=["collatz", "fib", "tuple", "namedtuple"],
)
def test_dry_run_is_the_reference_batched_runs_equal(backend, program, args):
    f = batched(program)
    reference = f(*args, dry_run=True)
    assert_members(reference, per_member(program, args))
    result = f(*args, backend=backend, max_stack_depth=20)
    assert optree.tree_structure(result) == optree.tree_structure(reference)
    for got, want in zip(optree.tree_leaves(result), optree.tree_leaves(reference), strict=True):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
        assert np.asarray(got).dtype == want.dtype


# ----- bad arguments fail at the call ------------------------------------------------------------------


def test_none_and_dict_arguments_fail_at_the_call():
    f = batched(add)
    with pytest.raises(TypeError, match=r"argument 1 of add\(\) is None; pass an array"):
        f(np.array([1, 2]), None)
    with pytest.raises(TypeError, match=r"argument 0 of add\(\) is a dict; pass a tuple or a namedtuple"):
        f({"x": np.array([1, 2])}, 1)
    g = batched(sum_pair)
    with pytest.raises(TypeError, match=r"argument 0\[1\] of sum_pair\(\) is None"):
        g((np.array([1, 2]), None))
    with pytest.raises(TypeError, match=r"argument 0 of sum_pair\(\) is a str"):
        g("12")


def test_an_empty_batch_returns_empty_results_of_the_inferred_types(backend):
    steps = batched(collatz_steps)(np.array([], dtype=np.int64), backend=backend)
    assert backend.is_native(steps) and np.asarray(steps).shape == (0,) and np.asarray(steps).dtype == np.int64
    f = batched(sum_and_scale)
    empty = np.zeros((0, 3), np.float32)
    scaled, total = f(empty, 2.0, backend=backend)
    assert np.asarray(scaled).shape == (0, 3) and np.asarray(scaled).dtype == np.float32
    assert np.asarray(total).shape == (0,) and np.asarray(total).dtype == np.float32
    reference = f(empty, 2.0, dry_run=True)
    assert [(r.shape, r.dtype) for r in reference] == [((0, 3), np.float32), ((0,), np.float32)]


def test_mismatched_batch_sizes_and_unsupported_dtypes_say_what_is_expected():
    f = batched(add)
    with pytest.raises(ValueError, match=r"mismatched batch sizes 2, 3; .*same or 1"):
        f(np.array([1, 2]), np.array([1, 2, 3]))
    with pytest.raises(TypeError, match=r"dtype <U1.*use bool, int, uint, float or complex arrays"):
        f(np.array(["a", "b"]), 1)
    assert_members(f(np.array([1j, 2j]), 1), [1j + 1, 2j + 1])


def test_a_float_index_names_the_line_and_the_expression():
    f = batched(take)
    with pytest.raises(TypeInferenceError) as info:
        f(np.array([[1, 2], [3, 4]]), np.array([0.0, 1.0]))
    message = str(info.value)
    assert line_of(take, 1) in message and "in batched function 'take'" in message
    assert "`v[i]`" in message and "integers" in message and "float64" in message and "int(i)" in message


@pytest.mark.parametrize("name", ["numpy", "jax", "tensorflow", "tf", "JAX"])
def test_backends_can_be_named(name):
    result = batched(collatz_steps)(np.array([1, 7, 27]), backend=name)
    np.testing.assert_array_equal(np.asarray(result), [0, 16, 111])
    assert resolve_backend(name) is resolve_backend(name.lower())  # compiled code is reused


def test_a_wrong_backend_says_what_to_pass():
    f = batched(collatz_steps)
    with pytest.raises(TypeError, match=r"one of the names 'numpy', 'jax', 'tensorflow', 'tf', got 'torch'"):
        f(np.array([3]), backend="torch")
    with pytest.raises(TypeError, match=r"pass an instance: abir\.JaxBackend\(\)"):
        f(np.array([3]), backend=abir.JaxBackend)


# ----- types: type_inference patterns, declared types, weak numbers ------------------------------------


def test_type_inference_sees_argument_structures_and_returns_patterns(backend):
    pair = (np.array([1, 2, 3], dtype=np.int32), np.array([4, 5, 6], dtype=np.int32))
    assert_matches_python(sum_pair, (pair,), backend, type_inference=lambda args: args[0][0])
    assert_matches_python(swap, (pair,), backend, type_inference=lambda args: (args[0][1], args[0][0]))
    nested_types = lambda args: ((args[0], args[0]), TensorType(np.bool_, ()))  # noqa: E731
    assert_matches_python(nest_and_flag, (np.array([-1.5, 2.0]),), backend, type_inference=nested_types)
    as_type = lambda args: abir.Type(((args[0], args[0]), TensorType(np.bool_, ())))  # noqa: E731
    assert_matches_python(nest_and_flag, (np.array([-1.5, 2.0]),), backend, type_inference=as_type)


def test_a_declared_type_wins_over_weak_literals(backend):
    int32 = lambda args: TensorType(np.int32, ())  # noqa: E731
    result = batched(count_up, type_inference=int32)(np.array([0, 3, 9]), backend=backend)
    assert np.asarray(result).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(result), [count_up(n) for n in (0, 3, 9)])
    result = batched(literal_or_input, type_inference=int32)(np.array([1, 9]), backend=backend)
    assert np.asarray(result).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(result), [1, 2])


def test_declared_types_are_still_checked():
    float32 = lambda args: TensorType(np.float32, ())  # noqa: E731
    with pytest.raises(TypeInferenceError, match=r"says result #0 is f32, but its returns produce i64"):
        batched(twice, type_inference=float32)(np.array([1, 2]))
    int32 = lambda args: TensorType(np.int32, ())  # noqa: E731
    with pytest.raises(TypeInferenceError, match=r"says result #0 is i32, but its returns produce f64 from Python numbers"):
        batched(constant_half, type_inference=int32)(np.array([1]))  # NEP 50: 0.5 is no int32
    with pytest.raises(TypeInferenceError, match=r"gives 2 result type\(s\), but the function returns 3"):
        batched(nest_and_flag, type_inference=lambda args: (args[0], args[0]))(np.array([1.0]))


@pytest.mark.parametrize(
    ("array", "number"),
    [(np.array([1, 2, 3], dtype=np.int32), 5), (np.array([1.5, 2.5], dtype=np.float32), 0.5), (np.array([1, 2], dtype=np.uint8), 3)],
    ids=["int32+int", "float32+float", "uint8+int"],
)
def test_python_number_arguments_are_weak(backend, array, number):
    result = assert_matches_python(add, (array, number), backend)
    assert np.asarray(result).dtype == array.dtype
    # A Python number returned alone stays a Python number per member: int64 or float64 batched.
    assert_matches_python(only_k, (array, number), backend)
