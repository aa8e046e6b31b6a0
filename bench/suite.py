"""abir's benchmark suite of program shapes, each against the best alternative a user would pick.

    make bench-suite SUITE_ARGS="--quick"
    PYTHONPATH=.bench-site .venv/bin/python bench/suite.py --sizes 64,1024 --backends jax,numpy,tf

Each program of `bench/suite_programs.py`, NUTS from `examples/nuts.py` on Gaussian targets and
`abir.samplers.nuts` on a Bayesian logistic regression runs on every selected abir backend,
constructed as a user would ("tf" means both `TensorFlowBackend(jit_compile=True)`, labelled
tf-xla, and the default `TensorFlowBackend()`, labelled tf). Each backend is set against the
alternatives a user of its framework would pick (`ALTERNATIVE_FAMILIES`): the plain Python loop
over members for all (NUTS beyond `PYTHON_NUTS_CHAINS` chains: that many chains' time scaled to
the batch, labelled python-scaled); on JAX a hand-written `jax.jit(jax.vmap(...))` where the program has one
and BlackJAX for NUTS; on TensorFlow TFP's `auto_batching` for Collatz and TFP's NUTS under
XLA. abir's result must equal the per-member Python result before it is timed (NUTS: the first
`NUTS_CHECKED` chains, each chain's result being independent of the batch); a failure is printed
and kept in the table as FAILED. First call = a fresh compile (fresh `abir.Context`, fresh
`jax.jit`/`tf.function`) traced, compiled and run; steady = median of `--repeats` later calls
(after `--settle` seconds of untimed calls, for background compilations to finish).
The ratio is the best alternative's steady time over abir's on that backend (above 1: abir is
faster). Progress goes to stderr; stdout ends with one Markdown table per backend.
`--processes N` runs the whole measurement in N fresh processes, one after another, and reports
the medians and each ratio's range over them: a process's XLA thread pool can make it slower.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import importlib.util
import json
import platform
import statistics
import subprocess
import sys
import tempfile
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
samplers_nuts = importlib.import_module("abir.samplers.nuts")  # the module; `abir.samplers.nuts` is its function
NUTS_CHECKED = 8
NUTS_TARGETS = {"nuts-d10": (10, 6), "nuts-d100": (100, 10)}  # dimension, depth cap
NUTS_STEP_SIZE = {"nuts-d10": 0.3, "nuts-d100": 0.1}
LOGREG = "nuts-logreg"
LOGREG_STEP_SIZE, LOGREG_DEPTH = 0.1, 8
PYTHON_NUTS_CHAINS = 64  # the most chains the per-chain Python NUTS runs; more are extrapolated
FAMILIES = ("jax", "numpy", "tf")
# The abir backends each alternative stands against (the plain Python loop against all).
ALTERNATIVE_FAMILIES = {"jax-vmap": {"jax"}, "blackjax": {"jax"}, "tfp-xla": {"tf"}, "tfp-nuts-xla": {"tf"}}


@dataclasses.dataclass
class Timing:
    """First call and steady seconds of one system; `error` set when it failed."""

    first: float = float("nan")
    steady: float = float("nan")
    error: str | None = None


@dataclasses.dataclass
class Row:
    """One table row: abir on `backend` at batch `size`, and the best alternative against that backend."""

    program: str
    backend: str
    size: int
    abir: Timing
    alternative: str
    best: Timing
    spread: str = ""  # the ratio's range over processes, with --processes


def family(label: str) -> str:
    """The framework of an abir backend label: tf-xla and tf are both "tf"."""
    return "tf" if label.startswith("tf") else label


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


SETTLE_SECONDS = 0.0
"""Seconds of untimed calls between a compiled callable's first call and its steady calls
(`--settle`, set once by `main`)."""


def timed(make: Callable[[], Callable[[], Any]], repeats: int, check: Callable[[Any], None]) -> Timing:
    """First call of a freshly made callable (its compile included), `check` of its result, calls
    for `SETTLE_SECONDS`, then the median of `repeats` further calls. An exception becomes
    `Timing.error`."""
    try:
        start = time.perf_counter()
        call = make()
        result = block(call())
        first = time.perf_counter() - start
        check(result)
        settled = time.perf_counter() + SETTLE_SECONDS
        while time.perf_counter() < settled:
            block(call())
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
    try:
        start = time.perf_counter()
        run()
        first = time.perf_counter() - start
    except Exception as error:  # noqa: BLE001 (reported in the table, not fatal)
        traceback.print_exc()
        return Timing(error=f"{type(error).__name__}: {str(error).splitlines()[0][:100]}")
    times = [first]
    while len(times) < repeats and first < 2.0:
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return Timing(first, statistics.median(times))


def best_of(alternatives: dict[str, Timing], label: str) -> tuple[str, Timing]:
    """The fastest alternative that ran, among those standing against the backend `label`."""
    ok = {name: t for name, t in alternatives.items()
          if t.error is None and family(label) in ALTERNATIVE_FAMILIES.get(name, set(FAMILIES))}  # fmt: skip
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


def program_alternatives(program: sp.SuiteProgram, inputs: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...],
                         repeats: int, families: set[str]) -> dict[str, Timing]:  # fmt: skip
    """The alternatives' timings: plain Python, hand-written jit(vmap) (with a JAX backend), TFP
    (Collatz, with a TF backend)."""
    results = {"python": python_timing(lambda: sp.python_run(program, inputs), repeats)}

    def check(label: str) -> Callable[[Any], None]:
        return lambda got: sp.assert_equal(sp.as_tuple(got), want, label)

    if program.jax_vmap is not None and "jax" in families:
        jax_vmap = program.jax_vmap
        results["jax-vmap"] = timed(lambda: (lambda f: lambda: f(*inputs))(jax_vmap()), repeats,
                                    check(f"{program.name} jax-vmap"))  # fmt: skip
    if program.name == "collatz" and "tf" in families and tfp_collatz(inputs) is not None:
        results["tfp-xla"] = timed(lambda: tfp_collatz(inputs), repeats, check("collatz tfp"))
    return results


def program_rows(program: sp.SuiteProgram, size: int, backends: dict[str, Callable[[], abir.Backend]],
                 repeats: int, small: bool) -> list[Row]:  # fmt: skip
    inputs = program.make_inputs(size, small)
    want = sp.python_run(program, inputs)
    alternatives = program_alternatives(program, inputs, want, repeats, {family(b) for b in backends})
    rows = []
    for label, factory in backends.items():
        alternative, best = best_of(alternatives, label)

        def make(factory: Callable[[], abir.Backend] = factory) -> Callable[[], Any]:
            run, backend = sp.abir_function(program), factory()
            return lambda: run(*inputs, backend=backend, max_stack_depth=program.max_stack_depth)

        check = lambda got, label=label: sp.assert_equal(sp.as_tuple(got), want, f"{program.name} on {label}")  # noqa: E731
        rows.append(Row(program.name, label, size, timed(make, repeats, check), alternative, best))
        print_row(rows[-1])
    return rows


def tfp_nuts(target_log_prob: Callable[[Any], Any], q0: np.ndarray, eps: float, depth: int,
             steps: int) -> Callable[[], Any]:  # fmt: skip
    """TFP's NUTS under `tf.function(jit_compile=True)` on all chains at once (a batch of states,
    `target_log_prob` returning one log density per chain): `steps` transitions of step size `eps`
    with at most `depth` doublings, no warm-up. Returns a call giving (samples, leapfrogs)."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    kernel = tfp.mcmc.NoUTurnSampler(target_log_prob, step_size=eps, max_tree_depth=depth)

    @tf.function(jit_compile=True, autograph=False)  # TFP builds its own loops
    def run(q: Any) -> Any:
        return tfp.mcmc.sample_chain(steps, current_state=q, kernel=kernel, num_burnin_steps=0,
                                     trace_fn=lambda _, results: results.leapfrogs_taken, seed=(1, 2))  # fmt: skip

    q = tf.constant(q0)
    return lambda: run(q)


def check_tfp_nuts(got: Any, depth: int) -> None:
    """A light check (TFP's RNG differs, so its samples cannot equal abir's): finite samples and
    a leapfrog count per transition within NUTS's bounds."""
    samples, leapfrogs = (np.asarray(x) for x in got)
    assert np.isfinite(samples).all(), "TFP NUTS samples are not finite"
    assert ((leapfrogs >= 1) & (leapfrogs < 2**depth)).all(), "TFP NUTS leapfrogs out of range"


def blackjax_nuts(logdensity: Callable[[Any], Any], q0: np.ndarray, eps: float, depth: int,
                  steps: int) -> Callable[[], Any]:  # fmt: skip
    """BlackJAX's NUTS (`bench/nuts.py`'s `make_blackjax_for`) over the chains of `q0` on the
    one-chain `logdensity` (same step size, transitions and depth cap as abir; no warm-up)."""
    import jax

    run = nuts_bench.make_blackjax_for(logdensity, q0.shape[1], eps, depth, steps)
    keys = jax.random.split(jax.random.key(1), q0.shape[0])
    return lambda: run(q0, keys)


def check_blackjax(depth: int) -> Callable[[Any], None]:
    return lambda got: nuts_bench.check_blackjax(nuts_bench.BlackjaxChain(*(np.asarray(x) for x in got)), depth)


def nuts_alternatives(families: set[str], python: Callable[[int], Any], size: int,
                      blackjax: Callable[[], Callable[[], Any]], tfp: Callable[[], Callable[[], Any]], depth: int,
                      repeats: int) -> dict[str, Timing]:  # fmt: skip
    """The NUTS alternatives of the selected backends' frameworks: BlackJAX (JAX), TFP's NUTS on
    XLA (TF; without TFP installed, absent), the per-chain Python run (NumPy and TF). `python(n)`
    runs the first n chains; beyond `PYTHON_NUTS_CHAINS` chains its time is that of the first
    `PYTHON_NUTS_CHAINS` scaled by the batch size (chains are independent, one after the other)
    and the alternative is labelled python-scaled."""
    results = {}
    if "jax" in families:
        results["blackjax"] = timed(blackjax, repeats, check_blackjax(depth))
    if "tf" in families and importlib.util.find_spec("tensorflow_probability") is not None:
        results["tfp-nuts-xla"] = timed(tfp, repeats, lambda got: check_tfp_nuts(got, depth))
    if families & {"numpy", "tf"}:
        chains = min(size, PYTHON_NUTS_CHAINS)
        timing = python_timing(lambda: python(chains), repeats)
        scale = size / chains
        results["python" if chains == size else "python-scaled"] = Timing(timing.first * scale, timing.steady * scale)
    return results


def nuts_rows(name: str, size: int, backends: dict[str, Callable[[], abir.Backend]], steps: int,
              repeats: int) -> list[Row]:  # fmt: skip
    """NUTS of `examples/nuts.py` on a D-dimensional correlated Gaussian; abir checked against the
    per-chain Python run of the first `NUTS_CHECKED` chains."""
    dim, depth = NUTS_TARGETS[name]
    precision, _ = ex.correlated_precision(dim)
    eps = NUTS_STEP_SIZE[name]
    sampler = ex.make_nuts(precision, depth)
    q0, keys = ex.initial_positions(1, size, dim), ex.chain_keys(1, size)
    checked = min(size, NUTS_CHECKED)
    want = ex.run_per_chain(sampler, q0[:checked], eps, keys[:checked], steps)

    def blackjax() -> Callable[[], Any]:
        import jax.numpy as jnp

        prec = jnp.asarray(precision)
        return blackjax_nuts(lambda q: -0.5 * (q @ prec @ q), q0, eps, depth, steps)

    def tfp() -> Callable[[], Any]:
        import tensorflow as tf

        prec = tf.constant(precision)
        return tfp_nuts(lambda q: -0.5 * tf.reduce_sum((q @ prec) * q, axis=-1), q0, eps, depth, steps)

    python = lambda n: ex.run_per_chain(sampler, q0[:n], eps, keys[:n], steps)  # noqa: E731
    alternatives = nuts_alternatives({family(b) for b in backends}, python, size, blackjax, tfp, depth, repeats)
    rows = []
    for label, factory in backends.items():

        def make(factory: Callable[[], abir.Backend] = factory) -> Callable[[], Any]:
            run, backend = ex.batch(sampler), factory()
            return lambda: run(q0, eps, keys, np.int64(steps), backend=backend,
                               max_stack_depth=ex.stack_depth(sampler))  # fmt: skip

        def check(got: Any) -> None:
            chain = ex.as_chain(got)
            ex.compare(ex.Chain(*(np.asarray(x)[:checked] for x in chain)), want)

        alternative, best = best_of(alternatives, label)
        rows.append(Row(name, label, size, timed(make, repeats, check), alternative, best))
        print_row(rows[-1])
    return rows


def assert_same_nuts(got: Any, want: Any, label: str) -> None:
    """Draws and per-draw statistics of a batched run's first chains equal the per-chain run's."""
    np.testing.assert_allclose(got.draws[: len(want.draws)], want.draws, rtol=1e-9, atol=1e-12, err_msg=label)
    for field, g, w in zip(want.stats._fields, got.stats, want.stats, strict=True):
        np.testing.assert_allclose(g[: len(w)], w, rtol=1e-9, atol=1e-12, err_msg=f"{label} {field}")


def logreg_rows(size: int, backends: dict[str, Callable[[], abir.Backend]], steps: int, repeats: int) -> list[Row]:
    """NUTS (`abir.samplers.nuts`) on the Bayesian logistic regression of `suite_programs`; abir
    checked against the per-chain Python run (`dry_run=True`, same gradient source) of the first
    `NUTS_CHECKED` chains."""
    q0 = sp.logreg_initial_positions(size)
    checked = min(size, NUTS_CHECKED)

    def blackjax() -> Callable[[], Any]:
        return blackjax_nuts(sp.logreg_logdensity_jax, q0, LOGREG_STEP_SIZE, LOGREG_DEPTH, steps)

    def tfp() -> Callable[[], Any]:
        import tensorflow as tf

        x, y = tf.constant(sp.LOGREG_X), tf.constant(sp.LOGREG_Y)

        def logdensity(q: Any) -> Any:
            logits = tf.linalg.matmul(q, x, transpose_b=True)
            return tf.reduce_sum(y * logits - tf.math.softplus(logits), axis=-1) - 0.5 * tf.reduce_sum(q * q, axis=-1)

        return tfp_nuts(logdensity, q0, LOGREG_STEP_SIZE, LOGREG_DEPTH, steps)

    def logreg_nuts(backend: abir.Backend | str, q: np.ndarray, dry_run: bool = False) -> Any:
        return sp.logreg_nuts(backend, q, steps, LOGREG_STEP_SIZE, LOGREG_DEPTH, dry_run)

    python = lambda n: logreg_nuts("numpy", q0[:n], dry_run=True)  # noqa: E731
    alternatives = nuts_alternatives({family(b) for b in backends}, python, size, blackjax, tfp, LOGREG_DEPTH, repeats)
    rows = []
    for label, factory in backends.items():
        want = logreg_nuts("jax" if label == "jax" else "numpy", q0[:checked], dry_run=True)

        def make(factory: Callable[[], abir.Backend] = factory) -> Callable[[], Any]:
            samplers_nuts.batched_program.cache_clear()  # a fresh compile for the first call
            backend = factory()
            return lambda: logreg_nuts(backend, q0)

        check = lambda got, want=want, label=label: assert_same_nuts(got, want, f"{LOGREG} on {label}")  # noqa: E731
        alternative, best = best_of(alternatives, label)
        rows.append(Row(LOGREG, label, size, timed(make, repeats, check), alternative, best))
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


PROGRESS_HEADER = (f"{'program':14} {'backend':7} {'B':>5} {'abir':>9} {'alternative':12} {'its time':>9} "
                   f"{'ratio':>8} {'abir 1st':>9} {'alt 1st':>9}")  # fmt: skip


def print_row(row: Row) -> None:
    """One progress line, on stderr (stdout gets the tables at the end, each row once)."""
    print(
        f"{row.program:14} {row.backend:7} {row.size:5d} {seconds(row.abir.steady):>9} {row.alternative:12} "
        f"{seconds(row.best.steady):>9} {ratio(row):>8} {seconds(row.abir.first):>9} {seconds(row.best.first):>9}",
        file=sys.stderr,
        flush=True,
    )


def markdown_tables(rows: list[Row]) -> list[str]:
    """One Markdown table per backend, its ratio column naming the backend (docs/performance.md's form)."""
    lines = []
    spread = any(r.spread for r in rows)
    for backend in dict.fromkeys(r.backend for r in rows):
        lines += [
            "",
            f"| program | B | abir on {backend} | best alternative | its time | ratio on {backend} "
            "(alternative / abir) |" + (" ratio's range over processes |" if spread else "")
            + " abir first call | alternative first call |",
            "|---|---|---|---|---|---|---|---|" + ("---|" if spread else ""),
        ]
        lines += [
            f"| {r.program} | {r.size} | {seconds(r.abir.steady)} | {r.alternative} | {seconds(r.best.steady)} | "
            f"{ratio(r)} |" + (f" {r.spread} |" if spread else "")
            + f" {seconds(r.abir.first)} | {seconds(r.best.first)} |"
            for r in rows
            if r.backend == backend
        ]
    return lines


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
    names = [*sp.SUITE, *NUTS_TARGETS, LOGREG]
    parser.add_argument("--sizes", default=None, help="comma-separated batch sizes (default 64,1024; 8,32 with --quick)")
    parser.add_argument("--backends", default="jax,numpy,tf", help="comma-separated, of jax,numpy,tf")
    parser.add_argument("--programs", default=",".join(names), help=f"comma-separated, of {','.join(names)}")
    parser.add_argument("--repeats", type=int, default=5,
                        help="steady calls per measurement (median; at least 3, as a backend's second call may still compile)")  # fmt: skip
    parser.add_argument("--settle", type=float, default=0.0,
                        help="seconds of untimed calls after a compiled system's first call, before its steady calls "
                             "(lets background compilations finish: abir's active rows, kernels and steady program)")  # fmt: skip
    parser.add_argument("--nuts-steps", type=int, default=20, help="NUTS transitions per chain")
    parser.add_argument("--quick", action="store_true", help="sizes 8,32, 3 repeats, small inputs, 3 NUTS steps")
    parser.add_argument("--processes", type=int, default=1,
                        help="run the whole measurement in this many fresh processes, one after another, and report "
                             "the median and the ratio's range (XLA's thread pool differs per process)")  # fmt: skip
    parser.add_argument("--rows-json", default=None, help=argparse.SUPPRESS)  # a child process's rows
    parser.add_argument("--figure", default=None,
                        help="where to save the ratio figure (none by default; make bench-suite writes docs/bench_suite.png)")
    args = parser.parse_args(argv)
    unknown = set(args.programs.split(",")) - set(names)
    if unknown:
        parser.error(f"unknown programs {sorted(unknown)}; choose from {names}")
    if args.quick:
        args.repeats, args.nuts_steps = 3, 3
    args.sizes = args.sizes or ("8,32" if args.quick else "64,1024")
    return args


def measured_rows(args: argparse.Namespace, backends: dict[str, Callable[[], abir.Backend]]) -> list[Row]:
    """Every selected program at every size, in this process."""
    rows: list[Row] = []
    for name in args.programs.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            if name == LOGREG:
                rows += logreg_rows(size, backends, args.nuts_steps, args.repeats)
            elif name in NUTS_TARGETS:
                rows += nuts_rows(name, size, backends, args.nuts_steps, args.repeats)
            else:
                rows += program_rows(sp.SUITE[name], size, backends, args.repeats, args.quick)
    return rows


def without_option(argv: list[str], option: str) -> list[str]:
    """`argv` without `option` and its value (either `--option value` or `--option=value`)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        elif not arg.startswith(option + "="):
            kept.append(arg)
    return kept


def rows_over_processes(argv: list[str], processes: int) -> list[Row]:
    """The measurement run `processes` times, each in a fresh process; per row the median times
    and the range of the ratio over the processes that ran it."""
    child_argv = without_option(without_option(without_option(argv, "--processes"), "--figure"), "--rows-json")
    runs: list[list[Row]] = []
    with tempfile.TemporaryDirectory() as directory:
        for k in range(processes):
            path = Path(directory) / f"rows{k}.json"
            print(f"process {k + 1} of {processes}", file=sys.stderr, flush=True)
            subprocess.run([sys.executable, __file__, *child_argv, "--rows-json", str(path)],
                           check=False, stdout=subprocess.DEVNULL)  # fmt: skip
            if path.exists():
                runs.append([row_from_dict(d) for d in json.loads(path.read_text())])
    return [median_row(same) for same in zip(*runs, strict=True)] if runs else []


def row_from_dict(fields: dict[str, Any]) -> Row:
    return Row(**{**fields, "abir": Timing(**fields["abir"]), "best": Timing(**fields["best"])})


def median_row(same: tuple[Row, ...]) -> Row:
    """One row of several processes' runs of it: median times, the ratio's range as `spread`."""
    def median_timing(timings: list[Timing]) -> Timing:
        errors = [t.error for t in timings if t.error is not None]
        if errors:
            return Timing(error=errors[0])
        return Timing(first=statistics.median(t.first for t in timings), steady=statistics.median(t.steady for t in timings))

    row = dataclasses.replace(same[0], abir=median_timing([r.abir for r in same]), best=median_timing([r.best for r in same]))
    ratios = [r.best.steady / r.abir.steady for r in same if r.abir.error is None and r.best.error is None]
    if ratios:
        row.spread = f"{min(ratios):.3g}x-{max(ratios):.3g}x over {len(ratios)}"
    return row


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    global SETTLE_SECONDS
    SETTLE_SECONDS = args.settle
    import jax

    jax.config.update("jax_enable_x64", True)  # the alternatives compute in float64, as abir does
    print("\n".join(header_lines(argv)))
    backends = abir_backends(args.backends.split(","))
    print(PROGRESS_HEADER, file=sys.stderr)
    rows = rows_over_processes(argv, args.processes) if args.processes > 1 else measured_rows(args, backends)
    if args.rows_json:
        Path(args.rows_json).write_text(json.dumps([dataclasses.asdict(row) for row in rows]))
    print("\nsteady = median of later calls (after --settle seconds of calls); ratio = best alternative's steady time / abir's on that backend")
    print("\n".join(markdown_tables(rows)))
    failures = [r for r in rows if r.abir.error is not None]
    for row in failures:
        print(f"FAILED {row.program} on {row.backend} B={row.size}: {row.abir.error}")
    if args.figure:
        draw_figure(rows, args.figure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
