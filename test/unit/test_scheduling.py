"""Alternative scheduling policies (abir.backends.base): same results as the default on every
backend, and the step counts measured on NumPy (`RunStats`)."""

from __future__ import annotations

import numpy as np
import pytest

import abir
from abir.backends.base import most_populous_block, smallest_live_block, sparse_skipping_scheduler


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def run(fn, args, backend):
    return np.asarray(abir.Context().batch_uncurried(fn)(*args, backend=backend))


POLICIES = [sparse_skipping_scheduler(0.05), most_populous_block]
ARGS = {"fib": (fib, [np.array([3, 7, 4, 5])]), "collatz": (collatz, [np.array([1, 7, 27, 97, 12])])}


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.__name__)
@pytest.mark.parametrize("backend", [abir.NumpyBackend, abir.JaxBackend], ids=["numpy", "jax"])
@pytest.mark.parametrize("name", list(ARGS))
def test_results_identical_to_default(name, backend, policy):
    fn, args = ARGS[name]
    want = run(fn, args, abir.NumpyBackend())
    np.testing.assert_array_equal(run(fn, args, backend(scheduler=policy)), want)


def test_fib_and_collatz_steps_not_worse():
    """Measured: fib [3,7,4,5] 85 -> 85 (ideal 82), fib of 64 random n in [5, 16) 3,956 ->
    3,955 (ideal 3,946), collatz 122 -> 122 (ideal 122)."""
    rng = np.random.default_rng(0)
    cases = [*ARGS.values(), (fib, [rng.integers(5, 16, 64)])]
    for fn, args in cases:
        default, sparse = (
            abir.NumpyBackend(smallest_live_block),
            abir.NumpyBackend(sparse_skipping_scheduler()),
        )
        np.testing.assert_array_equal(run(fn, args, sparse), run(fn, args, default))
        assert sparse.last_stats.steps <= default.last_stats.steps
        assert sparse.last_stats.ideal_steps == default.last_stats.ideal_steps


def test_sparse_skipping_on_ragged_recursion():
    """Members at very different recursion depths (fib 2..12, 33 members): measured 940 steps
    under both policies (ideal 930); fib is already near its ideal, the gain is on NUTS
    (64 chains x 20, depth 6: 12,991 -> 10,115; 256 chains: 17,518 -> 13,113)."""
    n = np.array([2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] * 3)
    default, sparse = abir.NumpyBackend(), abir.NumpyBackend(sparse_skipping_scheduler(0.05))
    np.testing.assert_array_equal(run(fib, [n], sparse), run(fib, [n], default))
    assert sparse.last_stats.steps <= default.last_stats.steps


def test_scheduler_on_all_halted_and_single_block():
    backend = abir.NumpyBackend()
    policy = sparse_skipping_scheduler(0.5)
    assert int(policy(backend, np.array([7, 7, 7], np.int32))) == 7
    assert int(policy(backend, np.array([2, 2, 7], np.int32))) == 2
    # block 1 holds 1 of 5 live members (< 50%): the most populous block 4 runs instead
    assert int(policy(backend, np.array([1, 4, 4, 4, 3, 9], np.int32))) == 4
    assert int(most_populous_block(backend, np.array([1, 3, 3, 2, 2, 9], np.int32))) == 2
    assert int(smallest_live_block(backend, np.array([1, 3, 3, 2, 2, 9], np.int32))) == 1
