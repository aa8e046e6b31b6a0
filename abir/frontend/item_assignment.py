"""Item assignment (`x[i] = v`, `x[i] += v`, `x[a:b] = w`, `x[i, j] = v`) with NumPy's meaning.

The index is anything a read accepts (`ArrayLowering.index_components`): compile-time ints,
slices, `...`, `None`, one integer array, and per-member integers, clipped into range as reads
are. The write is the array prim `setitem` (`abir.array_prims`): a new SSA value for
`x` (a functional update), typed like reads by type inference.

NumPy changes the array in place, so first the frontend makes sure nothing can observe the
difference (`abir.frontend.aliases` tracks which values may share an array):

* `x` must hold an array the function owns: assigning into an argument, an array from the
  enclosing scope or a call's result is an error (Python would change the caller's array too),
  which suggests assigning into a copy;
* every other variable holding the very same array is rebound to the update, as NumPy shows it;
* a variable read from `x` by integer indices (`key = x[j]`) is a copy if it is a per-member
  scalar: a check that runs once types are known raises the located error if it is not; so is a
  join of such reads with values not sharing `x`, and a call's result (`r = f(x[j])`) if the reads
  it was given are scalars (checked: then the call cannot return a view of `x`);
* any other variable that may share `x`'s memory (a slice, `.T`, a reshape, a join of `x` and
  another array, a call's result) makes the assignment an error naming it.

`x op= v` on a name (`augmented_name_assignment`) updates an array `x` in place too, in its own
dtype and shape, but rebinds a per-member scalar `x` (immutable in Python), and the frontend learns
which one `x` is only with types. Unless `x` is a scalar by construction (`known_scalar`), the
prim computing the update carries requirements type inference checks when `x` has axes
(`abir.passes.prim_evaluation.check_in_place`): the located error to raise (`x` holds an argument, or
another variable may share its array) or the result must keep `x`'s type. Variables holding the
very same value follow the update as arrays do (the array prim `after_in_place`).

Loops: a carried variable gets an array of its own at the header when it enters with one that
only names the loop does not assign share (`sharers_at_entry`, `header_argument_roots`), and
every back edge is checked to keep it so (`check_back_edge`); else its array is foreign there.
In a loop that updates arrays in place, the variables holding the very array a carried variable
holds as the loop starts follow it (as arrays; scalars keep their value), and a back edge where
they no longer do, or where another variable shares it, fails type inference if it is an array
and an update in the loop may change that array or the one the back edge gives (updates of other
arrays, e.g. `k -= 1` on what types may show to be an array, cannot tell the sharing).
Copy checks of integer-index reads are emitted at loops that update in place only: elsewhere
such a read keeps the loop's variable from owning its array, and nothing is checked. A carried
variable that is itself an integer-index read of an array updated in place in or after the loop
(`v = w[i]` before `for ...: v = ...` and a later `w[k] = ...`) is checked to be a copy at the
entry instead of sharing `w`'s array. After the loop a header argument is the join of its entry
and back-edge values, so a read carried out of a loop is a copy as any join of reads is.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, SSAValue

from abir.array_ops import IndexComponent
from abir.array_prims import format_index
from abir.dialects.functional import ARRAY_OPERAND_ERROR_ATTR, IN_PLACE_RESULT_ATTR, PrimOp
from abir.errors import UnsupportedSyntaxError
from abir.frontend.aliases import (
    Binding,
    Root,
    assigns_items,
    bindings,
    names_updated_in_place,
    rebind,
    statements_from,
)
from abir.frontend.arrays import ArrayLowering
from abir.frontend.expressions import ExpressionLowering
from abir.frontend.source import FunctionSource
from abir.frontend.state import Env, LoweringState
from abir.frontend.values import MaybeUndefined, Static, describe_object, flatten, unwrap_statics

IN_PLACE_OPERATORS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.iadd,
    ast.Sub: operator.isub,
    ast.Mult: operator.imul,
    ast.Div: operator.itruediv,
    ast.FloorDiv: operator.ifloordiv,
    ast.Mod: operator.imod,
    ast.Pow: operator.ipow,
    ast.LShift: operator.ilshift,
    ast.RShift: operator.irshift,
    ast.BitAnd: operator.iand,
    ast.BitOr: operator.ior,
    ast.BitXor: operator.ixor,
    ast.MatMult: operator.imatmul,
}
OPERATOR_SYMBOLS: dict[type[ast.operator], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
    ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.MatMult: "@",
}  # fmt: skip


def assignment_target_error(source: FunctionSource, target: ast.expr) -> UnsupportedSyntaxError:
    """The error for assigning to `target` where abir cannot: a starred target, an attribute, or
    an item of something that is not an array (a tuple or list: values are immutable)."""
    if isinstance(target, ast.Starred):
        return source.error(target, "starred assignment (`a, *rest = ...`) is not supported",
                            "unpack every element by name")
    what = "item" if isinstance(target, ast.Subscript) else "attribute"
    return source.error(
        target,
        f"{what} assignment is not supported (values are immutable)",
        "build a new value and assign it to a variable, e.g. `state = state._replace(x=...)` for namedtuples",
    )


@dataclass(frozen=True)
class OwnedHeaderLeaf:
    """A loop header argument assumed to hold an array no other variable holds, except `group`:
    variables the loop does not assign that hold the very same array (bound to the argument too)."""

    name: str
    position: int
    root: Root
    group: tuple[tuple[str, int], ...] = ()


class ItemAssignmentLowering:
    """Item assignment statements, and the loop bookkeeping they need, on the function's `state`
    (its `aliases` say which variables may share an array)."""

    def __init__(self, state: LoweringState, arrays: ArrayLowering, expressions: ExpressionLowering):
        self.state = state
        self.source = state.source
        self.aliases = state.aliases
        self.arrays = arrays
        self.expressions = expressions

    # -- statements ---------------------------------------------------------------------------

    def assign_item(self, target: ast.Subscript, value: Any) -> None:
        """`target = value` for a subscript target, `value` already evaluated (as Python does)."""
        array = self._target_array(target)
        components, operands = self._target_index(target)
        self._update(target, array, self.arrays.array_operand(target, value), components, operands)

    def augmented_item_assignment(self, node: ast.AugAssign, target: ast.Subscript) -> None:
        """`x[i] op= v`: read `x[i]` once, combine, write back (NumPy buffers `x[idx] += v`, so a
        repeated index in an index array is written once, as here)."""
        array = self._target_array(target)
        components, operands = self._target_index(target)
        current = self.arrays.batch_op(target, "getitem", {"index": format_index(components)},
                                [self.state.materialize(array, target), *operands])
        combined = self.expressions.binary(node, type(node.op), current, self.expressions.expr(node.value))
        self._update(target, array, self.state.materialize(combined, node), components, operands)

    def augmented_name_assignment(self, node: ast.AugAssign, target: ast.Name) -> None:
        """`x op= v`: NumPy updates an array `x` in place (in its dtype and shape; every variable
        holding that array sees the change), Python rebinds a scalar `x`."""
        name = target.id
        current = self.expressions.expr(ast.Name(name, ast.Load(), lineno=node.lineno, col_offset=node.col_offset))
        value = self.expressions.expr(node.value)
        if isinstance(current, Static) and isinstance(current.value, np.ndarray) and current.value.ndim > 0:
            self._update_static_in_place(node, name, current, value)
        elif isinstance(current, SSAValue) and not self.state.known_scalar(current):
            self._update_in_place(node, name, current, value)
        else:
            self.state.assign_name(name, self.expressions.binary(node, type(node.op), current, value), node)

    def _update_in_place(self, node: ast.AugAssign, name: str, current: SSAValue, value: Any) -> None:
        """`x op= v` for a batched `x` that may be a per-member array or scalar."""
        updated = self.expressions.binary(node, type(node.op), current, value)
        op = updated.owner
        assert isinstance(op, PrimOp) and op.operands[0] is current, "the update's first operand is `x`"
        obstacle = self._in_place_obstacle(node, name, current)
        if obstacle is not None:
            op.attributes[ARRAY_OPERAND_ERROR_ATTR] = StringAttr(str(obstacle))
            self.state.assign_name(name, updated, node)
            return
        op.attributes[IN_PLACE_RESULT_ATTR] = StringAttr(str(self._in_place_type_error(node, name)))
        self.aliases.updated_in_place(current)
        self.aliases.same(updated, current)
        for binding in self._exact_holders(name, current):
            old = self.state.materialize(binding.value, node)
            follower = self.arrays.batch_op(node, "after_in_place", {}, [old, updated])
            self.aliases.follows(follower, updated)
            rebind(self.state.env, binding.name, binding.position, follower)
        self.state.assign_name(name, updated, node)

    def _update_static_in_place(self, node: ast.AugAssign, name: str, current: Static, value: Any) -> None:
        """`x op= v` for a compile-time array `x`."""
        if (obstacle := self._in_place_obstacle(node, name, current)) is not None:
            raise obstacle
        if isinstance(value, Static):
            array = np.array(current.value, copy=True)  # the member's own array, updated in place
            try:
                IN_PLACE_OPERATORS[type(node.op)](array, value.value)
            except Exception as e:
                raise self.source.error(
                    node, f"evaluating this at compile time raised {type(e).__name__}: {e}"
                ) from None
            updated: Any = Static(array)
            self.aliases.fresh_static(updated, [], self.state.names.values())
        else:
            updated = self.expressions.binary(node, type(node.op), current, value)
            assert isinstance(updated.owner, PrimOp)
            updated.owner.attributes[IN_PLACE_RESULT_ATTR] = StringAttr(str(self._in_place_type_error(node, name)))
            self.aliases.same(updated, current)
        self.aliases.updated_in_place(current)
        for binding in self._exact_holders(name, current):
            rebind(self.state.env, binding.name, binding.position, updated)
        self.state.assign_name(name, updated, node)

    def _exact_holders(self, name: str, array: Any) -> list[Binding]:
        """The variables other than `name` holding `array` itself (hidden ones are never arrays)."""
        return [
            b for b in bindings(self.state.env)
            if b.name != name and b.name.isidentifier() and self.aliases.holds_exactly(b.value, array)
        ]  # fmt: skip

    def _in_place_obstacle(self, node: ast.AugAssign, name: str, current: Any) -> Exception | None:
        """The error for `x op= v` if `x` is an array NumPy would change where abir cannot
        follow: `x` holds an argument's (or another foreign) array, or another variable may share
        it. Integer-index reads of it (`key = x[j]`) are checked to be copies instead."""
        statement, rebinding = self._augmented_texts(node, name)
        if (reason := self.aliases.foreign_reason(self.aliases.roots_of(current))) is not None:
            return self.source.error(
                node, f"`{statement}` updates the array `{name}` holds in place (in NumPy), but `{name}` holds "
                f"{reason}: NumPy would change that array too",
                f"write `{rebinding}` to make a new array, or `{name} = {name}.copy()` before updating it in place",
            )
        for binding in list(bindings(self.state.env)):
            if binding.name == name or not binding.name.isidentifier() or not self.aliases.shares(binding.value, current):
                continue
            if self.aliases.holds_exactly(binding.value, current):
                continue
            if self.aliases.copy_if_scalar(binding.value, current):
                self._require_copy(node, name, binding, self.state.env, current)
                continue
            return self.source.error(
                node, f"`{statement}` updates the array `{name}` holds in place (in NumPy), and variable "
                f"'{binding.name}' may share that array (a view, or the same array on some paths): NumPy would "
                f"change '{binding.name}' too",
                f"write `{rebinding}` to make a new array ('{binding.name}' keeps the old one), or make "
                f"'{binding.name}' a copy where it is assigned (`.copy()`)",
            )
        return None

    def _in_place_type_error(self, node: ast.AugAssign, name: str) -> Exception:
        statement, rebinding = self._augmented_texts(node, name)
        symbol = OPERATOR_SYMBOLS[type(node.op)]
        convert = "" if isinstance(node.value, ast.Constant) else (
            f", or convert the right-hand side: `{name} {symbol}= ({self.source.segment(node.value)}).astype({name}.dtype)`"
        )  # fmt: skip
        return self.source.error(
            node, f"`{statement}` updates the array `{name}` in place (in NumPy), keeping its dtype and shape, but "
            "the result here has another dtype or shape (NumPy would cast it within its kind, or raise)",
            f"write `{rebinding}` to make a new array of the result's type{convert}",
        )

    def _augmented_texts(self, node: ast.AugAssign, name: str) -> tuple[str, str]:
        """The statement's text, and the rebinding assignment that computes the same value."""
        symbol = OPERATOR_SYMBOLS[type(node.op)]
        value = self.source.segment(node.value)
        return f"{name} {symbol}= {value}", f"{name} = {name} {symbol} {value}"

    def _target_array(self, target: ast.Subscript) -> SSAValue | Static:
        """The array `target.value` holds, which must be a variable's (or a field of one's)."""
        if isinstance(target.value, ast.Subscript | ast.Call):
            inner = self.source.segment(target.value)
            raise self.source.error(
                target, f"assigning into an item of `{inner}` is not supported",
                "index the array once: `x[i, j] = v` instead of `x[i][j] = v`",
            )
        array = self.expressions.expr(target.value)
        if isinstance(array, tuple | list):
            raise assignment_target_error(self.source, target)
        if isinstance(array, Static) and not self.aliases.roots_of(array):
            raise self.source.error(
                target,
                f"item assignment into {describe_object(array.value)} is not supported (Python raises TypeError)",
                "assign into an array",
            )
        if not any(b.value is array for b in bindings(self.state.env)):
            raise self.source.error(target, f"`{self.source.segment(target.value)}` is not a variable's array",
                                    "assign the array to a variable first, then into its items")
        return array

    def _target_index(self, target: ast.Subscript) -> tuple[list[IndexComponent], list[SSAValue]]:
        index = self.expressions.expr(target.slice)
        if isinstance(index, tuple | list) and all(isinstance(leaf, Static) for leaf in flatten(index)[0]):
            index = Static(unwrap_statics(index))
        return self.arrays.index_components(target, index)

    def _update(
        self, target: ast.Subscript, array: SSAValue | Static, value: SSAValue,
        components: list[IndexComponent], operands: list[SSAValue],
    ) -> None:  # fmt: skip
        name = self.source.segment(target.value)
        roots = self.aliases.roots_of(array)
        if (reason := self.aliases.foreign_reason(roots)) is not None:
            copy = (f"write `{name} = {name}.copy()` before assigning items" if isinstance(target.value, ast.Name)
                    else f"give `{name}` an array of its own where it is made (`.copy()`)")
            raise self.source.error(
                target, f"item assignment into `{name}` is not supported here: `{name}` holds {reason}; NumPy "
                "would change that array in place",
                f"assign into a copy: {copy}",
            )
        same = self._other_holders(target, name, array, self.state.env)
        updated = self.arrays.batch_op(target, "setitem", {"index": format_index(components)},
                                [self.state.materialize(array, target.value), value, *operands])
        self.aliases.updated_in_place(array)
        self.aliases.same(updated, array)
        if isinstance(target.value, ast.Name):
            updated.name_hint = target.value.id
        for binding in same:
            rebind(self.state.env, binding.name, binding.position, updated)

    def _other_holders(self, node: ast.AST, name: str, array: Any, env: Env) -> list[Binding]:
        """The bindings of `env` holding `array` itself (to rebind). Integer-index reads of it are
        checked to be scalars (copies); any other binding that may share its memory is an error."""
        same: list[Binding] = []
        for binding in list(bindings(env)):
            if self.aliases.holds_exactly(binding.value, array):
                same.append(binding)
            elif self.aliases.shares(binding.value, array):
                self._require_copy(node, name, binding, env, array)
        return same

    def _require_copy(self, node: ast.AST, name: str, binding: Binding, env: Env, array: Any) -> None:
        """Make sure `binding`, which may share `array` (held by `name`), is a copy: an
        integer-index read of it must be a per-member scalar (checked at type inference), and so
        must the reads a call result shares it through; anything else is an error."""
        if (reads := self.aliases.reads_behind(binding.value, array)) is not None:
            self._require_scalar_arguments(node, name, binding, reads)
            return
        if not self.aliases.scalar_copy_of(binding.value, array):
            raise self.source.error(
                node, f"variable '{binding.name}' may share its array with `{name}` (a view, or the same "
                f"array on some paths): NumPy would change '{binding.name}' too when `{name}` changes in place",
                f"make '{binding.name}' a copy where it is assigned (`.copy()`), or compute it again after the "
                "item assignment",
            )
        value = self.state.materialize(binding.value, node)

        def view_error() -> Exception:
            return self.source.error(
                node, f"variable '{binding.name}' is an item of `{name}` with axes of its own, a view of "
                f"`{name}`'s array: NumPy would change '{binding.name}' too when `{name}` changes in place",
                f"read it with `.copy()` (e.g. `{binding.name} = {name}[j].copy()`), or read it again after the "
                "item assignment",
            )

        site = ast.Name(binding.name, ast.Load(), lineno=node.lineno, col_offset=node.col_offset)
        checked = self.arrays.batch_op(site, "check_scalar", {"message": str(view_error())}, [value])
        rebind(env, binding.name, binding.position, checked)

    def _require_scalar_arguments(self, node: ast.AST, name: str, binding: Binding, reads: list[SSAValue]) -> None:
        """Check that the integer-index reads of `name`'s array given to the call whose result
        `binding` holds are per-member scalars: then the call cannot return a view of the array."""

        def view_error() -> Exception:
            return self.source.error(
                node, f"variable '{binding.name}' holds the result of a call given an item of `{name}` with axes of "
                f"its own (a view of `{name}`'s array), which it may return or view: NumPy would change "
                f"'{binding.name}' too when `{name}` changes in place",
                f"pass a copy to the call (`{name}[j].copy()`), or call it again after the item assignment",
            )

        site = ast.Name(binding.name, ast.Load(), lineno=node.lineno, col_offset=node.col_offset)
        for read in reads:
            self.arrays.batch_op(site, "check_scalar", {"message": str(view_error())}, [read])

    # -- loops --------------------------------------------------------------------------------

    def sharers_at_entry(self, node: ast.stmt, names: list[str]) -> dict[tuple[str, int], list[Binding]]:
        """For each leaf (name, position) of the variables a loop carries, what keeps it from
        holding an array of its own as the loop is entered (`_sharers`); integer-index reads of
        them are checked to be copies in the current block (the loop's entry) if the loop assigns
        items, or the loop or the code after it updates that variable in place (its items, or
        `x op= v`) and it may be an array."""
        if not self.aliases.enabled:
            return {}
        carried = {n: self.state.env[n] for n in names if n in self.state.env}
        assigns = assigns_items(node)
        updated = names_updated_in_place(statements_from(self.source.tree, node))  # in the loop or after it
        return {
            (b.name, b.position): self._sharers(
                node, b.name, b.position, b.value, self.state.env,
                assigns or b.name in updated and not self.state.known_scalar(b.value),
                self._roots_updated(updated - {b.name}),
            )
            for b in list(bindings(carried))
        }  # fmt: skip

    def _roots_updated(self, names: set[str]) -> frozenset[Root]:
        """The roots of the arrays the variables `names` hold now."""
        return self.aliases.roots_of_all(self.state.env[n] for n in names if n in self.state.env
                                         and not isinstance(self.state.env[n], MaybeUndefined))

    def header_argument_roots(
        self, node: ast.stmt, arg: SSAValue, name: str, position: int, entry_value: Any, sharers: list[Binding],
        carried: list[str],
    ) -> OwnedHeaderLeaf | None:
        """Roots for a loop header argument: an array of its own when its entry value's only
        `sharers` are variables the loop does not assign holding that very array, and the loop
        may update that array in place through `name` (then returned: `follow_at_header` binds
        the group to the argument, the back edges check it stays so), else a foreign array."""
        if not self.aliases.enabled:
            return None
        follows = name in names_updated_in_place([node]) and not self.state.known_scalar(entry_value)
        group = [
            b for b in sharers
            if self.aliases.holds_exactly(b.value, entry_value) and b.name != name and b.name not in carried
        ] if follows else []  # fmt: skip
        if len(group) == len(sharers):
            root = self.aliases.owned_header(arg, entry_value)
            return OwnedHeaderLeaf(name, position, root, tuple((b.name, b.position) for b in group))
        sharers = [b for b in sharers if b not in group]
        line = self.source.lineno(node)
        if sharers[0].name == name:
            reason = self.aliases.foreign_reason(self.aliases.roots_of(entry_value))
        else:
            reason = f"an array that '{name}' and '{sharers[0].name}' may share when the loop at line {line} starts"
        self.aliases.foreign(arg, reason or f"an array shared when the loop at line {line} starts", [entry_value])
        return None

    def follow_at_header(self, node: ast.stmt, owned: list[OwnedHeaderLeaf]) -> None:
        """In the loop header (the current block), bind each owned argument's group to the
        argument's array: a variable holding the very array a carried variable holds as the loop
        starts sees the loop's in-place updates of it, if it is an array (a follower; a
        compile-time array is one)."""
        for leaf in owned:
            arg = flatten(self.state.env[leaf.name])[0][leaf.position]
            for member, position in leaf.group:
                entry = flatten(self.state.env[member])[0][position]
                if isinstance(entry, Static):
                    rebind(self.state.env, member, position, arg)
                    continue
                follower = self.arrays.batch_op(node, "after_in_place", {}, [entry, arg])
                self.aliases.follows(follower, arg)
                rebind(self.state.env, member, position, follower)

    def check_back_edge(
        self, node: ast.stmt, owned: list[OwnedHeaderLeaf], origin: Block, env: Env, updates_before: int
    ) -> None:
        """At the end of an iteration each owned header argument must again get an owned array no
        other variable shares but its group, which must still hold it (integer-index reads of it
        are checked to be copies, in `origin`). If not, and an in-place update in the loop's body
        (one after the first `updates_before`) may change the argument's array or the array it
        gets at the back edge, that is an error if the variable is an array, which type inference
        checks (scalars are immutable); otherwise the roots are merged, so that updates after the
        loop see the sharing. An update changing neither cannot tell the sharing: if it changes
        another carried variable's array, that variable's own check sees it."""
        saved = self.state.current
        self.state.current = origin
        try:
            for leaf in owned:
                if isinstance(env.get(leaf.name), MaybeUndefined | None):
                    continue  # an error when the back edge is built
                value = flatten(env[leaf.name])[0][leaf.position]
                in_place = self.aliases.updated_since(updates_before, {leaf.root, *self.aliases.roots_of(value)})
                group = [b for b in bindings(env) if (b.name, b.position) in leaf.group]
                following = {(b.name, b.position) for b in group if self.aliases.holds_exactly(b.value, value)}
                sharers = [b for b in self._sharers(node, leaf.name, leaf.position, value, env, in_place)
                           if (b.name, b.position) not in following]
                left = [b for b in group if (b.name, b.position) not in following]
                if in_place and (sharers or left):
                    error = (self._loop_sharing_error(node, leaf.name, sharers) if sharers
                             else self._left_behind_error(node, leaf.name, left[0].name))
                    self._require_scalar_at_back_edge(node, leaf, value, env, error)
                self.aliases.union_values([value, *(b.value for b in sharers)], leaf.root)
        finally:
            self.state.current = saved

    def _require_scalar_at_back_edge(
        self, node: ast.stmt, leaf: OwnedHeaderLeaf, value: Any, env: Env, error: Exception
    ) -> None:
        """Pass `value` on through a check raising `error` at type inference if it has axes."""
        operand = self.state.materialize(value, node)
        checked = self.arrays.batch_op(node, "check_scalar", {"message": str(error)}, [operand])
        rebind(env, leaf.name, leaf.position, checked)

    def _sharers(
        self, node: ast.stmt, name: str, position: int, value: Any, env: Env, check_copies: bool,
        updated: frozenset[Root] = frozenset(),
    ) -> list[Binding]:
        """Why `value` (leaf `position` of `name` in `env`) is not an owned array of its own: the
        other bindings that may share it, or `value` itself when it is foreign. With
        `check_copies`, integer-index reads of it are checked to be copies (in the current block)
        and do not count. Nor do the arrays `value` itself is an integer-index read of when they
        may be `updated` in place later: then `value` is checked to be a copy, and rebound in
        `env` to the checked value (which must be what the loop is entered with)."""
        if self.aliases.foreign_reason(self.aliases.roots_of(value)) is not None:
            return [Binding(name, position, value)]
        sharers, checked = [], False
        for binding in list(bindings(env)):
            if (binding.name, binding.position) == (name, position) or not self.aliases.shares(binding.value, value):
                continue
            if check_copies and binding.value is not value and self.aliases.copy_if_scalar(binding.value, value):
                self._require_copy(node, name, binding, env, value)
            elif (
                binding.value is not value and self.aliases.roots_of(binding.value) & updated
                and self.aliases.copy_if_scalar(value, binding.value)
            ):  # fmt: skip
                if not checked:
                    self._require_copy(node, binding.name, Binding(name, position, value), env, binding.value)
                    checked = True
            else:
                sharers.append(binding)
        return sharers

    def _loop_sharing_error(self, node: ast.stmt, name: str, sharers: list[Binding]) -> Exception:
        first = sharers[0]
        if first.name == name:
            what = f"holds {self.aliases.foreign_reason(self.aliases.roots_of(first.value))}"
            copy = f"`{name} = {name}.copy()`"
        else:
            what = f"may share its array with '{first.name}'"
            copy = f"`{name} = {first.name}.copy()`"
        return self.source.error(
            node, f"at the end of an iteration of this loop '{name}' {what}: the in-place updates in the loop "
            "(item assignment, or `x += v` on an array) would change that array in NumPy, and abir cannot "
            "follow arrays shared across iterations",
            f"give '{name}' an array of its own in the loop, e.g. {copy}",
        )

    def _left_behind_error(self, node: ast.stmt, name: str, member: str) -> Exception:
        return self.source.error(
            node, f"'{member}' holds the array '{name}' holds when this loop starts, and at the end of an "
            f"iteration '{name}' holds another array: NumPy keeps '{member}' on the first one (and the in-place "
            "updates in the loop change it), which abir cannot follow across iterations",
            f"give '{member}' an array of its own before the loop (`{member} = {name}.copy()`), or make "
            f"'{name}' a new array with a plain assignment (`{name} = ...`) only",
        )
