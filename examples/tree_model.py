"""A recursive neural network over arithmetic expression trees, trained through abir.

Each example is one expression tree (`+`, `-`, `*` over numbers in [-1, 1], between 1 and 12
levels deep) and the model learns to predict the expression's value. The model is written for
ONE tree, as a recursion over the node index: a leaf embeds its number, an internal node
combines its two children's states with the weight matrix of its operator, shared by every node
of every tree. abir runs that per-tree code over a batch of trees of differing shapes, and
`jax.value_and_grad` of the batch's mean loss gives the gradient with respect to the shared
parameters, which optax's Adam follows.

A tree is flat arrays of `MAX_NODES` entries (`Trees`): each node's kind (`LEAF` or an
operator), its children's indices (greater than its own: the root is node 0) and a leaf's
number; entries past the tree's last node are unused leaves.

Run: `.venv/bin/python examples/tree_model.py [--steps 300] [--batch 64]` (optax comes with
`make install`).
"""

from __future__ import annotations

import argparse
import collections
from collections.abc import Iterator

import numpy as np

import abir

LEAF, ADD, SUB, MUL = 0, 1, 2, 3
OPERATORS = (ADD, SUB, MUL)
MAX_NODES = 64
"""The length of a tree's arrays: the most nodes a generated tree has."""
MAX_DEPTH = 12
"""The deepest generated tree (a leaf alone has depth 0): the recursion's depth."""
HIDDEN = 16
"""The size of a node's state vector."""

Params = collections.namedtuple("Params", ["leaf_w", "leaf_b", "op_w", "op_b", "out_w", "out_b"])
"""The model's parameters, shared by every node of every tree: the leaf embedding (`leaf_w`,
`leaf_b`: HIDDEN each), one combination per operator (`op_w[k - 1]`: HIDDEN x 2 HIDDEN,
`op_b[k - 1]`: HIDDEN, for operator kind k) and the read-out (`out_w`: HIDDEN, `out_b`: ())."""

Trees = collections.namedtuple("Trees", ["kind", "left", "right", "value", "target"])
"""Trees as flat arrays, one row per tree: `kind`, `left`, `right` (int, MAX_NODES), `value`
(float, MAX_NODES: a leaf's number) and `target` (float: the expression's value)."""


# The model, written for one tree. `batched_losses` runs it over a batch with abir.


def node_state(kind, left, right, value, node, params):
    """The state vector of `node`: a leaf's embedded number, or its operator's combination of
    its children's states."""
    if kind[node] == LEAF:
        return np.tanh(params.leaf_w * value[node] + params.leaf_b)
    children = np.concatenate(
        (node_state(kind, left, right, value, left[node], params), node_state(kind, left, right, value, right[node], params))
    )
    operator = kind[node] - 1
    return np.tanh(params.op_w[operator] @ children + params.op_b[operator])


def tree_loss(kind, left, right, value, target, params):
    """The squared error of the model's prediction of one tree's value."""
    state = node_state(kind, left, right, value, 0, params)
    prediction = params.out_w @ state + params.out_b
    return (prediction - target) ** 2


CONTEXT = abir.Context()
BATCHED_LOSS = CONTEXT.batch_uncurried(tree_loss)
CONTEXT.batch_uncurried(node_state)


def batched_losses(params: Params, trees: Trees):
    """Each tree's loss (a JAX array, one per tree) from the per-tree `tree_loss` batched by
    abir on the JAX backend; differentiable with respect to `params` by `jax.grad`. Trees given
    as NumPy arrays are checked (`check_trees`); traced ones (under `jax.jit`) cannot be, so
    check a data set before training on it, as `train` does."""
    if all(isinstance(field, np.ndarray) for field in trees):
        check_trees(trees)
    shared = Params(*(p[None] if hasattr(p, "shape") else np.asarray(p)[None] for p in params))  # one row: every tree's
    return BATCHED_LOSS(*trees, shared, backend=abir.JaxBackend(), max_stack_depth=MAX_DEPTH + 2)


def mean_loss(params: Params, trees: Trees):
    return batched_losses(params, trees).mean()


# Trees: generation, checks and the expression's value in plain Python.


def expression_value(kind: np.ndarray, left: np.ndarray, right: np.ndarray, value: np.ndarray, node: int = 0) -> float:
    if kind[node] == LEAF:
        return float(value[node])
    a = expression_value(kind, left, right, value, int(left[node]))
    b = expression_value(kind, left, right, value, int(right[node]))
    return {ADD: a + b, SUB: a - b, MUL: a * b}[int(kind[node])]


def random_tree(rng: np.random.Generator, depth: int) -> Trees:
    """A random expression tree exactly `depth` levels deep, of at most MAX_NODES nodes: a
    spine of `depth` operators, each with a subtree of random smaller depth beside it (redrawn
    while the tree would exceed MAX_NODES)."""
    while True:
        shape = random_shape(rng, depth)
        if count_nodes(shape) <= MAX_NODES:
            return tree_arrays(rng, shape)


def random_shape(rng: np.random.Generator, depth: int):
    """A nested tuple: () for a leaf, (operator, deeper child, other child) for an operator."""
    if depth == 0:
        return ()
    side = random_shape(rng, min(int(rng.geometric(0.6)) - 1, depth - 1))
    spine = random_shape(rng, depth - 1)
    children = (spine, side) if rng.random() < 0.5 else (side, spine)
    return (int(rng.choice(OPERATORS)), *children)


def count_nodes(shape) -> int:
    return 1 if not shape else 1 + count_nodes(shape[1]) + count_nodes(shape[2])


def tree_arrays(rng: np.random.Generator, shape) -> Trees:
    kind, left, right = (np.zeros(MAX_NODES, np.int64) for _ in range(3))
    value = np.zeros(MAX_NODES)
    todo, free = [(shape, 0)], 1
    while todo:
        subtree, node = todo.pop()
        if not subtree:
            value[node] = rng.uniform(-1.0, 1.0)
            continue
        kind[node], left[node], right[node] = subtree[0], free, free + 1
        todo += [(subtree[1], free), (subtree[2], free + 1)]
        free += 2
    return Trees(kind, left, right, value, np.float64(expression_value(kind, left, right, value)))


def random_trees(rng: np.random.Generator, count: int, depths: tuple[int, int] = (1, MAX_DEPTH)) -> Trees:
    """`count` random trees, each of a depth drawn uniformly from `depths` (inclusive)."""
    low, high = depths
    trees = [random_tree(rng, int(depth)) for depth in rng.integers(low, high + 1, count)]
    return Trees(*(np.stack(field) for field in zip(*trees, strict=True)))


def tree_depths(trees: Trees) -> np.ndarray:
    depth = np.zeros(trees.kind.shape, np.int64)
    for node in range(MAX_NODES - 1, -1, -1):  # children come after their parent
        inner = trees.kind[:, node] != LEAF
        rows = np.arange(len(depth))
        below = np.maximum(depth[rows, trees.left[:, node]], depth[rows, trees.right[:, node]]) + 1
        depth[:, node] = np.where(inner, below, 0)
    return depth[:, 0]


def check_trees(trees: Trees) -> None:
    """Raise ValueError naming the first tree and node that is not a tree `node_state` can
    evaluate: arrays of the wrong shape or type, an unknown kind, a child index not after its
    parent's or outside the arrays (a cycle, or a node read twice), or a tree deeper than
    MAX_DEPTH."""
    if not isinstance(trees, Trees):
        raise TypeError(f"trees must be a Trees namedtuple (kind, left, right, value, target), not {type(trees).__name__}")
    for name in ("kind", "left", "right", "value"):
        field = np.asarray(getattr(trees, name))
        if field.ndim != 2 or field.shape[1] != MAX_NODES or field.shape[0] != len(trees.kind):
            raise ValueError(
                f"trees.{name} has shape {field.shape}; every node array must be (number of trees, MAX_NODES={MAX_NODES}): "
                "pad each tree's arrays with unused leaves"
            )
    for name in ("kind", "left", "right"):
        if not np.issubdtype(np.asarray(getattr(trees, name)).dtype, np.integer):
            raise ValueError(f"trees.{name} must hold integers, not {np.asarray(getattr(trees, name)).dtype}")
    if np.shape(trees.target) != (len(trees.kind),):
        raise ValueError(f"trees.target has shape {np.shape(trees.target)}; it must hold one number per tree ({len(trees.kind)},)")
    bad_kind = ~np.isin(trees.kind, (LEAF, *OPERATORS))
    if bad_kind.any():
        tree, node = np.argwhere(bad_kind)[0]
        raise ValueError(
            f"tree {tree}, node {node}: kind {trees.kind[tree, node]} is none of LEAF={LEAF}, ADD={ADD}, SUB={SUB}, MUL={MUL}"
        )
    nodes = np.arange(MAX_NODES)
    for name in ("left", "right"):
        child = np.asarray(getattr(trees, name))
        bad = (trees.kind != LEAF) & ((child <= nodes) | (child >= MAX_NODES))
        if bad.any():
            tree, node = np.argwhere(bad)[0]
            raise ValueError(
                f"tree {tree}, node {node}: {name} child {child[tree, node]} must lie after the node and inside the arrays "
                f"({node} < child < {MAX_NODES}): number the nodes so that children come after their parent"
            )
    depths = tree_depths(trees)
    if (depths > MAX_DEPTH).any():
        tree = int(np.argmax(depths > MAX_DEPTH))
        raise ValueError(f"tree {tree} is {depths[tree]} levels deep; the model recurses at most MAX_DEPTH={MAX_DEPTH} levels")


# Training.


def initial_params(rng: np.random.Generator) -> Params:
    def normal(*shape: int, scale: float) -> np.ndarray:
        return rng.normal(0.0, scale, shape)

    return Params(
        leaf_w=normal(HIDDEN, scale=1.0),
        leaf_b=normal(HIDDEN, scale=0.1),
        op_w=normal(len(OPERATORS), HIDDEN, 2 * HIDDEN, scale=1.0 / np.sqrt(2 * HIDDEN)),
        op_b=np.zeros((len(OPERATORS), HIDDEN)),
        out_w=normal(HIDDEN, scale=1.0 / np.sqrt(HIDDEN)),
        out_b=np.float64(0.0),
    )


def batches(rng: np.random.Generator, trees: Trees, size: int) -> Iterator[Trees]:
    """Batches of `size` trees drawn from `trees`, in a new random order every epoch."""
    while True:
        order = rng.permutation(len(trees.kind))
        for start in range(0, len(order) - size + 1, size):
            yield Trees(*(np.asarray(field)[order[start : start + size]] for field in trees))


def training_step(optimizer):
    """The jitted training step `(params, optimizer state, trees) -> (params, optimizer state,
    mean loss)`: `jax.value_and_grad` of the batch's mean loss through abir, then `optimizer`'s
    update."""
    import jax
    import optax

    @jax.jit
    def step(params, state, trees):
        loss, grads = jax.value_and_grad(mean_loss)(params, trees)
        updates, state = optimizer.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    return step


def train(steps: int, batch: int, dataset: int, seed: int, learning_rate: float, report_every: int) -> list[float]:
    """Adam on the mean squared error over `dataset` random trees, `batch` trees a step;
    returns the training loss of every step."""
    import jax
    import optax

    rng = np.random.default_rng(seed)
    trees = random_trees(rng, dataset)
    check_trees(trees)
    params = Params(*(jax.numpy.asarray(p) for p in initial_params(rng)))
    optimizer = optax.adam(learning_rate)
    state = optimizer.init(params)
    step = training_step(optimizer)
    losses = []
    for index, trees_now in zip(range(steps), batches(rng, trees, batch), strict=False):
        params, state, loss = step(params, state, trees_now)
        losses.append(float(loss))
        if index % report_every == 0 or index == steps - 1:
            recent = np.mean(losses[-report_every:])
            print(f"step {index:4d}  loss {losses[-1]:.4f}  mean of the last {min(report_every, len(losses))} steps {recent:.4f}")
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=64, help="trees per step")
    parser.add_argument("--dataset", type=int, default=2048, help="training trees")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--report-every", type=int, default=25)
    args = parser.parse_args()
    losses = train(args.steps, args.batch, args.dataset, args.seed, args.learning_rate, args.report_every)
    first, last = np.mean(losses[: args.report_every]), np.mean(losses[-args.report_every :])
    print(f"mean loss of the first {args.report_every} steps {first:.4f}, of the last {args.report_every} {last:.4f}")


if __name__ == "__main__":
    main()
