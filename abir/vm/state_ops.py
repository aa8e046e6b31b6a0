"""Masked updates of the machine state, written once against the backend protocol.

Each function takes the state dict (layout in `abir.backends.base`) and returns it updated;
`mask` is bool `[B]`, true for the members standing at the running block. Reads see every row,
only these updates are masked. A push onto a full stack, or a pop/peek/return from an empty
one, writes nothing out of range: it records `1 + block` in the member's `overflow` or
`underflow` flag instead, and `halt_failed` then stops the member so the run can finish.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from abir.backends.base import Backend, State

OVERFLOW = "overflow"
UNDERFLOW = "underflow"
PC = "pc"
PC_STACK = "pc_stack"
PC_SP = "pc_sp"
FLAG_KEYS = (OVERFLOW, UNDERFLOW)


def register_key(var: str) -> str:
    return f"r:{var}"


def stack_key(var: str) -> str:
    return f"s:{var}"


def pointer_key(var: str) -> str:
    return f"sp:{var}"


def _int(backend: Backend, value: int) -> Any:
    return backend.asarray(np.int32(value), np.int32)


def _prim(backend: Backend, name: str, *args: Any, dtype: Any = np.bool_) -> Any:
    return backend.builtin_prim(name, args, dtype)


def block_mask(backend: Backend, state: State, block: int) -> Any:
    """The members whose program counter is `block`."""
    return _prim(backend, "equal", state[PC], _int(backend, block))


def write(backend: Backend, state: State, var: str, value: Any, mask: Any) -> State:
    """`vm.write`: the masked members' current value of `var` becomes `value`."""
    key = register_key(var)
    state[key] = backend.where(mask, value, state[key])
    return state


def set_pc(backend: Backend, state: State, target: Any, mask: Any) -> State:
    """pc := target (an int or a per-member int32 array) for the masked members."""
    if isinstance(target, int):
        target = _int(backend, target)
    state[PC] = backend.where(mask, target, state[PC])
    return state


def flag(backend: Backend, state: State, key: str, members: Any, block: int) -> State:
    """Record `1 + block` in error flag `key` for `members` that have no error flag yet."""
    fresh = _prim(backend, "equal", state[key], _int(backend, 0))
    state[key] = backend.where(_prim(backend, "logical_and", members, fresh), _int(backend, block + 1), state[key])
    return state


def _split(backend: Backend, mask: Any, ok: Any) -> tuple[Any, Any]:
    """(mask & ok, mask & ~ok)."""
    good = _prim(backend, "logical_and", mask, ok)
    bad = _prim(backend, "logical_and", mask, _prim(backend, "logical_not", ok))
    return good, bad


def _step(backend: Backend, pointer: Any, mask: Any, name: str) -> Any:
    return _prim(backend, name, pointer, _prim(backend, "astype", mask, dtype=np.int32), dtype=np.int32)


def stack_push(
    backend: Backend, state: State, stack: str, pointer: str, value: Any, mask: Any, block: int
) -> State:
    """Save `value` at each masked member's stack pointer and advance the pointer."""
    depth = int(state[stack].shape[0])
    good, bad = _split(backend, mask, _prim(backend, "less", state[pointer], _int(backend, depth)))
    state[stack] = backend.stack_write(state[stack], state[pointer], value, good)
    state[pointer] = _step(backend, state[pointer], good, "add")
    return flag(backend, state, OVERFLOW, bad, block)


def stack_top(
    backend: Backend, state: State, stack: str, pointer: str, mask: Any, block: int, drop: bool
) -> tuple[State, Any, Any]:
    """The last saved value of each member (`drop`: and remove it for the masked members).

    Returns (state, value, valid) where `valid` is the masked members that had a saved value;
    the others are flagged in `underflow`."""
    good, bad = _split(backend, mask, _prim(backend, "greater", state[pointer], _int(backend, 0)))
    top = _prim(backend, "subtract", state[pointer], _int(backend, 1), dtype=np.int32)
    value = backend.stack_read(state[stack], top)
    if drop:
        state[pointer] = _step(backend, state[pointer], good, "subtract")
    return flag(backend, state, UNDERFLOW, bad, block), value, good


def push(backend: Backend, state: State, var: str, mask: Any, block: int) -> State:
    """`vm.push @var`: save the current value of `var` (it stays current too)."""
    return stack_push(
        backend, state, stack_key(var), pointer_key(var), state[register_key(var)], mask, block
    )


def restore(backend: Backend, state: State, var: str, mask: Any, block: int, drop: bool) -> State:
    """`vm.pop @var` (drop) or `vm.peek @var`: the last saved value becomes current."""
    state, value, valid = stack_top(backend, state, stack_key(var), pointer_key(var), mask, block, drop)
    return write(backend, state, var, value, valid)


def call(backend: Backend, state: State, target: int, return_target: int, mask: Any, block: int) -> State:
    """`vm.call`: save `return_target` on the program-counter stack, then pc := target."""
    saved = backend.where(mask, _int(backend, return_target), state[PC])
    state = stack_push(backend, state, PC_STACK, PC_SP, saved, mask, block)
    return set_pc(backend, state, target, mask)


def return_(backend: Backend, state: State, mask: Any, block: int) -> State:
    """`vm.return`: pc := the last saved return block, which is dropped."""
    state, value, valid = stack_top(backend, state, PC_STACK, PC_SP, mask, block, drop=True)
    return set_pc(backend, state, value, valid)


def halt_failed(backend: Backend, state: State, halt_index: int) -> State:
    """Members with an overflow or underflow flag stop: pc := halt_index."""
    failed = _prim(
        backend,
        "logical_or",
        _prim(backend, "not_equal", state[OVERFLOW], _int(backend, 0)),
        _prim(backend, "not_equal", state[UNDERFLOW], _int(backend, 0)),
    )
    return set_pc(backend, state, halt_index, failed)
