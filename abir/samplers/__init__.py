"""Samplers written per chain and batched by abir: `abir.samplers.nuts` on a user's log density.

```python
import jax.numpy as jnp
import abir.samplers

def logdensity(q):                      # ONE position, shape [dim]
    return -0.5 * jnp.sum(q * q / scales**2)

result = abir.samplers.nuts(logdensity, initial_positions, num_warmup=1000, num_draws=1000,
                            seed=0, backend="jax")
result.draws              # [chains, draws, dim]
result.stats.divergent    # [chains, draws], and tree_depth, leapfrogs, accept, energy
result.step_size          # [chains], adapted per chain
result.inverse_mass       # [chains, dim], the adapted diagonal inverse mass matrix
```

The sampler is ordinary abir code: a function for ONE chain with real control flow (the tree
doubling of NUTS, one leapfrog per loop iteration, and the warm-up), batched over the chains
by abir's compiler, so every chain builds trajectories of its own length and adapts its own step size and mass matrix
without waiting for the others (`abir/samplers/program.py`). It is Stan's sampler: multinomial
NUTS with the generalized U-turn criterion (and the checks across the halves of every merge),
divergences (an energy error above 1000) counted and ending the trajectory, at most
`max_tree_depth` doublings; warm-up by Stan's windowed adaptation (dual averaging of the step
size with target acceptance `target_accept`, gamma 0.05, t0 10, kappa 0.75; a diagonal inverse
mass matrix estimated by Welford's algorithm in windows of 25, 50, 100, ... iterations between
an initial buffer of 75 and a terminal one of 50, regularized as Stan does, each window end
restarting the dual averaging at ten times the step size found by Stan's search: doubling or
halving it until one leapfrog's acceptance probability crosses 0.8. At the start the search
runs from `step_size` (default 1) and the first window shrinks towards ten times `step_size`,
as Stan does. Where Stan raises on a step size beyond 1e7 or 0, the search stops after 50
doublings or halvings and the warm-up goes on). The final step size is the dual averaging's
average over the terminal window, exp(x_bar).

**The gradient.** `logdensity(q)` takes one position (a vector of `dim` floats) and returns its
log density (up to a constant). On the JAX backend write it with `jax.numpy`: abir declares
`jax.vmap(jax.value_and_grad(logdensity))` a whole-batch primitive (`ctx.primitive`), so the
gradient comes from JAX's autodiff. On NumPy and TensorFlow pass `value_and_grad=`: a function
of positions `q` returning `(log density, gradient)`, written for whole batches (called with `q`
of shape [chains, dim] it returns shapes [chains] and [chains, dim]; reduce over `axis=-1`), the
contract of a primitive (docs/language.md, "Helpers"). Without it those backends raise
`abir.samplers.MissingGradientError` naming the fix.

**Randomness** is per chain and deterministic: chain c draws with `abir.random` from the key
`fold_in(key(seed), c)` and a counter it carries, so a run is the same on every backend and the
same as the per-chain plain Python run (`dry_run=True`, one chain after the other).

**Draws and memory.** The iterations run in calls of at most `chunk_size` transitions (a
multiple of `thin`); each call returns only its kept draws and their statistics, so memory grows
with what is kept: `num_draws // thin` (rounded up) draws per chain. `stats` holds per kept draw
`tree_depth` (doublings kept), `leapfrogs`, `divergent`, `accept` (Stan's mean acceptance
probability over the trajectory) and `energy` (the Hamiltonian at the draw).

**Options.** `max_tree_depth` (10), `target_accept` (0.8), `step_size` (1.0, where the
warm-up's search starts; with `num_warmup=0` the fixed step size), `thin` (1), `chunk_size`
(10 transitions per call: the kept draws' arrays,
`chunk_size` rows per chain, cost every sweep of the compiled loop; docs/performance.md,
"NUTS on users' models"), `dry_run=True` (the per-chain plain Python run, chain by chain). A
later call with the same `logdensity` (or `value_and_grad`) and settings reuses the compiled
program.

**Progress.** `progress=True` shows a tqdm bar of the transitions done (all chains advance
together between calls), updated between calls, so the compiled loop is not slowed down; tqdm
must be installed.
"""

from __future__ import annotations

from abir.samplers.nuts import MissingGradientError, NutsResult, Stats, nuts

__all__ = ["MissingGradientError", "NutsResult", "Stats", "nuts"]
