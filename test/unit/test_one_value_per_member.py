"""Where Python takes one value of each member, the batched call does too or raises as Python does:

* `float(v)` / `int(v)` of a per-member array raises NumPy's TypeError in the plain run (NumPy
  converts only 0-dimensional arrays to Python scalars); the batched call raises it as an abir
  error (`ScalarConversionError`, a TypeError) at the user's line, before anything runs;
* a conditional expression, `and` or `or` gives each member one of its operands itself, so when
  the operands' per-member shapes differ the batched call is refused at the line (a `where`
  would broadcast them into values no member's run gives);
* otherwise the batched run equals the plain Python run of every member.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import abir
from abir.backend_registry import spec_named
from abir.errors import AbirError, ScalarConversionError, TypeInferenceError


def float_of(v):
    return float(v) + 0.5  # convert


def int_of(v):
    return int(v) * 2  # convert


def shorter_arm(v, c):
    return v if c > 0 else v[:2]  # select


def number_arm(v, c):
    return v if c > 0 else 0.0  # select


def scalar_or_vector(c, v):
    return c or v  # select


def same_shape_arms(v, c):
    return v if c > 0 else v * 2


def float_of_element(v, c):
    return float(v[0]) + int(c)


@pytest.fixture
def backend(backend_name: str) -> abir.Backend:
    return spec_named(backend_name).new_backend()


VECTORS = np.array([[1.0, -2.0, 3.0], [-1.0, -2.0, -3.0]])
ONE_ELEMENT = np.array([[2.5], [-3.0]])
CONDITIONS = np.array([1, -1])


def located(program, marker: str) -> str:
    lines, first = inspect.getsourcelines(program)
    line = first + next(offset for offset, text in enumerate(lines) if marker in text)
    return f"{inspect.getsourcefile(program)}:{line}: in batched function '{program.__name__}'"


@pytest.mark.parametrize("program", [float_of, int_of], ids=lambda p: p.__name__)
@pytest.mark.parametrize("members", [VECTORS, ONE_ELEMENT], ids=["shape (3,)", "shape (1,)"])
def test_float_and_int_of_a_member_array_raise_pythons_type_error(backend, program, members):
    with pytest.raises(TypeError) as python:
        program(members[0])
    with pytest.raises(TypeError) as batched:
        abir.Context().batch()(program)(members, backend=backend)
    error = batched.value
    assert isinstance(error, ScalarConversionError) and isinstance(error, AbirError)
    text = str(error)
    assert located(program, "# convert") in text, text
    assert str(python.value) in text and "Instead:" in text and ".astype(" in text, text


@pytest.mark.parametrize("program", [shorter_arm, number_arm], ids=lambda p: p.__name__)
def test_arms_of_different_shapes_are_refused_at_the_line(program):
    with pytest.raises(TypeInferenceError) as info:
        abir.Context().batch()(program)(VECTORS, CONDITIONS)
    text = str(info.value)
    assert located(program, "# select") in text, text
    assert "(a conditional expression) gives each member one of two values itself" in text, text
    assert "Instead: give both values the same shape" in text, text


def test_or_of_a_scalar_and_an_array_is_refused_at_the_line():
    with pytest.raises(TypeInferenceError) as info:
        abir.Context().batch()(scalar_or_vector)(CONDITIONS, VECTORS)
    text = str(info.value)
    assert located(scalar_or_vector, "# select") in text and "(an `or`)" in text, text


@pytest.mark.parametrize("program", [same_shape_arms, float_of_element], ids=lambda p: p.__name__)
def test_one_value_per_member_runs_as_python(backend, program):
    result = np.asarray(abir.Context().batch()(program)(VECTORS, CONDITIONS, backend=backend))
    for i in range(len(VECTORS)):
        np.testing.assert_allclose(result[i], program(VECTORS[i].copy(), CONDITIONS[i]))
