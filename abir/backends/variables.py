"""Batched variables with the reference's interface: `create_variable` returns one of these.

A variable holds one value per batch member and answers four operations, each returning a new
variable (the old one stays as it was, so a variable can be carried through a compiled loop):

    var.read()               the current value of every member, [B, *shape]
    var.update(value, mask)  members where `mask` ([B] bool) take `value`, the others keep theirs
    var.push(mask)           masked members save their current value (a duplicating push: the
                             current value stays; the next `update` changes only the top)
    var.pop(mask)            masked members restore the value they saved last

There is one class per storage class (the `stack` dialect's `dead`, `temporary`, `register`
and `stack`; the reference calls them NULL, TEMPORARY, REGISTER and FULL): the cheaper ones
refuse or ignore what their storage cannot do. Every operation is written in backend protocol
methods (`where`, `stack_write`, `stack_read`, `builtin_prim`, `any`, `static_value`), so the
classes serve every backend; they are what a backend's `variable_class` lists.

The machine itself does not use these objects: its kernels update the flat state arrays
(`abir.vm.state_ops`) with the same meaning, fused per block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from abir.types import TensorType


class VariableBackend(Protocol):
    """The methods of `abir.backends.base.BackendProtocol` a variable uses (named here so that
    this module sits below `base`, which builds its variables)."""

    def any(self, t: Any, name: str | None = None) -> Any: ...
    def static_value(self, t: Any) -> Any: ...
    def type_of(self, t: Any, dtype_hint: Any = None) -> Any: ...
    def where(self, condition: Any, x: Any, y: Any, name: str | None = None) -> Any: ...
    def builtin_prim(self, name: str, args: Sequence[Any], result_dtype: Any) -> Any: ...
    def stack_write(self, stack: Any, index: Any, value: Any, mask: Any) -> Any: ...
    def stack_read(self, stack: Any, index: Any) -> Any: ...
    def zeros(self, shape: Sequence[int], dtype: Any) -> Any: ...
    def create_register(self, batch_size: int, type: TensorType) -> Any: ...
    def create_stack(self, max_stack_depth: int, batch_size: int, type: TensorType) -> Any: ...

INDEX_DTYPE = np.dtype(np.int32)
"""The dtype of a variable's per-member stack pointer."""

ALLOCATIONS = {
    "dead": "dead",
    "null": "dead",
    "temporary": "temporary",
    "register": "register",
    "stack": "stack",
    "full": "stack",
}
"""Allocation names `create_variable` accepts (abir's storage classes and the reference's
`VariableAllocation` names) -> the storage class."""


def allocation_kind(alloc: Any) -> str:
    """The storage class (`dead`, `temporary`, `register`, `stack`) of an allocation given as a
    `abir.dialects.stack.StorageClass`, a name, or an object with a `name` (the reference's
    `VariableAllocation.FULL`)."""
    text = alloc if isinstance(alloc, str) else getattr(alloc, "name", None)
    kind = ALLOCATIONS.get(str(text).lower()) if text is not None else None
    if kind is None:
        raise ValueError(
            f"unknown variable allocation {alloc!r}; use one of {', '.join(map(repr, ALLOCATIONS))}"
        )
    return kind


def new_variable(
    backend: VariableBackend, alloc: Any, type_: Any, max_stack_depth: int, batch_size: int
) -> NullVariable | TemporaryVariable | RegisterVariable | FullVariable:
    """`create_variable`'s variable: by `allocation_kind(alloc)`, zero-valued, of per-member type
    `type_` (a `TensorType` or a `(dtype, shape)` pair), on `backend`'s arrays."""
    kind = allocation_kind(alloc)
    if kind == "dead":
        return NullVariable()
    if kind == "temporary":
        return TemporaryVariable.empty()
    type_ = TensorType(np.dtype(type_[0]), tuple(type_[1]))
    value = backend.create_register(batch_size, type_)
    if kind == "register":
        return RegisterVariable(backend, value)
    stack = backend.create_stack(max_stack_depth, batch_size, type_)
    return FullVariable(backend, value, stack, backend.zeros((batch_size,), INDEX_DTYPE))


class NullVariable:
    """A `dead` variable: never read, so it stores nothing and drops every write."""

    def read(self, name: str | None = None) -> Any:
        raise ValueError("a dead (null) variable holds no value: allocate it as 'register' or 'stack' to read it")

    def update(self, value: Any, mask: Any, name: str | None = None) -> NullVariable:
        return self

    def push(self, mask: Any, name: str | None = None) -> NullVariable:
        return self

    def pop(self, mask: Any, name: str | None = None) -> NullVariable:
        return self


@dataclass(frozen=True)
class TemporaryVariable:
    """A `temporary` variable: a value that lives inside one block, so an update replaces it for
    every member (the mask is ignored) and it can be neither pushed nor popped once it holds a
    value. `value` is None while it holds none."""

    value: Any = None

    @staticmethod
    def empty() -> TemporaryVariable:
        return TemporaryVariable()

    def read(self, name: str | None = None) -> Any:
        if self.value is None:
            raise ValueError("reading a temporary variable before it was written")
        return self.value

    def update(self, value: Any, mask: Any, name: str | None = None) -> TemporaryVariable:
        return TemporaryVariable(value)

    def push(self, mask: Any, name: str | None = None) -> TemporaryVariable:
        if self.value is not None:
            raise ValueError("pushing a temporary variable that holds a value; allocate it as 'stack' to save it")
        return self

    def pop(self, mask: Any, name: str | None = None) -> TemporaryVariable:
        if self.value is None:
            raise ValueError("popping a temporary variable that holds no value")
        return TemporaryVariable()


@dataclass(frozen=True)
class RegisterVariable:
    """A `register` variable: one `[B, *shape]` array, updated under a mask; it never crosses a
    call, so push and pop change nothing."""

    backend: VariableBackend
    value: Any

    def read(self, name: str | None = None) -> Any:
        return self.value

    def update(self, value: Any, mask: Any, name: str | None = None) -> RegisterVariable:
        return RegisterVariable(self.backend, self.backend.where(mask, value, self.value))

    def push(self, mask: Any, name: str | None = None) -> RegisterVariable:
        return self

    def pop(self, mask: Any, name: str | None = None) -> RegisterVariable:
        return self


@dataclass(frozen=True)
class FullVariable:
    """A `stack` variable: the current value (`[B, *shape]`), the saved values (`stack`,
    `[D, B, *shape]`) and each member's count of saved values (`index`, int32 `[B]`).

    Member b's saved values are `stack[:index[b], b]`, the last saved on top. A push beyond D
    or a pop with nothing saved raises ValueError on an eager backend (where `static_value`
    sees the values); in a traced computation the offending members' push or pop is skipped."""

    backend: VariableBackend
    current: Any
    stack: Any
    index: Any

    def read(self, name: str | None = None) -> Any:
        return self.current

    def update(self, value: Any, mask: Any, name: str | None = None) -> FullVariable:
        return FullVariable(self.backend, self.backend.where(mask, value, self.current), self.stack, self.index)

    def push(self, mask: Any, name: str | None = None) -> FullVariable:
        backend = self.backend
        depth = int(self.stack.shape[0])
        room = _prim(backend, "less", self.index, np.int32(depth))
        self._check(mask, room, f"stack overflow: a push beyond max_stack_depth={depth}; pass a larger max_stack_depth")
        pushing = _prim(backend, "logical_and", mask, room)
        stack = backend.builtin_prim("copy", [self.stack], backend.type_of(self.stack).dtype)
        stack = backend.stack_write(stack, self.index, self.current, pushing)
        return FullVariable(backend, self.current, stack, self._moved(pushing, "add"))

    def pop(self, mask: Any, name: str | None = None) -> FullVariable:
        backend = self.backend
        saved = _prim(backend, "greater", self.index, np.int32(0))
        self._check(mask, saved, "stack underflow: a pop with no value saved (more pops than pushes)")
        popping = _prim(backend, "logical_and", mask, saved)
        index = self._moved(popping, "subtract")
        current = backend.where(popping, backend.stack_read(self.stack, index), self.current)
        return FullVariable(backend, current, self.stack, index)

    def _moved(self, moving: Any, direction: str) -> Any:
        step = self.backend.builtin_prim("astype", [moving], INDEX_DTYPE)
        return self.backend.builtin_prim(direction, [self.index, step], INDEX_DTYPE)

    def _check(self, mask: Any, allowed: Any, message: str) -> None:
        """Raise `message` if some masked member is not `allowed`, when that is known now."""
        backend = self.backend
        refused = _prim(backend, "logical_and", mask, _prim(backend, "logical_not", allowed))
        known = backend.static_value(backend.any(refused))
        if known is not None and bool(np.asarray(known)):
            members = np.flatnonzero(np.asarray(backend.static_value(refused)))
            raise ValueError(f"{message} (batch members {members.tolist()})")


def _prim(backend: VariableBackend, name: str, *args: Any) -> Any:
    """A boolean-valued builtin prim (a comparison or logical op)."""
    return backend.builtin_prim(name, list(args), np.bool_)
