"""abir inside a JAX user's program.

* the process's JAX settings are left alone: a standalone JAX run happens under 64-bit types
  (NumPy's int64 and float64) scoped to the run; `jax_enable_x64` is whatever the user set
  before and after it;
* called on tracers (under `jax.jit`, in `lax.scan` / `lax.fori_loop` / `lax.cond` bodies) the
  machine is staged into the caller's computation, with the caller's dtypes, and its errors
  surface when that computation runs;
* under `jax.vmap` (nested too) the mapped axes fold into the batch: one machine run of all
  the members of all the mapped calls;
* forward-mode derivatives (`jax.jvp`, `jax.jacfwd`) go through the machine's loop, checked
  against finite differences and against JAX differentiating the per-member Python (reverse
  mode: test_reverse_mode.py).

Every result is checked against the plain per-member Python run (`dry_run=True`).
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
from abir.errors import StackOverflowError, StepLimitError  # noqa: E402

lax = jax.lax


from interop_programs import fib, halving_steps  # noqa: E402


def draws_until_small(key, counter):
    u = abir.random.uniform(key, counter)
    n = 0
    while u > 0.2:
        n += 1
        u = abir.random.uniform(key, counter + n)
    return n


def countdown(n):
    while n != 0:
        n = n - 1
    return n


def power(x, n):
    if n == 0:
        return x * 0.0 + 1.0
    return x * power(x, n - 1)


CTX = abir.Context()
batched_fib = CTX.batch_uncurried(fib)
halving = CTX.batch_uncurried(halving_steps)
batched_draws = CTX.batch_uncurried(draws_until_small)
batched_countdown = CTX.batch_uncurried(countdown)
batched_power = CTX.batch_uncurried(power)
BACKEND = abir.JaxBackend()
N = np.array([3, 7, 10, 1])


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
import numpy as np, jax, jax.numpy as jnp, abir
from test_jax_interop import batched_fib

def setting():
    return f"{jax.config.jax_enable_x64}:{jnp.arange(3.0).dtype}"

seen = [setting()]
backend = abir.JaxBackend()
seen.append(setting())
batched_fib(np.array([3, 7]), backend=backend)
seen.append(setting())
jax.block_until_ready(jax.jit(jax.vmap(lambda n: batched_fib(n, backend=backend)))(jnp.ones((2, 3), int)))
seen.append(setting())
print(*seen)
"""


@pytest.mark.parametrize("x64", [False, True])
def test_using_the_jax_backend_leaves_the_process_x64_setting_alone(x64):
    """In a fresh process (nothing else has touched JAX's configuration), with 64-bit types off
    (JAX's default) or on (`JAX_ENABLE_X64=1`): importing abir's JAX backend, creating one and
    running on it, standalone or staged under jit and vmap, leaves `jax_enable_x64` and the
    user's `jnp.arange(3.0).dtype` as they were."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(pathlib.Path(__file__).parent), *sys.path])}
    env.pop("JAX_ENABLE_X64", None)
    if x64:
        env["JAX_ENABLE_X64"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == [f"{x64}:{'float64' if x64 else 'float32'}"] * 4


@pytest.mark.parametrize("x64", [False, True])
def test_under_jit_the_machine_is_staged_with_the_callers_dtypes(x64):
    with jax.enable_x64(x64):
        n = jnp.asarray(N)
        staged = jax.jit(lambda n: batched_fib(n, backend=BACKEND))
        got = staged(n)
        values, steps = jax.jit(lambda x: halving(x, 0.3, backend=BACKEND))(jnp.array([1.0, 10.0, 1000.0]))
        jaxpr = jax.make_jaxpr(lambda n: batched_fib(n, backend=BACKEND))(n)
    want_values, want_steps = halving(np.array([1.0, 10.0, 1000.0]), 0.3, dry_run=True)
    assert isinstance(got, jax.Array) and got.dtype == (np.int64 if x64 else np.int32)
    np.testing.assert_array_equal(np.asarray(got), batched_fib(N, dry_run=True))
    assert (values.dtype, steps.dtype) == ((np.float64, np.int64) if x64 else (np.float32, np.int32))
    np.testing.assert_allclose(np.asarray(values), want_values)
    np.testing.assert_array_equal(np.asarray(steps), want_steps)
    # one staged computation: the machine's while loop, and no callback to the host outside the
    # conditional that raises a run's errors
    text = str(jaxpr)
    assert "while" in text
    assert all(eqn.primitive.name != "debug_callback" for eqn in jaxpr.jaxpr.eqns)


def test_inside_scan_fori_loop_and_cond_bodies():
    want = batched_fib(N, dry_run=True)
    want_next = batched_fib(N + 1, dry_run=True)

    def scan_body(total, x):
        return total + batched_fib(x, backend=BACKEND), None

    with jax.enable_x64(True):
        n = jnp.asarray(N)
        scanned, _ = lax.scan(scan_body, jnp.zeros(4, jnp.int64), jnp.stack([n, n + 1]))
        looped = lax.fori_loop(
            0, 2, lambda i, total: total + batched_fib(n + i, backend=BACKEND), jnp.zeros(4, jnp.int64)
        )
        chosen = lax.cond(n[0] > 0, lambda x: batched_fib(x, backend=BACKEND), lambda x: -x, n)
    np.testing.assert_array_equal(np.asarray(scanned), want + want_next)
    np.testing.assert_array_equal(np.asarray(looped), want + want_next)
    np.testing.assert_array_equal(np.asarray(chosen), want)


def test_on_typed_prng_keys_data_under_jit():
    keys = jax.random.split(jax.random.key(0), 6)
    got = jax.jit(lambda k: batched_draws(jax.random.key_data(k), 0, backend=BACKEND))(keys)
    want = batched_draws(np.asarray(jax.random.key_data(keys)), 0, dry_run=True)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_errors_of_a_staged_run_surface_when_the_computation_runs():
    deep = jax.jit(lambda n: batched_fib(n, backend=BACKEND, max_stack_depth=3))
    np.testing.assert_array_equal(np.asarray(deep(jnp.array([3, 4]))), [2, 3])  # no error: no callback
    with pytest.raises(jax.errors.JaxRuntimeError, match="stack overflow in function 'fib'"):
        deep(jnp.array([3, 9])).block_until_ready()
    limited = jax.jit(lambda n: batched_countdown(n, backend=BACKEND, max_steps=50))
    with pytest.raises(jax.errors.JaxRuntimeError, match="max_steps=50 reached: 1 member still running"):
        limited(jnp.array([3, -1])).block_until_ready()
    with pytest.raises(StackOverflowError):  # the same call outside a trace raises abir's own error
        batched_fib(np.array([3, 9]), backend=BACKEND, max_stack_depth=3)
    with pytest.raises(StepLimitError):
        batched_countdown(np.array([3, -1]), backend=BACKEND, max_steps=50)


def test_errors_of_a_run_staged_in_scan_or_vmap_name_the_function_and_the_limit():
    def body(carry, n):
        return carry, batched_fib(n, backend=BACKEND, max_stack_depth=3)

    scanned = jax.jit(lambda ns: lax.scan(body, 0, ns)[1])
    np.testing.assert_array_equal(np.asarray(scanned(jnp.array([[3, 4], [4, 3]]))), [[2, 3], [3, 2]])
    with pytest.raises(jax.errors.JaxRuntimeError, match="'fib'.*batch member 1 recursed deeper than max_stack_depth=3"):
        scanned(jnp.array([[3, 4], [4, 9]])).block_until_ready()


def _staged_failure(run, error_type):
    """The `JaxRuntimeError` running a staged computation raises, and the abir error it carries."""
    with pytest.raises(jax.errors.JaxRuntimeError) as raised:
        jax.block_until_ready(run())
    error = abir.staged_error(raised.value)
    assert isinstance(error, error_type), raised.value
    assert str(error) in str(raised.value)
    return error


@pytest.mark.parametrize("jit", [False, True])
def test_errors_under_vmap_name_the_vmap_index_and_the_member_in_its_call(jit):
    """vmap folds its V calls of B members into one run; an error names each failing member as
    the user sees it: its index in its call's batch and the call's index along the mapped axis
    (`err.members`, `err.vmap_indices`: element [v, b] of the results)."""
    mapped = jax.vmap(lambda n: batched_fib(n, backend=BACKEND, max_stack_depth=3))
    mapped = jax.jit(mapped) if jit else mapped
    n = jnp.array([[3, 4, 2], [4, 9, 9]])
    error = _staged_failure(lambda: mapped(n), StackOverflowError)
    assert "'fib'" in str(error)
    assert "batch members 1 (vmap index 1), 2 (vmap index 1) recursed deeper than max_stack_depth=3" in str(error)
    assert (error.members, error.vmap_indices) == ([1, 2], [(1,), (1,)])
    np.testing.assert_array_equal(np.asarray(n)[1, [1, 2]], [9, 9])  # the members the user passed

    limited = jax.vmap(lambda n: batched_countdown(n, backend=BACKEND, max_steps=50))
    error = _staged_failure(lambda: limited(jnp.array([[3, 4], [-1, 5], [2, 2]])), StepLimitError)
    assert "max_steps=50 reached: 1 member still running (batch member 0 (vmap index 1) in function 'countdown'" in str(error)
    assert (error.members, error.vmap_indices) == ([0], [(1,)])


def test_errors_under_nested_vmap_name_every_vmap_index():
    """Nested vmaps fold one by one; an error names the indices along every mapped axis,
    outermost first, with `in_axes` moving the axes as the user wrote them."""
    inner = jax.vmap(lambda n: batched_fib(n, backend=BACKEND, max_stack_depth=3))
    n = np.full((2, 3, 4), 3)
    n[1, 2, 0] = 9
    error = _staged_failure(lambda: jax.vmap(inner)(jnp.asarray(n)), StackOverflowError)
    assert "batch member 0 (vmap indices 1, 2) recursed" in str(error)
    assert (error.members, error.vmap_indices) == ([0], [(1, 2)])
    # the outer vmap maps axis 1 of its argument: the member is n[1, 2, 0] -> [2, 1, 0] there
    swapped = np.ascontiguousarray(n.transpose(1, 0, 2))
    error = _staged_failure(lambda: jax.jit(jax.vmap(inner, in_axes=1))(jnp.asarray(swapped)), StackOverflowError)
    assert (error.members, error.vmap_indices) == ([0], [(1, 2)])
    assert swapped[2, 1, 0] == 9


def test_staged_error_ignores_errors_that_are_not_abirs():
    assert abir.staged_error(jax.errors.JaxRuntimeError("INTERNAL: something else")) is None


def test_vmap_folds_the_mapped_axis_into_one_run():
    n = np.arange(12).reshape(3, 4) % 9
    mapped = jax.vmap(lambda x: batched_fib(x, backend=BACKEND))
    with jax.enable_x64(True):
        got = mapped(jnp.asarray(n))
        jaxpr = str(jax.make_jaxpr(mapped)(jnp.asarray(n)))
    np.testing.assert_array_equal(np.asarray(got), batched_fib(n.reshape(-1), dry_run=True).reshape(3, 4))
    assert "i32[12]" in jaxpr  # the program counters of one machine of 3 x 4 members
    assert "i32[3,4]" not in jaxpr  # not a machine whose every op was batched by vmap


def test_nested_vmap_and_vmap_under_jit():
    n = np.arange(24).reshape(2, 3, 4) % 9
    want = batched_fib(n.reshape(-1), dry_run=True).reshape(2, 3, 4)
    inner = jax.vmap(lambda x: batched_fib(x, backend=BACKEND))
    with jax.enable_x64(True):
        nested = jax.vmap(inner)(jnp.asarray(n))
        jitted = jax.jit(jax.vmap(inner))(jnp.asarray(n))
        swapped = jax.vmap(inner, in_axes=1, out_axes=1)(jnp.asarray(n.transpose(1, 0, 2)))
    np.testing.assert_array_equal(np.asarray(nested), want)
    np.testing.assert_array_equal(np.asarray(jitted), want)
    np.testing.assert_array_equal(np.asarray(swapped), want.transpose(1, 0, 2))


def test_vmap_over_some_arguments_shares_the_others():
    """The mapped tolerance is one number per mapped call (shared by its members); the unmapped
    starting values are the same members in every call."""
    x = np.array([1.0, 10.0, 1000.0])
    tolerances = np.array([0.3, 0.1])
    with jax.enable_x64(True):
        values, steps = jax.vmap(lambda t: halving(jnp.asarray(x), t, backend=BACKEND))(
            jnp.asarray(tolerances)
        )
    for call, tolerance in enumerate(tolerances):
        want_values, want_steps = halving(x, tolerance, dry_run=True)
        np.testing.assert_array_equal(np.asarray(values[call]), want_values)
        np.testing.assert_array_equal(np.asarray(steps[call]), want_steps)


def _per_member_jvp(function, x, tangent):
    """JAX's own jvp of the plain Python `function` run on each member (Python control flow on
    concrete values), stacked."""
    pairs = [jax.jvp(function, (jnp.float64(x[b]),), (jnp.float64(tangent[b]),)) for b in range(len(x))]
    return np.array([float(p) for p, _ in pairs]), np.array([float(t) for _, t in pairs])


def _finite_difference(function, x, tangent, eps=1e-6):
    return (function(x + eps * tangent) - function(x - eps * tangent)) / (2 * eps)


def test_jvp_through_loops_and_recursion():
    x = np.array([1.0, 10.0, 1000.0, 0.7])
    tangent = np.array([1.0, -2.0, 0.5, 3.0])
    n = np.array([3, 0, 5, 2])
    with jax.enable_x64(True):
        halved, halved_dot = jax.jvp(
            lambda x: halving(x, 0.3, backend=BACKEND)[0], (jnp.asarray(x),), (jnp.asarray(tangent),)
        )
        powered, powered_dot = jax.jvp(
            lambda x: batched_power(x, jnp.asarray(n), backend=BACKEND),
            (jnp.asarray(x),),
            (jnp.asarray(tangent),),
        )
        want_halved = _per_member_jvp(lambda v: halving_steps(v, 0.3)[0], x, tangent)
        want_powered = [
            jax.jvp(lambda v, k=int(k): power(v, k), (jnp.float64(v),), (jnp.float64(t),))
            for v, k, t in zip(x, n, tangent, strict=True)
        ]
    np.testing.assert_allclose(np.asarray(halved), want_halved[0])
    np.testing.assert_allclose(np.asarray(halved_dot), want_halved[1])
    np.testing.assert_allclose(np.asarray(powered), [float(p) for p, _ in want_powered])
    np.testing.assert_allclose(np.asarray(powered_dot), [float(t) for _, t in want_powered])
    np.testing.assert_allclose(np.asarray(powered_dot), n * x ** np.maximum(n - 1, 0) * tangent * (n > 0))
    finite = _finite_difference(lambda v: batched_power(v, n, dry_run=True), x, tangent)
    np.testing.assert_allclose(np.asarray(powered_dot), finite, rtol=1e-6, atol=1e-6)
    finite = _finite_difference(lambda v: halving(v, 0.3, dry_run=True)[0], x, tangent)
    np.testing.assert_allclose(np.asarray(halved_dot), finite, rtol=1e-6)


def test_jacfwd_of_a_batched_function():
    x = np.array([1.0, 10.0, 1000.0])
    with jax.enable_x64(True):
        jacobian = jax.jacfwd(lambda x: halving(x, 0.3, backend=BACKEND)[0])(jnp.asarray(x))
    _, steps = halving(x, 0.3, dry_run=True)
    np.testing.assert_allclose(np.asarray(jacobian), np.diag(0.5**steps))
