"""NUTS written for one chain (examples/nuts.py), batched by abir: reduced, fast checks.

The batched run must equal the per-chain plain Python run member by member; the tree doubling
must take exactly 2**max_depth - 1 leapfrogs per transition on a target that never turns back;
and (slow) the samples must have the target's mean.
"""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import abir

_PATH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "nuts.py"
_SPEC = importlib.util.spec_from_file_location("abir_example_nuts", _PATH)
nuts_example = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(nuts_example)


def run_batched(nuts, q0, eps, keys, steps, backend):
    run = nuts_example.batch(nuts)
    result = run(
        q0, eps, keys, np.int64(steps), backend=backend, max_stack_depth=nuts_example.stack_depth(nuts)
    )
    return nuts_example.as_chain(result)


BACKENDS = {
    "numpy": abir.NumpyBackend,
    "jax": abir.JaxBackend,
    "tf": abir.TensorFlowBackend,
    "tf-xla": lambda: abir.TensorFlowBackend(jit_compile=True),
}


# the program compiles under XLA (tf-xla passes), so the default TF backend compiles it with XLA
# too: "tf" repeats "tf-xla", under `full` only
@pytest.mark.parametrize(
    "backend",
    [pytest.param(backend, id=name, marks=[pytest.mark.full] if name == "tf" else []) for name, backend in BACKENDS.items()],
)
def test_batched_equals_per_chain(backend):
    nuts = nuts_example.make_nuts(nuts_example.PRECISION, max_depth=4)
    keys = nuts_example.chain_keys(seed=3, chains=6)
    q0 = nuts_example.initial_positions(3, 6, nuts_example.DIM)
    got = run_batched(nuts, q0, 0.3, keys, 3, backend())
    want = nuts_example.run_per_chain(nuts, q0, 0.3, keys, 3)
    nuts_example.compare(got, want)
    assert len(set(want.leapfrogs.tolist())) > 1, "chains should build trajectories of different lengths"


def test_leapfrog_counter_at_max_depth():
    """A nearly flat target (q moves along p, the trajectory never turns back, the energy error
    stays tiny): every transition doubles to the max depth, 2**max_depth - 1 leapfrogs."""
    max_depth, steps, chains = 4, 3, 5
    nuts = nuts_example.make_nuts(1e-6 * np.eye(2), max_depth)
    keys = nuts_example.chain_keys(seed=7, chains=chains)
    q0 = nuts_example.initial_positions(7, chains, 2)
    backend = abir.NumpyBackend()
    got = run_batched(nuts, q0, 0.1, keys, steps, backend)
    np.testing.assert_array_equal(got.leapfrogs, np.full(chains, steps * (2**max_depth - 1)))
    # draws: per transition one momentum, max_depth directions, max_depth biased-progressive
    # choices, and one multinomial choice per merge inside the subtrees (2**d - 1 at depth d)
    merges = sum(2**d - 1 for d in range(max_depth))
    np.testing.assert_array_equal(got.counter, np.full(chains, steps * (1 + 2 * max_depth + merges)))
    # the machine ran the leapfrog leaf exactly once per leapfrog: every member is in lockstep
    assert backend.last_stats.steps == backend.last_stats.ideal_steps


def test_parameters_passed_down_the_recursion_share_the_callers_variable():
    """build_tree's key, energy and step arrive from the transition and pass unchanged down its
    recursion: after copy coalescing drops the saves around the recursive calls, each is one
    variable with the transition's, so a tree step copies none of them (one uint32 key variable
    in the whole program)."""
    nuts = nuts_example.make_nuts(nuts_example.PRECISION, max_depth=3)
    ctx = abir.Context()
    nuts_example.batch(nuts, ctx)
    q0 = nuts_example.initial_positions(0, 4, nuts_example.DIM)
    args = [q0, np.full(4, 0.3), nuts_example.chain_keys(0, 4), np.int64(2)]
    text = str(ctx.lowered_for_args("sample_chain", args, abir.JaxBackend()))
    keys = [line for line in text.splitlines() if "vm.var" in line and "tensor<2xui32>" in line]
    assert len(keys) == 1, keys


@pytest.mark.full
def test_mean_of_a_2d_gaussian():
    """64 chains x 20 transitions started from the target: the mean is within 4 standard errors
    of 0 (the standard error from the spread of the 64 independent chain means)."""
    precision, covariance = nuts_example.correlated_precision(2, rho=0.6)
    chains, steps = 64, 20
    nuts = nuts_example.make_nuts(precision, max_depth=6)
    keys = nuts_example.chain_keys(seed=11, chains=chains)
    q0 = np.random.default_rng(11).multivariate_normal(np.zeros(2), covariance, size=chains)
    got = run_batched(nuts, q0, 0.4, keys, steps, abir.NumpyBackend())
    chain_means = got.sum_q / steps
    mean = chain_means.mean(axis=0)
    standard_error = chain_means.std(axis=0, ddof=1) / np.sqrt(chains)
    assert np.all(np.abs(mean) < 4 * standard_error), (mean, standard_error)
    variance = got.sum_q2.sum(axis=0) / (chains * steps) - mean**2
    np.testing.assert_allclose(variance, np.diag(covariance), rtol=0.3)
