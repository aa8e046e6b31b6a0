"""The NumPy backend, and the machine's masked stack operations checked against a model."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from abir.backends.base import RunStats, apply_writes, loops_to_itself, smallest_live_block, tail_start_of
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
    assert be.while_loop(lambda i, p: i < 5, lambda i, p: (i + 1, p * 2), (0, 1)) == [5, 32]
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
    return {**frame.regs, **apply_writes(stacks, frame.writes, be.stack_scatter)}


def _apply(be: NumpyBackend, state: dict, kind: str, mask: np.ndarray, value: np.ndarray, block: int) -> dict:
    if kind == "write":
        return _in_frame(be, state, block, lambda f: state_ops.write(be, f, "x", value, mask))
    if kind == "push":
        return _in_frame(be, state, block, lambda f: state_ops.push(be, f, ["x"], "sp:x", mask))
    return _in_frame(be, state, block, lambda f: state_ops.restore(be, f, ["x"], "sp:x", mask, drop=kind == "pop"))


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
                state_ops.push(be, frame, ["x"], "sp:x", np.array(mask))
            else:
                state_ops.restore(be, frame, ["x"], "sp:x", np.array(mask), drop=kind == "pop")
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


# ----- executions: switch, sweep, min_share ---------------------------------------------------


def _collatz_machine():
    from test_machine import COLLATZ, parse

    from abir.vm import compile_machine

    return compile_machine(parse(COLLATZ)), np.array([1, 7, 27, 2, 97, 6, 12, 3])


def _reference_sweeps(machine, inputs: np.ndarray) -> tuple[list[int], int, np.ndarray]:
    """The sweep by its definition: each sweep runs, in index order, every block that holds a
    member when the sweep reaches it, a block that jumps to itself again while members stand
    there, and the blocks of the program's tail only once every live member is in the tail.
    Returns (runs per block, sweeps, output)."""
    be = NumpyBackend(execution="switch", min_share=0)
    state = machine.initial_state(be, [inputs], len(inputs), 20)
    kernels = machine.kernels(be)
    tail = tail_start_of(kernels)
    runs, sweeps = [0] * machine.num_blocks, 0
    while state["pc"].min() < machine.num_blocks:
        sweeps += 1
        for block, kernel in enumerate(kernels):
            while np.any(state["pc"] == block) and (block < tail or state["pc"].min() >= tail):
                runs[block] += 1
                state = kernel(state)
                if not loops_to_itself(kernel):
                    break
    return runs, sweeps, state[f"r:{machine.outputs[0]}"]


def test_sweep_runs_every_held_block_in_index_order():
    machine, inputs = _collatz_machine()
    runs, sweeps, want = _reference_sweeps(machine, inputs)
    be = NumpyBackend(execution="sweep", min_share=0)
    (got,) = machine.run([inputs], be, max_stack_depth=20)
    np.testing.assert_array_equal(got, want)
    assert be.last_stats.block_steps == runs
    assert be.last_stats.sweeps == sweeps
    assert f"in {sweeps} sweeps" in be.last_stats.summary()


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"execution": "switch", "min_share": 0},
        {"execution": "switch", "min_share": 0.5},
        {"execution": "sweep"},
        {"execution": "sweep", "min_share": 1},
        {"scheduler": smallest_live_block},
        {"collect_stats": False},
    ],
)
def test_executions_agree_and_count_consistently(kwargs: dict):
    """Results and each member's own block count do not depend on the execution; the counts
    gathered in bulk agree with each other."""
    machine, inputs = _collatz_machine()
    reference = NumpyBackend(scheduler=smallest_live_block)
    (want,) = machine.run([inputs], reference, max_stack_depth=20)
    be = NumpyBackend(**kwargs)
    (got,) = machine.run([inputs], be, max_stack_depth=20)
    np.testing.assert_array_equal(got, want)
    if not be.collect_stats:
        assert be.last_stats is None
        return
    stats = be.last_stats
    assert stats.member_steps == reference.last_stats.member_steps
    assert stats.steps == sum(stats.block_steps) >= stats.ideal_steps
    assert sum(stats.block_members) == sum(stats.member_steps)
    assert (stats.sweeps is not None) == (be.execution == "sweep")


def test_min_share_holds_back_sparse_blocks():
    """Two of eight members stand at block 0, six at block 1: with min_share 0.5 the sparse
    block 0 waits and block 1 runs first; once the six have halted, the two are all the live
    members and run. With min_share 0 the smallest block held runs first."""

    def advance(block: int, target: int):
        def kernel(state: dict) -> dict:
            return {"pc": np.where(state["pc"] == block, np.int32(target), state["pc"])}

        return kernel

    pc = np.array([1, 1, 1, 1, 1, 1, 0, 0], np.int32)
    kernels = [advance(0, 1), advance(1, 2)]
    shared, plain = NumpyBackend(min_share=0.5), NumpyBackend(min_share=0)
    for be in (shared, plain):
        assert be.run(kernels, {"pc": pc}, 2, None)["pc"].tolist() == [2] * 8
    assert plain.last_stats.block_steps == [1, 1] and plain.last_stats.block_members == [2, 8]
    assert shared.last_stats.block_steps == [1, 2] and shared.last_stats.block_members == [2, 8]
    assert shared.last_stats.member_steps == plain.last_stats.member_steps == [1] * 6 + [2, 2]


def test_stats_flushed_in_chunks_add_up():
    """More steps than one bulk chunk: the counts of several flushes add up."""
    machine, _ = _collatz_machine()
    big = np.array([27, 97, 871, 6171, 77031, 837799])
    be = NumpyBackend(execution="switch", min_share=0)
    machine.run([big], be, max_stack_depth=20)
    assert be.last_stats.steps > 512
    assert sum(be.last_stats.block_members) == sum(be.last_stats.member_steps)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"execution": "fastest"}, "execution must be one of 'sweep', 'switch'"),
        ({"execution": "sweep", "scheduler": smallest_live_block}, "execution='switch'"),
        ({"scheduler": smallest_live_block, "min_share": 0.1}, "min_share applies without a scheduler"),
        ({"min_share": 1.5}, r"min_share must be in \[0, 1\]"),
    ],
)
def test_bad_options(kwargs: dict, message: str):
    with pytest.raises(ValueError, match=message):
        NumpyBackend(**kwargs)


def test_run_leaves_the_callers_stacks_alone():
    from test_machine import FIB, parse

    from abir.vm import compile_machine

    fib = compile_machine(parse(FIB))
    be = NumpyBackend()
    state = fib.initial_state(be, [np.array([5, 9, 3])], 3, 8)
    before = {key: value.copy() for key, value in state.items()}
    out = be.run(fib.kernels(be), state, fib.num_blocks, None, stack_keys=fib.stack_keys)
    for key, value in before.items():
        np.testing.assert_array_equal(state[key], value)
    assert out["pc_stack"].shape == state["pc_stack"].shape
