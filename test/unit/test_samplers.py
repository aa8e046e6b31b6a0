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
import abir.samplers.program
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
SMALL_VG = gaussian_value_and_grad(SCALES[:2])
"""One `value_and_grad` for the runs at `SMALL`'s settings: `abir.samplers.nuts` keeps the program
it compiled for a (value_and_grad, settings) pair, so the tests share it."""


# make test: NUTS on TF through test_nuts.py's test_batched_equals_per_chain[tf-xla] (conftest's TF rule)
@pytest.mark.make_test_keeps({"backend_name": "numpy"}, {"backend_name": "jax"})
def test_batched_equals_per_chain(backend_name):
    want = abir.samplers.nuts(None, Q0, value_and_grad=SMALL_VG, dry_run=True, **SMALL)
    if backend_name == "jax":  # the gradient from JAX's autodiff of the user's log density
        got = abir.samplers.nuts(jax_logdensity(SCALES[:2]), Q0, backend="jax", **SMALL)
    else:
        got = abir.samplers.nuts(None, Q0, value_and_grad=SMALL_VG, backend=backend_name, **SMALL)
    assert got.draws.shape == (3, 12, 2)
    assert_same_run(got, want)
    assert len(set(want.stats.leapfrogs.ravel().tolist())) > 1, "chains should take trajectories of different lengths"
    assert len(set(want.step_size.tolist())) == 3, "each chain adapts its own step size"


def test_thinning_keeps_every_thin_th_draw():
    every = abir.samplers.nuts(None, Q0, value_and_grad=SMALL_VG, dry_run=True, **SMALL)
    thinned = abir.samplers.nuts(None, Q0, value_and_grad=SMALL_VG, thin=5, **SMALL)
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
    quiet = abir.samplers.nuts(None, Q0, value_and_grad=SMALL_VG, dry_run=True, **SMALL)
    shown = abir.samplers.nuts(None, Q0, value_and_grad=SMALL_VG, progress=True, **SMALL)
    assert "42/42" in capsys.readouterr().err  # 30 warm-up + 12 draws
    assert_same_run(shown, quiet)


def stans_rejected_leaf(momenta, inverse_mass, no_u_turn):
    """The leaf at which Stan's recursive subtree over `momenta` (2**depth leaves, no leapfrog:
    the leaves' momenta given) is rejected by a U-turn of one of its subtrees, or None: the
    reference the iterative checks must reproduce, check for check."""

    def build(first, size):  # (p_first, p_end, rho, rejected leaf or None)
        if size == 1:
            return momenta[first], momenta[first], momenta[first], None
        inner = build(first, size // 2)
        if inner[3] is not None:
            return inner
        outer = build(first + size // 2, size // 2)
        if outer[3] is not None:
            return outer
        rho = inner[2] + outer[2]
        ok = (
            no_u_turn(inner[0], outer[1], rho, inverse_mass)
            & no_u_turn(inner[0], outer[0], inner[2] + outer[0], inverse_mass)
            & no_u_turn(inner[1], outer[1], outer[2] + inner[1], inverse_mass)
        )
        return inner[0], outer[1], rho, None if ok else first + size - 1

    return build(0, len(momenta))[3]


def iterative_rejected_leaf(program, momenta, inverse_mass):
    """The first leaf at which `build_subtree`'s checks (checkpoints recorded leaf by leaf, the
    subtrees ending at each leaf checked there) find a U-turn, or None."""
    rows = max(program.settings.max_tree_depth, 2)
    checkpoints = tuple(np.zeros((rows, momenta.shape[1])) for _ in range(3))
    rho = 0.0 * momenta[0]
    before = momenta[0]  # the momentum before leaf 0 is never checked
    for n, p in enumerate(momenta):
        rho = rho + p
        checkpoints = program.recorded(checkpoints, n, p, rho, before)
        if program.turned_inside(n, p, rho, checkpoints, inverse_mass):
            return n
        before = p
    return None


@pytest.mark.parametrize("depth", [1, 2, 3, 5, 7])
def test_iterative_u_turn_checks_are_stans_recursive_ones(depth):
    """On random momentum sequences that turn at rates from slow to fast, the leaf-by-leaf checks
    reject a subtree at the same leaf as Stan's recursive tree (from depth 2, 12-50% of the
    sequences are rejected at one leaf or another, and 4-9% only by the checks across halves)."""
    program = abir.samplers.program.make_program(None, abir.samplers.program.Settings(dim=3, num_warmup=0))
    rng = np.random.default_rng(depth)
    rejected = 0
    for _ in range(200):
        inverse_mass = rng.uniform(0.5, 2.0, size=3)
        angles = np.cumsum(rng.normal(0.0, np.exp(rng.uniform(-4.0, 1.0)), size=2**depth))
        momenta = np.stack([np.cos(angles), np.sin(angles), rng.normal(0.0, 0.3, size=2**depth)], axis=1)
        want = stans_rejected_leaf(momenta, inverse_mass, program.no_u_turn)
        assert iterative_rejected_leaf(program, momenta, inverse_mass) == want
        rejected += want is not None
    if depth > 1:
        assert 20 <= rejected <= 180, rejected


def test_one_sweep_per_leapfrog():
    """The subtree is built one leapfrog per loop iteration and no other loop holds a chain
    back: on JAX every chain takes one sweep of the machine per leapfrog, plus one per call, so
    the batch takes as many sweeps as its longest chain's leapfrogs (not one per leapfrog and
    per call and return of a recursive build_tree), and no fewer: the leapfrog loop, inside the
    doubling loop, is not one block that a sweep repeats until every chain has left it."""
    backend = abir.JaxBackend(collect_stats=True)
    result = abir.samplers.nuts(jax_logdensity(SCALES), Q0[:, :1].repeat(3, axis=1) * SCALES, backend=backend,
                                num_warmup=0, num_draws=20, step_size=0.4, seed=3, chunk_size=20)  # fmt: skip
    stats = backend.last_stats
    leapfrogs = result.stats.leapfrogs.sum(axis=1)
    assert len(set(leapfrogs.tolist())) > 1
    np.testing.assert_array_less(np.asarray(stats.member_sweeps) - leapfrogs, 3)
    np.testing.assert_array_less(leapfrogs - np.asarray(stats.member_sweeps), 1)
    assert leapfrogs.max() <= stats.sweeps <= leapfrogs.max() + 2, (stats.sweeps, leapfrogs)


def test_first_window_shrinks_towards_ten_times_the_given_step_size():
    """Stan sets the dual averaging's mu to log(10 * step_size) before its initial step-size
    search: the search moves the first transition's step size, not the point the first window's
    dual averaging shrinks towards (later windows restart at ten times the searched one)."""
    program = abir.samplers.program.make_program(
        gaussian_value_and_grad(SCALES / 20), abir.samplers.program.Settings(dim=3, num_warmup=100)
    )
    state = program.initial_state(np.full(3, 0.05), 1.0, abir.random.key(0))
    assert state.step_size < 0.5, "the search should halve a unit step on scales 0.025, 0.05, 0.15"
    assert state.da_mu == np.log(10.0)
