"""Thresholds that guard behaviour, each pinned by what it decides rather than by its value: the
test moves the threshold across a case and checks the behaviour flips there. Why each threshold
has its value is in docs/performance.md."""

from __future__ import annotations

import numpy as np
import pytest
from test_order_sweeps import blocks_of, loop_module
from test_zero_state import countdown, counting_zero_states, make_backend

import abir
from abir.passes import order_sweeps as order_sweeps_module
from abir.vm import machine as machine_module


def block_order_after_order_sweeps(monkeypatch: pytest.MonkeyPatch, min_gain: float) -> list[str]:
    monkeypatch.setattr(order_sweeps_module, "MIN_GAIN", min_gain)
    module = loop_module()
    order_sweeps_module.order_sweeps(module)
    return [str(block) for _, block in sorted(blocks_of(module).items())]


def test_order_sweeps_applies_an_order_only_above_min_gain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop module's best order halves its expected backward transitions (a gain of 0.5)."""
    unchanged = [str(block) for _, block in sorted(blocks_of(loop_module()).items())]
    assert block_order_after_order_sweeps(monkeypatch, 0.6) == unchanged
    assert block_order_after_order_sweeps(monkeypatch, 0.4) != unchanged
    assert 0 < order_sweeps_module.MIN_GAIN < 0.5


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
    assert zero_states_made(monkeypatch, machine_module.REUSED_ZERO_STATE_BYTES) == 1
    assert zero_states_made(monkeypatch, 0) == 2
