"""`order-sweeps`: vm blocks renumbered by the transitions members are expected to make.

The traced backends sweep the blocks in index order, so every backward transition costs a member
a sweep. The pass weights the transitions by a Markov model of one member's run and moves blocks
while the expected backward transitions fall.
"""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest
from xdsl.parser import Parser

import abir
from abir.dialects import make_context, vm
from abir.passes import order_sweeps as pass_module

LOOP = pathlib.Path(__file__).resolve().parents[1] / "lit" / "passes" / "order-sweeps.mlir"


def loop_module():
    return Parser(make_context(), LOOP.read_text(), "order-sweeps.mlir").parse_module()


def blocks_of(module) -> dict[int, vm.BlockOp]:
    program = next(op for op in module.ops if isinstance(op, vm.ProgramOp))
    return {block.number: block for block in program.blocks}


def test_the_model_counts_loop_iterations_and_calls() -> None:
    weights = pass_module.expected_transitions(blocks_of(loop_module()))
    assert weights is not None
    # the header (block 3) is entered once by the call, then once per iteration (1/2 each)
    assert weights[0, 3] == pytest.approx(1.0)
    assert weights[3, 2] == pytest.approx(1.0) and weights[2, 1] == pytest.approx(1.0)
    assert weights[1, 3] == pytest.approx(1.0) and weights[3, 4] == pytest.approx(1.0)
    assert weights[4, 5] == pytest.approx(1.0)  # the return, to the call's return block
    assert weights[5].sum() == 0.0  # the halt leaves the program


def test_the_order_keeps_the_entry_and_the_tail_and_halves_the_backward_transitions() -> None:
    module = loop_module()
    before = pass_module.expected_transitions(blocks_of(module))
    pass_module.order_sweeps(module)
    module.verify()
    after = pass_module.expected_transitions(blocks_of(module))
    identity = list(range(6))
    assert pass_module.backward_weight(identity, after) == pytest.approx(pass_module.backward_weight(identity, before) / 2)
    blocks = blocks_of(module)
    assert isinstance(blocks[0].body.block.last_op, vm.CallOp)
    assert isinstance(blocks[4].body.block.last_op, vm.ReturnOp)
    assert isinstance(blocks[5].body.block.last_op, vm.HaltOp)


def test_a_loop_the_model_never_leaves_keeps_its_order() -> None:
    module = loop_module()
    program = next(op for op in module.ops if isinstance(op, vm.ProgramOp))
    header = blocks_of(module)[3]
    branch = header.body.block.last_op
    assert isinstance(branch, vm.BranchOp)
    header.body.block.insert_op_before(vm.JumpOp(2), branch)
    branch.detach()
    branch.erase()
    before = [(block.number, str(block)) for block in program.blocks]
    pass_module.order_sweeps(module)
    assert [(block.number, str(block)) for block in program.blocks] == before


def load_nuts():
    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "nuts.py"
    spec = importlib.util.spec_from_file_location("abir_example_nuts_order", path)
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    return ex


def nuts_sweeps(ex, monkeypatch: pytest.MonkeyPatch | None, per_chain: object) -> int:
    """The sweeps of a JAX run of the example's NUTS, whose samples must equal `per_chain`."""
    if monkeypatch is not None:
        monkeypatch.setattr(pass_module.OrderSweepsPass, "apply", lambda self, ctx, op: None)
    nuts = ex.make_nuts(ex.PRECISION, max_depth=4)
    keys, q0 = ex.chain_keys(seed=2, chains=16), ex.initial_positions(2, 16, ex.DIM)
    backend = abir.JaxBackend(collect_stats=True, code_cache={})
    got = ex.batch(nuts)(q0, 0.3, keys, np.int64(4), backend=backend, max_stack_depth=ex.stack_depth(nuts))
    ex.compare(ex.as_chain(got), per_chain)
    return backend.last_stats.sweeps


def test_nuts_needs_fewer_sweeps_and_gets_the_same_samples(monkeypatch: pytest.MonkeyPatch) -> None:
    ex = load_nuts()
    nuts = ex.make_nuts(ex.PRECISION, max_depth=4)
    per_chain = ex.run_per_chain(nuts, ex.initial_positions(2, 16, ex.DIM), 0.3, ex.chain_keys(seed=2, chains=16), 4)
    with_pass = nuts_sweeps(ex, None, per_chain)
    without_pass = nuts_sweeps(ex, monkeypatch, per_chain)
    assert with_pass < 0.85 * without_pass
