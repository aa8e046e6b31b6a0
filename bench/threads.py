"""The spread of abir's JAX calls over fresh processes, and where each call's CPU time goes among
XLA's threads, with and without per-executable compiler options for abir's loops.

    PYTHONPATH=.bench-site .venv/bin/python bench/threads.py --processes 4 \\
        --programs newton-cbrt,collatz,fib-lt,edit-distance,wide-128,nuts-d10 --sizes 64,1024 \\
        --variant default='{}' --variant no-eigen='{"xla_cpu_multi_thread_eigen": false}'

Each variant runs in `--processes` fresh processes, the variants alternating (A, B, A, B, ...), so
that processes of every variant meet the same moments of a machine others load. A process runs
every program at every batch size: the first call (trace, compile, run) timed in wall and CPU
time, calls until abir's background compilations (threads named `abir-*`) have finished and at
least `--settle` seconds passed, then calls for `--seconds` seconds: the median wall time per
call, and the CPU time per call of the whole process and of each thread (`/proc/self/task/*/
schedstat`), grouped as the calling thread ("main"), XLA's intra-op pool (threads named
`tf_XLAEigen`: parallel kernels, and thunks the runtime runs concurrently) and the rest (the
CPU client's dispatch pool, which runs an executable when it is not trivially cheap). "threads"
counts the threads that ran at least a tenth of the calls' CPU time.

A variant's options (a JSON object of XLA debug options) are merged into the options abir
compiles its standalone loops with (`abir.backends.jax.one_kernel.LOOP_COMPILER_OPTIONS` and
`ONE_KERNEL_COMPILER_OPTIONS`) in that variant's processes only. The table gives, per program, batch size and variant, the
minimum, median and maximum over the processes: on a loaded machine wall times say little and
CPU times are the comparison (docs/performance.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

NUTS_STEPS = 20  # transitions per chain: bench/suite.py's --nuts-steps default
INTRA_OP_THREAD = "tf_XLAEigen"
BUSY_SHARE = 0.1
"""A thread counts as used by the calls when it ran at least this share of their CPU time."""


@dataclasses.dataclass
class Measurement:
    """One program at one batch size in one process (times in seconds; CPU times per call)."""

    program: str
    size: int
    variant: str
    first_wall: float
    first_cpu: float
    wall: float
    cpu: float
    main: float
    intra_op: float
    other: float
    threads: int
    calls: int


def thread_times() -> dict[int, tuple[str, int]]:
    """Each thread of this process: its name and the nanoseconds it has run."""
    times = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ran = int(f.read().split()[0])
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:  # the thread ended
            continue
        times[int(tid)] = (name, ran)
    return times


def background_compiling() -> bool:
    """Whether one of abir's background compilations is running."""
    return any(thread.name.startswith("abir-") for thread in threading.enumerate())


def measure(call: Callable[[], Any], settle: float, seconds: float) -> dict[str, float]:
    """Calls `call` until abir's background compilations end and `settle` seconds passed, then
    for `seconds`: the median wall time per call and the CPU time per call by thread group."""
    import jax

    until = time.perf_counter() + settle
    while time.perf_counter() < until or background_compiling():
        jax.block_until_ready(call())
    before, cpu_before = thread_times(), time.process_time()
    walls: list[float] = []
    until = time.perf_counter() + seconds
    while time.perf_counter() < until or len(walls) < 3:
        start = time.perf_counter()
        jax.block_until_ready(call())
        walls.append(time.perf_counter() - start)
    cpu, after = time.process_time() - cpu_before, thread_times()
    calls = len(walls)
    groups = {"main": 0.0, "intra_op": 0.0, "other": 0.0}
    ran = []
    for tid, (name, total) in after.items():
        spent = (total - before.get(tid, (name, 0))[1]) * 1e-9
        ran.append(spent)
        group = "main" if tid == os.getpid() else "intra_op" if name == INTRA_OP_THREAD else "other"
        groups[group] += spent / calls
    busy = sum(spent >= BUSY_SHARE * sum(ran) for spent in ran)
    return {"wall": statistics.median(walls), "cpu": cpu / calls, "threads": busy, "calls": calls, **groups}


def program_call(name: str, size: int) -> Callable[[], Any]:
    """A fresh abir function of the named program (a suite program or one of bench/suite.py's
    Gaussian NUTS targets) on a fresh `JaxBackend`, as a call of no arguments."""
    import suite

    import abir

    backend = abir.JaxBackend()
    if name in suite.NUTS_TARGETS:
        ex = suite.ex
        (dim, depth), eps = suite.NUTS_TARGETS[name], suite.NUTS_STEP_SIZE[name]
        precision, _ = ex.correlated_precision(dim)
        sampler = ex.make_nuts(precision, depth)
        q0, keys = ex.initial_positions(1, size, dim), ex.chain_keys(1, size)
        run, stack = ex.batch(sampler), ex.stack_depth(sampler)
        return lambda: run(q0, eps, keys, np.int64(NUTS_STEPS), backend=backend, max_stack_depth=stack)
    import suite_programs as sp

    program = sp.SUITE[name]
    inputs = program.make_inputs(size, False)
    run = sp.abir_function(program)
    return lambda: run(*inputs, backend=backend, max_stack_depth=program.max_stack_depth)


def child(args: argparse.Namespace) -> None:
    """One process of one variant: every program at every size, written to `args.json`."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from abir.backends.jax import one_kernel

    for options in (one_kernel.LOOP_COMPILER_OPTIONS, one_kernel.ONE_KERNEL_COMPILER_OPTIONS):
        options.update(json.loads(args.options))  # read by each loop's `JitWithOptions` when made
    out = []
    for name in args.programs.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            cpu, start = time.process_time(), time.perf_counter()
            call = program_call(name, size)
            jax.block_until_ready(call())
            first_wall, first_cpu = time.perf_counter() - start, time.process_time() - cpu
            steady = measure(call, args.settle, args.seconds)
            out.append(Measurement(name, size, args.variant, first_wall, first_cpu, **steady))  # type: ignore[arg-type]
            print(
                f"{args.variant} {name} B={size}: {steady['cpu'] * 1e6:.0f} us CPU per call",
                file=sys.stderr,
                flush=True,
            )
    Path(args.json).write_text(json.dumps([dataclasses.asdict(m) for m in out]))


def spread(values: list[float], scale: float, unit: str) -> str:
    """min / median / max of `values` in `unit`."""
    lo, mid, hi = min(values) * scale, statistics.median(values) * scale, max(values) * scale
    return f"{lo:.3g} / {mid:.3g} / {hi:.3g} {unit}"


def table(measurements: list[Measurement]) -> list[str]:
    """One Markdown row per program, batch size and variant, over its processes."""
    lines = [
        "| program | B | variant | processes | steady wall per call (min / median / max) | CPU per call | "
        "main / intra-op / other CPU (medians) | threads used | first call wall | first call CPU |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = dict.fromkeys((m.program, m.size, m.variant) for m in measurements)
    for program, size, variant in keys:
        same = [m for m in measurements if (m.program, m.size, m.variant) == (program, size, variant)]
        groups = " / ".join(
            f"{statistics.median(getattr(m, g) for m in same) * 1e6:.0f}"
            for g in ("main", "intra_op", "other")
        )
        threads = "-".join(
            str(n) for n in sorted({min(m.threads for m in same), max(m.threads for m in same)})
        )
        lines.append(
            f"| {program} | {size} | {variant} | {len(same)} | {spread([m.wall for m in same], 1e6, 'us')} | "
            f"{spread([m.cpu for m in same], 1e6, 'us')} | {groups} us | {threads} | "
            f"{spread([m.first_wall for m in same], 1, 's')} | {spread([m.first_cpu for m in same], 1, 's')} |"
        )
    return lines


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--programs", default="newton-cbrt,collatz,fib-lt,edit-distance,wide-128,nuts-d10")
    parser.add_argument("--sizes", default="64,1024")
    parser.add_argument("--processes", type=int, default=4, help="fresh processes per variant")
    parser.add_argument("--variant", action="append", default=None,
                        help="NAME=JSON: XLA options merged into abir's loop options (repeatable; default: default={})")  # fmt: skip
    parser.add_argument(
        "--settle", type=float, default=1.0, help="seconds of untimed calls before the timed ones"
    )
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="seconds of timed calls per program and size"
    )
    parser.add_argument(
        "--json-out", default=None, help="also write every process's measurements here (after each)"
    )
    parser.add_argument(
        "--table", default=None, help="only print the table of measurements a --json-out wrote"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--options", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--json", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--variant-name", dest="child_variant", default="default", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        args.variant = args.child_variant
        child(args)
        return 0
    if args.table:
        print("\n".join(table([Measurement(**m) for m in json.loads(Path(args.table).read_text())])))
        return 0
    variants = dict(v.split("=", 1) for v in (args.variant or ["default={}"]))
    print(
        f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; load average {os.getloadavg()}"
    )
    measurements: list[Measurement] = []
    failed = 0
    with tempfile.TemporaryDirectory() as directory:
        for k in range(args.processes):
            for name, options in variants.items():
                path = Path(directory) / f"{name}-{k}.json"
                print(f"process {k + 1} of {args.processes}, variant {name}", file=sys.stderr, flush=True)
                command = [sys.executable, __file__, "--child", "--variant-name", name, "--options", options,
                           "--programs", args.programs, "--sizes", args.sizes, "--settle", str(args.settle),
                           "--seconds", str(args.seconds), "--json", str(path)]  # fmt: skip
                finished = subprocess.run(command, check=False)
                if path.exists():
                    measurements += [Measurement(**m) for m in json.loads(path.read_text())]
                else:  # its error is above, on stderr; the table has one process fewer
                    failed += 1
                    print(f"process {k + 1}, variant {name}: FAILED (exit code {finished.returncode})")
                if args.json_out:  # after each process, so that a stopped run keeps what it measured
                    Path(args.json_out).write_text(json.dumps([dataclasses.asdict(m) for m in measurements]))
    print(f"load average after: {os.getloadavg()}")
    print("\n".join(table(measurements)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
