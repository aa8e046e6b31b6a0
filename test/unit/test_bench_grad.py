"""bench/grad.py at a tiny size: its three systems (abir, per-tree `jax.grad` in a Python loop,
padding to full binary trees under `jit(vmap)`) give equal losses and gradients (float64, rtol
1e-9), a tree laid into heap slots keeps its nodes, and a run prints one row per system and
batch size (the agreement checked apart)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
pytest.importorskip("optax")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import grad as bench_grad  # noqa: E402

ex = bench_grad.ex


@pytest.mark.full  # make test: the run below checks the three trainings agree step for step
def test_three_systems_give_equal_losses_and_gradients():
    trees = ex.random_trees(np.random.default_rng(5), 4, depths=(1, 6))
    assert bench_grad.check_agreement(trees, seed=6) == []


def test_heap_layout_keeps_every_node_at_its_slot():
    trees = ex.random_trees(np.random.default_rng(7), 3, depths=(2, 4))
    kind, value = bench_grad.heap_layout(trees)
    for tree in range(3):
        assert (kind[tree] != bench_grad.ABSENT).sum() == (trees.kind[tree] != ex.LEAF).sum() * 2 + 1
        assert kind[tree, 0] == trees.kind[tree, 0]
        left = trees.left[tree, 0]
        assert kind[tree, 1] == trees.kind[tree, left] and value[tree, 1] == trees.value[tree, left]


def test_the_bench_runs_and_prints_a_row_per_system(capsys):
    code = bench_grad.main(["--sizes", "3", "--repeats", "1", "--check-trees", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    rows = [json.loads(line.removeprefix("row ")) for line in out.splitlines() if line.startswith("row ")]
    assert [row["system"] for row in rows] == list(bench_grad.SYSTEMS)
    assert all(row["batch"] == 3 and row["steps_per_s"] > 0 for row in rows)
    losses = [row["last_loss"] for row in rows]
    np.testing.assert_allclose(losses, losses[0], rtol=1e-4)  # float32: the same training, step for step
