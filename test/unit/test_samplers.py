"""abir.samplers.nuts: NUTS written per chain, batched by abir, on a user's log density.

The batched run equals the per-chain plain Python run (`dry_run=True`) draw for draw on every
backend; adaptation and sampling give a Gaussian's moments within Monte Carlo error; divergences
are detected; a backend without autodiff asks for `value_and_grad`.
"""

from __future__ import annotations

import numpy as np
import pytest

import abir
import abir.samplers
from abir.samplers.program import warmup_schedule

SCALES = np.array([0.5, 1.0, 3.0])


def gaussian_value_and_grad(scales):
    """(log density, gradient) of independent zero-mean Gaussians with `scales`, on [..., dim]."""

    def value_and_grad(q):
        return -0.5 * (q * q / scales**2).sum(axis=-1), -q / scales**2

    return value_and_grad


def jax_logdensity(scales):
    import jax.numpy as jnp

    def logdensity(q):
        return -0.5 * jnp.sum(q * q / scales**2)

    return logdensity


def assert_same_run(got, want):
    np.testing.assert_allclose(got.draws, want.draws, rtol=1e-9, atol=1e-12)
    for name, g, w in zip(abir.samplers.Stats._fields, got.stats, want.stats, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(got.step_size, want.step_size, rtol=1e-9)
    np.testing.assert_allclose(got.inverse_mass, want.inverse_mass, rtol=1e-9)


SMALL = {"num_warmup": 30, "num_draws": 12, "seed": 5, "chunk_size": 16, "max_tree_depth": 6}
Q0 = np.random.default_rng(5).normal(size=(3, 2))


def test_batched_equals_per_chain(backend_name):
    scales = SCALES[:2]
    vg = gaussian_value_and_grad(scales)
    want = abir.samplers.nuts(None, Q0, value_and_grad=vg, dry_run=True, **SMALL)
    if backend_name == "jax":  # the gradient from JAX's autodiff of the user's log density
        got = abir.samplers.nuts(jax_logdensity(scales), Q0, backend="jax", **SMALL)
    else:
        got = abir.samplers.nuts(None, Q0, value_and_grad=vg, backend=backend_name, **SMALL)
    assert got.draws.shape == (3, 12, 2)
    assert_same_run(got, want)
    assert len(set(want.stats.leapfrogs.ravel().tolist())) > 1, "chains should take trajectories of different lengths"
    assert len(set(want.step_size.tolist())) == 3, "each chain adapts its own step size"


def test_thinning_keeps_every_thin_th_draw():
    vg = gaussian_value_and_grad(SCALES[:2])
    every = abir.samplers.nuts(None, Q0, value_and_grad=vg, dry_run=True, **SMALL)
    thinned = abir.samplers.nuts(None, Q0, value_and_grad=vg, thin=5, **SMALL)
    assert thinned.draws.shape == (3, 3, 2)
    np.testing.assert_allclose(thinned.draws, every.draws[:, ::5])
    np.testing.assert_array_equal(thinned.stats.leapfrogs, every.stats.leapfrogs[:, ::5])


def test_stans_warmup_windows():
    in_slow, ends = warmup_schedule(1000)
    np.testing.assert_array_equal(np.flatnonzero(ends), [99, 149, 249, 449, 949])
    assert in_slow[75:950].all() and not in_slow[:75].any() and not in_slow[950:].any()
    in_slow, ends = warmup_schedule(100)  # shorter than the buffers: 15% / 75% / 10%
    np.testing.assert_array_equal(np.flatnonzero(in_slow), np.arange(15, 90))
    np.testing.assert_array_equal(np.flatnonzero(ends), [89])


def batch_means_standard_error(values, batch):
    """The standard error of the mean of `values` [chains, draws] from the spread of the means of
    batches of `batch` consecutive draws (batches far longer than the autocorrelation time of
    NUTS on a Gaussian are nearly independent)."""
    chains, draws = values.shape
    means = values[:, : draws // batch * batch].reshape(chains, -1, batch).mean(axis=-1).ravel()
    return means.std(ddof=1) / np.sqrt(means.size)


@pytest.mark.parametrize("num_draws", [100, pytest.param(400, marks=pytest.mark.full)])
def test_moments_of_a_gaussian_after_adaptation(num_draws):
    """4 chains from far away adapt (step size and a mass matrix matching the scales 0.5, 1, 3)
    and then draw the right mean and variance: each within 5 batch-means standard errors (4 or
    16 batches per chain; a 5-sigma miss of any of the 6 checks has probability below 1e-5).
    `make test` draws 100 per chain, `make test-full` 400 (a test of more power)."""
    vg = gaussian_value_and_grad(SCALES)
    q0 = np.full((4, 3), 4.0)
    result = abir.samplers.nuts(None, q0, value_and_grad=vg, num_warmup=200, num_draws=num_draws, seed=2,
                                chunk_size=200)  # fmt: skip
    draws = result.draws
    assert not result.stats.divergent.any()
    for i, scale in enumerate(SCALES):
        x = draws[..., i]
        se_mean = batch_means_standard_error(x, 25)
        assert abs(x.mean()) < 5 * se_mean, (i, x.mean(), se_mean)
        square = x**2
        se_square = batch_means_standard_error(square, 25)
        assert abs(square.mean() - scale**2) < 5 * se_square, (i, square.mean(), se_square)
    # the adapted inverse mass estimates the variances from a 50-iteration window: within a factor 2.5
    ratio = result.inverse_mass / SCALES**2
    assert np.all((ratio > 0.4) & (ratio < 2.5)), ratio
    assert np.all(result.stats.accept.mean(axis=1) > 0.6)


def test_divergences_are_detected_and_counted():
    """A leapfrog step of size 50 on a unit Gaussian multiplies the position by about
    50**2 / 2: the first leapfrog of every transition has an energy error far above 1000, a
    divergence, and the chain keeps its position. Steps of 0.5 never diverge."""
    vg = gaussian_value_and_grad(np.ones(2))
    q0 = np.random.default_rng(1).normal(size=(3, 2))
    unstable = abir.samplers.nuts(None, q0, value_and_grad=vg, num_warmup=0, num_draws=5, step_size=50.0)
    assert unstable.stats.divergent.all()
    assert (unstable.stats.leapfrogs == 1).all() and (unstable.stats.tree_depth == 0).all()
    np.testing.assert_array_equal(unstable.draws, np.repeat(q0[:, None], 5, axis=1))
    stable = abir.samplers.nuts(None, q0, value_and_grad=vg, num_warmup=0, num_draws=5, step_size=0.5)
    assert not stable.stats.divergent.any()


@pytest.mark.parametrize("backend", ["numpy", "tf"])
def test_missing_value_and_grad_names_the_fix(backend):
    with pytest.raises(abir.samplers.MissingGradientError, match=r"Pass value_and_grad=f.*backend='jax'"):
        abir.samplers.nuts(jax_logdensity(SCALES), np.zeros((2, 3)), backend=backend)


def test_progress_bar_counts_every_transition(capsys):
    pytest.importorskip("tqdm")
    vg = gaussian_value_and_grad(SCALES[:2])
    quiet = abir.samplers.nuts(None, Q0, value_and_grad=vg, dry_run=True, **SMALL)
    shown = abir.samplers.nuts(None, Q0, value_and_grad=vg, progress=True, **SMALL)
    assert "42/42" in capsys.readouterr().err  # 30 warm-up + 12 draws
    assert_same_run(shown, quiet)
