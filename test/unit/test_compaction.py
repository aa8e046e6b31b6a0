"""Compacted block runs on the JAX backend (`abir.backends.jax.compaction`).

A block with much work per member runs, when at most B/8 members stand there, on those
members' rows only: registers and stack columns gathered, results and stack write requests
gathered back. Results must equal the per-member Python run; with the work threshold at 0
every block of every program below runs compacted whenever few members are there. Each test
runs both formulations: with scatters (the loop as a sequence of XLA kernels, `one_kernel=False`)
and without (the loop as one kernel, the default at these sizes).
"""

from __future__ import annotations

import importlib.util
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import abir
from abir.backends.jax import compaction, cost

ctx = abir.Context()


@ctx.batch(type_inference=lambda types: types[0])
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


@ctx.batch(type_inference=lambda types: types[0])
def guarded_tree(n, limit):
    """Values live across two recursive calls (stack pushes and pops) and an early return."""
    if n < 2:
        return n
    left = guarded_tree(n - 1, limit)
    if left > limit:
        return left
    return left + guarded_tree(n - 2, limit) + 1


@ctx.batch(type_inference=lambda types: types[1])
def noisy_walk(key, x, steps):
    """A loop whose trip count differs per member, with a heavy block (a normal draw)."""
    for i in range(steps):
        x = x + 0.1 * abir.random.normal(key, i, shape=(8,)).sum()
    return x


def per_member(fn, *args):
    return np.asarray(fn(*args, dry_run=True))


def cases():
    rng = np.random.default_rng(5)
    n = rng.integers(0, 12, size=16)
    return {
        "fib": (fib, (n,)),
        "guarded_tree": (guarded_tree, (n, rng.integers(0, 30, size=16))),
        "noisy_walk": (noisy_walk, (abir.random.key(np.arange(16)), rng.normal(size=16), rng.integers(0, 9, size=16))),
    }


ONE_KERNEL = pytest.mark.parametrize("one_kernel", [False, None], ids=["kernels", "one-kernel"])


@ONE_KERNEL
@pytest.mark.parametrize("name", sorted(cases()))
@pytest.mark.make_test_keeps({"one_kernel": None}, {"name": "noisy_walk"})
def test_every_block_compacted_equals_python(name: str, one_kernel: bool | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compaction, "COMPACT_MIN_ROW_WORK", 0)
    monkeypatch.setattr(compaction, "COMPACT_MIN_WORK_PER_WRITTEN", 0)
    compacted = []
    compact_rows = compaction.compact_rows

    def spy(kernel, template, stack_keys, split=None):
        compacted.append(compact_rows(kernel, template, stack_keys, split))
        return compacted[-1]

    monkeypatch.setattr(compaction, "compact_rows", spy)
    fn, args = cases()[name]
    got = np.asarray(fn(*args, backend=abir.JaxBackend(code_cache={}, one_kernel=one_kernel)))
    np.testing.assert_allclose(got, per_member(fn, *args), rtol=1e-12)
    assert 2 in compacted  # B=16: compacted runs use 2 rows


@ctx.batch(type_inference=lambda types: types[0])
def wide_rounds(x, n):
    """A loop of one block that repeats: a few operations on each of the member's 256 numbers."""
    i = n - n
    while i < n:
        x = 0.5 * x + 1.0 / (1.0 + x * x)
        i += 1
    return x


@ctx.batch(type_inference=lambda types: types[1])
def drawn_rounds(key, x, n):
    """A loop of one block that repeats: eight normal draws (thousands of operations) for one number."""
    i = n - n
    while i < n:
        x = x + 0.1 * abir.random.normal(key, i, shape=(8,)).sum()
        i += 1
    return x


@pytest.mark.parametrize(("name", "compacted_rows"), [("wide", None), ("drawn", 2)])
def test_a_repeating_block_is_compacted_only_with_much_work_per_element_it_writes(
    name: str, compacted_rows: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both blocks pass `COMPACT_MIN_ROW_WORK`; the wide one does a few operations per element
    it writes (`COMPACT_MIN_WORK_PER_WRITTEN`)."""
    from abir.backends.base import loops_to_itself

    repeating = []
    compact_rows = compaction.compact_rows

    def spy(kernel, template, stack_keys, split=None):
        rows = compact_rows(kernel, template, stack_keys, split)
        if loops_to_itself(kernel):
            repeating.append((compaction.row_work(split or kernel.split, template, stack_keys), rows))
        return rows

    monkeypatch.setattr(compaction, "compact_rows", spy)
    rng = np.random.default_rng(6)
    n = rng.integers(0, 5, size=16)
    if name == "wide":
        fn, args = wide_rounds, (rng.normal(size=(16, 256)), n)
    else:
        fn, args = drawn_rounds, (abir.random.key(np.arange(16)), rng.normal(size=16), n)
    got = np.asarray(fn(*args, backend=abir.JaxBackend(code_cache={})))
    np.testing.assert_allclose(got, per_member(fn, *args), rtol=1e-12)
    ((work, rows),) = repeating
    assert work >= compaction.COMPACT_MIN_ROW_WORK and rows == compacted_rows


@ONE_KERNEL
def test_default_threshold_compacts_only_the_heavy_block(one_kernel: bool | None, monkeypatch: pytest.MonkeyPatch) -> None:
    compacted = []
    compact_rows = compaction.compact_rows

    def spy(kernel, template, stack_keys, split=None):
        compacted.append((kernel.plan.instructions, compact_rows(kernel, template, stack_keys, split)))
        return compacted[-1][1]

    monkeypatch.setattr(compaction, "compact_rows", spy)
    fn, args = cases()["noisy_walk"]
    got = np.asarray(fn(*args, backend=abir.JaxBackend(code_cache={}, one_kernel=one_kernel)))
    np.testing.assert_allclose(got, per_member(fn, *args), rtol=1e-12)
    heavy = [rows for instructions, rows in compacted if "normal" in repr(instructions)]
    light = [rows for instructions, rows in compacted if "normal" not in repr(instructions)]
    assert heavy == [2] and set(light) == {None}


@ONE_KERNEL
@pytest.mark.make_test_keeps({"one_kernel": None})
def test_nuts_equals_per_chain_with_compacted_momentum_draws(one_kernel: bool | None) -> None:
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "nuts.py"
    spec = importlib.util.spec_from_file_location("abir_example_nuts_compaction", path)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    nuts = ex.make_nuts(ex.PRECISION, max_depth=4)
    keys, q0 = ex.chain_keys(seed=4, chains=16), ex.initial_positions(4, 16, ex.DIM)
    got = ex.batch(nuts)(
        q0, 0.3, keys, np.int64(3), backend=abir.JaxBackend(code_cache={}, one_kernel=one_kernel),
        max_stack_depth=ex.stack_depth(nuts),
    )
    ex.compare(ex.as_chain(got), ex.run_per_chain(nuts, q0, 0.3, keys, 3))


def test_jaxpr_work_counts_elements_products_and_transcendentals() -> None:
    def work(fn, *shapes):
        args = [jax.ShapeDtypeStruct(shape, np.float64) for shape in shapes]
        return cost.jaxpr_work(jax.make_jaxpr(fn)(*args).jaxpr)

    assert work(lambda x: x + 1.0, (4, 3)) == 12
    assert work(lambda x: jnp.exp(x), (4, 3)) == 12 * cost.TRANSCENDENTAL_COST
    assert work(lambda x, p: x @ p, (4, 3), (3, 5)) == 4 * 5 * 3
    assert work(lambda x: x.reshape(12), (4, 3)) == 0
    branches = work(lambda x: jax.lax.cond(x[0] > 0, lambda y: jnp.exp(y), lambda y: y + 1.0, x), (5,))
    assert branches >= 5 * cost.TRANSCENDENTAL_COST


@pytest.mark.parametrize("batch", [1, 5, 64])
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_compact_slots_finds_the_first_members_and_their_slots(batch: int, rows: int) -> None:
    rng = np.random.default_rng(batch * 31 + rows)
    for here in [np.zeros(batch, bool), np.ones(batch, bool), *(rng.random(batch) < p for p in (0.1, 0.5, 0.9))]:
        members, slots = compaction.compact_slots(jnp.asarray(here), rows)
        first = np.flatnonzero(here)[:rows]
        np.testing.assert_array_equal(members, np.concatenate([first, np.full(rows - len(first), batch)]))
        want_slots = np.full(batch, -1)
        want_slots[first] = np.arange(len(first))
        np.testing.assert_array_equal(slots, want_slots)
