"""More members than lanes: `f(xs, lanes=L)` against fixed batches of L and one batch of all.

    make bench-lanes LANES_ARGS="--quick"
    .venv/bin/python bench/lanes.py --lanes 64,1024,4096 --backends jax,numpy,tf-xla
    .venv/bin/python bench/lanes.py --devices 2 --workloads collatz --lanes 1024 --backends jax --clock wall

Three workloads whose members cost very different amounts: Collatz over 1..N, a heavy-tailed
rejection sampler (each member flips coins until tails, then draws 2**depth uniforms: depth
geometric, cost 2**depth) and the suite's adaptive ODE solver (`bench/suite_programs.py`,
ode-rk23). Each runs, for every L of `--lanes` and every backend, three ways: fixed batches of
L members one after another (each batch waits for its slowest member), one batch of all N
members, and `lanes=L`. Every result equals the per-member Python result before anything is
timed (a failure is printed and kept in the table as FAILED).

Time is CPU time of this process by default (`--clock cpu`: the machine may be shared), the
best of `--repeats` calls after a first, compiling one; members/s is N over it, and the ratio is
`lanes=L`'s members/s over the fixed batches'. Lane use is the share of the lane-steps of the
program's blocks that ran a member (`RunStats.lane_use`, the refill block left out), counted by
a separate run with `collect_stats=True` on backends that collect them (else "-"). Progress
goes to stderr; stdout ends with one Markdown table.

`--devices D` (D > 1) adds on JAX a fourth way: `lanes=L` on the inputs sharded over D host
devices (`--xla_force_host_platform_device_count=D`; the bench runs itself again in a fresh
process when JAX has fewer devices), each device running its own L lanes from one queue of
members; its last column is its members/s over `lanes=L` on one device. CPU time (the default
clock) adds up the devices' threads, so it shows what the devices cost, not how soon they
finish: for that, `--clock wall` on a machine with a free core per device. Its lane use counts
the lanes of every device.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import platform
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import programs  # noqa: E402
import suite_programs  # noqa: E402

import abir  # noqa: E402

HEAVY_MAX_DEPTH = 10
"""The heavy-tailed sampler's depth cap (NUTS's default tree depth): its members cost 1 to
2**10 draws, half of them 1, 6 on average."""


def heavy_tail(key):
    """Flip coins until tails (depth: geometric), then draw 2**depth uniforms by rejection (each
    kept when below 0.5); returns (depth, uniforms kept)."""
    depth = 0
    while abir.random.uniform(key, depth) < 0.5 and depth < HEAVY_MAX_DEPTH:
        depth = depth + 1
    draws = 1
    i = 0
    while i < depth:
        draws = draws * 2
        i = i + 1
    kept = 0
    j = 0
    while j < draws:
        if abir.random.uniform(key, 100 + j) < 0.5:
            kept = kept + 1
        j = j + 1
    return depth, kept


@dataclasses.dataclass(frozen=True)
class Workload:
    """A per-member function and its inputs for N members."""

    name: str
    function: Callable[..., Any]
    make_inputs: Callable[[int], tuple[np.ndarray, ...]]


def _collatz_inputs(size: int) -> tuple[np.ndarray, ...]:
    return (np.arange(1, size + 1, dtype=np.int64),)


def _heavy_inputs(size: int) -> tuple[np.ndarray, ...]:
    return (abir.random.fold_in(abir.random.key(7), np.arange(size)),)


def _ode_inputs(size: int) -> tuple[np.ndarray, ...]:
    return suite_programs.SUITE["ode-rk23"].make_inputs(size, True)


WORKLOADS = {
    "collatz": Workload("collatz", programs.collatz, _collatz_inputs),
    "heavy-tail": Workload("heavy-tail", heavy_tail, _heavy_inputs),
    "ode-rk23": Workload("ode-rk23", suite_programs.ode_steps, _ode_inputs),
}
SIZES = {"collatz": 65_536, "heavy-tail": 65_536, "ode-rk23": 8_192}
QUICK_SIZES = {"collatz": 4_096, "heavy-tail": 2_048, "ode-rk23": 1_024}


def make_backend(name: str, collect_stats: bool = False) -> Any:
    """The backend named `name` (jax, numpy, tf-xla), counting its runs' steps with `collect_stats`."""
    options = {"collect_stats": True} if collect_stats else {}
    if name == "jax":
        return abir.JaxBackend(**options)
    if name == "numpy":
        return abir.NumpyBackend(**options)
    if name == "tf-xla":
        return abir.TensorFlowBackend(jit_compile=True, **options)
    raise ValueError(f"unknown backend {name!r}: choose among jax, numpy, tf-xla")


def as_tuple(result: Any) -> tuple[np.ndarray, ...]:
    return suite_programs.as_tuple(result)


def python_run(workload: Workload, inputs: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The reference: the per-member function on every member in a Python loop."""
    rows = [as_tuple(workload.function(*(x[b] for x in inputs))) for b in range(len(inputs[0]))]
    return tuple(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0])))


DEVICES_WAY = "lanes, devices"
"""The way that runs `lanes=L` on the inputs sharded over `--devices` devices."""


def run_way(
    batched: Any, way: str, inputs: tuple[np.ndarray, ...], lanes: int, backend: Any, devices: int = 1
) -> tuple[np.ndarray, ...]:
    """The results of all members run `way`: fixed batches of `lanes`, one batch, `lanes=`, or
    `lanes=` on the inputs sharded over `devices` devices."""
    if way == "one batch":
        return as_tuple(batched(*inputs, backend=backend))
    if way == "lanes":
        return as_tuple(batched(*inputs, backend=backend, lanes=lanes))
    if way == DEVICES_WAY:
        return as_tuple(batched(*sharded(inputs, devices), backend=backend, lanes=lanes))
    count = len(inputs[0])
    parts = [as_tuple(batched(*(x[i : i + lanes] for x in inputs), backend=backend)) for i in range(0, count, lanes)]
    return tuple(np.concatenate([part[k] for part in parts]) for k in range(len(parts[0])))


def sharded(inputs: tuple[np.ndarray, ...], devices: int) -> list[Any]:
    """`inputs` with a row per member put on `devices` devices split along the batch axis (the
    others, shared by every member, as they are)."""
    import jax

    mesh = jax.make_mesh((devices,), ("batch",))
    split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
    count = len(inputs[0])
    with jax.enable_x64(True):
        return [jax.device_put(x, split) if x.shape[:1] == (count,) and count % devices == 0 else x for x in inputs]


class StatsCollector:
    """Sums the `RunStats` of every run of the wrapped backend (`Backend.last_stats` after each).
    A lock holds each run with its read of `last_stats`: the threads of several devices' runs
    take turns (so only the counts of such a run are meaningful, not its time)."""

    def __init__(self, backend: Any):
        self.backend = backend
        self.used = 0
        self.slots = 0
        run = backend.run
        lock = threading.Lock()

        def counted(kernels: Sequence[Any], *args: Any, **kwargs: Any) -> Any:
            with lock:
                state = run(kernels, *args, **kwargs)
                stats = backend.last_stats
            if stats is not None:
                program_blocks = len(kernels) - int(bool(getattr(kernels[-1], "refills_lanes", False)))
                self.used += sum(stats.block_members[:program_blocks])
                self.slots += sum(stats.block_steps[:program_blocks]) * stats.batch_size
            return state

        backend.run = counted

    @property
    def lane_use(self) -> float | None:
        return self.used / self.slots if self.slots else None


def lane_use(
    workload: Workload, backend_name: str, way: str, inputs: tuple[np.ndarray, ...], lanes: int, devices: int = 1
) -> float | None:
    """The lane use of the program's blocks in one run `way` (None if the backend collects none)."""
    try:
        backend = make_backend(backend_name, collect_stats=True)
    except (TypeError, ValueError):
        return None
    collector = StatsCollector(backend)
    batched = abir.Context().batch_uncurried(workload.function)
    run_way(batched, way, inputs, lanes, backend, devices)
    return collector.lane_use


def timed(call: Callable[[], Any], repeats: int, clock: Callable[[], float]) -> float:
    """The best of `repeats` timed calls (after the first, which compiles)."""
    call()
    times = []
    for _ in range(repeats):
        start = clock()
        call()
        times.append(clock() - start)
    return min(times)


@dataclasses.dataclass
class Row:
    workload: str
    backend: str
    lanes: int
    way: str
    seconds: float | None
    members: int
    use: float | None
    error: str | None = None
    devices: int = 1


def measure(
    workload: Workload,
    size: int,
    backend_name: str,
    lanes_list: Sequence[int],
    repeats: int,
    clock: Callable[[], float],
    devices: int = 1,
) -> list[Row]:
    inputs = workload.make_inputs(size)
    want = python_run(workload, inputs)
    rows = []
    for lanes in lanes_list:
        ways = ("fixed", "one batch", "lanes") if lanes == lanes_list[0] else ("fixed", "lanes")
        if devices > 1 and backend_name == "jax":
            ways += (DEVICES_WAY,)
        for way in ways:
            print(f"  {workload.name} {backend_name} L={lanes} {way}", file=sys.stderr, flush=True)
            backend = make_backend(backend_name)
            batched = abir.Context().batch_uncurried(workload.function)
            run = functools.partial(run_way, batched, way, inputs, lanes, backend, devices)
            on = devices if way == DEVICES_WAY else 1
            try:
                got = run()
                suite_programs.assert_equal(got, want, f"{workload.name} {way} L={lanes} on {backend_name}")
                seconds = timed(run, repeats, clock)
                use = lane_use(workload, backend_name, way, inputs, lanes, devices)
            except Exception as error:  # kept in the table, the other rows still run
                traceback.print_exc()
                rows.append(Row(workload.name, backend_name, lanes, way, None, size, None, f"{type(error).__name__}", on))
                continue
            rows.append(Row(workload.name, backend_name, lanes, way, seconds, size, use, None, on))
    return rows


def table(rows: Sequence[Row]) -> str:
    """One Markdown table: members/s and lane use per way, and lanes= over fixed batches."""
    fixed = {(r.workload, r.backend, r.lanes): r.seconds for r in rows if r.way == "fixed"}
    one_device = {(r.workload, r.backend, r.lanes): r.seconds for r in rows if r.way == "lanes"}
    with_devices = any(r.way == DEVICES_WAY for r in rows)
    lines = [
        "| workload | backend | L | way | members/s | lane use | lanes= vs fixed |" + (" vs 1 device |" if with_devices else ""),
        "|---|---|---:|---|---:|---:|---:|" + ("---:|" if with_devices else ""),
    ]
    for r in rows:
        rate = "FAILED" if r.seconds is None else f"{r.members / r.seconds:,.0f}"
        use = "-" if r.use is None else f"{r.use:.0%}"
        base = fixed.get((r.workload, r.backend, r.lanes))
        ratio = f"{base / r.seconds:.2f}x" if r.way in ("lanes", DEVICES_WAY) and r.seconds and base else ""
        label = {"one batch": "one batch of all", DEVICES_WAY: f"lanes, {r.devices} devices"}.get(r.way, r.way)
        line = f"| {r.workload} | {r.backend} | {r.lanes if r.way != 'one batch' else r.members} | {label} | {rate} | {use} | {ratio} |"
        if with_devices:
            single = one_device.get((r.workload, r.backend, r.lanes))
            line += f" {single / r.seconds:.2f}x |" if r.way == DEVICES_WAY and r.seconds and single else " |"
        lines.append(line)
    return "\n".join(lines)


def enough_devices(devices: int) -> bool:
    """Whether JAX has at least `devices` devices (else the bench runs again in a fresh process
    that asks XLA for that many host devices)."""
    if devices <= 1:
        return True
    import jax

    return len(jax.devices()) >= devices


def run_with_devices(argv: Sequence[str], devices: int) -> int:
    """This bench run again with `argv` in a fresh process whose XLA makes `devices` host devices
    (XLA reads the flag once, when JAX starts); its exit code."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    env = {**os.environ, "XLA_FLAGS": flags}
    return subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv], env=env).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lanes", default="64,1024,4096", help="comma-separated lane counts L")
    parser.add_argument("--backends", default="jax,numpy,tf-xla", help="comma-separated: jax, numpy, tf-xla")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated: " + ", ".join(WORKLOADS))
    parser.add_argument("--size", type=int, default=None, help="members per workload (default: each workload's own)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--quick", action="store_true", help="small sizes, L = 64,256, one repeat")
    parser.add_argument("--devices", type=int, default=1, help="also run lanes= over this many host devices (JAX)")
    args = parser.parse_args(argv)
    if not enough_devices(args.devices):
        return run_with_devices(sys.argv[1:] if argv is None else list(argv), args.devices)
    lanes_list = [64, 256] if args.quick and args.lanes == parser.get_default("lanes") else [int(x) for x in args.lanes.split(",")]
    repeats = 1 if args.quick else args.repeats
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    rows = []
    for name in args.workloads.split(","):
        workload = WORKLOADS[name]
        size = args.size or (QUICK_SIZES if args.quick else SIZES)[name]
        for backend_name in args.backends.split(","):
            rows.extend(measure(workload, size, backend_name, lanes_list, repeats, clock, args.devices))
    print(f"\n{args.clock} time, best of {repeats}; {platform.processor() or platform.machine()}; abir lanes bench\n")
    print(table(rows))
    return 1 if any(r.seconds is None for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
