"""`nuts`: the user's entry point, running the per-chain program of `abir.samplers.program` over
the chains in calls of a bounded number of transitions and gathering the kept draws."""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

import abir
from abir.calling import progress_bar, resolve_backend
from abir.samplers import program as per_chain

Stats = collections.namedtuple("Stats", per_chain.Info._fields)
Stats.__doc__ = """Per kept draw, arrays [chains, draws]: tree_depth, leapfrogs, divergent, accept, energy."""


class MissingGradientError(ValueError):
    """`nuts` was asked to run on a backend without autodiff and given no `value_and_grad`."""


@dataclasses.dataclass(frozen=True)
class NutsResult:
    """A NUTS run: `draws` [chains, draws, dim], `stats` (`Stats` of [chains, draws] arrays), the
    adapted `step_size` [chains] and diagonal `inverse_mass` [chains, dim], all NumPy arrays."""

    draws: np.ndarray
    stats: Stats
    step_size: np.ndarray
    inverse_mass: np.ndarray


def jax_value_and_grad(logdensity: Callable) -> Callable:
    """`value_and_grad` from JAX's autodiff: `jax.jit(jax.vmap(jax.value_and_grad(logdensity)))` on whole
    batches [B, dim]; on one position (the per-chain Python run) the unbatched gradient, in float64
    as the batched run computes it."""
    import jax

    single = jax.value_and_grad(logdensity)
    # jitted: type inference calls it on NumPy arrays, where each operation of an unjitted
    # function would compile a program of its own (docs/performance.md#first-calls)
    batched = jax.jit(jax.vmap(single))

    def value_and_grad(q):
        if np.ndim(q) == 1:
            with jax.enable_x64(True):
                value, grad = single(np.asarray(q))
                return np.asarray(value), np.asarray(grad)
        return batched(q)

    return value_and_grad


def require_gradient(logdensity: Callable, value_and_grad: Callable | None, backend: Any) -> None:
    """Raise `MissingGradientError` unless the gradient has a source: the user's `value_and_grad`
    or, on the JAX backend, JAX's autodiff of `logdensity`."""
    if value_and_grad is not None or getattr(backend, "name", None) == "jax":
        return
    name = getattr(backend, "name", "numpy")
    raise MissingGradientError(
        f"abir.samplers.nuts on the {name} backend needs the log density's gradient: the {name} "
        f"backend has no automatic differentiation. Pass value_and_grad=f, with f(q) returning "
        f"(log density, gradient) for positions q of shape [chains, dim] (shapes [chains] and "
        f"[chains, dim]; reduce over axis=-1), or run on backend='jax', which differentiates "
        f"{getattr(logdensity, '__name__', 'logdensity')!r} with jax.value_and_grad"
    )


@functools.lru_cache(maxsize=8)
def batched_program(gradient_source: Callable, uses_autodiff: bool, settings: per_chain.Settings):
    """(initial_state, run_chunk) batched in one Context, kept for later calls with the same log
    density (or value_and_grad) and settings, so they reuse its compiled programs."""
    vg = jax_value_and_grad(gradient_source) if uses_autodiff else gradient_source
    return per_chain.batch(per_chain.make_program(vg, settings), vg)


def chain_keys(seed: int, chains: int) -> np.ndarray:
    """One `abir.random` key per chain: the seed's key folded with the chain index."""
    return abir.random.fold_in(abir.random.key(seed), np.arange(chains))


def chunks(first: int, stop: int, size: int):
    """(first, count) of the calls covering iterations [first, stop)."""
    while first < stop:
        count = min(size, stop - first)
        yield first, count
        first += count


def nuts(
    logdensity: Callable,
    initial_positions,
    *,
    num_warmup: int = 1000,
    num_draws: int = 1000,
    seed: int = 0,
    backend: Any = "numpy",
    value_and_grad: Callable | None = None,
    max_tree_depth: int = 10,
    target_accept: float = 0.8,
    step_size: float = 1.0,
    thin: int = 1,
    chunk_size: int = 10,
    progress: bool = False,
    dry_run: bool = False,
) -> NutsResult:
    """NUTS with Stan's warm-up on `logdensity`, one chain per row of `initial_positions`
    [chains, dim]; see the package's docstring. `dry_run=True` runs the per-chain plain Python
    program chain by chain (the reference a batched run equals)."""
    positions = np.asarray(initial_positions, dtype=np.float64)
    if positions.ndim != 2:
        raise ValueError(
            f"initial_positions must have shape [chains, dim], got {positions.shape}; "
            "for one chain pass positions[None]"
        )
    if max_tree_depth < 1:
        raise ValueError(f"max_tree_depth must be at least 1 (one leapfrog), got {max_tree_depth}")
    if thin < 1 or chunk_size < 1:
        raise ValueError(f"thin and chunk_size must be at least 1, got thin={thin}, chunk_size={chunk_size}")
    resolved = resolve_backend(backend)
    chunk_size = -(-chunk_size // thin) * thin  # a multiple of thin: every call keeps whole rows
    settings = per_chain.Settings(
        dim=positions.shape[1], num_warmup=num_warmup, max_tree_depth=max_tree_depth,
        target_accept=target_accept, thin=thin, chunk_rows=chunk_size // thin,
    )  # fmt: skip
    require_gradient(logdensity, value_and_grad, resolved)
    uses_autodiff = value_and_grad is None
    gradient_source = logdensity if uses_autodiff else value_and_grad
    initial_state, run_chunk = batched_program(gradient_source, uses_autodiff, settings)
    keys = chain_keys(seed, positions.shape[0])
    options = {"backend": resolved, "max_stack_depth": per_chain.stack_depth(settings), "dry_run": dry_run}
    state = initial_state(positions, np.float64(step_size), keys, **options)
    bar = progress_bar("abir.samplers.nuts(progress=True)", num_warmup + num_draws, "transition") if progress else None
    kept_draws, kept_stats = [], []
    total = num_warmup + num_draws
    for first, count in [*chunks(0, num_warmup, chunk_size), *chunks(num_warmup, total, chunk_size)]:
        state, draws, info = run_chunk(state, keys, np.int64(first), np.int64(count), **options)
        if first >= num_warmup:
            rows = -(-count // thin)
            kept_draws.append(np.asarray(draws)[:, :rows])
            kept_stats.append([np.asarray(leaf)[:, :rows] for leaf in info])
        if bar is not None:
            bar.update(count)
    if bar is not None:
        bar.close()
    dim = positions.shape[1]
    chains = positions.shape[0]
    draws = np.concatenate(kept_draws, axis=1) if kept_draws else np.zeros((chains, 0, dim))
    stats = Stats(*(np.concatenate(leaves, axis=1) for leaves in zip(*kept_stats, strict=True)))
    if not kept_stats:
        stats = Stats(*(np.zeros((chains, 0)) for _ in Stats._fields))
    return NutsResult(draws, stats, np.asarray(state.step_size), np.asarray(state.inverse_mass))
