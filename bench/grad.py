"""Training steps per second of the recursive tree model of `examples/tree_model.py`: abir against
per-tree `jax.grad` in a Python loop and against padding every tree to the full binary tree of
the deepest shape under `jit(vmap)`.

A training step is the mean loss over a batch of trees, its gradient with respect to the shared
parameters, and one Adam update (optax), for each system:

- `abir`: the per-tree recursive model batched by abir on the JAX backend, `jax.jit` of
  `jax.value_and_grad` of the batch's mean loss, and the update, in one call.
- `per-tree`: one jitted `jax.value_and_grad` of the per-tree loss, called for each tree in a
  Python loop, adding into the batch's loss and gradient (one call per tree), then the update.
  The jitted per-tree function is the same model written bottom-up, a `lax.scan` over the
  tree's MAX_NODES node slots from the last (children come after their parent): one compiled
  function for every tree shape (a recursion in Python would be traced and compiled once per
  distinct tree, and JAX differentiates no `lax.while_loop` in reverse mode).
- `padded`: every tree laid into a full binary tree of MAX_DEPTH levels (2**(MAX_DEPTH + 1) - 1
  heap slots, absent nodes masked), evaluated level by level from the leaves under `jax.vmap`
  over trees, and `jax.jit` of `jax.value_and_grad` and the update.

Before timing, the three systems' losses and gradients are checked equal (float64, rtol 1e-9)
on a few trees. Timing (float32, JAX's default) runs each system's first step apart (tracing
and compilation included), then `--repeats` steps over fresh batches; each row gives wall-clock
and CPU time (the process's, all threads) per step and steps per second, and the ratios
other / abir are printed per batch size from the same run. Each row is also printed as one JSON
line (prefix `row `).

Run: `make bench-grad` or `.venv/bin/python bench/grad.py [--sizes 64,1024] [--repeats 5]`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

_PATH = pathlib.Path(__file__).resolve().parents[1] / "examples" / "tree_model.py"
_SPEC = importlib.util.spec_from_file_location("abir_example_tree_model", _PATH)
ex = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ex)

SYSTEMS = ("abir", "per-tree", "padded")
RTOL = 1e-9
LEARNING_RATE = 3e-3


# The per-tree model bottom-up over node slots (the `per-tree` system).


def slot_states(params: Any, kind: Any, left: Any, right: Any, value: Any) -> Any:
    """The state of every node slot of one tree (MAX_NODES x HIDDEN), from the last slot to the
    first: a leaf's embedding, or its operator's combination of its children's states."""

    def visit(states: Any, node: Any) -> tuple[Any, None]:
        children = jnp.concatenate((states[left[node]], states[right[node]]))
        operator = jnp.maximum(kind[node] - 1, 0)
        combined = jnp.tanh(params.op_w[operator] @ children + params.op_b[operator])
        leaf = jnp.tanh(params.leaf_w * value[node] + params.leaf_b)
        return states.at[node].set(jnp.where(kind[node] == ex.LEAF, leaf, combined)), None

    empty = jnp.zeros((ex.MAX_NODES, ex.HIDDEN), params.leaf_w.dtype)
    return lax.scan(visit, empty, jnp.arange(ex.MAX_NODES - 1, -1, -1))[0]


def slot_loss(params: Any, kind: Any, left: Any, right: Any, value: Any, target: Any) -> Any:
    root = slot_states(params, kind, left, right, value)[0]
    return (params.out_w @ root + params.out_b - target) ** 2


# The model over full binary trees (the `padded` system).

HEAP_SLOTS = 2 ** (ex.MAX_DEPTH + 1) - 1
"""Slots of a full binary tree of MAX_DEPTH levels below its root, root first, the children
of slot i at 2 i + 1 and 2 i + 2."""
ABSENT = -1


def heap_layout(trees: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each tree's kinds and leaf numbers in heap slots (`ABSENT` where the tree has no node)."""
    count = len(trees.kind)
    kind = np.full((count, HEAP_SLOTS), ABSENT, np.int64)
    value = np.zeros((count, HEAP_SLOTS))
    for tree in range(count):
        todo = [(0, 0)]  # (node, heap slot)
        while todo:
            node, slot = todo.pop()
            kind[tree, slot], value[tree, slot] = trees.kind[tree, node], trees.value[tree, node]
            if trees.kind[tree, node] != ex.LEAF:
                todo += [(int(trees.left[tree, node]), 2 * slot + 1), (int(trees.right[tree, node]), 2 * slot + 2)]
    return kind, value


def heap_loss(params: Any, kind: Any, value: Any, target: Any) -> Any:
    """One tree's loss from its heap layout, level by level from the deepest: every slot of a
    level computes a leaf's embedding and all operators' combinations, and keeps its own."""
    states = jnp.zeros((1, ex.HIDDEN), params.leaf_w.dtype)  # below the deepest level: nothing
    for level in range(ex.MAX_DEPTH, -1, -1):
        slots = slice(2**level - 1, 2 ** (level + 1) - 1)
        kinds, values = kind[slots], value[slots]
        leaf = jnp.tanh(values[:, None] * params.leaf_w + params.leaf_b)
        if level == ex.MAX_DEPTH:
            new = leaf
        else:
            children = states.reshape(2**level, 2 * ex.HIDDEN)
            combined = jnp.tanh(jnp.einsum("khc,nc->knh", params.op_w, children) + params.op_b[:, None, :])
            chosen = jnp.take_along_axis(combined, jnp.maximum(kinds - 1, 0)[None, :, None], axis=0)[0]
            new = jnp.where((kinds == ex.LEAF)[:, None], leaf, chosen)
        states = jnp.where((kinds == ABSENT)[:, None], 0.0, new)
    return (params.out_w @ states[0] + params.out_b - target) ** 2


# Training steps.

Step = Callable[[Any, Any, Any], tuple[Any, Any, Any]]
"""(params, optimizer state, batch) -> (params, optimizer state, mean loss)."""


def adam_update(optimizer: Any, params: Any, state: Any, grads: Any) -> tuple[Any, Any]:
    updates, state = optimizer.update(grads, state, params)
    return optax.apply_updates(params, updates), state


def per_tree_step(optimizer: Any) -> Step:
    @jax.jit
    def accumulate(total: Any, params: Any, kind: Any, left: Any, right: Any, value: Any, target: Any) -> Any:
        loss, grads = jax.value_and_grad(slot_loss)(params, kind, left, right, value, target)
        return jax.tree.map(jnp.add, total, (loss, grads))

    @jax.jit
    def update(params: Any, state: Any, total: Any, count: Any) -> Any:
        loss, grads = jax.tree.map(lambda x: x / count, total)
        return *adam_update(optimizer, params, state, grads), loss

    def step(params: Any, state: Any, trees: Any) -> Any:
        total = jax.tree.map(jnp.zeros_like, (jnp.zeros((), params.out_b.dtype), params))
        for tree in range(len(trees.kind)):
            total = accumulate(total, params, *(field[tree] for field in trees))
        return update(params, state, total, len(trees.kind))

    return step


def padded_mean_loss(params: Any, kind: Any, value: Any, target: Any) -> Any:
    return jax.vmap(heap_loss, in_axes=(None, 0, 0, 0))(params, kind, value, target).mean()


def padded_step(optimizer: Any) -> Step:
    @jax.jit
    def step(params: Any, state: Any, heaps: Any) -> Any:
        loss, grads = jax.value_and_grad(padded_mean_loss)(params, *heaps)
        return *adam_update(optimizer, params, state, grads), loss

    return step


def system_batch(system: str, trees: Any) -> Any:
    """The batch as `system`'s step takes it, built outside the timing as a data pipeline
    would: the padded layout; NumPy rows for the per-tree loop (indexing a device array would
    cost a dispatch per field and tree); device arrays for abir."""
    if system == "padded":
        return (*heap_layout(trees), trees.target)
    if system == "per-tree":
        return ex.Trees(*(np.asarray(field) for field in trees))
    return ex.Trees(*(jnp.asarray(field) for field in trees))


STEPS = {"abir": ex.training_step, "per-tree": per_tree_step, "padded": padded_step}


# Agreement of the three systems.


def loss_and_gradient(system: str, params: Any, trees: Any) -> tuple[float, Any]:
    """`system`'s mean loss and gradient, without the update."""
    if system == "abir":
        return jax.value_and_grad(ex.mean_loss)(params, system_batch(system, trees))
    if system == "per-tree":
        trees = system_batch(system, trees)
        per_tree = jax.jit(jax.value_and_grad(slot_loss))
        losses, grads = zip(*(per_tree(params, *(field[tree] for field in trees)) for tree in range(len(trees.kind))), strict=True)
        return sum(losses) / len(losses), jax.tree.map(lambda *g: sum(g) / len(g), *grads)
    return jax.value_and_grad(padded_mean_loss)(params, *system_batch(system, trees))


def check_agreement(trees: Any, seed: int) -> list[str]:
    """The systems whose loss or gradient differ from abir's on `trees` (float64, rtol 1e-9)."""
    with jax.enable_x64(True):
        params = ex.Params(*(jnp.asarray(p) for p in ex.initial_params(np.random.default_rng(seed))))
        want_loss, want_grads = loss_and_gradient("abir", params, trees)
        failed = []
        for system in SYSTEMS[1:]:
            loss, grads = loss_and_gradient(system, params, trees)
            try:
                np.testing.assert_allclose(float(loss), float(want_loss), rtol=RTOL)
                for got, want in zip(jax.tree.leaves(grads), jax.tree.leaves(want_grads), strict=True):
                    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=1e-12)
            except AssertionError as error:
                print(f"FAILED: {system} differs from abir: {error}")
                failed.append(system)
    return failed


# Timing.


def cpu_and_wall() -> tuple[float, float]:
    return time.process_time(), time.perf_counter()


def block(result: Any) -> Any:
    return jax.block_until_ready(result)


def time_system(system: str, batches: Sequence[Any], seed: int) -> dict[str, Any]:
    """The first step (tracing and compilation included) and the steady steps over the other
    batches, each timed to completion."""
    optimizer = optax.adam(LEARNING_RATE)
    params = ex.Params(*(jnp.asarray(p, jnp.float32) for p in ex.initial_params(np.random.default_rng(seed))))
    state = optimizer.init(params)
    step = STEPS[system](optimizer)
    inputs = [system_batch(system, trees) for trees in batches]
    cpu, wall = cpu_and_wall()
    params, state, loss = block(step(params, state, inputs[0]))
    cpu_end, wall_end = cpu_and_wall()
    first = {"first_wall_s": wall_end - wall, "first_cpu_s": cpu_end - cpu}
    cpu, wall = cpu_and_wall()
    for batch in inputs[1:]:
        params, state, loss = block(step(params, state, batch))
    cpu_end, wall_end = cpu_and_wall()
    steps = len(inputs) - 1
    return {
        **first,
        "wall_s_per_step": (wall_end - wall) / steps,
        "cpu_s_per_step": (cpu_end - cpu) / steps,
        "steps_per_s": steps / (wall_end - wall),
        "last_loss": float(loss),
    }


def bench_size(size: int, repeats: int, seed: int, systems: Sequence[str]) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    batches = [ex.random_trees(rng, size) for _ in range(repeats + 1)]
    rows = []
    for system in systems:
        row = {"bench": "grad", "system": system, "batch": size, "steps": repeats, **time_system(system, batches, seed)}
        print("row " + json.dumps(row), flush=True)
        rows.append(row)
    return rows


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    print("| batch | system | first step s (wall / cpu) | s/step wall | s/step cpu | steps/s | wall / abir | cpu / abir |")
    print("|---|---|---|---|---|---|---|---|")
    abir_rows = {row["batch"]: row for row in rows if row["system"] == "abir"}
    for row in rows:
        base = abir_rows.get(row["batch"])
        wall_ratio = f"{row['wall_s_per_step'] / base['wall_s_per_step']:.3g}x" if base else "-"
        cpu_ratio = f"{row['cpu_s_per_step'] / base['cpu_s_per_step']:.3g}x" if base else "-"
        print(
            f"| {row['batch']} | {row['system']} | {row['first_wall_s']:.3g} / {row['first_cpu_s']:.3g} "
            f"| {row['wall_s_per_step']:.4g} | {row['cpu_s_per_step']:.4g} | {row['steps_per_s']:.3g} | {wall_ratio} | {cpu_ratio} |"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,1024", help="comma-separated trees per batch")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per system and size, after the first")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated: " + ", ".join(SYSTEMS))
    parser.add_argument("--check-trees", type=int, default=6, help="trees of the agreement check (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    systems = [name for name in args.systems.split(",") if name]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown systems {', '.join(unknown)}; choose among {', '.join(SYSTEMS)}")
    if args.check_trees:
        trees = ex.random_trees(np.random.default_rng(args.seed + 1), args.check_trees)
        failed = check_agreement(trees, args.seed)
        if failed:
            return 1
        print(f"agreement: {', '.join(SYSTEMS)} give equal losses and gradients on {args.check_trees} trees (float64, rtol {RTOL})")
    rows = []
    for size in (int(size) for size in args.sizes.split(",")):
        rows += bench_size(size, args.repeats, args.seed, systems)
    print_table(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
