"""The No-U-Turn Sampler written for ONE chain in plain Python, run over many chains by abir.

The sampler is the multinomial variant of NUTS (Betancourt, "A Conceptual Introduction to
Hamiltonian Monte Carlo", 2017, appendix A; Hoffman & Gelman 2014 for the tree doubling):

* one transition draws a momentum, then doubles the trajectory (a `while` loop, at most
  `max_depth` doublings, so at most 2**max_depth - 1 leapfrogs) in a random direction;
* each doubling builds a balanced subtree of 2**depth leapfrogs with the recursive
  `build_tree` (the depth differs per chain, so the recursion differs per chain);
* inside a subtree the candidate is drawn in proportion to exp(-H) (uniform progressive
  sampling); when a new subtree joins the trajectory, its candidate replaces the current sample
  with probability min(1, w_subtree / w_trajectory) (biased progressive sampling);
* a subtree whose endpoints make a U-turn (Hoffman & Gelman's criterion on the endpoints, at
  every merge) or whose energy error exceeds `MAX_ENERGY_ERROR` (a divergence) is rejected
  and ends the trajectory; the trajectory also ends when its own endpoints U-turn.

Randomness is per chain and deterministic: `abir.random`'s counter-based draws (Threefry-2x32,
as in JAX) from the chain's key and a draw counter, the same in the per-chain Python run and on
every backend. The draw counter is carried in the chain state and threaded through the
recursion; every draw uses its own counter value.

The target is a D-dimensional Gaussian with a fixed correlated precision matrix; its log density
and gradient are written with `@` on the member's own vector.

Run `python examples/nuts.py` (B chains x N steps on abir's NumPy, JAX and TF+XLA backends, checked
member by member against the per-chain Python run, then sample moments against the truth).
"""

from __future__ import annotations

import argparse
import collections
import time
import types

import numpy as np

import abir

DIM = 10
MAX_ENERGY_ERROR = 1000.0


def correlated_precision(dim: int, rho: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """(precision, covariance) of a Gaussian with covariance s_i s_j rho**|i-j| (an AR(1)
    correlation with scales s_i spread over [0.5, 2])."""
    scales = np.geomspace(0.5, 2.0, dim)
    lags = np.abs(np.subtract.outer(np.arange(dim), np.arange(dim)))
    covariance = np.outer(scales, scales) * rho**lags
    precision = np.linalg.inv(covariance)
    precision = 0.5 * (precision + precision.T)  # exactly symmetric
    return precision, covariance


PRECISION, COVARIANCE = correlated_precision(DIM)

# A phase-space point with the log density's gradient at q, and a subtree built by `build_tree`:
# `first_q`/`first_p` the end next to where it started, `last` its far end, `sample` the position
# drawn from it. Values live across a recursive call are kept on abir's stacks, and every
# machine step of the JAX backend costs in proportion to the whole state: the tuples carry only
# what later steps read (the log density is recomputed where it is needed).
Point = collections.namedtuple("Point", ["q", "p", "grad"])
Tree = collections.namedtuple(
    "Tree", ["first_q", "first_p", "last", "sample", "log_weight", "leapfrogs", "ok"]
)
Chain = collections.namedtuple("Chain", ["q", "counter", "leapfrogs", "sum_q", "sum_q2"])


def no_u_turn(first_q, first_p, last_q, last_p, direction):
    """Whether the span from `first` to `last` (going the way of `direction`'s sign) has not started to turn
    back: both end momenta still point along it (Hoffman & Gelman's criterion).

    Opaque to abir (whole-batch arrays [B, dim] and [B]; reduces over axis -1 so it also runs on
    one chain's vectors)."""
    span = last_q - first_q
    return (direction * (span * first_p).sum(axis=-1) >= 0.0) & (
        direction * (span * last_p).sum(axis=-1) >= 0.0
    )


def make_nuts(precision: np.ndarray, max_depth: int) -> types.SimpleNamespace:  # noqa: C901 (closures)
    """The per-chain sampler for the Gaussian with `precision`, as plain Python functions.

    The functions close over the constants and call each other by name; batch them with
    `batch(nuts)` or call them directly for one chain (`nuts.sample_chain(...)`).

    `abir.random.uniform`, `abir.random.normal` and `no_u_turn` are called as opaque primitives
    (elementwise code, correct on whole batches). Helpers batched in the same Context would cost
    nothing either: abir's `inline-calls` pass copies non-recursive functions into their callers
    (the machine runs the same blocks whether the leapfrog and the density are such helpers or
    written inline; only the recursion of `build_tree` stays a call). Neither does the order of
    the code: the compiler numbers the blocks from the control-flow graph, so writing the leaf
    of `build_tree` first or last gives the same run (test/unit/test_sweep.py checks this on a
    recursive tree)."""
    dim = precision.shape[0]

    def normal(key, counter):
        """A standard normal vector of `dim` entries, and the next counter."""
        return abir.random.normal(key, counter, shape=(dim,)), counter + 1

    def build_tree(start, step, depth, energy0, key, counter):
        """A subtree of 2**depth leapfrogs of signed size `step` from the Point `start`;
        returns (Tree, counter)."""
        if depth == 0:
            # One leapfrog step (identity mass matrix); the gradient of the log density -q.P.q/2
            # is -P q.
            p = start.p + (0.5 * step) * start.grad
            q = start.q + step * p
            grad = -(q @ precision)
            p = p + (0.5 * step) * grad
            energy = 0.5 * (p @ p) - 0.5 * (grad @ q)
            ok = energy - energy0 < MAX_ENERGY_ERROR  # False for a divergence (or NaN)
            return Tree(q, p, Point(q, p, grad), q, energy0 - energy, 1, ok), counter
        inner, counter = build_tree(start, step, depth - 1, energy0, key, counter)
        if not inner.ok:
            return inner, counter
        outer, counter = build_tree(inner.last, step, depth - 1, energy0, key, counter)
        leapfrogs = inner.leapfrogs + outer.leapfrogs
        if not outer.ok:
            return Tree(inner.first_q, inner.first_p, outer.last, inner.sample, inner.log_weight,
                        leapfrogs, False), counter  # fmt: skip
        log_weight = np.logaddexp(inner.log_weight, outer.log_weight)
        sample = inner.sample
        if np.log(abir.random.uniform(key, counter)) < outer.log_weight - log_weight:  # multinomial
            sample = outer.sample
        last = outer.last
        ok = no_u_turn(inner.first_q, inner.first_p, last.q, last.p, step)
        return Tree(inner.first_q, inner.first_p, last, sample, log_weight, leapfrogs, ok), counter + 1

    def transition(q, grad, eps, key, counter):
        """One NUTS transition from q; returns (new q, leapfrogs, counter)."""
        p, counter = normal(key, counter)
        energy0 = 0.5 * (p @ p) - 0.5 * (grad @ q)
        left = Point(q, p, grad)
        right = left
        sample = q
        log_weight = 0.0
        leapfrogs = 0
        depth = 0
        while depth < max_depth:
            step = eps
            start = right
            if abir.random.uniform(key, counter) < 0.5:
                step = -eps
                start = left
            tree, counter = build_tree(start, step, depth, energy0, key, counter + 1)
            leapfrogs += tree.leapfrogs
            if not tree.ok:
                break
            if step > 0.0:
                right = tree.last
            else:
                left = tree.last
            if np.log(abir.random.uniform(key, counter)) < tree.log_weight - log_weight:  # biased progressive
                sample = tree.sample
            counter = counter + 1
            log_weight = np.logaddexp(log_weight, tree.log_weight)
            depth += 1
            if not no_u_turn(left.q, left.p, right.q, right.p, 1.0):
                break
        return sample, leapfrogs, counter

    def sample_chain(q, eps, key, num_steps):
        """`num_steps` transitions from q; returns the Chain (last position, draw counter, total
        leapfrogs, running sums of q and q**2 over the kept samples)."""
        counter = 0
        leapfrogs = 0
        sum_q = 0.0 * q
        sum_q2 = 0.0 * q
        for _ in range(num_steps):
            grad = -(q @ precision)
            q, taken, counter = transition(q, grad, eps, key, counter)
            leapfrogs += taken
            sum_q = sum_q + q
            sum_q2 = sum_q2 + q * q
        return Chain(q, counter, leapfrogs, sum_q, sum_q2)

    return types.SimpleNamespace(
        normal=normal, build_tree=build_tree, transition=transition, sample_chain=sample_chain,
        max_depth=max_depth, dim=dim,
    )  # fmt: skip


FUNCTIONS = ("normal", "build_tree", "transition", "sample_chain")  # batched together in one Context


def batch(nuts: types.SimpleNamespace, ctx: abir.Context | None = None):
    """The batched `sample_chain` of `nuts` (all its functions registered in one Context)."""
    ctx = ctx or abir.Context()
    batched = {name: ctx.batch_uncurried(getattr(nuts, name)) for name in FUNCTIONS}
    return batched["sample_chain"]


def stack_depth(nuts: types.SimpleNamespace) -> int:
    """A `max_stack_depth` enough for `sample_chain` (build_tree recursion plus the callers)."""
    return nuts.max_depth + 6


def chain_keys(seed: int, chains: int) -> np.ndarray:
    """One `abir.random` key per chain (uint32 [chains, 2]): the seed's key folded with the chain index."""
    return abir.random.fold_in(abir.random.key(seed), np.arange(chains))


def initial_positions(seed: int, chains: int, dim: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(chains, dim))


def run_per_chain(nuts, q0, eps, keys, num_steps) -> Chain:
    """The unbatched reference: the per-chain program run by plain Python, chain by chain."""
    chains = [nuts.sample_chain(q0[b], eps, keys[b], num_steps) for b in range(len(keys))]
    return Chain(*(np.stack([np.asarray(c[k]) for c in chains]) for k in range(len(Chain._fields))))


def as_chain(result) -> Chain:
    return Chain(*(np.asarray(leaf) for leaf in result))


def compare(got: Chain, want: Chain, rtol: float = 1e-9) -> None:
    """Member by member: integers exactly, floats to `rtol`."""
    for name in Chain._fields:
        g, w = np.asarray(getattr(got, name)), np.asarray(getattr(want, name))
        assert g.shape == w.shape, f"{name}: shape {g.shape} != {w.shape}"
        if np.issubdtype(w.dtype, np.integer):
            np.testing.assert_array_equal(g, w, err_msg=name)
        else:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-12, err_msg=name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chains", type=int, default=64)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--max-depth", type=int, default=6)
    parser.add_argument("--step-size", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    nuts = make_nuts(PRECISION, args.max_depth)
    run = batch(nuts)
    keys = chain_keys(args.seed, args.chains)
    q0 = initial_positions(args.seed, args.chains, DIM)
    steps = np.int64(args.steps)

    start = time.perf_counter()
    want = run_per_chain(nuts, q0, args.step_size, keys, args.steps)
    print(f"plain Python, chain by chain: {time.perf_counter() - start:8.3f} s")
    for backend in (abir.NumpyBackend(), abir.JaxBackend(), abir.TensorFlowBackend(jit_compile=True)):
        start = time.perf_counter()
        got = as_chain(
            run(q0, args.step_size, keys, steps, backend=backend, max_stack_depth=stack_depth(nuts))
        )
        elapsed = time.perf_counter() - start
        compare(got, want)
        name = getattr(backend, "label", backend.name)
        print(f"abir on {name:14}:      {elapsed:8.3f} s  (first call; equals the per-chain run)")

    n = args.chains * args.steps
    mean = want.sum_q.sum(axis=0) / n
    var = want.sum_q2.sum(axis=0) / n - mean**2
    print(f"\n{args.chains} chains x {args.steps} steps, {want.leapfrogs.sum() / n:.1f} leapfrogs per step")
    print("dim   mean    (true 0)   variance (true)")
    for i in range(DIM):
        print(f"{i:3d} {mean[i]:8.3f}            {var[i]:8.3f} ({COVARIANCE[i, i]:.3f})")


if __name__ == "__main__":
    main()
