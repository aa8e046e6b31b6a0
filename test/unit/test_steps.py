"""Machine steps per program: what if-convert and fuse-blocks save, with results unchanged.

Each machine step has a fixed overhead, so the step count is the main cost of scalar programs.
BEFORE is what the pipeline without if-convert / fuse-blocks took on these inputs (NumPy backend,
measured at commit 57ca029); AFTER what it takes now. `ideal` is the longest member's own block
count (independent of the scheduler), `steps` the kernel executions of the whole batch.
"""

from __future__ import annotations

import numpy as np
import pytest

import abir


def fib(n):
    if n > 1:
        return fib(n - 1) + fib(n - 2)
    return 1


def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def gcd(a, b):
    while b != 0:
        a, b = b, a % b
    return a


def nested(n):
    total = 0
    i = 0
    while i < n:
        j = 0
        while j < i:
            if (i + j) % 3 == 0:
                total += i * j
            else:
                total -= 1
            j += 1
        i += 1
    return total


def clipped_sum(n):
    total = 0.0
    for i in range(n):
        x = i * 0.5 - 2.0
        if x < 0.0:
            x = -x
        if x > 3.0:
            x = 3.0
        total += x
    return total


CASES = {
    "fib": (fib, [np.array([3, 7, 4, 5, 10])]),
    "collatz": (collatz, [np.array([1, 7, 27, 97, 12])]),
    "gcd": (gcd, [np.array([12, 1071, 17, 100, 144]), np.array([18, 462, 5, 75, 89])]),
    "nested": (nested, [np.array([0, 3, 7, 12, 5])]),
    "clipped_sum": (clipped_sum, [np.array([0, 3, 9, 20, 1])]),
}

# (steps, ideal) before and after
BEFORE = {
    "fib": (536, 532),
    "collatz": (542, 477),
    "gcd": (29, 25),
    "nested": (325, 317),
    "clipped_sum": (133, 125),
}
AFTER = {
    "fib": (358, 354),
    # Loop programs run at the ideal: loop blocks are scheduled before the loops' exits.
    "collatz": (122, 122),
    "gcd": (14, 14),
    "nested": (94, 94),
    "clipped_sum": (24, 24),
}


def run(name: str) -> tuple[np.ndarray, abir.NumpyBackend]:
    fn, args = CASES[name]
    backend = abir.NumpyBackend()
    out = abir.Context().batch_uncurried(fn)(*args, backend=backend)
    return np.asarray(out), backend


@pytest.mark.parametrize("name", list(CASES))
def test_results_match_plain_python(name: str) -> None:
    fn, args = CASES[name]
    out, _ = run(name)
    want = [fn(*[a[i].item() for a in args]) for i in range(len(args[0]))]
    np.testing.assert_allclose(out, want)


@pytest.mark.parametrize("name", list(CASES))
def test_fewer_steps(name: str) -> None:
    _, backend = run(name)
    stats = backend.last_stats
    assert stats is not None
    steps, ideal = AFTER[name]
    assert stats.ideal_steps == ideal
    assert stats.steps <= steps
    assert steps < BEFORE[name][0] and ideal < BEFORE[name][1]


def test_collatz_iteration_is_one_step() -> None:
    """Loop header rotated into the body, the if/else converted: one block per iteration."""
    _, backend = run("collatz")
    stats = backend.last_stats
    assert stats is not None
    iterations = [collatz(int(n)) for n in CASES["collatz"][1][0]]
    # program entry (call), function entry + loop test, one step per iteration, return, halt
    assert [s - i for s, i in zip(stats.member_steps, iterations, strict=True)] == [4] * len(iterations)


def test_fib_leaves_cost_no_step_of_their_own() -> None:
    """Each internal call costs 4 steps (trampoline, call 1 + entry test, continuation + call 2
    + entry test, add + return); a leaf runs inside its caller's continuation."""
    _, backend = run("fib")
    stats = backend.last_stats
    assert stats is not None

    def internal(n: int) -> int:
        return 1 + internal(n - 1) + internal(n - 2) if n > 1 else 0

    # plus the program entry (the call of the root) and the exit (the halt)
    assert stats.member_steps == [4 * internal(int(n)) + 2 for n in CASES["fib"][1][0]]
