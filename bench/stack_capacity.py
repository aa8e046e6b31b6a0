"""Recursive Fibonacci on JAX at several stack capacities (`max_stack_depth`): issue 26's check
that a run costs the same whatever the capacity, as long as the recursion fits.

    .venv/bin/python bench/stack_capacity.py
    .venv/bin/python bench/stack_capacity.py --sizes 1024 --depths 20,200 --repeats 15

Each (batch size, depth) is timed in one process on a fresh backend: one untimed call (tracing
and compilation), then the median of `--repeats` calls on the same inputs, n drawn uniformly
from [5, 16) with seed 0 (at most 13 return blocks saved per member).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import abir


def fib(n):
    if n > 2:
        return fib(n - 1) + fib(n - 2)
    return 1


def steady_ms(batched, n: np.ndarray, depth: int, repeats: int) -> float:
    backend = abir.JaxBackend()
    batched(n, backend=backend, max_stack_depth=depth)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        batched(n, backend=backend, max_stack_depth=depth)
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="64,1024", help="comma-separated batch sizes")
    parser.add_argument("--depths", default="20,64,200", help="comma-separated max_stack_depth values")
    parser.add_argument("--repeats", type=int, default=9, help="timed calls per measurement (median)")
    args = parser.parse_args()
    batched = abir.Context().batch()(fib)
    depths = [int(d) for d in args.depths.split(",")]
    print("| B | " + " | ".join(f"depth {d} (ms)" for d in depths) + " |")
    print("|---|" + "---|" * len(depths))
    for size in (int(s) for s in args.sizes.split(",")):
        n = np.random.default_rng(0).integers(5, 16, size)
        times = [steady_ms(batched, n, depth, args.repeats) for depth in depths]
        print(f"| {size} | " + " | ".join(f"{t:.2f}" for t in times) + " |", flush=True)


if __name__ == "__main__":
    main()
