"""abir inside a JAX user's program: the process's JAX settings are left alone.

A standalone JAX run happens under 64-bit types (NumPy's int64 and float64) scoped to the run;
`jax_enable_x64` is whatever the user set before and after it. Every result is checked against
the plain per-member Python run (`dry_run=True`).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import abir  # noqa: E402


def fib(n):
    if n > 2:
        return fib(n - 1) + fib(n - 2)
    return 1


def halving_steps(x, tolerance):
    steps = 0
    while x > tolerance:
        x = x * 0.5
        steps += 1
    return x, steps


CTX = abir.Context()
batched_fib = CTX.batch_uncurried(fib)
halving = CTX.batch_uncurried(halving_steps)


@pytest.mark.parametrize("x64", [False, True])
def test_a_jax_run_keeps_the_users_x64_setting(x64):
    n = np.array([3, 7, 10])
    with jax.enable_x64(x64):
        result = batched_fib(n, backend=abir.JaxBackend())
        assert jax.config.jax_enable_x64 is x64
        assert jnp.arange(3.0).dtype == (np.float64 if x64 else np.float32)
    want = batched_fib(n, dry_run=True)
    assert result.dtype == want.dtype == np.int64
    np.testing.assert_array_equal(np.asarray(result), want)


@pytest.mark.parametrize("x64", [False, True])
def test_a_standalone_jax_run_has_numpys_dtypes_whatever_the_setting(x64):
    x = np.array([1.0, 10.0, 1000.0])
    with jax.enable_x64(x64):
        values, steps = halving(x, 0.3, backend=abir.JaxBackend())
        values32, steps32 = halving(x.astype(np.float32), np.float32(0.3), backend=abir.JaxBackend())
    want_values, want_steps = halving(x, 0.3, dry_run=True)
    assert (values.dtype, steps.dtype) == (np.float64, np.int64)
    np.testing.assert_array_equal(np.asarray(values), want_values)
    np.testing.assert_array_equal(np.asarray(steps), want_steps)
    want32, _ = halving(x.astype(np.float32), np.float32(0.3), dry_run=True)
    assert values32.dtype == want32.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(values32), want32)
    np.testing.assert_array_equal(np.asarray(steps32), want_steps)


FRESH_PROCESS = """
import numpy as np, jax.numpy as jnp, abir
from test_jax_interop import batched_fib
batched_fib(np.array([3, 7]), backend=abir.JaxBackend())
import jax
print(jax.config.jax_enable_x64, jnp.arange(3.0).dtype)
"""


def test_using_the_jax_backend_leaves_the_process_x64_setting_alone():
    """In a fresh process (nothing else has touched JAX's configuration): importing abir's JAX
    backend, creating one and running on it leaves `jax_enable_x64` off for the user's code."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pathlib.Path(__file__).parent), *sys.path])}
    env.pop("JAX_ENABLE_X64", None)
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "float32"]
