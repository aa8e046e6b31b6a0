"""`x in range(start, stop[, step])` on per-member values, by arithmetic on the bounds.

Python tests an integer `x` against a range arithmetically and any other number by comparing it
with each element; both say that `x` is in the range exactly when `d = x - start` is a multiple
of `step` whose quotient `q = d // step` satisfies `0 <= q < len(range)`. For a float `x` the
remainder `d % step` is zero only if `x` is a whole number, so `2.0 in range(3)` is True and
`2.5 in range(3)` False, as in Python. The length `-((start - stop) // step)` is computed from the
bounds alone (at compile time when they are constants), so an empty range and a negative step
need no case of their own. Per-member operands are widened to int64 first, so that no
subtraction wraps around in a narrow dtype. A per-member step of zero (Python's `ValueError`)
gives an empty range, as a `for` loop over it runs no iteration.

Python requires integer bounds: the prims computing the length from per-member bounds carry the
requirement (`INTEGER_OPERANDS_ATTR`), which type inference reports at the user's line for a
float. Each member's test must be one truth value, checked once types are known (`check_scalar`).
"""

from __future__ import annotations

import ast
from typing import Any, Protocol

import numpy as np
from xdsl.dialects.builtin import StringAttr

from abir.dialects.functional import INTEGER_OPERANDS_ATTR
from abir.frontend.arrays import ArrayLowering
from abir.frontend.source import FunctionSource
from abir.frontend.state import LoweringState
from abir.frontend.values import Static


class Emitter(Protocol):
    """What the membership test needs from the expression lowerer: the function's state, the
    array lowerer and the lowering of a single value."""

    source: FunctionSource
    state: LoweringState
    arrays: ArrayLowering

    def leaf(self, node: ast.expr) -> Any: ...


def integer_requirement(source: FunctionSource, call: ast.AST) -> StringAttr:
    """The error type inference reports if a per-member argument of `range(...)` is a float."""
    segment = source.segment(call)
    error = source.error(
        call, f"range() arguments must be integers, but an argument of `{segment}` is a per-member float "
        "(Python raises TypeError)",
        "convert the argument with int(...), e.g. `range(int(n))`, or pass integers",
    )
    return StringAttr(str(error))


def range_arguments(emitter: Emitter, call: ast.Call) -> tuple[Any, Any, Any]:
    """`(start, stop, step)` of a `range(...)` call; compile-time bounds are checked here."""
    if call.keywords or not 1 <= len(call.args) <= 3 or any(isinstance(a, ast.Starred) for a in call.args):
        raise emitter.source.error(call, "range() takes 1 to 3 positional arguments",
                                   "write `range(stop)`, `range(start, stop)` or `range(start, stop, step)`")
    bounds = [_bound(emitter, a) for a in call.args]
    start, stop, step = (Static(0), bounds[0], Static(1)) if len(bounds) == 1 else (*bounds, Static(1))[:3]
    if isinstance(step, Static) and step.value == 0:
        raise emitter.source.error(call, "range() step must not be zero (Python raises ValueError)",
                                   "use a positive step to count up, a negative one to count down")
    return start, stop, step


def _bound(emitter: Emitter, node: ast.expr) -> Any:
    value = emitter.leaf(node)
    if isinstance(value, Static):
        if not isinstance(value.value, int | np.integer):
            raise emitter.source.error(node, f"range() arguments must be integers, got {value.value!r}",
                                       f"convert it: `range(int({emitter.source.segment(node)}))`")
        return Static(int(value.value))
    return value


def range_membership(emitter: Emitter, node: ast.Compare, x: Any, bounds: tuple[Any, Any, Any], call: ast.AST) -> Any:
    """Whether `x` is in `range(*bounds)`, a bool per member (a `Static` if everything is)."""
    start, stop, step = bounds
    if all(isinstance(v, Static) for v in (x, start, stop, step)):
        try:
            return Static(x.value in range(start.value, stop.value, step.value))
        except Exception as e:
            raise emitter.source.error(node, f"evaluating this at compile time raised {type(e).__name__}: {e}") from None
    x, start, stop, step = (_widened(emitter, node, v) for v in (emitter.state.materialize(x, node), start, stop, step))
    requirement = integer_requirement(emitter.source, call)
    length = _range_length(emitter, node, start, stop, step, requirement)
    offset = x if isinstance(start, Static) and start.value == 0 else _arith(emitter, node, "subtract", x, start)
    remainder = _arith(emitter, node, "remainder", offset, step)
    quotient = offset if isinstance(step, Static) and step.value == 1 else _arith(
        emitter, node, "floor_divide", offset, step
    )
    conditions = [
        _arith(emitter, node, "equal", remainder, Static(0)),
        _arith(emitter, node, "greater_equal", quotient, Static(0)),
        _arith(emitter, node, "less", quotient, length),
    ]
    found = emitter.state.prim("logical_and", [conditions[0], emitter.state.prim("logical_and", conditions[1:])])
    error = emitter.source.error(
        node, f"`{emitter.source.segment(node)}` needs single numbers, but here `{emitter.source.segment(node.left)}` "
        "or a bound of range() is a per-member array (Python raises TypeError or ValueError)",
        "test single numbers with `in range(...)`; for an element-wise test of an array write "
        "`(start <= x) & (x < stop)`",
    )
    checked = emitter.arrays.batch_op(node, "check_scalar", {"message": str(error)}, [found])
    emitter.state.booleans.add(checked)
    return checked


def _widened(emitter: Emitter, node: ast.AST, value: Any) -> Any:
    """A per-member `value` in at least int64 (`value + np.int64(0)`: bools and narrower integers
    become int64, floats stay floats), so that `x - start` cannot wrap around in `x`'s dtype
    (`np.int8(-128) - 125` would be 3); a compile-time one as it is."""
    if isinstance(value, Static):
        return value
    return emitter.state.prim("add", [emitter.state.materialize(value, node), emitter.state.materialize(Static(np.int64(0)), node)])


def _range_length(
    emitter: Emitter, node: ast.AST, start: Any, stop: Any, step: Any, requirement: StringAttr
) -> Any:
    """`len(range(start, stop, step))`, possibly negative for an empty range: `-((start - stop)
    // step)`; the prims over per-member bounds carry the integer requirement."""
    if all(isinstance(v, Static) for v in (start, stop, step)):
        return Static(len(range(start.value, stop.value, step.value)))
    span = _arith(emitter, node, "subtract", start, stop, requirement)
    return emitter.state.prim("negative", [_arith(emitter, node, "floor_divide", span, step, requirement)])


def _arith(
    emitter: Emitter, node: ast.AST, name: str, a: Any, b: Any, requirement: StringAttr | None = None
) -> Any:
    """The builtin prim `name` on two leaves, folded at compile time when both are constants."""
    if isinstance(a, Static) and isinstance(b, Static):
        return Static(_FOLD[name](a.value, b.value))
    result = emitter.state.prim(name, [emitter.state.materialize(a, node), emitter.state.materialize(b, node)])
    if requirement is not None:
        result.owner.attributes[INTEGER_OPERANDS_ATTR] = requirement  # type: ignore[union-attr]
    return result


_FOLD = {
    "subtract": lambda a, b: a - b,
    "floor_divide": lambda a, b: a // b,
}
