"""The one-kernel choice weighs its compilation (`abir.backends.jax.one_kernel`): a loop of more
operations than `ONE_KERNEL_MAX_OPERATIONS` (`abir.backends.jax.cost.operation_count`) compiles
as a sequence of kernels, whose compilation grows about linearly with the operations, where one
kernel's grows faster; a small loop stays one kernel. Either way the results equal Python.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import abir
from abir.backends.jax import cost
from abir.backends.jax import one_kernel as compilation

ctx = abir.Context()
ROUNDS = compilation.ONE_KERNEL_MAX_OPERATIONS // 2 + 1
"""Rounds of `halved` in `long_step`: two operations each, just over the bound in all."""


def halved(y, rounds: int):
    """`rounds` times y -> y * 0.5 + 0.25: two operations per round."""
    for _ in range(rounds):
        y = y * 0.5 + 0.25
    return y


@ctx.primitive
def long_step(x):
    """A step of `ROUNDS` rounds of `halved` (traced as that many operations)."""
    return halved(x, ROUNDS)


@ctx.primitive
def short_step(x):
    """A step of 11 rounds of `halved`."""
    return halved(x, 11)


@ctx.batch(type_inference=lambda types: types[0])
def long_loop(x, n):
    i = n - n
    while i < n:
        x = long_step(x)
        i += 1
    return x


@ctx.batch(type_inference=lambda types: types[0])
def short_loop(x, n):
    i = n - n
    while i < n:
        x = short_step(x)
        i += 1
    return x


def chosen_loop(fn, one_kernel: bool | None = None) -> tuple[np.ndarray, compilation.OneKernelWherePossible]:
    """`fn`'s result on a small batch (checked against Python) and its compiled loop."""
    x, n = np.linspace(-1.0, 1.0, 24).reshape(6, 4), np.array([0, 1, 2, 3, 5, 2])
    cache: dict = {}
    got = np.asarray(fn(x, n, backend=abir.JaxBackend(code_cache=cache, one_kernel=one_kernel)))
    np.testing.assert_allclose(got, np.asarray(fn(x, n, dry_run=True)), rtol=1e-12, atol=1e-14)
    (entry,) = cache.values()
    assert isinstance(entry[1], compilation.OneKernelWherePossible)
    return got, entry[1]


def test_operation_count_counts_each_call_every_branch_and_a_loop_body_once() -> None:
    def count(fn, *args) -> int:
        return cost.operation_count(jax.make_jaxpr(fn)(*args).jaxpr)

    x = jnp.ones(8)
    assert count(lambda x: halved(x, 5), x) == 10
    assert count(lambda x: x.reshape(2, 4).astype(jnp.float32), x) == 0  # free
    inner = jax.jit(lambda x: halved(x, 3))
    assert count(lambda x: inner(inner(x)), x) == 12  # inlined at each call
    assert count(lambda x: jax.lax.cond(x[0] > 0, lambda x: halved(x, 2), lambda x: halved(x, 3), x), x) == 1 + 10
    assert count(lambda x: jax.lax.fori_loop(0, 100, lambda i, x: halved(x, 4), x), x) >= 8
    assert count(lambda x: jax.lax.fori_loop(0, 100, lambda i, x: halved(x, 4), x), x) < 20  # not 100 bodies


def test_a_loop_of_more_operations_than_the_bound_runs_as_kernels() -> None:
    _, loop = chosen_loop(long_loop)
    assert list(loop.chosen.values()) == [loop.plain]


def test_a_small_loop_stays_one_kernel() -> None:
    _, loop = chosen_loop(short_loop)
    assert list(loop.chosen.values()) == [loop.fused]


@pytest.mark.parametrize("bound", [10, 1 << 20])
def test_the_bound_decides_between_one_kernel_and_kernels(monkeypatch: pytest.MonkeyPatch, bound: int) -> None:
    monkeypatch.setattr(compilation, "ONE_KERNEL_MAX_OPERATIONS", bound)
    _, loop = chosen_loop(short_loop)
    assert list(loop.chosen.values()) == [loop.fused if bound > 10 else loop.plain]


def test_one_kernel_true_passes_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compilation, "ONE_KERNEL_MAX_OPERATIONS", 10)
    _, loop = chosen_loop(short_loop, one_kernel=True)
    assert list(loop.chosen.values()) == [loop.fused]
