"""Which frontend values may be the same NumPy array: what in-place updates need (item
assignment `x[i] = v`, and `x += v` on an array).

NumPy updates an array in place: every name bound to that array, and every view of it
(`x[1:]`, `x.T`, `m[i]` of a matrix), sees the change, and so does the caller when the array is
an argument. The frontend lowers an update to a functional one (a new SSA value for `x`), so
it must know which other bindings hold the same array. It tracks, per value, its *roots*: the
array objects it may be (or view). A root is

* *owned* when the function made the array itself: the result of arithmetic, of `copy()`, of an
  advanced-index read, of a NumPy constructor evaluated at compile time (`np.zeros(5)`), ...;
* *foreign* otherwise, with the reason in words: an argument (the caller holds it), an array from
  the enclosing scope (later calls see it), the result of a call (it may be an argument or an
  array held elsewhere), a loop variable that may be another variable's array.

Roots are merged (union-find) when analysis learns two of them may be one array (a loop
carrying one variable's array into another's). A value that is a view records how: an index read
by integers only (`key = x[j]`) is a copy when the member's result is a scalar, which the frontend
checks once types are known; any other view (slices, `.T`, reshapes) or possible alias (a join of
two values, a call's result) is definite, except that a call given integer-index reads
(`r = f(x[j])`) shares `x`'s memory only through them: when they are per-member scalars (copies),
the call cannot return a view of `x` (`through_reads`; the frontend checks the reads, not `r`).
Values the tracker never saw are foreign: analysis errs on the side of an error, never of a
silent difference.

`x += v` updates `x` in place only when members are arrays (a per-member scalar is immutable:
Python rebinds `x`), which the frontend learns only with types. A variable holding the same
value as `x` then holds a *follower* (`followed`): `x`'s updated array for arrays, its own old
value for scalars; it counts as holding exactly `x`'s array (`holds_exactly`).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optree
from xdsl.ir import SSAValue

from abir.frontend.values import MaybeUndefined, Static, flatten, unflatten

SCALAR_OR_VIEW = "scalar-or-view"
"""An index read by integers only: a scalar copy when it reaches a scalar, else a view."""
VIEW = "view"
"""A view, or a value that may be one of several arrays: always shares its roots' memory."""


_ROOT_NUMBERS = itertools.count()


@dataclass(eq=False)
class Root:
    """One array object (or several that analysis cannot tell apart)."""

    foreign: str | None = None
    """None when the function owns the array; else why it does not, in words for an error."""
    number: int = field(default_factory=lambda: next(_ROOT_NUMBERS))
    """When the root was made: the lowering makes roots in source order, so sets of roots
    (ordered by their objects' addresses, which change from run to run) are read in this order
    wherever the choice shows in an error."""


UNTRACKED = Root("a value whose array abir cannot trace")
CALL_RESULT = "the result of a call, which may be one of its arguments or an array held elsewhere"


@dataclass(frozen=True)
class Binding:
    """One leaf of one variable: `env[name]`'s leaf number `position`."""

    name: str
    position: int
    value: Any


@dataclass
class AliasTracker:
    """Roots of the values of one function's lowering (a no-op when `enabled` is false: a function
    without item assignment never needs them)."""

    enabled: bool
    roots: dict[SSAValue, frozenset[Root]] = field(default_factory=dict)
    kinds: dict[SSAValue | Static, str] = field(default_factory=dict)
    fresh_statics: dict[int, tuple[Static, Root]] = field(default_factory=dict)
    parent: dict[Root, Root] = field(default_factory=dict)
    followed: dict[SSAValue, SSAValue] = field(default_factory=dict)
    """Followers (see the module docstring) and the value whose array each one is for arrays."""
    updates: list[frozenset[Root]] = field(default_factory=list)
    """Per update of a value that may be an array lowered in place so far, the roots of the
    arrays it may change."""
    stands_for: dict[Root, frozenset[Root]] = field(default_factory=dict)
    """Roots of loop header arguments owning their array (`owned_header`), and the roots of the
    entry value each one is on the first iteration."""
    through_reads: dict[SSAValue, tuple[frozenset[Root], tuple[SSAValue, ...]]] = field(default_factory=dict)
    """Results of calls given integer-index reads: the roots each may share besides the reads'
    (the call's own, its other arguments'), and those reads."""
    joins: dict[SSAValue, tuple[Any, ...]] = field(default_factory=dict)
    """The values joined into each block argument (one per incoming path)."""

    # -- recording ----------------------------------------------------------------------------

    def fresh(self, value: SSAValue) -> None:
        """`value` is a new array the function owns."""
        if self.enabled:
            self.roots[value] = frozenset({Root()})
            self.through_reads.pop(value, None)

    def foreign(self, value: SSAValue, reason: str, sources: Iterable[Any] = ()) -> None:
        """`value` is an array the function does not own, which may also be one of `sources`."""
        if self.enabled:
            self.roots[value] = frozenset({Root(reason)}) | self.roots_of_all(sources)
            self.kinds[value] = VIEW
            self.through_reads.pop(value, None)

    def call_result(self, value: SSAValue, args: Iterable[SSAValue]) -> None:
        """`value` is a result of a call taking `args`: an array the function does not own, which
        may be one of the arguments' (through an integer-index read only if the read has axes)."""
        if not self.enabled:
            return
        others, reads = frozenset({Root(CALL_RESULT)}), []
        for arg in args:
            if self.kinds.get(arg) == SCALAR_OR_VIEW:
                reads.append(arg)
            elif arg in self.through_reads:
                arg_others, arg_reads = self.through_reads[arg]
                others, reads = others | arg_others, [*reads, *arg_reads]
            elif arg in self.joins and (parts := self._join_parts([arg])) and any(
                self.kinds.get(part) == SCALAR_OR_VIEW for part in parts
            ):
                # the join is checked in place of its reads (it has their type on every path)
                reads.append(arg)
                others |= self.roots_of_all(p for p in parts if self.kinds.get(p) != SCALAR_OR_VIEW)
            else:
                others |= self.roots_of(arg)
        self.roots[value] = others | self.roots_of_all(reads)
        self.kinds[value] = VIEW
        if reads:
            self.through_reads[value] = (others, tuple(dict.fromkeys(reads)))

    def _join_parts(self, values: Iterable[Any]) -> list[Any]:
        """`values` with each join (a block argument) replaced by the values it joins, through
        nested joins. A join has one type: if it is a per-member scalar, so is each
        integer-index read among its parts, and a call given it shares none of their arrays."""
        parts: list[Any] = []
        todo, seen = list(values), set()
        while todo:
            value = todo.pop(0)
            if isinstance(value, SSAValue) and value in self.joins:
                if value not in seen:
                    seen.add(value)
                    todo[:0] = self.joins[value]
                continue
            parts.append(value)
        return parts

    def joined(self, value: SSAValue, leaves: Sequence[Any], kind: str) -> None:
        """`value` is one of `leaves`, by path (a block argument)."""
        if self.enabled:
            self.derived(value, leaves, kind)
            self.joins[value] = tuple(leaves)

    def loop_joined(self, header_argument: SSAValue, leaves: Sequence[Any]) -> None:
        """The loop header argument `header_argument` is one of `leaves` (its entry value and
        those of the back edges): known once the loop is closed, and then only for the code after
        it (its roots were merged with the back edges' as they were built)."""
        if self.enabled:
            self.joins[header_argument] = tuple(leaves)

    def owned_header(self, header_argument: SSAValue, entry_value: Any) -> Root:
        """`header_argument` holds an array of its own: `entry_value`'s on the first iteration
        (the back edges are checked to give it one of its own too, if the loop updates it)."""
        root = Root()
        self.roots[header_argument] = frozenset({root})
        self.stands_for[root] = self.roots_of(entry_value)
        return root

    def updated_in_place(self, value: Any) -> None:
        """`value`'s array is updated in place (when it is an array)."""
        self.updates.append(self._changed_by_update(self.roots_of(value)))

    def _changed_by_update(self, roots: frozenset[Root]) -> frozenset[Root]:
        """`roots`, and the roots each owned header root among them is on its first iteration."""
        changed, todo = set(roots), list(roots)
        while todo:
            for other in self.stands_for.get(todo.pop(), ()):
                if (other := self.find(other)) not in changed:
                    changed.add(other)
                    todo.append(other)
        return frozenset(changed)

    def updated_since(self, start: int, roots: Iterable[Root]) -> bool:
        """Whether an update after the first `start` ones may change one of `roots`' arrays."""
        classes = {self.find(r) for r in roots}
        return any(self.find(r) in classes for update in self.updates[start:] for r in update)

    def derived(self, value: SSAValue, sources: Iterable[Any], kind: str = VIEW) -> None:
        """`value` is (a view of) one of `sources`' arrays."""
        if self.enabled:
            self.roots[value] = self.roots_of_all(sources)
            self.kinds[value] = kind
            self.through_reads.pop(value, None)

    def same(self, value: SSAValue, source: Any) -> None:
        """`value` is `source`'s array (after an in-place update)."""
        if self.enabled:
            self.roots[value] = self.roots_of(source)
            self.through_reads.pop(value, None)

    def follows(self, follower: SSAValue, value: SSAValue) -> None:
        """`follower` is `value`'s array when members are arrays (else an immutable scalar)."""
        if self.enabled:
            self.roots[follower] = self.roots_of(value)
            self.followed[follower] = value
            self.through_reads.pop(follower, None)

    def constant(self, value: SSAValue, static: Static) -> None:
        """`value` materializes `static`: the same array (a number is a fresh one)."""
        if not self.enabled:
            return
        roots = self._static_roots(static)
        self.roots[value] = roots or frozenset({Root()})
        if self.kind(static) == VIEW and roots:
            self.kinds[value] = VIEW

    def fresh_static(self, static: Static, inputs: Iterable[Any], enclosing: Iterable[Any]) -> None:
        """`static` is the result of a call evaluated at compile time: an array the function owns
        unless it shares memory with the call's inputs or with the enclosing scope's arrays."""
        if not self.enabled or not isinstance(static.value, np.ndarray):
            return
        others = [*_arrays(inputs), *(v for v in enclosing if isinstance(v, np.ndarray))]
        if not any(np.may_share_memory(static.value, other) for other in others):
            self.fresh_statics[id(static)] = (static, Root())

    # -- queries ------------------------------------------------------------------------------

    def roots_of(self, leaf: Any) -> frozenset[Root]:
        if isinstance(leaf, SSAValue):
            return frozenset(self.find(r) for r in self.roots.get(leaf, (UNTRACKED,)))
        if isinstance(leaf, Static):
            return self._static_roots(leaf)
        return frozenset()

    def roots_of_all(self, leaves: Iterable[Any]) -> frozenset[Root]:
        result: frozenset[Root] = frozenset()
        for leaf in leaves:
            for part in flatten(leaf)[0]:
                result |= self.roots_of(part)
        return result

    def kind(self, leaf: Any) -> str | None:
        """SCALAR_OR_VIEW, VIEW, or None for an array of its own."""
        if isinstance(leaf, Static):
            return None if id(leaf) in self.fresh_statics else VIEW
        return self.kinds.get(leaf)

    def reads_behind(self, leaf: Any, array: Any) -> list[SSAValue] | None:
        """The integer-index reads through which alone the call result `leaf` may share
        `array`'s memory (it shares none if they are per-member scalars), or None when `leaf` is
        no such call result or may share `array` otherwise."""
        entry = self.through_reads.get(leaf) if isinstance(leaf, SSAValue) else None
        if entry is None:
            return None
        others, reads = entry
        if frozenset(self.find(r) for r in others) & self.roots_of(array):
            return None
        return [read for read in reads if self.shares(read, array)]

    def copy_if_scalar(self, leaf: Any, array: Any) -> bool:
        """Whether `leaf` shares no memory with `array` if some per-member values are scalars: it
        is an integer-index read (`scalar_copy_of`), or a call result sharing `array` only
        through such reads."""
        return self.scalar_copy_of(leaf, array) or self.reads_behind(leaf, array) is not None

    def scalar_copy_of(self, leaf: Any, array: Any, seen: frozenset[SSAValue] = frozenset()) -> bool:
        """Whether `leaf` shares no memory with `array` if it is a per-member scalar: an
        integer-index read, or a join of such reads and values that do not share `array` (a join
        has one type: all are scalars, or none). A join met again through a loop is one of its
        other parts."""
        if self.kind(leaf) == SCALAR_OR_VIEW or isinstance(leaf, SSAValue) and leaf in seen:
            return True
        parts = self.joins.get(leaf) if isinstance(leaf, SSAValue) else None
        return parts is not None and all(
            not self.shares(part, array) or self.scalar_copy_of(part, array, seen | {leaf}) for part in parts
        )

    def foreign_reason(self, roots: frozenset[Root]) -> str | None:
        """Why `roots` are not the function's own arrays (the first foreign root in source
        order, so that an error names the same one in every run), or None if they all are."""
        foreign = [r for r in roots if r.foreign is not None]
        return min(foreign, key=lambda r: r.number).foreign if foreign else None

    def holds_exactly(self, leaf: Any, array: Any) -> bool:
        """Whether `leaf` is `array`'s very array (when it is an array): the same value, or a
        follower of it."""
        return leaf is array or (isinstance(leaf, SSAValue) and self.followed.get(leaf) is array)

    def shares(self, a: Any, b: Any) -> bool:
        """Whether leaves `a` and `b` may share memory."""
        return bool(self.roots_of(a) & self.roots_of(b))

    def _static_roots(self, static: Static) -> frozenset[Root]:
        if id(static) in self.fresh_statics:
            return frozenset({self.find(self.fresh_statics[id(static)][1])})
        arrays = list(_arrays([static.value]))
        if not arrays:
            return frozenset()  # numbers, functions, ...: immutable, or not arrays
        owned = {
            self.find(root)
            for fresh, root in self.fresh_statics.values()
            if any(np.may_share_memory(a, fresh.value) for a in arrays)
        }
        return frozenset(owned) or frozenset({Root("an array from outside the function (a module-level or closure "
                                                   "value), which later calls would see changed")})

    # -- merging ------------------------------------------------------------------------------

    def find(self, root: Root) -> Root:
        while root in self.parent:
            root = self.parent[root]
        return root

    def union_values(self, leaves: Iterable[Any], *roots: Root) -> None:
        """These leaves (and `roots`) may be one array."""
        if self.enabled:
            self.union([*roots, *self.roots_of_all(leaves)])

    def union(self, roots: Iterable[Root]) -> None:
        """These roots may be one array: merge them (a foreign one makes the merged one foreign)."""
        classes = sorted({self.find(r) for r in roots}, key=lambda r: r.number)
        if len(classes) < 2:
            return
        keep = next((r for r in classes if r.foreign is not None), classes[0])
        for other in classes:
            if other is not keep:
                self.parent[other] = keep


def assigns_items(tree: ast.AST) -> bool:
    """Whether a function assigns into items (`x[i] = v`, `x[i] += v`) anywhere."""
    return any(isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) for n in ast.walk(tree))


def updates_in_place(tree: ast.AST) -> bool:
    """Whether code may update an array in place: item assignment, or `x op= v` on a name (an
    array `x` is updated in place)."""
    return assigns_items(tree) or any(
        isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) for n in ast.walk(tree)
    )


def names_updated_in_place(body: list[ast.stmt]) -> set[str]:
    """The variables `body` may update in place: those whose items it assigns, and the targets
    of `x op= v`."""
    augmented = {
        n.target.id for s in body for n in ast.walk(s) if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name)
    }
    return augmented | set(item_assigned_names(body))


def statements_from(tree: ast.AST, node: ast.stmt) -> list[ast.stmt]:
    """The statements of `tree` that may run once `node` has started: those from its line on, and
    the loops around it (their next iterations run the statements before `node` again)."""
    later = [s for s in ast.walk(tree) if isinstance(s, ast.stmt) and s.lineno >= node.lineno]
    around = [
        s for s in ast.walk(tree)
        if isinstance(s, ast.For | ast.While) and s is not node and any(n is node for n in ast.walk(s))
    ]  # fmt: skip
    return later + around


def item_assigned_names(body: list[ast.stmt]) -> list[str]:
    """The variables whose items (or whose fields' items) `body` assigns: `x` of `x[i] = v` and
    of `s.x[i] += v`."""
    names: dict[str, None] = {}
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                base = node.value
                while isinstance(base, ast.Attribute | ast.Subscript):
                    base = base.value
                if isinstance(base, ast.Name):
                    names[base.id] = None
    return list(names)


def bindings(env: dict[str, Any]) -> Iterator[Binding]:
    """Every leaf of every variable of `env`."""
    for name, value in env.items():
        if isinstance(value, MaybeUndefined):
            continue
        for position, leaf in enumerate(flatten(value)[0]):
            yield Binding(name, position, leaf)


def rebind(env: dict[str, Any], name: str, position: int, leaf: Any) -> None:
    """Replace leaf `position` of variable `name` in `env`."""
    leaves, treedef = flatten(env[name])
    leaves[position] = leaf
    env[name] = unflatten(treedef, leaves)


def _arrays(values: Iterable[Any]) -> Iterator[np.ndarray]:
    for value in values:
        leaf_value = value.value if isinstance(value, Static) else value
        for leaf in optree.tree_leaves(leaf_value, is_leaf=lambda x: isinstance(x, Static | SSAValue)):
            inner = leaf.value if isinstance(leaf, Static) else leaf
            if isinstance(inner, np.ndarray):
                yield inner
