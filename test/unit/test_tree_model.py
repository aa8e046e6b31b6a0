"""The recursive tree model of `examples/tree_model.py`: its batched loss equals the per-tree
Python run, its gradient through abir equals `jax.grad` of the same per-tree source run tree by
tree with JAX's NumPy (float64, rtol 1e-9), Adam steps on a batch lower its loss, and malformed
trees are refused with the tree and node named."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
optax = pytest.importorskip("optax")

_PATH = Path(__file__).resolve().parents[2] / "examples" / "tree_model.py"
_SPEC = importlib.util.spec_from_file_location("abir_example_tree_model", _PATH)
ex = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ex)

RTOL = 1e-9


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def trees():
    return ex.random_trees(np.random.default_rng(3), 6, depths=(1, 5))


@pytest.fixture(scope="module")
def params():
    return ex.initial_params(np.random.default_rng(4))


def with_jax_numpy(function: types.FunctionType) -> types.FunctionType:
    """`function` with the example's globals but `np` bound to `jax.numpy`: the per-tree model's
    own source, differentiable by `jax.grad` (the tree's arrays stay NumPy, so its `if` tests
    concrete values)."""
    names = {**vars(ex), "np": jnp}
    names["node_state"] = types.FunctionType(ex.node_state.__code__, names)
    return types.FunctionType(function.__code__, names)


def one_tree(trees, index: int):
    return ex.Trees(*(np.asarray(field)[index] for field in trees))


def test_generated_trees_span_depths_one_to_twelve():
    trees = ex.random_trees(np.random.default_rng(0), 200)
    ex.check_trees(trees)
    depths = ex.tree_depths(trees)
    assert depths.min() == 1 and depths.max() == ex.MAX_DEPTH
    values = [ex.expression_value(*one_tree(trees, index)[:4]) for index in range(len(depths))]
    np.testing.assert_allclose(trees.target, values, rtol=RTOL)


def test_batched_losses_equal_the_per_tree_python_run(trees, params):
    got = np.asarray(ex.batched_losses(params, trees))
    want = [ex.tree_loss(*one_tree(trees, index), params) for index in range(len(trees.kind))]
    np.testing.assert_allclose(got, want, rtol=RTOL)


def test_gradient_through_abir_equals_jax_grad_per_tree(trees, params):
    params = ex.Params(*(jnp.asarray(p) for p in params))
    loss, grads = jax.value_and_grad(ex.mean_loss)(params, trees)
    per_tree_loss = with_jax_numpy(ex.tree_loss)
    results = [jax.value_and_grad(per_tree_loss, argnums=5)(*one_tree(trees, index), params) for index in range(len(trees.kind))]
    count = len(results)
    np.testing.assert_allclose(float(loss), sum(float(value) for value, _ in results) / count, rtol=RTOL)
    for field in ex.Params._fields:
        want = sum(np.asarray(getattr(tree_grads, field)) for _, tree_grads in results) / count
        np.testing.assert_allclose(np.asarray(getattr(grads, field)), want, rtol=RTOL, atol=1e-15, err_msg=field)


@pytest.mark.full  # make test: test_bench_grad's run takes two Adam steps of `training_step`, equal to two other systems'
def test_adam_steps_lower_the_loss(trees, params):
    optimizer = optax.adam(1e-2)
    params = ex.Params(*(jnp.asarray(p) for p in params))
    state = optimizer.init(params)
    step = ex.training_step(optimizer)
    losses = []
    for _ in range(8):
        params, state, loss = step(params, state, trees)
        losses.append(float(loss))
    assert losses[-1] < 0.8 * losses[0], losses


def broken(trees, field: str, tree: int, node: int, value) -> ex.Trees:
    arrays = {name: np.array(getattr(trees, name)) for name in ex.Trees._fields}
    arrays[field][tree, node] = value
    return ex.Trees(**arrays)


def test_malformed_trees_are_refused_with_the_tree_and_node(trees, params):
    ex.check_trees(trees)
    inner = int(np.argmax(trees.kind[2] != ex.LEAF))
    with pytest.raises(ValueError, match=rf"tree 2, node {inner}: kind 7 is none of LEAF"):
        ex.check_trees(broken(trees, "kind", 2, inner, 7))
    with pytest.raises(ValueError, match=rf"tree 2, node {inner}: kind 7"):
        ex.batched_losses(params, broken(trees, "kind", 2, inner, 7))
    with pytest.raises(ValueError, match=rf"tree 2, node {inner}: left child {inner} must lie after the node"):
        ex.check_trees(broken(trees, "left", 2, inner, inner))
    with pytest.raises(ValueError, match=r"trees.value has shape \(6, 10\)"):
        ex.check_trees(trees._replace(value=np.zeros((6, 10))))
    with pytest.raises(ValueError, match="trees.kind must hold integers"):
        ex.check_trees(trees._replace(kind=trees.kind.astype(float)))


def test_a_tree_deeper_than_max_depth_is_refused():
    kind, left, right = (np.zeros((1, ex.MAX_NODES), np.int64) for _ in range(3))
    for node in range(ex.MAX_DEPTH + 1):  # a spine of MAX_DEPTH + 1 operators
        kind[0, 2 * node], left[0, 2 * node], right[0, 2 * node] = ex.ADD, 2 * node + 1, 2 * node + 2
    trees = ex.Trees(kind, left, right, np.zeros((1, ex.MAX_NODES)), np.zeros(1))
    with pytest.raises(ValueError, match=rf"tree 0 is {ex.MAX_DEPTH + 1} levels deep"):
        ex.check_trees(trees)
