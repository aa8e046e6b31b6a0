"""The benchmark programs, written for ONE example as plain Python.

The same functions serve as the plain-Python baseline (called once per batch member) and, after
`batched(...)` registers them in a fresh `abir.Context`, as abir batched functions. Recursive
calls name the function, which the Context resolves among its registered functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def fib(n):
    """fib(0) = fib(1) = 1."""
    if n > 1:
        return fib(n - 1) + fib(n - 2)
    return 1


def collatz(n):
    """Number of Collatz steps from n down to 1."""
    steps = n - n
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps


PROGRAMS: dict[str, Callable[..., Any]] = {"fib": fib, "collatz": collatz}
MAX_STACK_DEPTH = {"fib": 20, "collatz": 4}


def inputs(program: str, size: int, seed: int = 0) -> np.ndarray:
    """int64 inputs: fibonacci n in [5, 16), Collatz start in [1, 1000)."""
    rng = np.random.default_rng(seed)
    low, high = (5, 16) if program == "fib" else (1, 1000)
    return rng.integers(low, high, size=size, dtype=np.int64)


def python_loop(program: str) -> Callable[[np.ndarray], np.ndarray]:
    """The baseline: the per-example function called on every member in a Python loop."""
    function = PROGRAMS[program]
    return lambda x: np.array([function(int(v)) for v in x], dtype=np.int64)


def batched(program: str) -> Any:
    """A fresh `abir.Context` holding `program`, and the batched function (fresh compile caches)."""
    import abir

    context = abir.Context()
    return context.batch_uncurried(PROGRAMS[program])
