"""abir's benchmark suite of program shapes, each against the best alternative a user would pick.

    make bench-suite SUITE_ARGS="--quick"
    PYTHONPATH=.bench-site .venv/bin/python bench/suite.py --sizes 64,1024 --backends jax,numpy,tf

Each program of `bench/suite_programs.py` (and NUTS from `examples/nuts.py` on Gaussian targets)
runs on every selected abir backend ("tf" means both `TensorFlowBackend(jit_compile=True)`,
labelled tf-xla, and the default `TensorFlowBackend()`, labelled tf) and on its alternatives: the
plain Python loop over members, a hand-written `jax.jit(jax.vmap(...))` where the program has one,
TFP's `auto_batching` for Collatz when it is importable, and BlackJAX for NUTS. abir's result must
equal the per-member Python result before it is timed (NUTS: the first `NUTS_CHECKED` chains,
each chain's result being independent of the batch); a failure is printed and kept in the table
as FAILED. First call = a fresh compile (fresh `abir.Context`, fresh `jax.jit`) traced, compiled
and run; steady = median of `--repeats` later calls. The ratio is the best alternative's steady
time over abir's (above 1: abir is faster).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import importlib.util
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nuts as nuts_bench  # noqa: E402
import suite_programs as sp  # noqa: E402

import abir  # noqa: E402

ex = nuts_bench.ex
NUTS_CHECKED = 8
NUTS_TARGETS = {"nuts-d10": (10, 6), "nuts-d100": (100, 10)}  # dimension, depth cap
NUTS_STEP_SIZE = {"nuts-d10": 0.3, "nuts-d100": 0.1}


@dataclasses.dataclass
class Timing:
    """First call and steady seconds of one system; `error` set when it failed."""

    first: float = float("nan")
    steady: float = float("nan")
    error: str | None = None


@dataclasses.dataclass
class Row:
    program: str
    backend: str
    size: int
    abir: Timing
    alternative: str
    best: Timing


def abir_backends(names: list[str]) -> dict[str, Callable[[], abir.Backend]]:
    """Labelled factories of fresh abir backends for the `--backends` names."""
    factories: dict[str, Callable[[], abir.Backend]] = {}
    for name in names:
        if name == "numpy":
            factories["numpy"] = abir.NumpyBackend
        elif name == "jax":
            factories["jax"] = abir.JaxBackend
        elif name == "tf":
            factories["tf-xla"] = lambda: abir.TensorFlowBackend(jit_compile=True)
            factories["tf"] = abir.TensorFlowBackend
        else:
            raise SystemExit(f"unknown backend {name!r}: choose from jax, numpy, tf")
    return factories


def block(value: Any) -> Any:
    """`value` with every JAX array in it computed."""
    import jax

    return jax.block_until_ready(value)


def timed(make: Callable[[], Callable[[], Any]], repeats: int, check: Callable[[Any], None]) -> Timing:
    """First call of a freshly made callable (its compile included), `check` of its result, then the
    median of `repeats` further calls. An exception becomes `Timing.error`."""
    try:
        start = time.perf_counter()
        call = make()
        result = block(call())
        first = time.perf_counter() - start
        check(result)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            block(call())
            times.append(time.perf_counter() - start)
        return Timing(first, statistics.median(times) if times else first)
    except Exception as error:  # noqa: BLE001 (a failing system is reported in the table, not fatal)
        traceback.print_exc()
        return Timing(error=f"{type(error).__name__}: {str(error).splitlines()[0][:100]}")


def python_timing(run: Callable[[], Any], repeats: int) -> Timing:
    """The plain Python loop: its first run is its first call; steady = median of up to `repeats`
    runs (one when a run takes over 2 s)."""
    start = time.perf_counter()
    run()
    first = time.perf_counter() - start
    times = [first]
    while len(times) < repeats and first < 2.0:
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return Timing(first, statistics.median(times))


def best_of(alternatives: dict[str, Timing]) -> tuple[str, Timing]:
    ok = {name: t for name, t in alternatives.items() if t.error is None}
    if not ok:
        return "none", Timing(error="no alternative ran")
    name = min(ok, key=lambda n: ok[n].steady)
    return name, ok[name]


def tfp_collatz(inputs: tuple[np.ndarray, ...]) -> Callable[[], Any] | None:
    """TFP's auto_batching Collatz under tf.function(jit_compile=True), or None without TFP."""
    if importlib.util.find_spec("tensorflow_probability") is None:
        return None
    import programs
    import tfp_programs

    depth = programs.MAX_STACK_DEPTH["collatz"]
    run = tfp_programs.runner("collatz", "tfp-tf-xla", depth)
    return lambda: run(inputs[0])


def program_alternatives(program: sp.SuiteProgram, inputs: tuple[np.ndarray, ...],
                         want: tuple[np.ndarray, ...], repeats: int) -> dict[str, Timing]:  # fmt: skip
    """The alternatives' timings: plain Python, hand-written jit(vmap), TFP (Collatz only)."""
    results = {"python": python_timing(lambda: sp.python_run(program, inputs), repeats)}

    def check(label: str) -> Callable[[Any], None]:
        return lambda got: sp.assert_equal(sp.as_tuple(got), want, label)

    if program.jax_vmap is not None:
        jax_vmap = program.jax_vmap
        results["jax-vmap"] = timed(lambda: (lambda f: lambda: f(*inputs))(jax_vmap()), repeats,
                                    check(f"{program.name} jax-vmap"))  # fmt: skip
    if program.name == "collatz" and tfp_collatz(inputs) is not None:
        results["tfp-xla"] = timed(lambda: tfp_collatz(inputs), repeats, check("collatz tfp"))
    return results


def program_rows(program: sp.SuiteProgram, size: int, backends: dict[str, Callable[[], abir.Backend]],
                 repeats: int, small: bool) -> list[Row]:  # fmt: skip
    inputs = program.make_inputs(size, small)
    want = sp.python_run(program, inputs)
    alternative, best = best_of(program_alternatives(program, inputs, want, repeats))
    rows = []
    for label, factory in backends.items():

        def make(factory: Callable[[], abir.Backend] = factory) -> Callable[[], Any]:
            run, backend = sp.abir_function(program), factory()
            return lambda: run(*inputs, backend=backend, max_stack_depth=program.max_stack_depth)

        check = lambda got, label=label: sp.assert_equal(sp.as_tuple(got), want, f"{program.name} on {label}")  # noqa: E731
        rows.append(Row(program.name, label, size, timed(make, repeats, check), alternative, best))
        print_row(rows[-1])
    return rows


def nuts_rows(name: str, size: int, backends: dict[str, Callable[[], abir.Backend]], steps: int,
              repeats: int) -> list[Row]:  # fmt: skip
    """NUTS on a D-dimensional correlated Gaussian against BlackJAX (same step size, transitions and
    depth cap); abir checked against the per-chain Python run of the first `NUTS_CHECKED` chains."""
    dim, depth = NUTS_TARGETS[name]
    precision, _ = ex.correlated_precision(dim)
    eps = NUTS_STEP_SIZE[name]
    sampler = ex.make_nuts(precision, depth)
    q0, keys = ex.initial_positions(1, size, dim), ex.chain_keys(1, size)
    checked = min(size, NUTS_CHECKED)
    want = ex.run_per_chain(sampler, q0[:checked], eps, keys[:checked], steps)

    def blackjax() -> Callable[[], Any]:
        import jax

        run = nuts_bench.make_blackjax(precision, eps, depth, steps)
        jax_keys = jax.random.split(jax.random.key(1), size)
        return lambda: run(q0, jax_keys)

    def check_blackjax(got: Any) -> None:
        nuts_bench.check_blackjax(nuts_bench.BlackjaxChain(*(np.asarray(x) for x in got)), depth)

    best = timed(blackjax, repeats, check_blackjax)
    rows = []
    for label, factory in backends.items():

        def make(factory: Callable[[], abir.Backend] = factory) -> Callable[[], Any]:
            run, backend = ex.batch(sampler), factory()
            return lambda: run(q0, eps, keys, np.int64(steps), backend=backend,
                               max_stack_depth=ex.stack_depth(sampler))  # fmt: skip

        def check(got: Any) -> None:
            chain = ex.as_chain(got)
            ex.compare(ex.Chain(*(np.asarray(x)[:checked] for x in chain)), want)

        rows.append(Row(name, label, size, timed(make, repeats, check), "blackjax", best))
        print_row(rows[-1])
    return rows


def seconds(value: float) -> str:
    if value != value:
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.1f}us"
    if value < 1:
        return f"{value * 1e3:.2f}ms"
    return f"{value:.2f}s"


def ratio(row: Row) -> str:
    if row.abir.error is not None:
        return "FAILED"
    if row.best.error is not None:
        return "-"
    return f"{row.best.steady / row.abir.steady:.3g}x"


HEADER = f"{'program':14} {'backend':7} {'B':>5} {'abir':>9} {'alternative':11} {'its time':>9} {'ratio':>8} {'abir 1st':>9} {'alt 1st':>9}"


def print_row(row: Row) -> None:
    print(
        f"{row.program:14} {row.backend:7} {row.size:5d} {seconds(row.abir.steady):>9} {row.alternative:11} "
        f"{seconds(row.best.steady):>9} {ratio(row):>8} {seconds(row.abir.first):>9} {seconds(row.best.first):>9}",
        flush=True,
    )


def _installed_version(package: str) -> str:
    """The installed version of `package`, under its CPU-only distribution name too
    (`tensorflow-cpu`), or "absent"."""
    for distribution in (package, f"{package}-cpu"):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "absent"


def header_lines(argv: list[str]) -> list[str]:
    """Command line, date, CPU model and library versions."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())  # fmt: skip
    versions = []
    for package in ("numpy", "jax", "tensorflow", "tensorflow-probability", "blackjax", "xdsl"):
        versions.append(f"{package} {_installed_version(package)}")
    return [
        "command: python bench/suite.py " + " ".join(argv),
        f"date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M UTC}",
        f"cpu: {cpu}",
        "versions: " + ", ".join(versions),
    ]


def draw_figure(rows: list[Row], path: str) -> None:
    """Ratio (best alternative / abir, log scale) per program and batch size, one panel per backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = list(dict.fromkeys(r.backend for r in rows))
    programs = list(dict.fromkeys(r.program for r in rows))
    sizes = sorted({r.size for r in rows})
    figure, axes = plt.subplots(len(backends), 1, figsize=(10, 3 * len(backends)), squeeze=False)
    width = 0.8 / len(sizes)
    for axis, backend in zip(axes[:, 0], backends, strict=True):
        for k, size in enumerate(sizes):
            cell = {r.program: r for r in rows if r.backend == backend and r.size == size}
            values = [cell[p].best.steady / cell[p].abir.steady if p in cell and cell[p].abir.error is None
                      else np.nan for p in programs]  # fmt: skip
            axis.bar(np.arange(len(programs)) + k * width, values, width, label=f"B={size}")
        axis.axhline(1.0, color="black", linewidth=0.8)
        axis.set_yscale("log")
        axis.set_title(f"abir on {backend}: best alternative's time / abir's (above 1: abir faster)")
        axis.set_xticks(np.arange(len(programs)) + 0.4 - width / 2, programs, rotation=30, ha="right")
        axis.legend()
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    print(f"figure: {path}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    names = [*sp.SUITE, *NUTS_TARGETS]
    parser.add_argument("--sizes", default=None, help="comma-separated batch sizes (default 64,1024; 8,32 with --quick)")
    parser.add_argument("--backends", default="jax,numpy,tf", help="comma-separated, of jax,numpy,tf")
    parser.add_argument("--programs", default=",".join(names), help=f"comma-separated, of {','.join(names)}")
    parser.add_argument("--repeats", type=int, default=5, help="steady calls per measurement (median)")
    parser.add_argument("--nuts-steps", type=int, default=20, help="NUTS transitions per chain")
    parser.add_argument("--quick", action="store_true", help="sizes 8,32, 1 repeat, small inputs, 3 NUTS steps")
    parser.add_argument("--figure", default="docs/bench_suite.png", help="where to save the ratio figure")
    args = parser.parse_args(argv)
    unknown = set(args.programs.split(",")) - set(names)
    if unknown:
        parser.error(f"unknown programs {sorted(unknown)}; choose from {names}")
    if args.quick:
        args.repeats, args.nuts_steps = 1, 3
    args.sizes = args.sizes or ("8,32" if args.quick else "64,1024")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)  # the alternatives compute in float64, as abir does
    print("\n".join(header_lines(argv)))
    backends = abir_backends(args.backends.split(","))
    print(HEADER)
    rows: list[Row] = []
    for name in args.programs.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            if name in NUTS_TARGETS:
                rows += nuts_rows(name, size, backends, args.nuts_steps, args.repeats)
            else:
                rows += program_rows(sp.SUITE[name], size, backends, args.repeats, args.quick)
    print("\nsummary (steady = median of later calls; ratio = best alternative / abir)")
    print(HEADER)
    for row in rows:
        print_row(row)
    failures = [r for r in rows if r.abir.error is not None]
    for row in failures:
        print(f"FAILED {row.program} on {row.backend} B={row.size}: {row.abir.error}")
    draw_figure(rows, args.figure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
