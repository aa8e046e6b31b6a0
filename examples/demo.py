"""abir demo: several per-example programs batched, checked against plain Python, and timed.

Run with `make demo` (creates the virtual environment on first use).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import abir

# The programs are plain Python functions; `batch_uncurried` below makes batched versions, so the
# same source also runs unbatched, member by member, as the reference.


def fib(n):
    """Doubly recursive Fibonacci: recursion depth and call count differ per member."""
    if n > 2:
        return fib(n - 1) + fib(n - 2)
    return 1


def collatz_steps(n):
    """A while loop whose trip count differs per member."""
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def gcd(a, b):
    """A loop with a swap of its two variables."""
    while b != 0:
        a, b = b, a % b
    return a


def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)


Stats = collections.namedtuple("Stats", ["total", "largest"])


def digit_stats(n):
    """Early return from a loop, and a namedtuple result."""
    total = 0
    largest = 0
    while True:
        d = n % 10
        total += d
        largest = d if d > largest else largest
        n = n // 10
        if n == 0:
            return Stats(total, largest)


DIM = 32
_rng = np.random.default_rng(1)
_basis = np.linalg.qr(_rng.normal(size=(DIM, DIM)))[0]
MATRIX = _basis @ np.diag(np.linspace(1.0, 2.0, DIM)) @ _basis.T  # symmetric, eigenvalues 1..2


def power_iteration(v, tolerance):
    """Vector state and a data-dependent loop: the dominant eigenvector of MATRIX from a start
    vector, to a per-member tolerance (so the iteration count differs per member)."""
    v = v / np.linalg.norm(v)
    iterations = 0
    change = 1.0
    while change > tolerance:
        w = v @ MATRIX
        w = w / np.linalg.norm(w)
        change = np.linalg.norm(w - v)
        v = w
        iterations += 1
    return v, iterations


ctx = abir.Context()
BATCHED = {
    f.__name__: ctx.batch_uncurried(f)
    for f in (fib, collatz_steps, gcd, is_even, is_odd, digit_stats, power_iteration)
}


def member(column: np.ndarray, i: int) -> Any:
    """Member i of a batched column: a Python number, or the member's own NumPy array."""
    row = column[i]
    return row.item() if np.ndim(row) == 0 else row


def plain_python(fn: Callable[..., Any], *columns: np.ndarray) -> list[Any]:
    """Run the plain Python function member by member (the reference result)."""
    return [fn(*(member(c, i) for c in columns)) for i in range(len(columns[0]))]


def same(got: Any, want: Any) -> bool:
    return bool(np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=1e-9, atol=1e-12))


def timed(thunk: Callable[[], Any], repeats: int) -> tuple[Any, float]:
    result = thunk()  # first call compiles; time the steady state
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = thunk()
        times.append(time.perf_counter() - start)
    return result, statistics.median(times)


def available_backends() -> list[tuple[str, Any]]:
    backends: list[tuple[str, Any]] = [("numpy", abir.NumpyBackend())]
    with contextlib.suppress(ImportError):
        backends.append(("jax", abir.JaxBackend()))
    return backends


def run_case(name: str, fn: Any, columns: Sequence[np.ndarray], repeats: int) -> None:
    expected, python_time = timed(lambda: plain_python(fn, *columns), repeats)
    for backend_name, backend in available_backends():
        batched = BATCHED[fn.__name__]
        result, batched_time = timed(lambda b=backend, f=batched: f(*columns, backend=b, max_stack_depth=64), repeats)
        flat = [np.asarray(r) for r in (result if isinstance(result, tuple) else (result,))]
        want = [e if isinstance(e, tuple) else (e,) for e in expected]
        matches = all(
            same(x[i], w) for i, per_member in enumerate(want) for x, w in zip(flat, per_member, strict=True)
        )
        status = "ok" if matches else "MISMATCH"
        print(
            f"{name:15s} {backend_name:6s} B={len(columns[0]):5d}  {status:8s} "
            f"abir {batched_time * 1e3:8.2f} ms   python loop {python_time * 1e3:8.2f} ms   "
            f"speed-up x{python_time / batched_time:6.2f}"
        )
        if status != "ok":
            raise SystemExit(f"{name} on {backend_name}: batched result differs from plain Python")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    batch = args.batch

    print("The functional IR of fib, as the frontend emits it:\n")
    print(ctx.program("fib"))
    print()
    run_case("fib", fib, [rng.integers(1, 16, batch)], args.repeats)
    run_case("collatz_steps", collatz_steps, [rng.integers(1, 1000, batch)], args.repeats)
    run_case("gcd", gcd, [rng.integers(1, 10**6, batch), rng.integers(1, 10**6, batch)], args.repeats)
    run_case("is_even", is_even, [rng.integers(0, 40, batch)], args.repeats)
    run_case("digit_stats", digit_stats, [rng.integers(0, 10**9, batch)], args.repeats)
    starts = rng.normal(size=(batch, DIM))
    run_case("power_iteration", power_iteration, [starts, 10.0 ** rng.uniform(-8, -3, batch)], args.repeats)
    print("\nAll batched results match plain Python run member by member.")


if __name__ == "__main__":
    main()
