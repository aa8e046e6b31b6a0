"""The samplers bench's systems: NUTS with Stan-style windowed warm-up (dual-averaging step size,
diagonal mass matrix, target acceptance 0.8, at most 10 doublings) on a JAX log density of one
position, from the same initial positions, with the same numbers of warm-up and kept draws.

Each `*_sample(logdensity, positions [chains, dim], num_warmup, num_draws, seed)` (TFP's: the
TensorFlow density of a batch of positions, `DENSITY_OF`) returns a
`Sampled` of NumPy arrays: the kept `draws` [chains, draws, dim] and, per kept draw, `leapfrogs`
(gradient evaluations) and `divergent` [chains, draws]. Calls with the same log density, shapes
and numbers reuse the system's compiled program (abir's lru cache, BlackJAX's `jax.jit` kept in
`SAMPLERS`, NumPyro's `MCMC` object), so a second call measures sampling without compilation.
The caller enables `jax_enable_x64`: every system runs in float64, as abir does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

TARGET_ACCEPT = 0.8
MAX_TREE_DEPTH = 10


@dataclasses.dataclass(frozen=True)
class Sampled:
    """Kept draws [chains, draws, dim] with leapfrogs and divergence per draw [chains, draws]."""

    draws: np.ndarray
    leapfrogs: np.ndarray
    divergent: np.ndarray


def abir_sample(
    logdensity: Callable, positions: np.ndarray, num_warmup: int, num_draws: int, seed: int
) -> Sampled:
    """abir.samplers.nuts on the JAX backend (its gradient from jax.value_and_grad)."""
    import abir.samplers

    result = abir.samplers.nuts(
        logdensity, positions, num_warmup=num_warmup, num_draws=num_draws, seed=seed, backend="jax",
        max_tree_depth=MAX_TREE_DEPTH, target_accept=TARGET_ACCEPT,
    )  # fmt: skip
    return Sampled(result.draws, result.stats.leapfrogs, result.stats.divergent.astype(bool))


_BLACKJAX_PROGRAMS: dict = {}


def blackjax_program(logdensity: Callable, num_warmup: int, num_draws: int) -> Callable:
    """`jit(vmap(run_chain))`: BlackJAX's `window_adaptation` then `num_draws` NUTS steps in a
    `lax.scan`, one chain per (position, key)."""
    import blackjax
    import jax
    from jax import lax

    def run_chain(position, key):
        warmup_key, sample_key = jax.random.split(key)
        warmup = blackjax.window_adaptation(
            blackjax.nuts, logdensity, target_acceptance_rate=TARGET_ACCEPT, max_num_doublings=MAX_TREE_DEPTH
        )
        (state, parameters), _ = warmup.run(warmup_key, position, num_steps=num_warmup)
        kernel = blackjax.nuts(logdensity, **parameters)  # parameters carry max_num_doublings

        def step(state, step_key):
            state, info = kernel.step(step_key, state)
            return state, (state.position, info.num_integration_steps, info.is_divergent)

        _, kept = lax.scan(step, state, jax.random.split(sample_key, num_draws))
        return kept

    return jax.jit(jax.vmap(run_chain))


def blackjax_sample(
    logdensity: Callable, positions: np.ndarray, num_warmup: int, num_draws: int, seed: int
) -> Sampled:
    """BlackJAX's window adaptation + NUTS under `jit(vmap)`."""
    import jax

    key = (logdensity, num_warmup, num_draws)  # the function itself: an id could be reused
    if key not in _BLACKJAX_PROGRAMS:
        _BLACKJAX_PROGRAMS[key] = blackjax_program(logdensity, num_warmup, num_draws)
    keys = jax.random.split(jax.random.key(seed), positions.shape[0])
    draws, leapfrogs, divergent = _BLACKJAX_PROGRAMS[key](jax.numpy.asarray(positions), keys)
    return Sampled(np.asarray(draws), np.asarray(leapfrogs), np.asarray(divergent))


_NUMPYRO_RUNS: dict = {}


def numpyro_sample(
    logdensity: Callable, positions: np.ndarray, num_warmup: int, num_draws: int, seed: int
) -> Sampled:
    """NumPyro's NUTS on the potential -logdensity, chains vectorized (`chain_method="vectorized"`)."""
    import jax
    from numpyro.infer import MCMC, NUTS

    key = (logdensity, positions.shape, num_warmup, num_draws)
    if key not in _NUMPYRO_RUNS:
        kernel = NUTS(
            potential_fn=lambda q: -logdensity(q),
            target_accept_prob=TARGET_ACCEPT,
            max_tree_depth=MAX_TREE_DEPTH,
        )
        _NUMPYRO_RUNS[key] = MCMC(
            kernel, num_warmup=num_warmup, num_samples=num_draws, num_chains=positions.shape[0],
            chain_method="vectorized", progress_bar=False, jit_model_args=True,
        )  # fmt: skip
    mcmc = _NUMPYRO_RUNS[key]
    mcmc.run(
        jax.random.key(seed),
        init_params=jax.numpy.asarray(positions),
        extra_fields=("num_steps", "diverging"),
    )
    extra = mcmc.get_extra_fields(group_by_chain=True)
    draws = np.asarray(mcmc.get_samples(group_by_chain=True))
    return Sampled(draws, np.asarray(extra["num_steps"]), np.asarray(extra["diverging"]))


_TFP_PROGRAMS: dict = {}
TFP_ADAPTATION_FRACTION = 0.8
"""TFP's step-size adaptation runs over this fraction of the warm-up (TFP's documented advice)."""


def tfp_program(tf_logdensity: Callable, num_warmup: int, num_draws: int) -> Callable:
    """`tf.function(jit_compile=True)` of TFP's `sample_chain`: `NoUTurnSampler` inside
    `DualAveragingStepSizeAdaptation` (a step size per chain, adapted over the first
    `TFP_ADAPTATION_FRACTION` of the warm-up), all chains one batch of states."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    @tf.function(jit_compile=True, autograph=False)  # TFP builds its own loops
    def run(positions, step_size, seed):
        nuts = tfp.mcmc.NoUTurnSampler(tf_logdensity, step_size=step_size, max_tree_depth=MAX_TREE_DEPTH)
        kernel = tfp.mcmc.DualAveragingStepSizeAdaptation(
            nuts,
            num_adaptation_steps=int(TFP_ADAPTATION_FRACTION * num_warmup),
            target_accept_prob=TARGET_ACCEPT,
        )
        return tfp.mcmc.sample_chain(
            num_draws, current_state=positions, kernel=kernel, num_burnin_steps=num_warmup, seed=seed,
            trace_fn=lambda _, results: (results.inner_results.leapfrogs_taken, results.inner_results.has_divergence),
        )  # fmt: skip

    return run


def tfp_sample(
    tf_logdensity: Callable, positions: np.ndarray, num_warmup: int, num_draws: int, seed: int
) -> Sampled:
    """TFP's NUTS with dual-averaging step-size adaptation (TFP's NUTS adapts no mass matrix:
    the metric stays the identity) on the TensorFlow log density of a batch of positions."""
    import tensorflow as tf

    key = (tf_logdensity, num_warmup, num_draws)
    if key not in _TFP_PROGRAMS:
        _TFP_PROGRAMS[key] = tfp_program(tf_logdensity, num_warmup, num_draws)
    step_size = tf.fill([positions.shape[0], 1], tf.constant(0.1, tf.float64))
    draws, (leapfrogs, divergent) = _TFP_PROGRAMS[key](
        tf.constant(positions), step_size, tf.constant([seed, 0], tf.int32)
    )
    return Sampled(
        np.swapaxes(np.asarray(draws), 0, 1), np.asarray(leapfrogs).T, np.asarray(divergent).T.astype(bool)
    )


SYSTEMS: dict[str, Callable[..., Sampled]] = {
    "abir": abir_sample,
    "blackjax": blackjax_sample,
    "numpyro": numpyro_sample,
    "tfp": tfp_sample,
}
DENSITY_OF = {"tfp": "tf_logdensity"}
"""The `Target` field each system samples (others: `logdensity`, the JAX density of one position)."""
