"""What a batched call raises is an abir error or the error the members' plain Python runs
raise, never an exception from abir's machinery (xDSL, a backend, an internal assertion).

The differential fuzzer's programs are called with inputs they were not written for (every
number a per-member vector, or every int a float), so that plain Python raises for some members
(ambiguous truth values, float indices, ...) and abir has to reject them: each exception the
batched call raises must be an `AbirError` or of a type some member's plain run raises.
"""

from __future__ import annotations

import numpy as np
import pytest

import abir
from abir.boundary import batched_call_boundary
from abir.errors import AbirError, InternalError
from abir.testing import fuzz
from abir.testing.differential import InvalidProgram, Tracer, batched_entry, member_value
from abir.testing.generate import DEFAULT_FEATURES, FLOAT, INT, VEC

SEED = 7
PROGRAMS = range(6)


def as_vectors(value, t):
    """A per-member vector of 3 for every number input (arrays unchanged)."""
    if isinstance(t, tuple):
        return tuple(as_vectors(v, part) for v, part in zip(value, t, strict=True))
    if t in (INT, FLOAT):
        return np.repeat(value[:, None], 3, axis=1)
    return value


def as_floats(value, t):
    """Every int input as a float."""
    if isinstance(t, tuple):
        return tuple(as_floats(v, part) for v, part in zip(value, t, strict=True))
    return value.astype(np.float64) + 0.5 if t == INT else value


def vector_type(t):
    return tuple(vector_type(part) for part in t) if isinstance(t, tuple) else VEC if t in (INT, FLOAT) else t


def plain_errors(generated, inputs, types) -> list[type]:
    """The exception types the members' plain Python runs raise (None: a run left the bounds)."""
    program, namespace = generated.program, generated.namespace
    errors = []
    for i in range(program.batch_size()):
        args = [member_value(v, t, i, namespace) for v, t in zip(inputs, types, strict=True)]
        try:
            with Tracer(namespace["__file__"]).active():
                namespace[program.entry](*args)
        except InvalidProgram:
            return None
        except Exception as error:
            errors.append(type(error))
    return errors


@pytest.mark.parametrize("mutation", ["vectors", "floats"])
def test_a_batched_call_raises_abir_errors_or_pythons(mutation, tmp_path):
    checked = 0
    for index in PROGRAMS:
        generated = fuzz.generate(SEED, index, DEFAULT_FEATURES, str(tmp_path))
        program = generated.program
        if mutation == "vectors":
            inputs = [as_vectors(v, t) for v, t in zip(program.inputs, program.input_types, strict=True)]
            types = [vector_type(t) for t in program.input_types]
        else:
            inputs = [as_floats(v, t) for v, t in zip(program.inputs, program.input_types, strict=True)]
            types = [FLOAT if t == INT else t for t in program.input_types]
        expected = plain_errors(generated, inputs, types)
        if expected is None:
            continue
        checked += 1
        try:
            batched_entry(program, generated.namespace)(*inputs, backend=abir.NumpyBackend(), max_stack_depth=15)
        except Exception as error:
            assert isinstance(error, AbirError) or any(isinstance(error, t) for t in expected), (
                f"program {index} ({mutation}): {type(error).__module__}.{type(error).__name__}: {error}\n"
                f"plain Python raised {expected}\n{program.source()}"
            )
    assert checked >= len(PROGRAMS) // 2


def test_an_internal_exception_becomes_an_internal_error():
    from xdsl.utils.exceptions import VerifyException

    expected = "batched function 'f' failed inside abir with VerifyException"
    with pytest.raises(InternalError, match=expected) as info, batched_call_boundary("f"):
        raise VerifyException("operand 'cond' does not verify")
    assert isinstance(info.value.__cause__, VerifyException) and "bug in abir" in str(info.value)


def test_user_errors_pass_the_boundary_unchanged():
    with pytest.raises(TypeError, match="mine"), batched_call_boundary("f"):
        raise TypeError("mine")
    with pytest.raises(AttributeError, match="user"), batched_call_boundary("f"):
        raise AttributeError("a user's helper: no attribute 'user'")
