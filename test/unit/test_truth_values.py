"""Truth values, as Python takes them: a per-member value used as a condition (`if`, `while`,
a conditional expression, `and`, `or`, `not`, `bool()`) is Python's `bool()` of each member.

* a member with several elements, or none, makes Python raise NumPy's ValueError; the batched
  call raises it too, as an abir error (`TruthValueError`, a ValueError) naming the user's file,
  line, source line, the construct and a fix, on every backend, before anything runs;
* a member with exactly one element (shape (1,), (1, 1)) is truthy as its element is, as in
  NumPy, and the batched run equals the plain Python run of every member;
* per-member scalars are unchanged.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import abir
from abir.errors import AbirError, TruthValueError

# -- programs (plain module-level Python, written for one member) ------------------------------


def if_positive(a):
    if a > 0:  # truth
        return a * 2
    return a - 1


def while_nonzero(v):
    n = 0
    while v:  # truth
        v = v - np.sign(v)
        n += 1
    return n


def selected(a):
    return a * 2 if a > 0 else a  # truth


def selected_by_branch(a):
    return np.abs(a) if a < 0 else a + 1  # truth


def and_values(a, b):
    return a and b  # truth


def or_values(a, b):
    return a or b  # truth


def and_call(a, b):
    return a and np.abs(b)  # truth


def compared_or(a, b):
    return a > 0 or b > 0  # truth


def not_value(a):
    return not a  # truth


def bool_value(a):
    return bool(a)  # truth


ONE_ARGUMENT = [if_positive, while_nonzero, selected, selected_by_branch, not_value, bool_value]
TWO_ARGUMENTS = [and_values, or_values, and_call, compared_or]
PROGRAMS = ONE_ARGUMENT + TWO_ARGUMENTS


@pytest.fixture(scope="module")
def batched() -> dict[str, object]:
    context = abir.Context()
    return {program.__name__: context.batch_uncurried(program) for program in PROGRAMS}


@pytest.fixture(params=["numpy", "jax", "tf"])
def backend(request):
    return {"numpy": abir.NumpyBackend, "jax": abir.JaxBackend, "tf": abir.TensorFlowBackend}[request.param]()


def arguments(program, first: np.ndarray) -> list[np.ndarray]:
    """`first` for every parameter, the second one shifted (so that `and`/`or` choose visibly)."""
    return [first] if program in ONE_ARGUMENT else [first, first * 10 + 1]


def python_run(program, args: list[np.ndarray]) -> list[object]:
    """Each member's plain Python result, or the exception its run raised."""
    outcomes: list[object] = []
    for i in range(len(args[0])):
        try:
            outcomes.append(program(*(a[i].copy() for a in args)))
        except Exception as error:
            outcomes.append(error)
    return outcomes


def line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(offset for offset, line in enumerate(lines) if text in line)


def assert_like_python(batched, program, args: list[np.ndarray], backend) -> None:
    """The batched call returns each member's plain Python result, or raises, as an abir error
    located at the construct, the ValueError every member's run raises."""
    outcomes = python_run(program, args)
    errors = [o for o in outcomes if isinstance(o, Exception)]
    if not errors:
        result = np.asarray(batched[program.__name__](*args, backend=backend))
        for i, expected in enumerate(outcomes):
            np.testing.assert_array_equal(result[i], np.asarray(expected), err_msg=f"{program.__name__} member {i}")
        return
    assert len(errors) == len(outcomes) and all(type(e) is ValueError for e in errors), outcomes
    with pytest.raises(ValueError) as info:
        batched[program.__name__](*args, backend=backend)
    error = info.value
    assert isinstance(error, TruthValueError) and isinstance(error, AbirError)
    text = str(error)
    line = line_of(program, "# truth")
    assert f"{inspect.getsourcefile(program)}:{line}: in batched function '{program.__name__}'" in text, text
    assert inspect.getsourcelines(program)[0][line - program.__code__.co_firstlineno].strip() in text, text
    assert f"ValueError: {errors[0]}" in text and "Instead:" in text and "np.any(" in text, text


VECTORS = np.array([[1, -2, 3], [-1, -2, -3], [0, 4, 0]])
ONE_ELEMENT = {
    "shape (1,)": np.array([[2], [-3], [0], [1]]),
    "shape (1, 1)": np.array([[[2]], [[-3]], [[0]], [[1]]]),
    "float shape (1,)": np.array([[0.5], [-0.0], [np.nan], [-2.5]]),
}
SCALARS = np.array([2, -3, 0, 1])


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_members_with_several_elements_raise_pythons_value_error(batched, backend, program):
    assert_like_python(batched, program, arguments(program, VECTORS), backend)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_empty_members_do_as_the_installed_numpy_does(batched, backend, program):
    """NumPy 2.2 and later raise ValueError for the truth value of an empty array (earlier ones
    warn and give False): the batched call does as each member's plain run."""
    assert_like_python(batched, program, arguments(program, np.zeros((2, 0), np.int64)), backend)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("kind", list(ONE_ELEMENT))
@pytest.mark.make_test_keeps({"backend": "numpy"}, {"backend": "jax"}, {"kind": "float shape (1,)"})
def test_members_with_one_element_are_truthy_as_in_numpy(batched, backend, program, kind):
    if program is while_nonzero and "float" in kind:
        pytest.skip("a float counter that is not a whole number never reaches zero")
    assert_like_python(batched, program, arguments(program, ONE_ELEMENT[kind]), backend)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.make_test_keeps(
    {"backend": "numpy"}, {"backend": "jax"}, *({"program": p} for p in (if_positive, while_nonzero, and_call))
)
def test_per_member_scalars_are_unchanged(batched, backend, program):
    assert_like_python(batched, program, arguments(program, SCALARS), backend)


def test_the_error_is_raised_before_anything_runs():
    """Type inference finds it: the program is never lowered to the machine."""
    ctx = abir.Context()
    f = ctx.batch()(if_positive)
    with pytest.raises(TruthValueError, match="the condition of this `if`"):
        ctx.program_compiled("if_positive", [abir.TensorType(np.int64, (3,))])
    assert f(np.array([[2], [-1]])).tolist() == [[4], [-2]]


def test_a_reduced_condition_is_one_truth_value(batched, backend):
    """`np.any(...)`, as the error suggests, gives one truth value per member."""

    def any_positive(a):
        return 1 if np.any(a > 0) else 0

    f = abir.Context().batch()(any_positive)
    assert np.asarray(f(VECTORS, backend=backend)).tolist() == [any_positive(row) for row in VECTORS]
