"""Where a first call's time goes on JAX, stage by stage, for the programs of `bench/suite_programs.py`.

    PYTHONPATH=. .venv/bin/python bench/first_call.py --sizes 64,1024 --processes 3
    PYTHONPATH=. .venv/bin/python bench/first_call.py --programs fib-lt --passes

Each (program, batch size) runs in fresh processes, JAX's runtime started first (a trivial
jitted call) and abir's modules loaded (a first call of another program), so that no stage pays
for either: one process times abir's first call (a fresh
`abir.Context`, decoration included, the result computed) and one the hand-written
`jax.jit(jax.vmap(...))`'s where the program has one. Every stage is CPU time
(`time.process_time`, all threads) and exclusive: a stage entered inside another (an eager JAX
operation compiled while the machine is planned) counts for itself only.

Stages: `parse` (decoration), `frontend` (`Context.build_program`: Python AST -> functional IR),
`functional` (type inference and the functional passes), `stack+vm` (`lower_to_vm`),
`plan` (`compile_machine`: block plans and generated kernels), `trace` (JAX tracing into
jaxprs, the kernels' Python included), `lower` (jaxpr -> StableHLO), `xla` (XLA's
compilation), `other` (the rest: the run itself and the glue between stages). `--passes` adds
a line per xDSL pass (and the verifications between stages). Counts of traces (outermost only)
and XLA compilations follow the times. Results print as one Markdown table (medians over the
processes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

STAGES = ("parse", "frontend", "functional", "stack+vm", "plan", "trace", "lower", "xla", "other")


class StageClock:
    """Exclusive CPU time per stage: a stage entered while another runs pauses it."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.counts: Counter[str] = Counter()
        self.compiled: list[tuple[str, float]] = []  # (module name, CPU seconds) per XLA compilation
        self.events: Counter[str] = Counter()  # JAX's test events: "trace_to_jaxpr" per trace made
        self.stack: list[list[Any]] = []  # [stage, start, time of nested stages]

    def wrap(self, stage: str, fn: Callable[..., Any], outermost_only: bool = False) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if outermost_only and any(frame[0] == stage for frame in self.stack):
                return fn(*args, **kwargs)
            self.counts[stage] += 1
            frame = [stage, time.process_time(), 0.0]
            self.stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                self.stack.pop()
                elapsed = time.process_time() - frame[1]
                self.seconds[stage] += elapsed - frame[2]
                if self.stack:
                    self.stack[-1][2] += elapsed

        return timed

    def patch(self, owner: Any, attribute: str, stage: str, outermost_only: bool = False) -> None:
        setattr(owner, attribute, self.wrap(stage, getattr(owner, attribute), outermost_only))


def install(clock: StageClock, passes: bool) -> None:
    """Wrap the functions each stage runs in (abir's and JAX's)."""
    from jax._src import compiler, util
    from jax._src.interpreters import mlir, partial_eval

    import abir.calling
    import abir.context
    import abir.passes.pipeline

    clock.patch(abir.context.Context, "batch_uncurried", "parse")
    clock.patch(abir.context.Context, "build_program", "frontend")
    clock.patch(abir.calling.Compiler, "typed_module", "functional")
    clock.patch(abir.calling, "lower_to_vm", "stack+vm")
    clock.patch(abir.calling, "compile_machine", "plan")
    cached_trace = partial_eval.trace_to_jaxpr
    clock.patch(partial_eval, "trace_to_jaxpr", "trace", outermost_only=True)
    partial_eval.trace_to_jaxpr.evict_weakref = cached_trace.evict_weakref  # type: ignore[attr-defined]
    util.test_event_listener = lambda name, *_: clock.events.update([name])
    clock.patch(mlir, "lower_jaxpr_to_module", "lower")
    clock.patch(compiler, "backend_compile_and_load", "xla")
    compile_xla = compiler.backend_compile_and_load

    def named_compile(backend: Any, module: Any, *args: Any) -> Any:
        started = time.process_time()
        try:
            return compile_xla(backend, module, *args)
        finally:
            clock.compiled.append((str(module.operation.attributes["sym_name"]), time.process_time() - started))

    compiler.backend_compile_and_load = named_compile
    if passes:
        from xdsl.dialects.builtin import ModuleOp
        from xdsl.passes import PassPipeline

        def apply_each(pipeline: PassPipeline, ctx: Any, op: Any) -> None:
            for p in pipeline.passes:
                clock.wrap(f"pass {p.name}", p.apply)(ctx, op)

        PassPipeline.apply = apply_each  # type: ignore[method-assign]
        clock.patch(ModuleOp, "verify", "verify")


def count_down(n):
    """The warm-up's program: a loop, so that abir's lazily imported modules are loaded."""
    while n > 0:
        n = n - 1
    return n


def warm_up(system: str) -> None:
    """Start JAX's runtime, and for abir load what its first call imports (a user's first call
    pays it once per process, not once per function)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import abir

    jax.block_until_ready(jax.jit(lambda x: x + 1)(jnp.zeros(3)))
    if system == "abir":
        jax.block_until_ready(abir.Context().batch()(count_down)(np.arange(3), backend=abir.JaxBackend()))


def child(program_name: str, size: int, system: str, passes: bool) -> dict[str, Any]:
    import jax
    import suite_programs as sp

    import abir

    jax.config.update("jax_enable_x64", True)  # as bench/suite.py runs every system
    warm_up(system)
    if program_name in NUTS:
        return nuts_child(program_name, size, system, passes)
    program = sp.SUITE[program_name]
    inputs = program.make_inputs(size, False)
    clock = StageClock()
    install(clock, passes)
    start = time.process_time()
    if system == "abir":
        run = sp.abir_function(program)
        result = jax.block_until_ready(run(*inputs, backend=abir.JaxBackend(), max_stack_depth=program.max_stack_depth))
    else:
        assert program.jax_vmap is not None
        result = jax.block_until_ready(program.jax_vmap()(*inputs))
    total = time.process_time() - start
    sp.assert_equal(sp.as_tuple(result), sp.python_run(program, inputs), f"{program_name} {system}")
    seconds = dict(clock.seconds)
    seconds["other"] = total - sum(seconds.values())
    counts = {**clock.counts, "trace": clock.events["trace_to_jaxpr"]}
    return {"total": total, "seconds": seconds, "counts": counts, "compiled": clock.compiled}


NUTS = ("nuts-d10", "nuts-logreg")
"""NUTS of `bench/suite.py` (20 transitions): `examples/nuts.py` on the D=10 Gaussian, and
`abir.samplers.nuts` on the logistic regression; the alternative is BlackJAX."""
NUTS_STEPS = 20


def nuts_child(name: str, size: int, system: str, passes: bool) -> dict[str, Any]:
    """`child` for a NUTS program (results checked by `bench/suite.py`, not here)."""
    import jax
    import numpy as np
    import suite
    import suite_programs as sp

    import abir

    ex = suite.ex
    if name == "nuts-d10":
        dim, depth = suite.NUTS_TARGETS[name]
        eps = suite.NUTS_STEP_SIZE[name]
        precision, _ = ex.correlated_precision(dim)
        q0, keys = ex.initial_positions(1, size, dim), ex.chain_keys(1, size)
        sampler = ex.make_nuts(precision, depth)

        def logdensity(q: Any) -> Any:
            return -0.5 * q @ precision @ q

        def first() -> Any:
            if system != "abir":
                return suite.blackjax_nuts(logdensity, q0, eps, depth, NUTS_STEPS)()
            return ex.batch(sampler)(q0, eps, keys, np.int64(NUTS_STEPS), backend=abir.JaxBackend(),
                                     max_stack_depth=ex.stack_depth(sampler))  # fmt: skip
    else:
        q0 = sp.logreg_initial_positions(size)

        def first() -> Any:
            if system != "abir":
                return suite.blackjax_nuts(sp.logreg_logdensity_jax, q0, suite.LOGREG_STEP_SIZE, suite.LOGREG_DEPTH,
                                           NUTS_STEPS)()  # fmt: skip
            return sp.logreg_nuts(abir.JaxBackend(), q0, NUTS_STEPS, suite.LOGREG_STEP_SIZE, suite.LOGREG_DEPTH)

    clock = StageClock()
    install(clock, passes)
    start = time.process_time()
    jax.block_until_ready(first())
    total = time.process_time() - start
    seconds = dict(clock.seconds)
    seconds["other"] = total - sum(seconds.values())
    counts = {**clock.counts, "trace": clock.events["trace_to_jaxpr"]}
    return {"total": total, "seconds": seconds, "counts": counts, "compiled": clock.compiled}


def measure(program: str, size: int, system: str, passes: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", program, str(size), system] + (["--passes"] if passes else [])
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = {key for run in runs for key in run["seconds"]}
    return {
        "total": statistics.median(run["total"] for run in runs),
        "seconds": {key: statistics.median(run["seconds"].get(key, 0.0) for run in runs) for key in keys},
        "counts": runs[0]["counts"],
    }


def main() -> None:
    import suite_programs as sp

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", default=",".join(sp.SUITE), help=f"also {', '.join(NUTS)}")
    parser.add_argument("--sizes", default="64,1024")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--passes", action="store_true", help="also time each xDSL pass and verification")
    parser.add_argument("--no-alternative", action="store_true", help="time abir only")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, size, system = args.child
        print(json.dumps(child(name, int(size), system, args.passes)))
        return
    rows = []
    for name in args.programs.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            abir_runs, alternative_runs = [], []
            for _ in range(args.processes):
                abir_runs.append(measure(name, size, "abir", args.passes))
                if (name in NUTS or sp.SUITE[name].jax_vmap is not None) and not args.no_alternative:
                    alternative_runs.append(measure(name, size, "jax-vmap", False))
            abir = median_of(abir_runs)
            alternative = statistics.median(r["total"] for r in alternative_runs) if alternative_runs else None
            rows.append((name, size, abir, alternative))
            print(name, size, json.dumps(abir), alternative, file=sys.stderr, flush=True)
    extra = sorted({key for _, _, abir, _ in rows for key in abir["seconds"] if key not in STAGES})
    columns = [*STAGES, *extra]
    print("| program | B | " + " | ".join(columns) + " | abir total | alternative total | traces | XLA compiles |")
    print("|---|---:|" + "---:|" * (len(columns) + 4))
    for name, size, abir, alternative in rows:
        cells = [f"{abir['seconds'].get(c, 0.0) * 1000:.0f}" for c in columns]
        alt = f"{alternative * 1000:.0f}" if alternative is not None else "-"
        counts = abir["counts"]
        print(f"| {name} | {size} | " + " | ".join(cells) + f" | {abir['total'] * 1000:.0f} | {alt} |"
              f" {counts.get('trace', 0)} | {counts.get('xla', 0)} |")  # fmt: skip


if __name__ == "__main__":
    main()
