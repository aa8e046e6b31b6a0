"""Arguments as users pass them, and the batch size errors report.

* A plain list or tuple whose items are all numbers (Python or NumPy), or all such lists, is one
  array, read as `np.asarray` reads it, its first axis the batch: `egcd([12, 18, 35], [8, 27,
  14])` runs three members. Namedtuples, lists or tuples holding arrays, and lists mixing numbers
  and lists stay structures.
* A list `np.asarray` cannot read (ragged, integers beyond 64 bits) is refused at the call,
  naming the function, the argument and the fix.
* Errors about an undecorated helper's result report the batch size the user passed, not the
  stand-in rows of type inference nor the rows `pad_batch=True` runs.

Every batched result is compared with the plain function run on each member's own values.
"""

from __future__ import annotations

import collections
import sys

import numpy as np
import optree
import pytest

import abir
from abir.errors import HelperError, TypeInferenceError
from abir.opaque import calling_with_batch
from abir.passes.prim_evaluation import PrimEvaluator

Params = collections.namedtuple("Params", "scale shift")


# ----- the functions called ------------------------------------------------------------------------


def egcd(a, b):
    x0, x1 = 1, 0
    while b != 0:
        q = a // b
        a, b = b, a - q * b
        x0, x1 = x1, x0 - q * x1
    return a, x0


def add(x, y):
    return x + y


def norm_squared(v):
    return np.sum(v * v)


def scaled(x, params):
    return x * params.scale + params.shift


def first_plus_second(pair):
    return pair[0] + pair[1]


def keeps_one_row(x):
    return x[:1]


def uses_keeps_one_row(x):
    return keeps_one_row(x) + 1


def keeps_two_rows(x):
    return x[:2]


def uses_keeps_two_rows(x):
    return keeps_two_rows(x) + 1


def total(v):
    return v.sum()


def uses_total(v):
    return total(v) * 2.0


# ----- comparing with plain Python per member ----------------------------------------------------


@pytest.fixture(params=["numpy", "jax", "tf"])
def backend(request):
    if request.param == "numpy":
        return abir.NumpyBackend()
    if request.param == "jax":
        return abir.JaxBackend()
    return abir.TensorFlowBackend()


def batched(program, *others):
    """`program` decorated in a new Context, with the other functions it calls; the helpers that
    test whole-batch results are declared primitives."""
    ctx = abir.Context()
    for primitive in (keeps_one_row, keeps_two_rows, total):
        ctx.primitive(primitive)
    for other in others:
        ctx.batch_uncurried(other)
    return ctx.batch_uncurried(program)


def as_numpy_reads(arg):
    """`arg` with every plain list or tuple of numbers read by `np.asarray` (the reference rule)."""

    def is_number(value):
        return isinstance(value, bool | int | float | np.number | np.bool_)

    def numbers_only(value):
        if type(value) not in (list, tuple) or not value:
            return False
        return all(map(is_number, value)) or all(map(numbers_only, value))

    if numbers_only(arg):
        return np.asarray(arg)
    if type(arg) in (list, tuple):
        return type(arg)(as_numpy_reads(item) for item in arg)
    if isinstance(arg, tuple) and hasattr(arg, "_fields"):
        return type(arg)(*(as_numpy_reads(item) for item in arg))
    return arg


def member_args(args, i):
    """Member i's arguments: its row of each array leaf; size-1 rows and numbers are shared."""

    def row(leaf):
        if np.ndim(leaf) == 0:
            return leaf
        array = np.asarray(leaf)
        return array[0] if array.shape[0] == 1 else array[i]

    return optree.tree_map(row, args)


def per_member(program, args, batch):
    arrays = [as_numpy_reads(arg) for arg in args]
    return [program(*member_args(arrays, i)) for i in range(batch)]


def assert_members(result, expected):
    """`result` (a batched structure) holds `expected[i]` as member i, leaf by leaf, dtype too."""
    got_leaves, got_structure = optree.tree_flatten(result)
    for i, member in enumerate(expected):
        want_leaves, want_structure = optree.tree_flatten(member)
        assert want_structure == got_structure, f"member {i}: {got_structure} != {want_structure}"
        for got, want in zip(got_leaves, want_leaves, strict=True):
            row = np.asarray(got)[i]
            np.testing.assert_allclose(row, np.asarray(want), rtol=1e-6, err_msg=f"member {i}")
            assert row.dtype == np.asarray(want).dtype, f"member {i}: {row.dtype} != {np.asarray(want).dtype}"


def assert_matches_python(program, args, batch, backend, *others):
    result = batched(program, *others)(*args, backend=backend)
    assert_members(result, per_member(program, args, batch))
    return result


def last_frame_here(info: pytest.ExceptionInfo) -> int:
    """The line of the last traceback frame in this file (the call, for an error at the call)."""
    return [entry.lineno + 1 for entry in info.traceback if entry.path == __file__ or str(entry.path) == __file__][-1]


def raising_line() -> int:
    """The line after the caller's: where the call under test is written."""
    return sys._getframe(1).f_lineno + 1


# ----- lists and tuples of numbers are batches --------------------------------------------------


def test_lists_of_numbers_are_the_batch_as_np_asarray_reads_them(backend):
    assert_matches_python(egcd, ([12, 18, 35], [8, 27, 14]), 3, backend)


@pytest.mark.parametrize(
    "args",
    [
        ((12, 18, 35), (8, 27, 14)),
        ([12, 18, 35], np.array([8, 27, 14])),
        ([12, 18, 35], 8),
        ([np.int32(12), np.int32(18)], [np.int32(8), np.int32(27)]),
    ],
    ids=["tuples", "list-and-array", "list-and-shared-number", "numpy-scalars"],
)
def test_tuples_and_lists_of_numbers_mix_with_arrays_and_shared_numbers(backend, args):
    assert_matches_python(egcd, args, len(args[0]), backend)


def test_a_list_of_ints_is_int64_not_a_weak_python_number(backend):
    result = assert_matches_python(add, (np.array([1, 2, 3], np.int32), [5, 6, 7]), 3, backend)
    assert np.asarray(result).dtype == np.int64  # int32 + int64, as NumPy reads [5, 6, 7]


def test_nested_lists_give_each_member_its_row(backend):
    assert_matches_python(norm_squared, ([[1.0, 2.0], [3.0, 4.0], [0.5, -1.0]],), 3, backend)


def test_bools_read_as_a_bool_batch(backend):
    assert_matches_python(add, ([True, False, True], [1, 2, 3]), 3, backend)


def test_a_list_of_numbers_inside_a_structure_is_one_array(backend):
    assert_matches_python(first_plus_second, (([1.0, 2.0, 3.0], np.array([10.0, 20.0, 30.0])),), 3, backend)


def test_a_tuple_mixing_a_list_of_numbers_and_a_number_is_a_structure(backend):
    assert_matches_python(first_plus_second, (([1.0, 2.0, 3.0], 10.0),), 3, backend)


def test_a_namedtuple_of_numbers_stays_a_structure_shared_by_every_member(backend):
    assert_matches_python(scaled, (np.array([1.0, 2.0, 3.0]), Params(2.0, 0.5)), 3, backend)


def test_a_list_of_arrays_stays_a_structure(backend):
    assert_matches_python(first_plus_second, ([np.array([1, 2]), np.array([10, 20])],), 2, backend)


def test_dry_run_reads_lists_of_numbers_as_a_batched_call_does():
    f = batched(egcd)
    dry = f([12, 18, 35], [8, 27, 14], dry_run=True)
    run = f([12, 18, 35], [8, 27, 14])
    for got, want in zip(run, dry, strict=True):
        np.testing.assert_array_equal(got, want)


# ----- lists np.asarray cannot read: refused at the call -------------------------------------------


def test_a_ragged_list_is_refused_at_the_call_naming_the_argument_and_the_fix():
    f = batched(norm_squared)
    with pytest.raises(ValueError) as info:
        line = raising_line()
        f([[1.0, 2.0], [3.0]])
    message = str(info.value)
    assert "argument 0 of norm_squared()" in message
    assert "np.asarray" in message and "rectangular" in message and "namedtuple" in message
    assert last_frame_here(info) == line
    assert not any("abir/frontend" in str(entry.path) for entry in info.traceback)


def test_an_integer_beyond_64_bits_is_refused_at_the_call_with_a_dtype_to_pass():
    f = batched(egcd)
    with pytest.raises(TypeError) as info:
        line = raising_line()
        f([12, 18, 35], [8, 1 << 70, 14])
    message = str(info.value)
    assert "argument 1 of egcd()" in message and "np.asarray([8, 1180591620717411303424, 14], dtype=" in message
    assert last_frame_here(info) == line


def test_a_list_of_another_size_than_the_batch_is_a_mismatch_at_the_call():
    f = batched(add)
    with pytest.raises(ValueError, match=r"argument 1 \(a list of numbers.*\) has 3") as info:
        line = raising_line()
        f(np.arange(4), [1, 2, 3])
    assert "mismatched batch sizes" in str(info.value)
    assert "to give every member the same numbers, pass them in a namedtuple or as size-1 arrays" in str(info.value)
    assert last_frame_here(info) == line


# ----- batch sizes in errors are the user's -------------------------------------------------------


def test_a_helper_dropping_rows_at_type_inference_names_itself_and_the_users_batch(backend):
    f = batched(uses_keeps_one_row)
    with pytest.raises(HelperError) as info:
        f(np.arange(3.0), backend=backend)
    message = str(info.value)
    assert "the helper 'keeps_one_row'" in message and "return keeps_one_row(x) + 1" in message
    assert "shape [1] for arguments with 2 rows" in message
    assert "your call's batch has 3 members" in message
    assert "batch of 2" not in message and "batch of 4" not in message


def test_a_helper_returning_a_scalar_per_batch_reports_the_users_batch_not_the_stand_in_rows(backend):
    f = batched(uses_total)
    with pytest.raises(HelperError) as info:
        f(np.ones((3, 3)), backend=backend)  # stand-in rows at type inference: 4 (more than the event size)
    message = str(info.value)
    assert "the helper 'total'" in message and "shape [] for arguments with 4 rows" in message
    assert "your call's batch has 3 members" in message and "batch of 4" not in message


@pytest.mark.parametrize("pad_batch", [False, True])
def test_a_helper_dropping_rows_at_run_time_reports_the_users_batch(backend, pad_batch):
    f = batched(uses_keeps_two_rows)  # two stand-in rows at type inference pass; three members do not
    with pytest.raises(HelperError) as info:
        f(np.arange(3.0), backend=backend, pad_batch=pad_batch)
    message = str(info.value)
    assert "the helper 'keeps_two_rows'" in message and "return keeps_two_rows(x) + 1" in message
    rows = 4 if pad_batch else 3
    assert f"shape [2] for arguments with {rows} rows" in message
    if pad_batch:
        assert "pad_batch=True runs your batch of 3 as 4 rows" in message
    else:
        assert "your call's batch" not in message  # the rows the helper got are the user's batch


def test_a_registered_opaque_dropping_rows_reports_the_stand_in_rows_and_the_users_batch():
    with calling_with_batch(3), pytest.raises(TypeInferenceError) as info:
        PrimEvaluator._strip_batch(np.zeros(1), 2, "opaque callable @lookup (source: 'lookup(x)')")
    message = str(info.value)
    assert "returned shape [1] for arguments with 2 rows" in message and "for your batch of 3" in message
    assert "batch of 2" not in message
