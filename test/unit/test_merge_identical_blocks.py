"""`merge-identical-blocks`: the copies `fuse-blocks` makes of a loop's continuation, one per way
out of the loop, become one block again, and the program still means what Python means."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import backend_params

import abir
from abir.backend_registry import spec_named
from abir.passes.analysis import the_vm_program
from abir.passes.merge_identical_blocks import MergeIdenticalBlocksPass, block_key


def walk(n, limit):
    i = 0
    while i < limit:
        i += 1
        if n % 7 == 0:
            break
        n = n * 3 + 1
        if n > 1000:
            break
    return i * 2 + n


ARGS = (np.arange(1, 17), np.array([0, 1, 2, 9] * 4))


def block_keys() -> list[tuple[object, ...]]:
    ctx = abir.Context()
    ctx.batch_uncurried(walk)
    module = ctx.lowered_for_args("walk", list(ARGS), abir.JaxBackend())
    return [block_key(block) for block in the_vm_program(module, "test").blocks]


def test_the_loop_exits_share_one_continuation(monkeypatch: pytest.MonkeyPatch) -> None:
    keys = block_keys()
    assert len(set(keys)) == len(keys)
    monkeypatch.setattr(MergeIdenticalBlocksPass, "apply", lambda self, ctx, op: None)
    unmerged = block_keys()
    assert len(unmerged) > len(keys) and len(set(unmerged)) == len(keys)


def test_value_names_do_not_matter() -> None:
    ctx = abir.Context()
    ctx.batch_uncurried(walk)
    program = the_vm_program(ctx.lowered_for_args("walk", list(ARGS), abir.JaxBackend()), "test")
    block = program.blocks[-2]
    before = block_key(block)
    for op in block.body.block.ops:
        for result in op.results:
            result.name_hint = "renamed"
    assert block_key(block) == before


@pytest.mark.parametrize("name", backend_params())
def test_merged_program_equals_python(name: str) -> None:
    ctx = abir.Context()
    batched = ctx.batch_uncurried(walk)
    got = np.asarray(batched(*ARGS, backend=spec_named(name).new_backend()))
    want = [walk(int(n), int(limit)) for n, limit in zip(*ARGS, strict=True)]
    np.testing.assert_array_equal(got, want)
