"""Arguments a recursion passes on unchanged are not saved around its calls (`stack-optimize`'s
invariant saves), and the batched result is still the plain Python one per member.

A recursive tree evaluation passes its node arrays to both recursive calls as they are and reads
them after both: each call's parallel write copies them to themselves, which changes nothing, so
no call saves them (a saved array would be a `[D, B, N]` stack pushed at every call). The
results equal the per-member Python run on every registered backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import abir
from abir.backend_registry import spec_named
from abir.dialects import vm

LEAF, ADD, MUL = 0, 1, 2
NODES = 15


def eval_tree(op, left, right, value, node):
    if op[node] == LEAF:
        return value[node]
    a = eval_tree(op, left, right, value, left[node])
    b = eval_tree(op, left, right, value, right[node])
    if op[node] == ADD:
        return a + b
    return a * b - value[node]


def random_tree(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """A random tree in arrays of `NODES` nodes (root 0), between one and 7 leaves deep."""
    op, left, right = (np.zeros(NODES, np.int64) for _ in range(3))
    value = rng.integers(-3, 4, NODES)
    free = 1
    todo = [0]
    while todo:
        node = todo.pop()
        if free + 2 <= NODES and rng.random() < 0.7:
            op[node] = rng.integers(ADD, MUL + 1)
            left[node], right[node] = free, free + 1
            todo += [free, free + 1]
            free += 2
    return op, left, right, value


@pytest.fixture(scope="module")
def trees() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(26)
    parts = zip(*(random_tree(rng) for _ in range(24)), strict=True)
    return (*(np.stack(p) for p in parts), np.zeros(24, np.int64))


def test_arrays_passed_on_unchanged_are_not_saved(trees) -> None:
    context = abir.Context()
    context.batch()(eval_tree)
    signature = [abir.TensorType(np.int64, (NODES,))] * 4 + [abir.TensorType(np.int64, ())]
    lowered = context.program_lowered("eval_tree", signature)
    saved = {op.sym_name.data for op in lowered.ops if isinstance(op, vm.VarOp) and op.storage.data.value == "stack"}
    assert saved and not saved & {f"eval_tree.{name}" for name in ("op", "left", "right", "value")}


def test_tree_evaluation_equals_python_per_member(trees, backend_name: str) -> None:
    batched = abir.Context().batch()(eval_tree)
    got = batched(*trees, backend=spec_named(backend_name).new_backend(), max_stack_depth=12)
    want = [eval_tree(*(x[b] for x in trees)) for b in range(len(trees[0]))]
    np.testing.assert_array_equal(np.asarray(got), np.array(want))
