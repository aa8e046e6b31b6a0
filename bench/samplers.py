"""Samplers bench: abir.samplers.nuts on users' log densities against BlackJAX and NumPyro.

    make bench-samplers                                 # installs inference-gym + NumPyro into .bench-site
    make bench-samplers SAMPLERS_ARGS="--quick --figure"  # every target at 64 chains, short runs, the figure
    PYTHONPATH=.bench-site .venv/bin/python bench/samplers.py --targets neals_funnel --chains 64 256
    PYTHONPATH=.bench-site .venv/bin/python bench/samplers.py --figure   # docs/samplers_bench.png

Targets (bench/sampler_targets.py): inference-gym's ill-conditioned Gaussian (100 dimensions),
eight schools (non-centred), a logistic regression on a fixed synthetic 1,000 x 25 data set, the
synthetic item-response-theory model and Neal's funnel, each with a log density written in JAX;
`--quick` samples the item-response-theory model on a subset of its data (`QUICK_BUILDERS`).
Systems (bench/sampler_systems.py): abir JAX (`abir.samplers.nuts`), BlackJAX (`window_adaptation`
+ `nuts` under `jit(vmap)`) and NumPyro (`chain_method="vectorized"`), all NUTS with Stan-style
warm-up, target acceptance 0.8, at most 10 doublings, float64, the same initial positions and
the same numbers of warm-up and kept draws; and TFP's NUTS on TF + XLA (`tfp`: dual-averaging
step size only, TFP's NUTS adapts no mass matrix), on each target's TensorFlow density. A system
that cannot run a target gets a line saying why instead of a row.

Per target, chains and system the table shows:
* `ESS/s`: the minimum over parameters of the bulk ESS (bench/sampler_diagnostics.py) divided by
  the wall time of the second call (warm-up + sampling with everything compiled; for NumPyro the
  second call still retraces and compiles its sampling loop, as every `MCMC.run` does);
* `ESS/grad`: that minimum bulk ESS per leapfrog step (gradient evaluation) of the kept draws,
  summed over chains;
* `R-hat`: the maximum rank-normalized split R-hat; `div`: divergent kept transitions;
* `ESS/cpu-s`: the same over the process's CPU time of the second call (all its threads; the
  measure to compare on a loaded machine, where wall times mean little);
* `first call`: the wall time of the first call (tracing, compilation and a whole run);
* `err`: the largest error of a posterior mean against the ground truth, in ground-truth
  standard deviations (health, not speed); `vs BlackJAX`: ESS/s over BlackJAX's.
and one line per row for scripts:
`target=<name> chains=<B> system=<name> ess_per_s=<float> ess_per_grad=<float> rhat=<float>`.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import pathlib
import platform
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import sampler_systems  # noqa: E402
import sampler_targets  # noqa: E402
from sampler_diagnostics import bulk_ess, rank_rhat  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIGURE = ROOT / "docs" / "samplers_bench.png"
QUICK_CHAINS = [64]
QUICK_SYSTEMS = ["abir", "blackjax", "numpyro"]
"""`--quick`'s systems unless `--systems` names others: TFP's rows (its NUTS adapts no mass matrix)
cost minutes of the 10-minute budget (docs/performance.md, "NUTS on users' models")."""


@dataclasses.dataclass(frozen=True)
class Row:
    """One system's measurement on one target at one number of chains."""

    target: str
    chains: int
    system: str
    ess_per_s: float
    ess_per_grad: float
    rhat: float
    divergences: int
    first_call: float
    first_call_cpu: float
    seconds: float
    cpu_seconds: float
    mean_error: float

    @property
    def ess_per_cpu_s(self) -> float:
        return self.ess_per_s * self.seconds / self.cpu_seconds

    def machine_line(self) -> str:
        return (
            f"target={self.target} chains={self.chains} system={self.system} "
            f"ess_per_s={self.ess_per_s:.6g} ess_per_grad={self.ess_per_grad:.6g} rhat={self.rhat:.6g} "
            f"ess_per_cpu_s={self.ess_per_cpu_s:.6g} first_call_s={self.first_call:.6g} "
            f"first_call_cpu_s={self.first_call_cpu:.6g} run_s={self.seconds:.6g} run_cpu_s={self.cpu_seconds:.6g}"
        )


def mean_error(target: sampler_targets.Target, draws: np.ndarray) -> float:
    """The largest |posterior mean - ground truth mean| / ground truth standard deviation."""
    means = target.reported(draws).mean(axis=(0, 1))
    return float(np.max(np.abs(means - target.truth_mean) / target.truth_std))


def why_not_run(target: sampler_targets.Target, system: str) -> str | None:
    """Why `system` cannot sample `target` here (its density is not written for it, its package
    is not importable), or None."""
    field = sampler_systems.DENSITY_OF.get(system, "logdensity")
    if getattr(target, field) is None:
        return f"{target.name} has no {field}"
    package = {"tfp": "tensorflow_probability"}.get(system, system)
    if system != "abir" and importlib.util.find_spec(package) is None:
        return f"{package} is not importable (make bench-samplers installs it)"
    return None


def run_sizes(target: sampler_targets.Target, args: argparse.Namespace) -> tuple[int, int]:
    """(warm-up, kept draws) per chain: the target's `quick` sizes with --quick, else the
    command line's."""
    return target.quick if args.quick else (args.warmup, args.draws)


def measure(target: sampler_targets.Target, system: str, chains: int, args: argparse.Namespace) -> Row:
    """First call (compiling) and second call (timed) of `system` on `target`; diagnostics of the
    second call's draws."""
    warmup, draws = run_sizes(target, args)
    sample = sampler_systems.SYSTEMS[system]
    logdensity = getattr(target, sampler_systems.DENSITY_OF.get(system, "logdensity"))
    positions = sampler_targets.initial_positions(target.dim, chains, args.seed)
    start, cpu_start = time.perf_counter(), time.process_time()
    sample(logdensity, positions, warmup, draws, args.seed)
    first_call, first_call_cpu = time.perf_counter() - start, time.process_time() - cpu_start
    start, cpu_start = time.perf_counter(), time.process_time()
    result = sample(logdensity, positions, warmup, draws, args.seed + 1)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    min_ess = float(np.min(bulk_ess(result.draws)))
    return Row(
        target=target.name, chains=chains, system=system, ess_per_s=min_ess / seconds,
        ess_per_grad=min_ess / float(np.sum(result.leapfrogs)), rhat=float(np.max(rank_rhat(result.draws))),
        divergences=int(np.sum(result.divergent)), first_call=first_call, first_call_cpu=first_call_cpu,
        seconds=seconds, cpu_seconds=cpu_seconds,
        mean_error=mean_error(target, result.draws),
    )  # fmt: skip


HEADER = (
    f"{'target':<25} {'chains':>6} {'system':<9} {'ESS/s':>9} {'ESS/cpu-s':>9} {'ESS/grad':>9} {'R-hat':>6} {'div':>5} "
    f"{'first call':>10} {'run':>8} {'err':>5} {'vs BlackJAX':>11}"
)


def table_line(row: Row, blackjax: Row | None) -> str:
    ratio = f"{row.ess_per_s / blackjax.ess_per_s:.2f}x" if blackjax and blackjax.ess_per_s > 0 else "-"
    return (
        f"{row.target:<25} {row.chains:>6} {row.system:<9} {row.ess_per_s:>9.3g} {row.ess_per_cpu_s:>9.3g} {row.ess_per_grad:>9.3g} "
        f"{row.rhat:>6.3f} {row.divergences:>5} {row.first_call:>9.1f}s {row.seconds:>7.1f}s "
        f"{row.mean_error:>5.2f} {ratio:>11}"
    )


def cpu_model() -> str:
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    return next(
        (line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")),
        platform.processor(),
    )


def versions() -> str:
    import blackjax
    import jax
    import numpyro

    line = f"JAX {jax.__version__}, BlackJAX {blackjax.__version__}, NumPyro {numpyro.__version__}"
    if importlib.util.find_spec("tensorflow_probability") is not None:
        import tensorflow as tf
        import tensorflow_probability as tfp

        line += f", TensorFlow {tf.__version__}, TFP {tfp.__version__}"
    return line


def plot(rows: list[Row], path: str, settings: str, sizes: dict[str, tuple[int, int]] | None = None) -> None:
    """Bars of ESS/s (log scale) per target and system, one panel per number of chains. With
    `sizes` (a --quick run: each target's own warm-up and kept draws, named under it), bars of ESS
    per CPU second, the measure that means something on a loaded machine."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chains = sorted({row.chains for row in rows})
    targets = list(dict.fromkeys(row.target for row in rows))
    systems = list(dict.fromkeys(row.system for row in rows))
    fig, axes = plt.subplots(
        1, len(chains), figsize=(4.5 + 3.5 * len(chains), 4.8), layout="constrained", squeeze=False
    )
    width = 0.8 / len(systems)
    for ax, b in zip(axes[0], chains, strict=True):
        for k, system in enumerate(systems):
            values = {
                row.target: row.ess_per_cpu_s if sizes else row.ess_per_s
                for row in rows
                if row.chains == b and row.system == system
            }
            xs = [i + (k - (len(systems) - 1) / 2) * width for i in range(len(targets))]
            ax.bar(xs, [values.get(t, np.nan) for t in targets], width, label=system)
        ax.set_yscale("log")
        labels = [
            t.replace("_", "\n") + (f"\n{sizes[t][0]} + {sizes[t][1]}" if sizes else "") for t in targets
        ]
        ax.set_xticks(range(len(targets)), labels, fontsize=8)
        ax.set_title(f"{b} chains")
        ax.set_ylabel("min bulk ESS per CPU second" if sizes else "min bulk ESS per second")
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0][0].legend()
    fig.suptitle(f"NUTS, {settings}", fontsize=10)
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--targets", nargs="+", choices=list(sampler_targets.BUILDERS), default=list(sampler_targets.BUILDERS)
    )
    parser.add_argument(
        "--systems", nargs="+", choices=list(sampler_systems.SYSTEMS),
        help=f"default: all ({', '.join(sampler_systems.SYSTEMS)}); with --quick {', '.join(QUICK_SYSTEMS)}",
    )  # fmt: skip
    parser.add_argument("--chains", nargs="+", type=int, default=[64, 256, 1024])
    parser.add_argument("--warmup", type=int, default=1000, help="warm-up iterations per chain")
    parser.add_argument("--draws", type=int, default=1000, help="kept draws per chain")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--quick", action="store_true",
        help="64 chains, each target's short warm-up and kept draws (Target.quick), the smaller data "
        "sets of sampler_targets.QUICK_BUILDERS, systems QUICK_SYSTEMS unless --systems",
    )  # fmt: skip
    parser.add_argument(
        "--figure", nargs="?", const=str(FIGURE), metavar="PATH.png",
        help=f"draw ESS/s per target and system into PATH.png (default {FIGURE.relative_to(ROOT)}); "
        "with --quick, ESS per CPU second, each target's sizes under its name",
    )  # fmt: skip
    args = parser.parse_args()
    if args.quick:
        args.chains = QUICK_CHAINS
    if args.systems is None:
        args.systems = QUICK_SYSTEMS if args.quick else list(sampler_systems.SYSTEMS)
    return args


def main() -> None:
    args = parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    print(f"# {cpu_model()}; {versions()}")
    rows: list[Row] = []
    sizes: dict[str, tuple[int, int]] = {}
    for name in args.targets:
        target = (sampler_targets.QUICK_BUILDERS if args.quick else {}).get(name, sampler_targets.BUILDERS[name])()
        warmup, draws = sizes[target.name] = run_sizes(target, args)
        print(f"# {name}: {warmup} warm-up + {draws} kept draws per chain")
        for chains in args.chains:
            reasons = {system: why_not_run(target, system) for system in args.systems}
            group = [
                measure(target, system, chains, args) for system in args.systems if reasons[system] is None
            ]
            blackjax = next((row for row in group if row.system == "blackjax"), None)
            print(HEADER)
            for row in group:
                print(table_line(row, blackjax))
            for system, reason in reasons.items():
                if reason is not None:
                    print(f"{target.name:<25} {chains:>6} {system:<9} cannot run: {reason}")
            for row in group:
                print(row.machine_line())
            sys.stdout.flush()
            rows.extend(group)
    if args.figure and args.quick:
        plot(rows, args.figure, "--quick: each target's warm-up + kept draws per chain under its name", sizes)
    elif args.figure:
        plot(rows, args.figure, f"{args.warmup} warm-up + {args.draws} kept draws per chain")


if __name__ == "__main__":
    main()
