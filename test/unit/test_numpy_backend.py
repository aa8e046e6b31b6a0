"""The NumPy backend, and the machine's masked stack operations checked against a model."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from abir.backends.base import RunStats, smallest_live_block
from abir.backends.numpy_backend import NumpyBackend
from abir.types import TensorType
from abir.vm import state_ops

# ----- the backend's array operations ---------------------------------------------------------


def test_where_broadcasts_mask_over_event_dims():
    be = NumpyBackend()
    old = np.zeros((3, 2))
    out = be.where(np.array([True, False, True]), np.array([[1.0, 2.0]]), old)
    np.testing.assert_array_equal(out, [[1, 2], [0, 0], [1, 2]])
    assert out.dtype == old.dtype


def test_stack_write_touches_only_masked_members():
    be = NumpyBackend()
    stack = np.zeros((2, 3), np.int64)
    out = be.stack_write(stack, np.array([1, 5, 0]), np.array([7, 8, 9]), np.array([True, False, True]))
    np.testing.assert_array_equal(out, [[0, 0, 9], [7, 0, 0]])


def test_stack_read_clips_indices():
    be = NumpyBackend()
    stack = np.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(be.stack_read(stack, np.array([-1, 1, 7])), [0, 4, 5])


def test_builtin_prim_pins_result_dtype_and_silences_junk():
    be = NumpyBackend()
    a = np.array([1, 2], np.int32)
    assert be.builtin_prim("add", [a, np.int64(1)], np.int32).dtype == np.int32
    with np.errstate(all="raise"):
        out = be.builtin_prim("divide", [np.array([1.0, 0.0]), np.array([0.0, 0.0])], np.float64)
    assert np.isinf(out[0]) and np.isnan(out[1])
    np.testing.assert_array_equal(be.builtin_prim("astype", [np.array([1.7, -2.2])], np.int32), [1, -2])


def test_protocol_helpers():
    be = NumpyBackend()
    x = np.zeros((4, 3), np.float32)
    assert be.type_of(x) == TensorType(np.dtype(np.float32), (4, 3))
    assert be.batch_size(x) == 4 and be.batch_size(3.0) == 1
    assert be.full_mask(3).tolist() == [True] * 3
    assert be.merge_dtypes(np.int32, np.float32) == np.float64
    assert be.merge_shapes((3, 1), (4,)) == (3, 4)
    np.testing.assert_array_equal(
        be.broadcast_to_shape_of(np.array([1.0, 2.0, 3.0]), x), np.tile([1, 2, 3], (4, 1))
    )
    assert be.expand_event_dims(np.zeros(4), 2).shape == (4, 1, 1)
    assert be.switch_case(np.int32(1), [lambda v: v + 1, lambda v: v * 10], 3) == 30
    assert be.while_loop(lambda s: s[0] < 5, lambda s: (s[0] + 1, s[1] * 2), (0, 1)) == (5, 32)
    assert be.run_on_dummies(lambda a, b: a + b, [TensorType(np.int32, (2,))] * 2).tolist() == [0, 0]
    assert int(smallest_live_block(be, np.array([4, 2, 9]))) == 2


def test_run_counts_steps_and_members():
    be = NumpyBackend()

    def step_down(state):
        pc = state["pc"]
        return {"pc": np.where(pc == pc.min(), pc + 1, pc)}

    out = be.run([step_down] * 3, {"pc": np.array([0, 2, 1], np.int32)}, 3, None)
    assert out["pc"].tolist() == [3, 3, 3]
    assert be.last_stats == RunStats(3, 3, [1, 1, 1], [1, 2, 3], [3, 1, 2])
    assert be.last_stats.lane_use == pytest.approx(6 / 9)
    assert be.last_stats.ideal_steps == 3
    assert "3 steps (ideal 3)" in be.last_stats.summary()


# ----- model-based test of the masked stack operations -----------------------------------------

EVENT_SHAPES = [(), (2,)]


class StackModel:
    """Per member: a Python list of saved values, the current value and the error flags."""

    def __init__(self, batch: int, depth: int, shape: tuple[int, ...]):
        self.depth = depth
        self.saved: list[list[np.ndarray]] = [[] for _ in range(batch)]
        self.current = [np.zeros(shape) for _ in range(batch)]
        self.overflow = [0] * batch
        self.underflow = [0] * batch

    def apply(self, kind: str, mask: list[bool], value: np.ndarray, block: int) -> None:
        for b, active in enumerate(mask):
            if active:
                self._apply_one(kind, b, value[b], block)

    def _apply_one(self, kind: str, b: int, value: np.ndarray, block: int) -> None:
        if kind == "write":
            self.current[b] = value
        elif kind == "push":
            if len(self.saved[b]) == self.depth:
                self.overflow[b] = self.overflow[b] or block + 1
            else:
                self.saved[b].append(self.current[b])
        elif not self.saved[b]:
            self.underflow[b] = self.underflow[b] or block + 1
        else:
            self.current[b] = self.saved[b][-1]
            if kind == "pop":
                self.saved[b].pop()


def _initial_state(be: NumpyBackend, batch: int, depth: int, shape: tuple[int, ...]) -> dict:
    t = TensorType(np.dtype(np.float64), shape)
    return {
        "pc": be.zeros((batch,), np.int32),
        "r:x": be.create_register(batch, t),
        "s:x": be.create_stack(depth, batch, t),
        "sp:x": be.zeros((batch,), np.int32),
        "overflow": be.zeros((batch,), np.int32),
        "underflow": be.zeros((batch,), np.int32),
    }


def _in_frame(be: NumpyBackend, state: dict, block: int, op) -> dict:
    """Run `op(frame)` as a block of its own: apply its stack writes, record fresh error flags
    (without halting, so the model can keep going after an error)."""
    regs, stacks = state_ops.split_state(state)
    frame = state_ops.Frame(dict(regs), stacks)
    op(frame)
    for key, bad in ((state_ops.OVERFLOW, frame.overflow), (state_ops.UNDERFLOW, frame.underflow)):
        if bad is not None:
            fresh = frame.regs[key] == 0
            frame.regs[key] = np.where(bad & fresh, np.int32(block + 1), frame.regs[key])
    return {**frame.regs, **state_ops.apply_writes(be, stacks, frame.writes)}


def _apply(be: NumpyBackend, state: dict, kind: str, mask: np.ndarray, value: np.ndarray, block: int) -> dict:
    if kind == "write":
        return _in_frame(be, state, block, lambda f: state_ops.write(be, f, "x", value, mask))
    if kind == "push":
        return _in_frame(be, state, block, lambda f: state_ops.push(be, f, "x", mask))
    return _in_frame(be, state, block, lambda f: state_ops.restore(be, f, "x", mask, drop=kind == "pop"))


@st.composite
def stack_programs(draw):
    batch = draw(st.integers(1, 4))
    depth = draw(st.integers(1, 4))
    shape = draw(st.sampled_from(EVENT_SHAPES))
    op = st.tuples(
        st.sampled_from(["write", "push", "push", "pop", "peek"]),
        st.lists(st.booleans(), min_size=batch, max_size=batch),
    )
    ops = draw(st.lists(op, max_size=25))
    return batch, depth, shape, ops


@settings(max_examples=200, deadline=None)
@given(stack_programs())
def test_stack_ops_match_model(program):
    batch, depth, shape, ops = program
    be = NumpyBackend()
    model = StackModel(batch, depth, shape)
    state = _initial_state(be, batch, depth, shape)
    for step, (kind, mask) in enumerate(ops):
        value = np.full((batch, *shape), float(step + 1)) + np.arange(batch).reshape(
            (batch,) + (1,) * len(shape)
        )
        state = _apply(be, state, kind, np.array(mask), value, block=step)
        model.apply(kind, mask, value, block=step)
        np.testing.assert_array_equal(state["r:x"], np.array(model.current))
        assert state["sp:x"].tolist() == [len(s) for s in model.saved]
        assert state["overflow"].tolist() == model.overflow
        assert state["underflow"].tolist() == model.underflow
        for b in range(batch):
            for i, saved in enumerate(model.saved[b]):
                np.testing.assert_array_equal(state["s:x"][i, b], saved)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.booleans(), min_size=3, max_size=3)), max_size=20))
def test_pc_stack_call_return_match_model(ops):
    """vm.call pushes the return block and jumps; vm.return pops it into pc (masked, flagged)."""
    be = NumpyBackend()
    depth, batch = 3, 3
    state = {
        "pc": np.zeros(batch, np.int32),
        "pc_stack": be.zeros((depth, batch), np.int32),
        "pc_sp": be.zeros((batch,), np.int32),
        "overflow": be.zeros((batch,), np.int32),
        "underflow": be.zeros((batch,), np.int32),
    }
    saved: list[list[int]] = [[] for _ in range(batch)]
    pc = [0] * batch
    over, under = [0] * batch, [0] * batch
    for step, (is_call, mask) in enumerate(ops):
        if is_call:
            op = functools.partial(
                state_ops.call, be, target=100 + step, return_target=200 + step, mask=np.array(mask)
            )
        else:
            op = functools.partial(state_ops.return_, be, mask=np.array(mask))
        state = _in_frame(be, state, step, lambda f, op=op: op(frame=f))
        for b in (b for b in range(batch) if mask[b]):
            if is_call and len(saved[b]) == depth:
                over[b] = over[b] or step + 1
                pc[b] = 100 + step
            elif is_call:
                saved[b].append(200 + step)
                pc[b] = 100 + step
            elif saved[b]:
                pc[b] = saved[b].pop()
            else:
                under[b] = under[b] or step + 1
        assert state["pc"].tolist() == pc
        assert state["pc_sp"].tolist() == [len(s) for s in saved]
        assert state["overflow"].tolist() == over and state["underflow"].tolist() == under


@settings(max_examples=200, deadline=None)
@given(stack_programs())
def test_stack_ops_in_one_block_match_model(program):
    """All ops in ONE frame (one block, one mask): pops see values pushed earlier in the same
    block (still pending write requests) and the requests left over are applied in order."""
    batch, depth, shape, ops = program
    mask = [True] * batch if not ops else ops[0][1]
    be = NumpyBackend()
    model = StackModel(batch, depth, shape)
    state = _initial_state(be, batch, depth, shape)
    for b in range(batch):  # start from a partly filled stack
        for i in range(b % (depth + 1)):
            model.saved[b].append(np.full(shape, -1.0 - i))
            state["s:x"][i, b] = -1.0 - i
        state["sp:x"][b] = len(model.saved[b])

    def block(frame):
        for step, (kind, _) in enumerate(ops):
            value = np.full((batch, *shape), float(step + 1))
            if kind == "write":
                state_ops.write(be, frame, "x", value, np.array(mask))
            elif kind == "push":
                state_ops.push(be, frame, "x", np.array(mask))
            else:
                state_ops.restore(be, frame, "x", np.array(mask), drop=kind == "pop")
            model.apply(kind, mask, value, block=0)

    state = _in_frame(be, state, 0, block)
    for b in range(batch):
        if model.overflow[b] or model.underflow[b]:
            continue  # a failed member halts; its registers and stack are junk
        np.testing.assert_array_equal(state["r:x"][b], model.current[b])
        assert state["sp:x"][b] == len(model.saved[b])
        for i, saved in enumerate(model.saved[b]):
            np.testing.assert_array_equal(state["s:x"][i, b], saved)
    failed = [bool(o or u) for o, u in zip(state["overflow"], state["underflow"], strict=True)]
    assert failed == [bool(o or u) for o, u in zip(model.overflow, model.underflow, strict=True)]
