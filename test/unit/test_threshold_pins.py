"""Thresholds that guard behaviour, each pinned by what it decides rather than by its value: the
test moves the threshold across a case and checks the behaviour flips there. Why each threshold
has its value is in docs/performance.md."""

from __future__ import annotations

import numpy as np
import pytest
from test_order_sweeps import blocks_of, loop_module
from test_zero_state import countdown, counting_zero_states, make_backend
from xdsl.dialects import cf
from xdsl.parser import Parser

import abir
from abir.dialects import make_context
from abir.passes import if_convert as if_convert_module
from abir.passes import order_sweeps as order_sweeps_module
from abir.vm import machine as machine_module


def block_order_after_order_sweeps(monkeypatch: pytest.MonkeyPatch, min_gain: float) -> list[str]:
    monkeypatch.setattr(order_sweeps_module, "MIN_GAIN", min_gain)
    module = loop_module()
    order_sweeps_module.order_sweeps(module)
    return [str(block) for _, block in sorted(blocks_of(module).items())]


def test_order_sweeps_applies_an_order_only_above_min_gain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop module's best order halves its expected backward transitions (a gain of 0.5)."""
    assert 0 < order_sweeps_module.MIN_GAIN < 0.5
    unchanged = [str(block) for _, block in sorted(blocks_of(loop_module()).items())]
    assert block_order_after_order_sweeps(monkeypatch, 0.6) == unchanged
    assert block_order_after_order_sweeps(monkeypatch, 0.4) != unchanged


def zero_states_made(monkeypatch: pytest.MonkeyPatch, limit: int) -> int:
    monkeypatch.setattr(machine_module, "REUSED_ZERO_STATE_BYTES", limit)
    backend = make_backend("jax")
    made = counting_zero_states(monkeypatch, backend)
    batched = abir.Context().batch_uncurried(countdown)
    for inputs in (np.array([3, 1, 4]), np.array([2, 0, 5])):
        got = np.asarray(batched(inputs, backend=backend)).tolist()
        assert got == [countdown(int(n)) for n in inputs]
    return len(made)


def test_a_zero_state_is_reused_only_up_to_its_byte_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    assert machine_module.REUSED_ZERO_STATE_BYTES >= 1 << 20
    assert zero_states_made(monkeypatch, machine_module.REUSED_ZERO_STATE_BYTES) == 1
    assert zero_states_made(monkeypatch, 0) == 2


COLLATZ_STEP = """
builtin.module {
  functional.func @step(%n: i64) -> i64 {
    %c2 = functional.constant 2 : i64
    %r = functional.prim "remainder"(%n, %c2) : (i64, i64) -> i64
    %c0 = functional.constant 0 : i64
    %even = functional.prim "equal"(%r, %c0) : (i64, i64) -> i1
    cf.cond_br %even, ^bb1, ^bb2
  ^bb1:
    %half = functional.prim "floor_divide"(%n, %c2) : (i64, i64) -> i64
    cf.br ^bb3(%half : i64)
  ^bb2:
    %c3 = functional.constant 3 : i64
    %m = functional.prim "multiply"(%c3, %n) : (i64, i64) -> i64
    %c1 = functional.constant 1 : i64
    %odd = functional.prim "add"(%m, %c1) : (i64, i64) -> i64
    cf.br ^bb3(%odd : i64)
  ^bb3(%next: i64):
    functional.return %next : i64
  }
}
"""


def branches_after_if_convert(monkeypatch: pytest.MonkeyPatch, max_arm_ops: int) -> int:
    monkeypatch.setattr(if_convert_module, "MAX_ARM_OPS", max_arm_ops)
    module = Parser(make_context(), COLLATZ_STEP, "step.mlir").parse_module()
    if_convert_module.if_convert(module)
    module.verify()
    return sum(isinstance(op, cf.ConditionalBranchOp) for op in module.walk())


def test_if_convert_speculates_arms_up_to_max_arm_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    """The odd arm of the Collatz step holds two prims (its constants are free)."""
    assert if_convert_module.MAX_ARM_OPS >= 2
    assert branches_after_if_convert(monkeypatch, 2) == 0
    assert branches_after_if_convert(monkeypatch, 1) == 1
