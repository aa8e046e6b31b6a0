"""NUTS benchmark: the per-chain program of examples/nuts.py batched by abir, against baselines.

    make bench-nuts                                     # installs BlackJAX + matplotlib into .bench-site
    PYTHONPATH=.bench-site .venv/bin/python bench/nuts.py            # B=64 and B=1024, D=10, depth 6, 20 steps
    PYTHONPATH=.bench-site .venv/bin/python bench/nuts.py --batch 64 --repeats 5
    PYTHONPATH=.bench-site .venv/bin/python bench/nuts.py --batch --figure docs/nuts_bench.png
    taskset -c 0 env PYTHONPATH=.bench-site .venv/bin/python bench/nuts.py   # one core: steadier

On a machine with few cores XLA's CPU runtime sometimes (per process) spreads a loop's small
kernels over its threads, and the work stealing makes every call of that process slower (about
1.8x for abir and BlackJAX alike on a 2-core machine); pinned to one core the steady times are
stable, the first calls slower (XLA compiles on one thread).

Rows, all measured in one run on the same inputs (each system's first call in a Python process
of its own, `fresh_first_call`):
* abir on JAX (first call = trace + XLA compile + run; steady = median of later calls);
* abir on TensorFlow + XLA (likewise);
* abir on NumPy (eager; first call = abir's compilation + run; steady likewise);
* plain Python: the same per-chain program run chain by chain (NumPy scalars/vectors);
* hand-vectorized JAX: `jit(vmap(sample_chain))` of an ITERATIVE rewrite of the same sampler
  written here by hand (the recursive subtree becomes a `lax.while_loop` over leaves with an
  explicit per-level stack of left halves, merges in the same post-order, same RNG draws), so its
  results equal abir's; this is the design of hand-written JAX NUTS implementations;
* BlackJAX (`blackjax.nuts`, iterative multinomial NUTS with the generalised U-turn criterion):
  `jit(vmap(run_chain))`, run_chain a `lax.scan` of the kernel's step, same target, step size,
  maximum doublings, q0 and number of transitions. Its RNG (and U-turn test) differ, so its samples
  and leapfrog counts differ from abir's: it is checked lightly (finite, leapfrogs in range, sample
  moments printed next to abir's) and compared per leapfrog as well as per call.

Every abir and hand-vectorized result is checked against the plain Python run before it is timed.
The JAX sweeps, block runs, the ideal (the longest member's own block count) and lane use come
from one more call with `abir.JaxBackend(collect_stats=True)` (counted inside the compiled loop),
the NumPy machine's steps from `abir.NumpyBackend().last_stats`. `--figure PATH.png` also measures steady time against the number
of chains (`--figure-batches`; abir NumPy and plain Python only up to `--figure-slow-max`) and draws
it with bench/plot_nuts.py (matplotlib, Agg).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime
import importlib.util
import pathlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

import abir

_PATH = pathlib.Path(__file__).resolve().parents[1] / "examples" / "nuts.py"
_SPEC = importlib.util.spec_from_file_location("abir_example_nuts", _PATH)
ex = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ex)


def make_hand_vectorized(precision: np.ndarray, max_depth: int, num_steps: int):
    """`jit(vmap(sample_chain))` of an iterative, hand-written JAX version of examples/nuts.py."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    prec = jnp.asarray(precision)
    dim = precision.shape[0]

    def normal(key, counter):
        return abir.random.normal(key, counter, shape=(dim,))

    def subtree(start, step, depth, energy0, key, counter):
        """2**depth leapfrogs from `start` = (q, p, grad), merging halves bottom-up as the
        recursion does; returns (first_q, first_p, last, sample, log_weight, leapfrogs, ok, counter)."""
        zeros = jnp.zeros((max_depth, dim))
        # stack of completed left halves per level: first_q, first_p, sample, log_weight
        init = (jnp.int32(0), start, (zeros, zeros, zeros, jnp.zeros(max_depth)),
                (start[0], start[1], start[0], jnp.float64(0.0)), jnp.bool_(True), counter)  # fmt: skip

        def cond(s):
            i, _, _, _, ok, _ = s
            return ok & (i < (1 << depth))

        def body(s):
            i, (q, p, grad), stack, _, _, counter = s
            p = p + (0.5 * step) * grad
            q = q + step * p
            grad = -(q @ prec)
            p = p + (0.5 * step) * grad
            energy = 0.5 * (p @ p) - 0.5 * (grad @ q)
            ok = energy - energy0 < ex.MAX_ENERGY_ERROR
            tree = (q, p, q, energy0 - energy)

            def merge_cond(m):
                _, j, _, ok, _ = m
                return ok & ((j & 1) == 1)

            def merge(m):
                level, j, (fq, fp, sample, lw), _, counter = m
                lfq, lfp, lsample, llw = (x[level] for x in stack)
                new_lw = jnp.logaddexp(llw, lw)
                take = jnp.log(abir.random.uniform(key, counter)) < lw - new_lw
                sample = jnp.where(take, sample, lsample)
                ok = ex.no_u_turn(lfq, lfp, q, p, step)
                return level + 1, j >> 1, (lfq, lfp, sample, new_lw), ok, counter + 1

            level, _, tree, ok, counter = lax.while_loop(merge_cond, merge, (0, i, tree, ok, counter))
            stack = tuple(x.at[level].set(t) for x, t in zip(stack, tree, strict=True))
            return i + 1, (q, p, grad), stack, tree, ok, counter

        i, last, _, tree, ok, counter = lax.while_loop(cond, body, init)
        fq, fp, sample, lw = tree
        return fq, fp, last, sample, lw, i, ok, counter

    def transition(q, grad, eps, key, counter):
        p = normal(key, counter)
        counter = counter + 1
        energy0 = 0.5 * (p @ p) - 0.5 * (grad @ q)
        left = right = (q, p, grad)
        init = (jnp.int32(0), left, right, q, jnp.float64(0.0), jnp.int64(0), counter, jnp.bool_(False))

        def cond(s):
            depth, *_, done = s
            return (~done) & (depth < max_depth)

        def body(s):
            depth, left, right, sample, lw, leapfrogs, counter, _ = s
            go_left = abir.random.uniform(key, counter) < 0.5
            step = jnp.where(go_left, -eps, eps)
            start = jax.tree.map(lambda a, b: jnp.where(go_left, a, b), left, right)
            _, _, last, t_sample, t_lw, taken, ok, counter = subtree(
                start, step, depth, energy0, key, counter + 1
            )
            left = jax.tree.map(lambda a, b: jnp.where(ok & go_left, a, b), last, left)
            right = jax.tree.map(lambda a, b: jnp.where(ok & ~go_left, a, b), last, right)
            take = ok & (jnp.log(abir.random.uniform(key, counter)) < t_lw - lw)
            sample = jnp.where(take, t_sample, sample)
            counter = jnp.where(ok, counter + 1, counter)
            lw = jnp.where(ok, jnp.logaddexp(lw, t_lw), lw)
            done = ~ok | ~ex.no_u_turn(left[0], left[1], right[0], right[1], 1.0)
            return depth + 1, left, right, sample, lw, leapfrogs + taken, counter, done

        _, _, _, sample, _, leapfrogs, counter, _ = lax.while_loop(cond, body, init)
        return sample, leapfrogs, counter

    def sample_chain(q, eps, key):
        def step(_, s):
            q, counter, leapfrogs, sum_q, sum_q2 = s
            q, taken, counter = transition(q, -(q @ prec), eps, key, counter)
            return q, counter, leapfrogs + taken, sum_q + q, sum_q2 + q * q

        init = (q, jnp.int64(0), jnp.int64(0), jnp.zeros_like(q), jnp.zeros_like(q))
        return lax.fori_loop(0, num_steps, step, init)

    return jax.jit(jax.vmap(sample_chain, in_axes=(0, None, 0)))


BlackjaxChain = collections.namedtuple("BlackjaxChain", ["q", "leapfrogs", "sum_q", "sum_q2", "divergent"])


def make_blackjax(precision: np.ndarray, step_size: float, max_depth: int, num_steps: int):
    """`make_blackjax_for` the same Gaussian (precision matrix `precision`)."""
    import jax.numpy as jnp

    prec = jnp.asarray(precision)
    return make_blackjax_for(lambda q: -0.5 * (q @ prec @ q), precision.shape[0], step_size, max_depth, num_steps)


def make_blackjax_for(logdensity, dim: int, step_size: float, max_depth: int, num_steps: int):
    """`jit(vmap(run_chain))` of BlackJAX's NUTS on the one-chain `logdensity` of a `dim`-vector:
    `num_steps` transitions of `blackjax.nuts(...).step` in a `lax.scan`, one PRNG key per chain,
    identity inverse mass matrix (given as its diagonal of ones), at most `max_depth` doublings
    (2**max_depth - 1 leapfrogs), no warm-up.

    Called as `fn(q0 [B, D], keys [B])`; returns a `BlackjaxChain` whose `leapfrogs` is
    `NUTSInfo.num_integration_steps` per chain and transition ([B, num_steps])."""
    import blackjax
    import jax
    import jax.numpy as jnp
    from jax import lax

    nuts = blackjax.nuts(
        logdensity, step_size, jnp.ones(dim), max_num_doublings=max_depth, divergence_threshold=ex.MAX_ENERGY_ERROR
    )

    def run_chain(q, key):
        def step(carry, step_key):
            state, sum_q, sum_q2 = carry
            state, info = nuts.step(step_key, state)
            q = state.position
            return (state, sum_q + q, sum_q2 + q * q), (info.num_integration_steps, info.is_divergent)

        init = (nuts.init(q), jnp.zeros_like(q), jnp.zeros_like(q))
        (state, sum_q, sum_q2), (leapfrogs, divergent) = lax.scan(
            step, init, jax.random.split(key, num_steps)
        )
        return BlackjaxChain(state.position, leapfrogs, sum_q, sum_q2, divergent.sum())

    return jax.jit(jax.vmap(run_chain))


def check_blackjax(got: BlackjaxChain, max_depth: int) -> None:
    """A light check (BlackJAX's RNG differs, so its samples cannot equal abir's): finite results
    and a leapfrog count per transition within NUTS's bounds."""
    for name in ("q", "sum_q", "sum_q2"):
        assert np.isfinite(getattr(got, name)).all(), f"BlackJAX {name} is not finite"
    assert ((got.leapfrogs >= 1) & (got.leapfrogs < 2**max_depth)).all(), "BlackJAX leapfrogs out of range"


def moments_summary(sum_q: np.ndarray, sum_q2: np.ndarray, draws: int) -> str:
    """The pooled sample mean and variance of `draws` draws against the target's (mean 0,
    `ex.COVARIANCE`): the largest |mean| in true standard deviations, the range of variance / true."""
    mean = sum_q.sum(axis=0) / draws
    var = sum_q2.sum(axis=0) / draws - mean**2
    true_var = np.diag(ex.COVARIANCE)
    ratio = var / true_var
    return f"max |mean|/sd {np.max(np.abs(mean) / np.sqrt(true_var)):.2f}, var/true {ratio.min():.2f}..{ratio.max():.2f}"


@dataclasses.dataclass(frozen=True)
class Inputs:
    """One benchmark case: B chains from the positions `q0` with abir's per-chain `keys`."""

    batch: int
    q0: np.ndarray
    keys: np.ndarray
    eps: float
    steps: int


def make_inputs(batch: int, args: argparse.Namespace) -> Inputs:
    q0 = ex.initial_positions(args.seed, batch, ex.DIM)
    return Inputs(batch, q0, ex.chain_keys(args.seed, batch), args.step_size, args.steps)


@dataclasses.dataclass
class Row:
    """One system's line of the table. `first` is None for the eager systems, timed by one call;
    `leapfrogs` is over all chains; `vmap_iterations` the leapfrogs a lock-step batch runs."""

    name: str
    first: float | None
    steady: float | None
    leapfrogs: int | None = None
    vmap_iterations: int | None = None

    @property
    def per_leapfrog(self) -> float | None:
        """Steady seconds per leapfrog (of all chains)."""
        if self.steady is None or not self.leapfrogs:
            return None
        return self.steady / self.leapfrogs


def timed(fn, repeats: int) -> tuple[float, float, object]:
    """(first call, median of `repeats` later calls, first result), in seconds."""
    start = time.perf_counter()
    result = fn()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return first, statistics.median(times) if times else first, result


def run_python(nuts, inputs: Inputs) -> tuple[float, ex.Chain]:
    """Plain Python, chain by chain: (seconds, Chain)."""
    start = time.perf_counter()
    want = ex.run_per_chain(nuts, inputs.q0, inputs.eps, inputs.keys, inputs.steps)
    return time.perf_counter() - start, want


def abir_call(nuts, run, inputs: Inputs, backend: Callable[[], abir.Backend]) -> Callable[[], object]:
    """One call of the batched sampler on `inputs` on the backend `backend()` returns, its result
    ready."""
    import jax

    def call() -> object:
        return jax.block_until_ready(
            run(inputs.q0, inputs.eps, inputs.keys, np.int64(inputs.steps), backend=backend(),
                max_stack_depth=ex.stack_depth(nuts))  # fmt: skip
        )

    return call


def hand_call(inputs: Inputs, args: argparse.Namespace) -> Callable[[], object]:
    """One call of the hand-vectorized JAX sampler on `inputs`, its result ready."""
    import jax

    hand = make_hand_vectorized(ex.PRECISION, args.max_depth, inputs.steps)
    return lambda: jax.block_until_ready(hand(inputs.q0, inputs.eps, inputs.keys))


def blackjax_call(inputs: Inputs, args: argparse.Namespace) -> Callable[[], object]:
    """One call of BlackJAX's NUTS from the same q0 (its own per-chain keys), its result ready."""
    import jax

    sampler = make_blackjax(ex.PRECISION, inputs.eps, args.max_depth, inputs.steps)
    keys = jax.random.split(jax.random.key(args.seed), inputs.batch)
    return lambda: jax.block_until_ready(sampler(inputs.q0, keys))


def run_abir_numpy(nuts, run, inputs: Inputs, repeats: int) -> tuple[float, float, ex.Chain, object]:
    """abir on NumPy: (first call, including abir's compilation; steady; Chain; the backend's
    machine statistics)."""
    backend = abir.NumpyBackend()
    first, steady, result = timed(abir_call(nuts, run, inputs, lambda: backend), repeats)
    return first, steady, ex.as_chain(result), backend.last_stats


def run_abir_jax(nuts, run, inputs: Inputs, repeats: int) -> tuple[float, float, ex.Chain, object]:
    """abir on JAX: (first call, steady, Chain, the statistics of one more call with
    `collect_stats=True`, gathered inside the compiled loop; not timed)."""
    first, steady, got = timed(abir_call(nuts, run, inputs, abir.JaxBackend), repeats)
    counting = abir.JaxBackend(collect_stats=True)
    abir_call(nuts, run, inputs, lambda: counting)()
    return first, steady, ex.as_chain(got), counting.last_stats


def run_abir_tf_xla(nuts, run, inputs: Inputs, repeats: int) -> tuple[float, float, ex.Chain]:
    """abir on TensorFlow + XLA: (first call, steady, Chain)."""
    backend = abir.TensorFlowBackend(jit_compile=True)
    first, steady, got = timed(abir_call(nuts, run, inputs, lambda: backend), repeats)
    return first, steady, ex.as_chain(got)


def run_hand(inputs: Inputs, args: argparse.Namespace) -> tuple[float, float, ex.Chain]:
    """The hand-vectorized JAX sampler: (first call, steady, Chain)."""
    first, steady, got = timed(hand_call(inputs, args), args.repeats)
    return first, steady, ex.as_chain(got)


def run_blackjax(inputs: Inputs, args: argparse.Namespace) -> tuple[float, float, BlackjaxChain]:
    """BlackJAX's NUTS from the same q0 (its own per-chain keys): (first call, steady, result)."""
    first, steady, got = timed(blackjax_call(inputs, args), args.repeats)
    got = BlackjaxChain(*(np.asarray(x) for x in got))
    check_blackjax(got, args.max_depth)
    return first, steady, got


FIRST_CALLS: dict[str, Callable[[Inputs, argparse.Namespace], Callable[[], object]]] = {
    "abir NumPy": lambda inputs, args: abir_call(*_batched(args), inputs, abir.NumpyBackend),
    "abir JAX": lambda inputs, args: abir_call(*_batched(args), inputs, abir.JaxBackend),
    "abir TF+XLA": lambda inputs, args: abir_call(
        *_batched(args), inputs, lambda: abir.TensorFlowBackend(jit_compile=True)
    ),
    "hand-vectorized JAX": hand_call,
    "BlackJAX": blackjax_call,
}
"""The systems whose first call `fresh_first_call` times, and how to make that call."""


def _batched(args: argparse.Namespace) -> tuple[object, object]:
    """(the per-chain sampler, its batched form)."""
    nuts = ex.make_nuts(ex.PRECISION, args.max_depth)
    return nuts, ex.batch(nuts)


def fresh_first_call(system: str, batch: int, args: argparse.Namespace) -> float:
    """Seconds of `system`'s first call on B=`batch` chains in a Python process of its own (this
    script with `--first-call`; same interpreter, environment and CPU affinity). In one process
    each first call finds what the systems before it left: JAX's caches and the allocator warm,
    a larger Python heap (B=1024 on one core, one run: abir JAX 3.71 s in the process, 3.26 s
    fresh; BlackJAX, timed last, 4.45 and 4.07 s)."""
    command = [
        sys.executable, __file__, "--first-call", system, "--batch", str(batch), "--steps", str(args.steps),
        "--max-depth", str(args.max_depth), "--step-size", str(args.step_size), "--seed", str(args.seed),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(FIRST_CALL_PREFIX)]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the first call of {system} failed:\n{done.stderr[-2000:]}")
    return float(lines[-1].removeprefix(FIRST_CALL_PREFIX))


FIRST_CALL_PREFIX = "first call seconds: "


def time_first_call(system: str, batch: int, args: argparse.Namespace) -> None:
    """`--first-call`: time `system`'s first call in this fresh process and print it. The
    runtime it uses (JAX's, or TensorFlow's for TF+XLA) is started and one small program
    compiled first, untimed, as a user's script would have done before calling the sampler."""
    import jax

    if system == "abir TF+XLA":
        import tensorflow as tf

        tf.function(lambda x: x + 1, jit_compile=True)(tf.constant(1.0, tf.float64))
    else:
        jax.block_until_ready(jax.jit(lambda x: x + 1)(np.float64(1.0)))
    call = FIRST_CALLS[system](make_inputs(batch, args), args)
    start = time.perf_counter()
    call()
    print(f"{FIRST_CALL_PREFIX}{time.perf_counter() - start:.6f}")


def check_against(got: ex.Chain, want: ex.Chain | None, nuts, inputs: Inputs) -> None:
    """`got` equals the plain Python run `want`, or when there is none, that of 16 chains."""
    if want is None:
        few = min(inputs.batch, 16)
        want = ex.run_per_chain(nuts, inputs.q0[:few], inputs.eps, inputs.keys[:few], inputs.steps)
        got = ex.Chain(*(x[:few] for x in got))
    ex.compare(got, want)


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return f"{'-':>10}"
    return f"{seconds * 1e3:8.1f}ms" if seconds < 10 else f"{seconds:8.2f}s "


def fmt_int(value: int | None, width: int) -> str:
    return f"{'-' if value is None else f'{value:,}':>{width}}"


def ratio(a: float | None, b: float | None, width: int = 10) -> str:
    """a / b as "1.23x" right-aligned in `width`, or "-" if either is missing."""
    return (f"{a / b:.2f}x" if a is not None and b else "-").rjust(width)


def bench(batch: int, args: argparse.Namespace) -> None:
    """Run every system on B=`batch` chains, check the results and print the table."""
    nuts = ex.make_nuts(ex.PRECISION, args.max_depth)
    run = ex.batch(nuts)
    inputs = make_inputs(batch, args)

    python_time, want = run_python(nuts, inputs) if batch <= args.python_max_batch else (None, None)
    _, numpy_time, got_np, numpy_stats = run_abir_numpy(nuts, run, inputs, args.repeats)
    check_against(got_np, want, nuts, inputs)
    jax_first, jax_steady, got, stats = run_abir_jax(nuts, run, inputs, args.repeats)
    ex.compare(got, got_np)
    _, tf_steady, got = run_abir_tf_xla(nuts, run, inputs, args.repeats)
    ex.compare(got, got_np)
    _, hand_steady, got = run_hand(inputs, args)
    ex.compare(got, got_np)
    bj_first, bj_steady, bj = run_blackjax(inputs, args)

    first = {system: fresh_first_call(system, batch, args) for system in FIRST_CALLS}
    leapfrogs = int(got_np.leapfrogs.sum())
    abir_iterations = int(got_np.leapfrogs.max())  # abir's chains never wait for each other's transitions
    bj_leapfrogs = int(bj.leapfrogs.sum())
    bj_iterations = int(bj.leapfrogs.max(axis=0).sum())  # vmap: every transition as long as its longest chain
    rows = [
        Row("plain Python, chain by chain", None, python_time, leapfrogs),
        Row("abir NumPy", first["abir NumPy"], numpy_time, leapfrogs, abir_iterations),
        Row("abir JAX", first["abir JAX"], jax_steady, leapfrogs, abir_iterations),
        Row("abir TF+XLA", first["abir TF+XLA"], tf_steady, leapfrogs, abir_iterations),
        Row("hand-vectorized JAX jit(vmap(iterative))", first["hand-vectorized JAX"], hand_steady, leapfrogs),
        Row("BlackJAX jit(vmap(scan(nuts.step)))", first["BlackJAX"], bj_steady, bj_leapfrogs, bj_iterations),
    ]
    print_table(inputs, args, rows, stats, numpy_stats)
    per_transition = got_np.leapfrogs / inputs.steps
    print(f"leapfrogs per transition: abir mean {per_transition.mean():.1f} (longest chain's mean "
          f"{per_transition.max():.1f}); BlackJAX mean {bj.leapfrogs.mean():.1f} (mean of the per-transition "
          f"max over chains {bj.leapfrogs.max(axis=0).mean():.1f}), {int(bj.divergent.sum())} divergent")  # fmt: skip
    draws = batch * inputs.steps
    print(f"moments over {draws} draws: abir {moments_summary(got_np.sum_q, got_np.sum_q2, draws)}; "
          f"BlackJAX {moments_summary(bj.sum_q, bj.sum_q2, draws)}")  # fmt: skip
    abir_jax, blackjax_row = rows[2], rows[5]
    print(f"abir JAX / BlackJAX: steady {ratio(abir_jax.steady, blackjax_row.steady, 0)}, "
          f"per leapfrog {ratio(abir_jax.per_leapfrog, blackjax_row.per_leapfrog, 0)}, "
          f"first call {ratio(abir_jax.first, blackjax_row.first, 0)} (in this process, after the systems "
          f"before each: {fmt(jax_first).strip()} / {fmt(bj_first).strip()} = {ratio(jax_first, bj_first, 0)})")  # fmt: skip
    print(f"abir JAX per block run: {jax_steady / stats.steps * 1e6:.1f} us, per sweep "
          f"{jax_steady / stats.sweeps * 1e6:.1f} us; abir NumPy per machine step: "
          f"{numpy_time / numpy_stats.steps * 1e6:.1f} us")  # fmt: skip


def print_table(inputs: Inputs, args: argparse.Namespace, rows: list[Row], stats, numpy_stats) -> None:
    """The header lines and one line per system (ratios of steady times to BlackJAX and hand JAX)."""
    print(f"\nB={inputs.batch}  D={ex.DIM}  max depth {args.max_depth}  {inputs.steps} steps  "
          f"step size {inputs.eps}")  # fmt: skip
    leaf = max(range(len(stats.block_steps)), key=lambda b: stats.block_steps[b] if stats.block_members[b] else -1)
    print(f"abir JAX (sweeps): {stats.sweeps} sweeps running {stats.steps} blocks, ideal {stats.ideal_steps} "
          f"({stats.steps / stats.ideal_steps:.2f}x), lane use {stats.lane_use:.3f}; "
          f"busiest block {leaf}: {stats.block_steps[leaf]} runs, occupancy {stats.occupancy(leaf):.2f}")  # fmt: skip
    print(f"abir NumPy (one block per step): {numpy_stats.steps} steps, ideal {numpy_stats.ideal_steps} "
          f"({numpy_stats.steps / numpy_stats.ideal_steps:.2f}x), lane use {numpy_stats.lane_use:.3f}")  # fmt: skip
    print(f"{'':42} {'first call':>10} {'steady':>10} {'leapfrogs':>10} {'us/leapfrog':>11} "
          f"{'vmap iters':>10} {'/ BlackJAX':>10} {'/ hand JAX':>10}")  # fmt: skip
    blackjax_steady, hand_steady = rows[-1].steady, rows[-2].steady
    for row in rows:
        per = f"{row.per_leapfrog * 1e6:11.2f}" if row.per_leapfrog is not None else f"{'-':>11}"
        print(f"{row.name:42} {fmt(row.first)} {fmt(row.steady)} {fmt_int(row.leapfrogs, 10)} {per} "
              f"{fmt_int(row.vmap_iterations, 10)} {ratio(row.steady, blackjax_steady)} "
              f"{ratio(row.steady, hand_steady)}")  # fmt: skip
    print(
        "  first call = trace + compile + run, each in a fresh process; steady = median of later calls\n"
        "  (plain Python: its one call); us/leapfrog = steady / leapfrogs of all chains; vmap iters =\n"
        "  leapfrogs a batch runs in lock-step (abir: the longest chain's total; BlackJAX: per transition\n"
        "  the longest chain's, summed)"
    )


def sweep(args: argparse.Namespace) -> dict[str, list[tuple[int, float]]]:
    """Steady time per call against the batch size, per system (the slow eager systems only up to
    `--figure-slow-max` chains); abir and hand JAX are checked against each other, BlackJAX lightly."""
    nuts = ex.make_nuts(ex.PRECISION, args.max_depth)
    run = ex.batch(nuts)
    series: dict[str, list[tuple[int, float]]] = {
        name: [] for name in ("abir JAX", "BlackJAX", "hand-vectorized JAX", "abir NumPy", "plain Python")
    }
    for batch in args.figure_batches:
        inputs = make_inputs(batch, args)
        _, jax_steady, got, _ = run_abir_jax(nuts, run, inputs, args.repeats)
        _, hand_steady, got_hand = run_hand(inputs, args)
        ex.compare(got_hand, got)
        _, bj_steady, _ = run_blackjax(inputs, args)
        times = {"abir JAX": jax_steady, "BlackJAX": bj_steady, "hand-vectorized JAX": hand_steady}
        if batch <= args.figure_slow_max:
            _, times["abir NumPy"], got_np, _ = run_abir_numpy(nuts, run, inputs, args.repeats)
            ex.compare(got_np, got)
            times["plain Python"], want = run_python(nuts, inputs)
            ex.compare(got, want)
        for name, seconds in times.items():
            series[name].append((batch, seconds))
        print(f"figure B={batch}: " + ", ".join(f"{name} {fmt(s).strip()}" for name, s in times.items()))
    return series


def draw_figure(args: argparse.Namespace) -> None:
    """Measure the sweep and save it as the PNG `args.figure`."""
    from plot_nuts import plot_steady_times  # bench/ is on sys.path when this file runs as a script

    series = sweep(args)
    title = (f"NUTS, D={ex.DIM}, max depth {args.max_depth}, {args.steps} steps, step size {args.step_size} "
             f"({datetime.date.today().isoformat()})")  # fmt: skip
    path = plot_steady_times(series, args.figure, title)
    print(f"figure saved to {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, nargs="*", default=[64, 1024], help="tables for these B")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--step-size", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python-max-batch", type=int, default=1024, help="larger B: check 16 chains only")
    parser.add_argument(
        "--figure", metavar="PATH.png", help="also draw steady time against B (e.g. docs/nuts_bench.png)"
    )
    parser.add_argument("--figure-batches", type=int, nargs="+", default=[16, 64, 256, 1024, 4096])
    parser.add_argument(
        "--figure-slow-max", type=int, default=256, help="abir NumPy and plain Python up to this B"
    )
    parser.add_argument("--first-call", choices=list(FIRST_CALLS), help=argparse.SUPPRESS)  # fresh_first_call
    args = parser.parse_args()
    import jax

    # the hand-vectorized sampler and BlackJAX run in float64, as abir's own runs do
    jax.config.update("jax_enable_x64", True)
    if args.first_call:
        time_first_call(args.first_call, args.batch[0], args)
        return
    for batch in args.batch:
        bench(batch, args)
    if args.figure:
        draw_figure(args)


if __name__ == "__main__":
    main()
