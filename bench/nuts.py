"""NUTS benchmark: the per-chain program of examples/nuts.py batched by abir, against baselines.

    .venv/bin/python bench/nuts.py                      # B=64 and B=1024, D=10, depth 6, 20 steps
    .venv/bin/python bench/nuts.py --batch 64 --repeats 5

Rows, all measured in one run on the same inputs:
* abir on JAX (first call = trace + XLA compile + run; steady = median of later calls);
* abir on NumPy (one call, eager);
* plain Python: the same per-chain program run chain by chain (NumPy scalars/vectors);
* hand-vectorized JAX: `jit(vmap(sample_chain))` of an ITERATIVE rewrite of the same sampler
  written here by hand (the recursive subtree becomes a `lax.while_loop` over leaves with an
  explicit per-level stack of left halves, merges in the same post-order, same RNG draws), so its
  results equal abir's; this is the design of hand-written JAX NUTS implementations.

Every result is checked against the plain Python run before it is timed. Machine steps, the ideal
(the longest member's own block count) and lane use come from `abir.NumpyBackend().last_stats`.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import statistics
import time

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
    lanes = jnp.arange(dim, dtype=jnp.uint32)

    def normal(key, counter):
        base = counter * ex.DRAW_STRIDE
        u1 = (ex.mix32(ex.mix32(base + lanes) + key) >> 8).astype(jnp.float64) * 2.0**-24 + 2.0**-25
        u2 = (ex.mix32(ex.mix32(base + lanes + dim) + key) >> 8).astype(jnp.float64) * 2.0**-24
        return jnp.sqrt(-2.0 * jnp.log(u1)) * jnp.cos(6.283185307179586 * u2)

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
                take = jnp.log(ex.uniform(key, counter)) < lw - new_lw
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
            go_left = ex.uniform(key, counter) < 0.5
            step = jnp.where(go_left, -eps, eps)
            start = jax.tree.map(lambda a, b: jnp.where(go_left, a, b), left, right)
            _, _, last, t_sample, t_lw, taken, ok, counter = subtree(
                start, step, depth, energy0, key, counter + 1
            )
            left = jax.tree.map(lambda a, b: jnp.where(ok & go_left, a, b), last, left)
            right = jax.tree.map(lambda a, b: jnp.where(ok & ~go_left, a, b), last, right)
            take = ok & (jnp.log(ex.uniform(key, counter)) < t_lw - lw)
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

        init = (q, key - key, jnp.int64(0), jnp.zeros_like(q), jnp.zeros_like(q))
        return lax.fori_loop(0, num_steps, step, init)

    return jax.jit(jax.vmap(sample_chain, in_axes=(0, None, 0)))


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


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return f"{'-':>10}"
    return f"{seconds * 1e3:8.1f}ms" if seconds < 10 else f"{seconds:8.2f}s "


def bench(batch: int, args) -> None:
    import jax

    nuts = ex.make_nuts(ex.PRECISION, args.max_depth)
    keys = ex.chain_keys(args.seed, batch)
    q0 = ex.initial_positions(args.seed, batch, ex.DIM)
    eps, steps = args.step_size, args.steps
    run = ex.batch(nuts)
    depth = ex.stack_depth(nuts)
    rows: list[tuple[str, float | None, float | None]] = []

    python_time = None
    if batch <= args.python_max_batch:
        start = time.perf_counter()
        want = ex.run_per_chain(nuts, q0, eps, keys, steps)
        python_time = time.perf_counter() - start
    else:  # the reference for checking: a few chains only
        want = None
    rows.append(("plain Python, chain by chain", None, python_time))

    numpy_backend = abir.NumpyBackend()
    start = time.perf_counter()
    got_np = ex.as_chain(run(q0, eps, keys, np.int64(steps), backend=numpy_backend, max_stack_depth=depth))
    numpy_time = time.perf_counter() - start
    stats = numpy_backend.last_stats
    if want is None:
        few = min(batch, 16)
        ref = ex.run_per_chain(nuts, q0[:few], eps, keys[:few], steps)
        ex.compare(ex.Chain(*(x[:few] for x in got_np)), ref)
    else:
        ex.compare(got_np, want)
    rows.append(("abir NumPy", None, numpy_time))

    jax_backend = abir.JaxBackend()
    first, steady, got = timed(
        lambda: jax.block_until_ready(
            run(q0, eps, keys, np.int64(steps), backend=jax_backend, max_stack_depth=depth)
        ),
        args.repeats,
    )
    ex.compare(ex.as_chain(got), got_np)
    rows.append(("abir JAX", first, steady))

    hand = make_hand_vectorized(ex.PRECISION, args.max_depth, steps)
    first, steady_hand, got = timed(lambda: jax.block_until_ready(hand(q0, eps, keys)), args.repeats)
    ex.compare(ex.as_chain(got), got_np)
    rows.append(("hand-vectorized JAX jit(vmap(iterative))", first, steady_hand))

    leapfrogs = got_np.leapfrogs / steps
    print(f"\nB={batch}  D={ex.DIM}  max depth {args.max_depth}  {steps} steps  step size {eps}")
    print(f"leapfrogs per transition: mean {leapfrogs.mean():.1f}, max-chain mean {leapfrogs.max():.1f}; "
          f"machine steps {stats.steps}, ideal {stats.ideal_steps} ({stats.steps / stats.ideal_steps:.2f}x), "
          f"lane use {stats.lane_use:.3f}")  # fmt: skip
    print(f"{'':42} {'first call':>10} {'steady':>10} {'/ hand JAX':>11}")
    for name, first_call, steady_time in rows:
        ratio = f"{steady_time / steady_hand:10.1f}x" if steady_time is not None else f"{'-':>11}"
        print(f"{name:42} {fmt(first_call)} {fmt(steady_time)} {ratio}")
    jax_steady = rows[2][2]
    print(f"abir JAX per machine step: {jax_steady / stats.steps * 1e6:.1f} us; "
          f"abir NumPy per machine step: {numpy_time / stats.steps * 1e6:.1f} us")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 1024])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--step-size", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--python-max-batch", type=int, default=1024, help="larger B: check 16 chains only")
    args = parser.parse_args()
    for batch in args.batch:
        bench(batch, args)


if __name__ == "__main__":
    main()
