"""Sharded batches: recursive Fibonacci and NUTS at B=4096 on one device and split over host devices.

    taskset -c 0,1 .venv/bin/python bench/sharded.py                     # 1 vs 2 host devices
    .venv/bin/python bench/sharded.py --devices 4 --batch 1024 --repeats 3

XLA's CPU client makes `--devices` host devices (`--xla_force_host_platform_device_count`, set
before JAX starts); each runs its shard's machine on its own thread, so give the process as
many cores. A row per program: the steady time (median of `--repeats` later calls, the two
runs alternating so that both see the same machine load) and the first call (trace, compile,
run) of the one-device run (NumPy arguments) and of the sharded run (arguments put with a
`NamedSharding` over the batch axis, one machine per device), whose results are checked equal
to the one-device run's, and the sharded / one-device ratios.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import statistics
import time


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--devices", type=int, default=2, help="host devices to split the batch over")
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--nuts-steps", type=int, default=20, help="NUTS transitions per chain")
    return parser.parse_args()


ARGS = parse_args()
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={ARGS.devices}"

import jax  # noqa: E402  (after XLA_FLAGS)
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec  # noqa: E402

import abir  # noqa: E402

_HERE = pathlib.Path(__file__).resolve().parent


def _load(name: str, path: pathlib.Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


programs = _load("abir_bench_programs", _HERE / "programs.py")
ex = _load("abir_example_nuts", _HERE.parent / "examples" / "nuts.py")


def first_call(call, arrays) -> tuple[float, object]:
    """The time of the first call of `call(*arrays)` (trace, compile and run) and its result."""
    start = time.perf_counter()
    result = jax.block_until_ready(call(*arrays))
    return time.perf_counter() - start, result


def steady_times(call, argument_lists, repeats: int) -> list[float]:
    """The median time of `call(*arrays)` for each of `argument_lists`, called in turn `repeats` times."""
    times: list[list[float]] = [[] for _ in argument_lists]
    for _ in range(repeats):
        for arrays, spent in zip(argument_lists, times, strict=True):
            start = time.perf_counter()
            jax.block_until_ready(call(*arrays))
            spent.append(time.perf_counter() - start)
    return [statistics.median(spent) for spent in times]


def sharded(*arrays: np.ndarray) -> list[jax.Array]:
    mesh = jax.make_mesh((ARGS.devices,), ("batch",))
    with jax.enable_x64(True):
        return [jax.device_put(a, NamedSharding(mesh, PartitionSpec("batch"))) for a in arrays]


def cases():
    fib = programs.batched("fib")
    n = programs.inputs("fib", ARGS.batch)
    depth = programs.MAX_STACK_DEPTH["fib"]
    yield "fib", (lambda *a: fib(*a, backend=abir.JaxBackend(), max_stack_depth=depth)), (n,)
    nuts = ex.make_nuts(ex.PRECISION, 6)
    run = ex.batch(nuts)
    q0, keys = ex.initial_positions(1, ARGS.batch, ex.DIM), ex.chain_keys(1, ARGS.batch)
    steps = np.int64(ARGS.nuts_steps)

    def sample(q, k):
        return run(q, 0.3, k, steps, backend=abir.JaxBackend(), max_stack_depth=ex.stack_depth(nuts))

    yield "nuts", sample, (q0, keys)


def main() -> None:
    print(f"B={ARGS.batch}, {ARGS.devices} host devices ({jax.devices()}), cores {sorted(os.sched_getaffinity(0))}")
    print(f"| program | 1 device steady | first call | {ARGS.devices} devices steady | first call | ratio steady | ratio first |")
    print("|---|---|---|---|---|---|---|")
    for name, call, arrays in cases():
        placed = sharded(*arrays)
        one_first, one = first_call(call, arrays)
        many_first, many = first_call(call, placed)
        for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(many), strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        one_steady, many_steady = steady_times(call, [arrays, placed], ARGS.repeats)
        print(
            f"| {name} | {one_steady * 1e3:.1f} ms | {one_first:.2f} s | {many_steady * 1e3:.1f} ms | {many_first:.2f} s "
            f"| {many_steady / one_steady:.2f} | {many_first / one_first:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
