"""Every program of bench/suite_programs.py, batched by abir at a small batch, equals the plain
Python run per member on the NumPy, JAX and TF backends (NUTS is covered by test/unit/test_nuts.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import suite_programs  # noqa: E402

import abir  # noqa: E402

BACKENDS = {
    "numpy": abir.NumpyBackend,
    "jax": abir.JaxBackend,
    "tf": lambda: abir.TensorFlowBackend(jit_compile=True),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("name", sorted(suite_programs.SUITE))
def test_suite_program_equals_per_member_python(name: str, backend: str) -> None:
    program = suite_programs.SUITE[name]
    inputs = program.make_inputs(4, True)
    want = suite_programs.python_run(program, inputs)
    got = suite_programs.abir_function(program)(
        *inputs, backend=BACKENDS[backend](), max_stack_depth=program.max_stack_depth
    )
    suite_programs.assert_equal(suite_programs.as_tuple(got), want, f"{name} on {backend}")
