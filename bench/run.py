"""abir benchmarks: recursive fibonacci and Collatz step counts over batch sizes and backends.

    .venv/bin/python bench/run.py --quick
    .venv/bin/python bench/run.py --sizes 64,1024 --backends numpy,jax --repeats 7

Every (program, backend, batch size) is timed in one process: the first call (compilation of
the program and, on JAX/TF, tracing and XLA compilation) separately from the steady state (the
median of `--repeats` further calls on the same inputs, more for a program that runs in well under
a millisecond: at least `STEADY_SECONDS` of calls). The steady-state table gives each time
and its ratio to the plain Python loop over members measured in the same run. If
`tensorflow_probability` is importable, TFP's `auto_batching` runs the same programs too
(its NumPy VM, and its TF VM under `tf.function(jit_compile=True)`).

Two tables divide steady time by machine steps. "per machine step" divides by the block runs the
NumPy backend counts. "JAX per step against the XLA floor" (when the jax backend ran) divides
abir's JAX (sweep) steady time by its block runs and by its sweeps, counted by one extra untimed
call with `collect_stats=True`, and sets the first against the floor measured in the same run
(`bench/xla_floor.py`): a jitted `lax.while_loop` at the same batch size whose min-PC
`lax.switch` over as many branches as the program has blocks does one masked update per branch,
i.e. a machine step that adds nothing. "empty" is a `while_loop` iteration doing only `x + 1.0`.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import programs  # noqa: E402
import xla_floor  # noqa: E402

ABIR_BACKENDS = ("numpy", "jax", "jax-switch", "tf", "tf-xla")
TFP_BACKENDS = ("tfp-numpy", "tfp-tf-xla")
BASELINE = "python"
STEADY_SECONDS = 0.25
MAX_REPEATS = 1000


@dataclass
class Measurement:
    program: str
    backend: str
    size: int
    first_call: float
    steady: float


def abir_backend(name: str) -> Any:
    """A fresh abir backend instance for a backend name."""
    import abir

    if name == "numpy":
        return abir.NumpyBackend()
    if name in ("jax", "jax-switch"):
        return abir.JaxBackend(execution="switch" if name == "jax-switch" else "sweep")
    return abir.TensorFlowBackend(jit_compile=name == "tf-xla")


def to_numpy(value: Any) -> np.ndarray:
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


def make_runner(program: str, backend: str) -> Callable[[np.ndarray], Any]:
    """A callable on the inputs for one (program, backend), with fresh compile caches."""
    if backend == BASELINE:
        return programs.python_loop(program)
    depth = programs.MAX_STACK_DEPTH[program]
    if backend in TFP_BACKENDS:
        import tfp_programs

        return tfp_programs.runner(program, backend, depth)
    batched = programs.batched(program)
    instance = abir_backend(backend)
    return lambda x: to_numpy(batched(x, backend=instance, max_stack_depth=depth))


def measure(program: str, backend: str, size: int, repeats: int, budget: float) -> Measurement:
    """First-call time, then the median of `repeats` steady-state calls, or of as many as fill
    `STEADY_SECONDS` when more (a single one when the
    first call alone took more than `budget` seconds); checks the results."""
    x = programs.inputs(program, size)
    expected = programs.python_loop(program)(x)
    run = make_runner(program, backend)
    start = time.perf_counter()
    result = to_numpy(run(x))
    first = time.perf_counter() - start
    np.testing.assert_array_equal(result.astype(np.int64), expected, err_msg=f"{program} on {backend}")
    times: list[float] = []
    # a run of well under a millisecond is repeated for at least STEADY_SECONDS (the median of a
    # few such runs moves by 20% with the machine's noise)
    while len(times) < (repeats if first <= budget else 1) or (
        sum(times) < STEADY_SECONDS and len(times) < MAX_REPEATS
    ):
        start = time.perf_counter()
        to_numpy(run(x))
        times.append(time.perf_counter() - start)
    return Measurement(program, backend, size, first, statistics.median(times))


def machine_steps(program: str, size: int) -> tuple[int, int]:
    """(steps, ideal steps) of one run of `program` at batch `size`, counted by the NumPy
    backend (every abir backend runs the same schedule, so the count holds for all of them)."""
    import abir

    backend = abir.NumpyBackend()
    programs.batched(program)(programs.inputs(program, size), backend=backend,
                              max_stack_depth=programs.MAX_STACK_DEPTH[program])  # fmt: skip
    stats = backend.last_stats
    return (stats.steps, stats.ideal_steps) if stats is not None else (0, 0)


def print_step_costs(rows: list[Measurement]) -> None:
    """Steady-state time per machine step (the machine's own overhead per block executed)."""
    backends = [b for b in dict.fromkeys(m.backend for m in rows) if b in ABIR_BACKENDS]
    keys = list(dict.fromkeys((m.program, m.size) for m in rows))
    cell = {(m.program, m.size, m.backend): m for m in rows}
    print("\nper machine step (steady time / steps)")
    print(f"{'program':8} {'batch':>6} {'steps':>7} {'ideal':>7} " + " ".join(f"{b:>12}" for b in backends))
    for program, size in keys:
        steps, ideal = machine_steps(program, size)
        cells = []
        for backend in backends:
            m = cell.get((program, size, backend))
            cells.append(
                f"{'-':>12}" if m is None or not steps else f"{format_seconds(m.steady / steps):>12}"
            )
        print(f"{program:8} {size:6d} {steps:7d} {ideal:7d} " + " ".join(cells))


def jax_sweep_stats(program: str, size: int) -> Any:
    """The `abir.RunStats` of one untimed run of `program` at batch `size` on the JAX sweep
    backend with `collect_stats=True` (block runs, sweeps, blocks in the compiled program)."""
    import abir

    backend = abir.JaxBackend(collect_stats=True)
    programs.batched(program)(programs.inputs(program, size), backend=backend,
                              max_stack_depth=programs.MAX_STACK_DEPTH[program])  # fmt: skip
    if backend.last_stats is None:
        raise RuntimeError(f"JaxBackend(collect_stats=True) recorded no stats for {program}")
    return backend.last_stats


def print_floor_costs(rows: list[Measurement]) -> None:
    """abir's JAX (sweep) steady time per block run and per sweep against the XLA floor: the
    time of one min-PC `lax.switch` step doing one masked update, at the same batch size and
    number of blocks (`xla_floor.floor_us_per_step`, cached per shape)."""
    jax_rows = [m for m in rows if m.backend == "jax"]
    if not jax_rows:
        return
    print("\nJAX per step against the XLA floor (us; x floor = us per block run / floor)")
    print(
        f"{'program':8} {'batch':>6} {'blocks':>6} {'runs':>7} {'sweeps':>7} {'us/run':>9} "
        f"{'us/sweep':>9} {'floor':>8} {'empty':>8} {'x floor':>8}"
    )
    for m in jax_rows:
        stats = jax_sweep_stats(m.program, m.size)
        blocks, runs, sweeps = len(stats.block_steps), stats.steps, stats.sweeps or 0
        floor = xla_floor.floor_us_per_step(m.size, blocks)
        empty = xla_floor.empty_loop_us(m.size)
        per_run = m.steady * 1e6 / runs if runs else float("nan")
        per_sweep = m.steady * 1e6 / sweeps if sweeps else float("nan")
        print(
            f"{m.program:8} {m.size:6d} {blocks:6d} {runs:7d} {sweeps:7d} {per_run:9.2f} "
            f"{per_sweep:9.2f} {floor:8.3f} {empty:8.3f} {per_run / floor:8.1f}"
        )


def format_seconds(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:8.1f}us"
    if seconds < 1:
        return f"{seconds * 1e3:8.2f}ms"
    return f"{seconds:8.2f}s "


def print_table(
    title: str, rows: list[Measurement], value: Callable[[Measurement], float], ratios: bool
) -> None:
    """One row per (program, size), one column per backend; optionally `xN` vs the Python loop."""
    backends = list(dict.fromkeys(m.backend for m in rows))
    keys = list(dict.fromkeys((m.program, m.size) for m in rows))
    cell = {(m.program, m.size, m.backend): m for m in rows}
    width = 22 if ratios else 12
    print(f"\n{title}")
    print(f"{'program':8} {'batch':>6} " + " ".join(f"{b:>{width}}" for b in backends))
    for program, size in keys:
        cells = []
        base = cell.get((program, size, BASELINE))
        for backend in backends:
            m = cell.get((program, size, backend))
            if m is None:
                cells.append(f"{'-':>{width}}")
                continue
            text = format_seconds(value(m))
            if ratios and base is not None and backend != BASELINE:
                text += f" ({base.steady / m.steady:7.2f}x)"
            cells.append(f"{text:>{width}}")
        print(f"{program:8} {size:6d} " + " ".join(cells))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1,64,1024,4096", help="comma-separated batch sizes")
    parser.add_argument(
        "--backends", default=",".join(ABIR_BACKENDS), help=f"comma-separated, of {ABIR_BACKENDS}"
    )
    parser.add_argument("--programs", default="fib,collatz", help="comma-separated, of fib,collatz")
    parser.add_argument("--repeats", type=int, default=5, help="steady-state calls per measurement (median)")
    parser.add_argument("--quick", action="store_true", help="sizes 1,64 and 3 repeats (smoke run)")
    parser.add_argument("--no-tfp", action="store_true", help="skip TFP even if it is importable")
    parser.add_argument(
        "--budget",
        type=float,
        default=30.0,
        help="seconds: a backend whose first call takes longer is timed once, and skipped at larger batches",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats = "1,64", 3
    return args


def selected_backends(args: argparse.Namespace) -> list[str]:
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(backends) - set(ABIR_BACKENDS)
    if unknown:
        raise SystemExit(f"unknown backends {sorted(unknown)}; choose from {ABIR_BACKENDS}")
    tfp = not args.no_tfp and importlib.util.find_spec("tensorflow_probability") is not None
    if not tfp:
        print("tensorflow_probability is not importable (or --no-tfp): TFP comparison skipped")
    return [BASELINE, *backends, *(TFP_BACKENDS if tfp else ())]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = selected_backends(args)
    rows = []
    for program in args.programs.split(","):
        too_slow: set[str] = set()
        for size in sizes:
            for backend in backends:
                if backend in too_slow:
                    print(f"  {program} B={size} {backend}: skipped (a smaller batch already took > {args.budget:g}s)")
                    continue
                m = measure(program, backend, size, args.repeats, args.budget)
                print(
                    f"  {program} B={size} {backend}: first {format_seconds(m.first_call)}, steady {format_seconds(m.steady)}",
                    flush=True,
                )
                rows.append(m)
                if m.first_call > args.budget:
                    too_slow.add(backend)
    print_table(
        f"steady state (median of at least {args.repeats} calls, {STEADY_SECONDS} s for fast ones); (Nx) = speed-up over the Python loop",
        rows,
        lambda m: m.steady,
        True,
    )
    print_table("first call (compile + run)", rows, lambda m: m.first_call, False)
    print_reference_ratios(rows)
    print_step_costs(rows)
    print_floor_costs(rows)


def print_reference_ratios(rows: list[Measurement]) -> None:
    """abir against the reference's fastest mode measured in the same run (when TFP ran)."""
    cell = {(m.program, m.size, m.backend): m for m in rows}
    keys = list(dict.fromkeys((m.program, m.size) for m in rows))
    lines = []
    for program, size in keys:
        references = [cell[(program, size, b)] for b in TFP_BACKENDS if (program, size, b) in cell]
        if not references:
            continue
        best = min(references, key=lambda m: m.steady)
        for backend in ABIR_BACKENDS:
            if (m := cell.get((program, size, backend))) is not None:
                lines.append(
                    f"{program:8} {size:6d} abir {backend:7} {format_seconds(m.steady)} vs {best.backend} "
                    f"{format_seconds(best.steady)}: {best.steady / m.steady:7.2f}x faster"
                )
    if lines:
        print("\nabir vs the reference's fastest mode (steady state, same run)")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
