"""The samplers bench measures the right thing: its bulk ESS and R-hat behave as Vehtari et al.
(2021) define them, its JAX log densities are inference-gym's targets, and every system's
posterior means agree with inference-gym's ground truth at a small size.

The target and system checks need the bench's site (`make bench-samplers` installs inference-gym,
BlackJAX and NumPyro into .bench-site) and are skipped without it, e.g. run them with
`PYTHONPATH=.bench-site:. pytest -q test/unit/test_bench_samplers.py`.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import sampler_diagnostics as diagnostics  # noqa: E402

HAVE_BENCH_SITE = all(importlib.util.find_spec(name) for name in ("inference_gym", "blackjax", "numpyro"))
needs_bench_site = pytest.mark.skipif(
    not HAVE_BENCH_SITE, reason="inference-gym, BlackJAX or NumPyro is not importable: make bench-samplers"
)
QUICK_IRT = "item_response_theory_50x20"
"""`--quick`'s IRT target: the model on the answers of the first 50 students to 20 questions."""
TARGETS = [
    "ill_conditioned_gaussian",
    "eight_schools",
    "logistic_regression",
    "item_response_theory",
    QUICK_IRT,
    "neals_funnel",
]
# Sampling the Gaussian (trees of up to 1,023 leapfrogs) and the IRT models (the full one's 40,000
# logits per gradient) takes minutes per system on two cores: their posterior checks are `full`.
HEAVY = {"ill_conditioned_gaussian", "item_response_theory", QUICK_IRT}
SAMPLED_TARGETS = [pytest.param(name, marks=pytest.mark.full) if name in HEAVY else name for name in TARGETS]


def ar1_chains(rho: float, chains: int, draws: int, seed: int = 0) -> np.ndarray:
    """Stationary AR(1) chains [chains, draws, 1] with unit marginal variance."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((chains, draws)) * np.sqrt(1 - rho**2)
    x = np.empty((chains, draws))
    x[:, 0] = rng.standard_normal(chains)
    for t in range(1, draws):
        x[:, t] = rho * x[:, t - 1] + noise[:, t]
    return x[:, :, None]


def test_bulk_ess_of_independent_draws_is_their_number():
    draws = np.random.default_rng(1).standard_normal((4, 2000, 3))
    np.testing.assert_allclose(diagnostics.bulk_ess(draws), 8000, rtol=0.1)


def test_bulk_ess_of_ar1_chains_is_the_integrated_autocorrelation_time():
    rho = 0.8
    ess = diagnostics.bulk_ess(ar1_chains(rho, chains=8, draws=5000))
    np.testing.assert_allclose(ess, 40000 * (1 - rho) / (1 + rho), rtol=0.15)


def test_bulk_ess_is_invariant_under_monotone_maps():
    draws = ar1_chains(0.5, chains=4, draws=500, seed=2)
    np.testing.assert_allclose(diagnostics.bulk_ess(np.exp(3 * draws)), diagnostics.bulk_ess(draws))


@pytest.mark.skipif(importlib.util.find_spec("numpyro") is None, reason="NumPyro is not importable")
def test_ess_matches_numpyros_on_unsplit_chains():
    from numpyro.diagnostics import effective_sample_size

    draws = ar1_chains(0.6, chains=4, draws=3000, seed=3)
    expected = effective_sample_size(draws[:, :, 0])
    np.testing.assert_allclose(diagnostics.effective_sample_size(draws)[0], expected, rtol=0.02)


def test_rhat_of_mixed_chains_is_one():
    draws = np.random.default_rng(4).standard_normal((8, 1000, 2))
    assert np.all(diagnostics.rank_rhat(draws) < 1.01)


def test_rhat_flags_a_chain_stuck_elsewhere():
    draws = np.random.default_rng(5).standard_normal((4, 1000, 1))
    draws[0] += 3.0
    assert diagnostics.rank_rhat(draws)[0] > 1.1


def test_rhat_flags_a_chain_of_another_scale_through_the_folded_draws():
    draws = np.random.default_rng(6).standard_normal((4, 1000, 1))
    draws[0] *= 4.0
    assert diagnostics.split_rhat(diagnostics.rank_normalize(diagnostics.split_chains(draws)))[0] < 1.05
    assert diagnostics.rank_rhat(draws)[0] > 1.1


@functools.cache
def build_target(name: str):
    """The bench's target `name`, built once, with JAX in float64 as the bench runs it."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import sampler_targets

    if name == QUICK_IRT:
        return sampler_targets.QUICK_BUILDERS["item_response_theory"]()
    return sampler_targets.BUILDERS[name]()


@needs_bench_site
@pytest.mark.parametrize("name", TARGETS)
def test_jax_log_density_is_inference_gyms(name):
    """The bench's log density minus inference-gym's (plus the reparameterization's log Jacobian)
    is one constant at random points, up to inference-gym's float32 rounding (amplified by the
    Gaussian's condition number of about 1e5), while the points' log densities differ by far more."""
    import jax

    target = build_target(name)
    points = np.random.default_rng(7).uniform(-1.5, 1.5, size=(6, target.dim))
    ours = np.array([float(jax.jit(target.logdensity)(q)) for q in points])
    gyms = np.array([float(target.gym_logdensity(q.astype(np.float32))) for q in points])
    tolerance = 1e-4 * np.max(np.abs(gyms)) + 1e-3
    assert np.ptp(ours - gyms) < tolerance
    assert np.ptp(ours) > 100 * tolerance


@needs_bench_site
@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow_probability") is None, reason="TFP is not importable"
)
@pytest.mark.parametrize("name", TARGETS)
def test_tensorflow_log_density_is_the_jax_one(name):
    """TFP's row samples the same posterior: the TensorFlow density of a batch of positions
    equals the JAX density of each position."""
    import jax
    import tensorflow as tf

    target = build_target(name)
    points = np.random.default_rng(10).uniform(-1.5, 1.5, size=(4, target.dim))
    ours = np.array([float(jax.jit(target.logdensity)(q)) for q in points])
    np.testing.assert_allclose(np.asarray(target.tf_logdensity(tf.constant(points))), ours, rtol=1e-10)


@needs_bench_site
def test_quick_samples_a_subset_of_the_item_response_theory_data_and_the_full_run_all_of_it():
    import sampler_targets

    answers = sampler_targets.irt_answers(None)
    subset = sampler_targets.irt_answers(sampler_targets.IRT_QUICK_SHAPE)
    assert build_target("item_response_theory").dim == 1 + 400 + 100
    assert build_target(QUICK_IRT).dim == 1 + 50 + 20
    assert len(answers["train_correct"]) == 30012
    assert 0 < len(subset["train_correct"]) < len(answers["train_correct"])
    assert subset["train_student_ids"].max() == 49 and subset["train_question_ids"].max() == 19


@needs_bench_site
@pytest.mark.parametrize("name", ["logistic_regression", QUICK_IRT])
def test_reference_posteriors_are_converged_long_runs(name):
    """A stored reference (the ground truth of a target inference-gym has none for) comes from
    mixed chains with a Monte Carlo error far below the posterior checks' tolerance."""
    import json

    import sampler_targets

    reference = json.loads(sampler_targets.reference_path(name).read_text())
    assert len(reference["mean"]) == len(reference["std"]) == build_target(name).dim
    assert reference["max_rhat"] < 1.01
    assert reference["min_bulk_ess"] > 2000


SYSTEMS = ["abir", "blackjax", "numpyro"]
if importlib.util.find_spec("tensorflow_probability") is not None:
    SYSTEMS.append("tfp")


@needs_bench_site
@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("name", SAMPLED_TARGETS)
def test_posterior_means_match_the_ground_truth(name, system):
    """Every parameter's posterior mean lies within 5 Monte Carlo standard errors (ground-truth
    standard deviation over the square root of its bulk ESS) of the ground truth. The logistic
    regression's ground truth is a long BlackJAX run (bench/data)."""
    import sampler_systems
    import sampler_targets

    target = build_target(name)
    positions = sampler_targets.initial_positions(target.dim, 8, seed=8)
    logdensity = getattr(target, sampler_systems.DENSITY_OF.get(system, "logdensity"))
    sampled = sampler_systems.SYSTEMS[system](logdensity, positions, 200, 200, 9)
    assert sampled.draws.shape == (8, 200, target.dim)
    reported = target.reported(sampled.draws)
    standard_error = target.truth_std / np.sqrt(diagnostics.bulk_ess(reported))
    z = np.abs(reported.mean(axis=(0, 1)) - target.truth_mean) / standard_error
    assert np.max(z) < 5.0, (
        f"{system} on {name}: parameter {np.argmax(z)} is {np.max(z):.1f} standard errors off"
    )
