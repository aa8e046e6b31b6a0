"""The machine's generated block kernels and the NumPy fast paths under them.

A kernel is one straight-line Python function per block (`abir.vm.kernels.KernelCode`); it
must make exactly the backend calls the vm ops stand for, in op order, so that JAX and TF trace
the same computations NumPy runs. The NumPy backend's shortcuts (flat-index stack reads and
scatters, the direct products of `array_ops`, the `min_share` block choice) must give the same
arrays as the plain formulations.
"""

from __future__ import annotations

import traceback
from typing import Any

import numpy as np
import pytest
from test_machine import FIB, parse

from abir import array_ops
from abir.backends.numpy_backend import NumpyBackend
from abir.opaque import register_opaque
from abir.vm import compile_machine, state_ops


class RecordingBackend(NumpyBackend):
    """A NumPy backend that logs the protocol calls a kernel makes."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    def builtin_prim(self, name: str, args: Any, result_dtype: Any) -> np.ndarray:
        self.log.append(f"{name}:{np.dtype(result_dtype)}")
        return super().builtin_prim(name, args, result_dtype)

    def where(self, mask: Any, new: Any, old: Any) -> np.ndarray:
        self.log.append("where")
        return super().where(mask, new, old)

    def asarray(self, value: Any, dtype: Any = None) -> np.ndarray:
        self.log.append("asarray")
        return super().asarray(value, dtype)

    def stack_read(self, stack: np.ndarray, index: Any) -> np.ndarray:
        self.log.append("stack_read")
        return super().stack_read(stack, index)

    def known_none(self, mask: Any) -> bool:
        self.log.append("known_none")
        return super().known_none(mask)


PUSH = "less:bool logical_and:bool where:int32 add:int32 not_equal:bool"
POP = "greater:bool logical_and:bool subtract:int32 stack_read subtract:int32 not_equal:bool"
FIB_CALLS = [
    # the calls of the closure-per-op kernels the generated code replaced, block by block
    f"equal:bool {PUSH} where known_none",
    "equal:bool asarray less:bool where:int32 where",
    f"equal:bool asarray subtract:int64 {PUSH} where {PUSH} logical_or:bool where known_none",
    f"equal:bool {POP} where asarray subtract:int64 where {PUSH} where {PUSH} logical_or:bool where "
    "known_none known_none where where",
    f"equal:bool asarray where {POP} where known_none where where",
    "equal:bool where",
    f"equal:bool add:int64 where {POP} where {POP} logical_or:bool where known_none where where",
]


def test_kernels_make_the_reference_backend_calls() -> None:
    machine = compile_machine(parse(FIB))
    backend = RecordingBackend()
    state = machine.initial_state(backend, [np.array([5, 6, 8, 9])], 4, 6)
    for block, expected in enumerate(FIB_CALLS):
        regs, stacks = state_ops.split_state(dict(state))
        regs["pc"] = np.full(4, block, np.int32)
        backend.log = []
        machine.kernels(backend)[block].split(regs, stacks)
        assert " ".join(backend.log) == expected, f"block {block}"


def test_kernel_source_is_straight_line_code() -> None:
    plan = compile_machine(parse(FIB)).plans[2]
    source = plan.code.source
    assert source.startswith("def block_2(regs, stacks):\n")
    for line in (
        "mask = prim('equal', (regs['pc'], pc_2), bool_)",
        "v2 = prim('subtract', [v0, v1], dt_int64)",
        "stack_push(backend, frame, 'sp:n', [('s:n', regs['r:n'])], mask)",
        "regs['r:n'] = where(mask, v2, regs['r:n'])",
        "stack_push(backend, frame, 'pc_sp', [('pc_stack', pc_3)], mask)",
        "regs['pc'] = where(mask, pc_1, regs['pc'])",
    ):
        assert f"    {line}\n" in source
    assert not any(word in source for word in ("for ", "while ", "if "))


def test_opaque_errors_show_the_kernel_line() -> None:
    def fails(x: Any) -> Any:
        raise ZeroDivisionError("from the opaque prim")

    register_opaque("test_kernel_code_fails", fails)
    text = """
    functional.opaque @test_kernel_code_fails "fails"
    vm.var @x : f64 register
    vm.program @main(@x) -> (@x) {
      vm.block 0 {
        %x = vm.read @x : f64
        %y = vm.prim @test_kernel_code_fails(%x) : (f64) -> f64
        vm.write @x, %y : f64
        vm.halt
      }
    }
    """
    with pytest.raises(ZeroDivisionError) as info:
        compile_machine(parse(text)).run([np.array([1.0])], NumpyBackend())
    shown = "".join(traceback.format_tb(info.tb))
    assert "block_0" in shown and "call_opaque_prim(opaque, 'test_kernel_code_fails', [v0], 1)" in shown


def test_multiple_opaque_results_are_counted() -> None:
    register_opaque("test_kernel_code_three", lambda a: (a, a, a))
    text = """
    functional.opaque @test_kernel_code_three "three"
    vm.var @a : i64 register
    vm.program @main(@a) -> (@a) {
      vm.block 0 {
        %a = vm.read @a : i64
        %q, %r = vm.prim @test_kernel_code_three(%a) : (i64) -> (i64, i64)
        vm.write @a, %r : i64
        vm.halt
      }
    }
    """
    with pytest.raises(TypeError, match="returned 3 values, expected 2"):
        compile_machine(parse(text)).run([np.array([1])], NumpyBackend())


# ----- NumPy fast paths ---------------------------------------------------------------------


def test_stack_read_shares_rows_between_stacks_of_a_group() -> None:
    rng = np.random.default_rng(0)
    backend = NumpyBackend()
    vectors, scalars = rng.normal(size=(5, 4, 3)), rng.integers(0, 9, size=(5, 4))
    index = np.array([-1, 0, 4, 9], np.int32)
    rows = np.clip(index, 0, 4)
    for stack in (vectors, scalars, vectors):
        np.testing.assert_array_equal(backend.stack_read(stack, index), stack[rows, np.arange(4)])
    index[:] = [3, 2, 1, 0]  # a new index (here: the same array written) is a new lookup
    index = index.copy()
    np.testing.assert_array_equal(backend.stack_read(scalars, index), scalars[[3, 2, 1, 0], np.arange(4)])
    deeper = rng.normal(size=(7, 4))
    np.testing.assert_array_equal(backend.stack_read(deeper, index), deeper[[3, 2, 1, 0], np.arange(4)])


def _reference_next_held(pc: np.ndarray, after: int, halt: int, share: float) -> tuple[int, int]:
    counts = np.bincount(pc, minlength=halt + 1)
    live = pc.shape[0] - int(counts[halt])
    if not live:
        return halt, 0
    enough = counts[:halt] >= max(share * live, 1.0)
    ahead = np.flatnonzero(enough[after + 1 :])
    if ahead.size:
        return after + 1 + int(ahead[0]), 0
    first = np.flatnonzero(enough)
    return (int(first[0]) if first.size else int(pc.min())), 1


@pytest.mark.parametrize("share", [0.1, 0.3, 0.6, 1.0])
def test_next_held_block_matches_the_reference(share: float) -> None:
    rng = np.random.default_rng(1)
    backend, halt = NumpyBackend(min_share=share), 6
    for _ in range(300):
        pc = rng.integers(0, halt + 1, size=int(rng.integers(1, 12))).astype(np.int32)
        after = int(rng.integers(-1, halt))
        assert backend._next_held(pc, after, halt) == _reference_next_held(pc, after, halt, share)


PRODUCT_CASES = [
    ("matmul", (4, 3), (1, 3, 2)),
    ("matmul", (4, 3), (4, 3)),
    ("matmul", (4, 2, 3), (4, 3)),
    ("matmul", (1, 2, 3), (4, 3, 5)),
    ("matmul", (4, 5, 2, 3), (4, 3, 2)),
    ("matmul", (4, 3), (4, 2, 3, 2)),
    ("dot", (4, 3), (4, 3)),
    ("dot", (4, 2, 3), (1, 3, 2)),
    ("inner", (4, 3), (4, 3)),
    ("dot", (4,), (4,)),
    ("outer", (4, 3), (4, 2)),
]


@pytest.mark.parametrize(("name", "shape_a", "shape_b"), PRODUCT_CASES)
@pytest.mark.parametrize("dtypes", [(np.float64, np.float64), (np.int64, np.float32), (np.int32, np.int32)])
def test_numpy_products_equal_the_generic_path(name: str, shape_a: tuple, shape_b: tuple, dtypes: tuple) -> None:
    rng = np.random.default_rng(2)
    a = (rng.normal(size=shape_a) * 10).astype(dtypes[0])
    b = (rng.normal(size=shape_b) * 10).astype(dtypes[1])
    got = array_ops.make_product(name)(a, b)
    want = array_ops._product(name, array_ops.ArrayOps(np), a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_product_errors_are_raised_on_every_call() -> None:
    product = array_ops.make_product("matmul")
    for _ in range(2):
        with pytest.raises(TypeError, match="matmul: a per-member operand is a scalar"):
            product(np.ones((4,)), np.ones((4, 3)))
