"""The state the lowerers of one function share: where code goes and what names hold.

`LoweringState` owns the function's `FunctionGraph`, the block receiving operations (`current`,
`None` after a `return`/`break`/`continue`), the environment mapping variable names to frontend
values, the facts known about values (booleans, integers by construction, aliasing), and the
helpers that emit primitive operations and merge environments at joins. `FunctionLowering`
creates one per specialization and hands it to each lowerer (statements, expressions, arrays,
item assignment); none of them keeps a copy of `current` or `env`.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import optree
from xdsl.dialects.builtin import StringAttr, SymbolRefAttr, TensorType, i1
from xdsl.ir import Block, BlockArgument, SSAValue

from abir import prims
from abir.dialects.functional import (
    LOCATION_ATTR,
    SOURCE_ATTR,
    TRUTH_VALUE_ATTR,
    ConstantOp,
    PrimOp,
    UnknownType,
)
from abir.frontend.aliases import SCALAR_OR_VIEW, VIEW, AliasTracker, updates_in_place
from abir.frontend.cfg import Edge, FunctionGraph
from abir.frontend.source import FunctionSource
from abir.frontend.values import (
    LEAF,
    MaybeUndefined,
    Static,
    awaits_result_structure,
    constant_op,
    describe_object,
    flatten,
    is_materializable,
    stand_in,
    unflatten,
)

Env = dict[str, Any]
Arrival = tuple[Block | Edge, Env]
"""Control reaching a join: from the open end of a block, or along a branch edge, with the
variables as they are on that path."""

KNOWN_SCALAR_DEPTH = 32
"""How far back `LoweringState.known_scalar` follows definitions before it gives up."""

BOOLEAN_PRIMS = prims.COMPARISONS | {"logical_and", "logical_or", "logical_xor", "logical_not"}


class UnknownResultStructure(Exception):
    """A call to a function whose result structure is not known yet (recursion in progress).

    The path making the call is abandoned for this round; its base cases tell the structure."""

    def __init__(self, node: ast.AST, callee: str):
        super().__init__(callee)
        self.node = node
        self.callee = callee


class ProgramServices(Protocol):
    """What lowering one function needs from the program being built."""

    def batched_callee(self, obj: Any) -> str | None:
        """The name of the batched function `obj` is, if it belongs to this program."""
        ...

    def call_target(
        self, name: str, arg_treedefs: tuple[optree.PyTreeSpec, ...], node: ast.AST
    ) -> tuple[str, optree.PyTreeSpec | None]:
        """The symbol of a specialization and its output structure (None while unknown)."""
        ...

    def helper_callee(self, fn: Any) -> str:
        """The name under which the undecorated user function `fn` is compiled per member, as a
        decorated function is (registered on first use); `UnsupportedSyntaxError` when its source
        cannot be read or holds syntax outside abir's subset."""
        ...

    def helper_source(self, name: str) -> FunctionSource | None:
        """The source of the helper `name` (None when `name` is a decorated function)."""
        ...

    def is_primitive(self, fn: Any) -> bool:
        """Whether `fn` was declared a whole-batch primitive (`Context.primitive`)."""
        ...

    def opaque(self, key: Any, hint: str, source: str, fn: Any) -> str:
        """Register (once per key) an opaque callable and declare it in the module."""
        ...


def describe_structure(treedef: optree.PyTreeSpec) -> str:
    """How an error message names the structure of a value: `a single value`, `None`, `the
    structure (*, *)`."""
    if treedef == LEAF:
        return "a single value"
    if treedef.num_nodes == 1 and treedef.num_leaves == 0:
        return "None"
    return f"the structure {str(treedef).removeprefix('PyTreeSpec(').removesuffix(')')}"


class LoweringState:
    """Emission point, environment and join logic for one function specialization, shared by
    the lowerers `FunctionLowering` gives it to."""

    def __init__(
        self, source: FunctionSource, graph: FunctionGraph, services: ProgramServices, local_names: set[str]
    ):
        self.source = source
        self.graph = graph
        self.services = services
        self.local_names = local_names
        """The names the function assigns: a read of one never falls back to the enclosing scope."""
        self.current: Block | None = graph.entry
        self.env: Env = {}
        self.booleans: set[SSAValue] = set()
        self.integer_values: set[SSAValue] = set()
        """Values known to be integers by construction (shape facts, range counters)."""
        self.aliases = AliasTracker(enabled=updates_in_place(source.tree))
        self.first_assignment: dict[str, int] = {}
        self.names = source.enclosing_names()

    # -- emission ---------------------------------------------------------------------------

    @property
    def block(self) -> Block:
        assert self.current is not None, "emitting into unreachable code"
        return self.current

    def prim(self, name: str, operands: Sequence[SSAValue], to_bool: bool = False) -> SSAValue:
        boolean = to_bool or name in BOOLEAN_PRIMS
        op = PrimOp(name, list(operands), [i1 if boolean else UnknownType()])
        self.block.add_op(op)
        if boolean:
            self.booleans.add(op.res[0])
        self.aliases.fresh(op.res[0])
        return op.res[0]

    def opaque_prim(self, symbol: str, operands: Sequence[SSAValue], n_results: int) -> list[SSAValue]:
        op = PrimOp(SymbolRefAttr(symbol), list(operands), [UnknownType()] * n_results)
        self.block.add_op(op)
        for result in op.res:
            self.aliases.call_result(result, operands)
        return list(op.res)

    def materialize(self, value: Any, node: ast.AST, block: Block | None = None) -> SSAValue:
        """The SSA value of a leaf: statics become constants appended to `block`."""
        if isinstance(value, SSAValue):
            return value
        if isinstance(value, Static):
            if not is_materializable(value.value):
                raise self.source.error(
                    node,
                    f"{describe_object(value.value)} cannot be used as a batched value",
                    "only numbers, booleans and NumPy arrays can become per-member tensors; "
                    "use it at compile time only (attribute access, calls)",
                )
            try:
                op = constant_op(value.value)
            except (OverflowError, TypeError) as e:
                raise self.source.error(node, str(e)) from None
            (block or self.block).add_op(op)
            if op.res.type == i1:
                self.booleans.add(op.res)
            self.aliases.constant(op.res, value)
            return op.res
        raise self.source.error(
            node,
            "a tuple, list or namedtuple cannot be used where a single array is expected",
            "index or destructure the structure first",
        )

    def as_condition(self, value: Any, node: ast.AST, use: str = "a truth value") -> SSAValue | Static:
        """A per-member `i1` scalar (or a compile-time truth value) to branch on: Python's
        `bool(value)` for each member. `use` says how the value at `node` is used (`"the
        condition of this `if`"`); unless `value` is a scalar by construction, type inference
        checks that each member's value has one element (`TRUTH_VALUE_ATTR`), as NumPy does."""
        if isinstance(value, Static):
            try:
                return Static(bool(value.value))
            except Exception as e:
                raise self.source.error(
                    node, f"cannot take the truth value of {describe_object(value.value)}: {e}"
                ) from None
        if isinstance(value, tuple | list):
            return Static(len(value) > 0)
        if self.known_scalar(value):
            return value if value.type == i1 else self.prim("astype", [value], to_bool=True)
        return self._checked_truth_value(value, node, use)

    def _checked_truth_value(self, value: SSAValue, node: ast.AST, use: str) -> SSAValue:
        """`astype(value) -> i1`, marked for type inference to check that each member's value has
        one element (`TRUTH_VALUE_ATTR`), located at `node`."""
        op = PrimOp("astype", [value], [i1])
        op.attributes[LOCATION_ATTR] = StringAttr(self.source.location(node))
        op.attributes[SOURCE_ATTR] = StringAttr(self.source.segment(node))
        op.attributes[TRUTH_VALUE_ATTR] = StringAttr(use)
        self.block.add_op(op)
        self.booleans.add(op.res[0])
        self.aliases.fresh(op.res[0])
        return op.res[0]

    def known_scalar(self, value: Any, visiting: set[SSAValue] | None = None, depth: int = 0) -> bool:
        """Whether `value` is a per-member scalar whatever the arguments' types: a number, a
        scalar constant, a shape fact or range counter, an elementwise (builtin) prim of such
        values, or a join one of whose incoming values is one (the values meeting at a join have
        one type). False when unsure (a cycle, a long chain)."""
        if isinstance(value, Static):
            return np.ndim(value.value) == 0
        visiting = set() if visiting is None else visiting
        if not isinstance(value, SSAValue) or value in visiting or depth > KNOWN_SCALAR_DEPTH:
            return False
        visiting.add(value)
        op = value.owner
        if value in self.integer_values or isinstance(op, ConstantOp) and not isinstance(value.type, TensorType):
            return True
        if isinstance(op, PrimOp) and op.is_builtin:
            return all(self.known_scalar(operand, visiting, depth + 1) for operand in op.operands)
        if isinstance(value, BlockArgument):
            incoming = [e.args[value.index] for e in self.graph.edges()
                        if e.target is value.block and value.index < len(e.args)]
            return any(self.known_scalar(v, visiting, depth + 1) for v in incoming)
        return False

    # -- variables --------------------------------------------------------------------------

    def assign_name(self, name: str, value: Any, node: ast.AST) -> None:
        self.env[name] = value
        self.first_assignment.setdefault(name, self.source.lineno(node))
        if isinstance(value, SSAValue) and value.name_hint is None and name.isidentifier():
            value.name_hint = name

    # -- joins ------------------------------------------------------------------------------

    def merge(self, arrivals: list[Arrival], node: ast.AST) -> None:
        """Continue after a join of `arrivals`: block arguments for values that differ."""
        if not arrivals:
            self.current = None
            self.env = {}
            return
        if len(arrivals) == 1 and isinstance(arrivals[0][0], Block):
            self.current, self.env = arrivals[0]
            return
        target = self.graph.new_block()
        edges = [self.edge_to(origin, target) for origin, _ in arrivals]
        envs = [env for _, env in arrivals]
        merged: Env = {}
        for name in _ordered_union(envs):
            merged[name] = self._merge_variable(name, [env.get(name) for env in envs], edges, target, node)
        self.current, self.env = target, merged

    def edge_to(self, origin: Block | Edge, target: Block) -> Edge:
        """The edge from `origin` (a jump from the open end of a block, or a branch edge) to `target`."""
        edge = self.graph.jump(origin) if isinstance(origin, Block) else origin
        edge.target = target
        return edge

    def _merge_variable(self, name: str, values: list[Any], edges: list[Edge], target: Block, node: ast.AST) -> Any:
        if any(v is None or isinstance(v, MaybeUndefined) for v in values):
            return MaybeUndefined(name, self.first_assignment.get(name, self.source.lineno(node)))
        if all(_same(values[0], v) for v in values[1:]):
            return values[0]
        values = _placeholders_for_pending(values)
        flat = [flatten(v) for v in values]
        treedefs = {treedef for _, treedef in flat}
        if len(treedefs) > 1:
            shapes = ", ".join(sorted({describe_structure(t) for t in treedefs}))
            raise self.source.error(
                node,
                f"variable '{name}' holds different structures on the paths that meet here ({shapes})",
                f"give '{name}' the same tuple/list/namedtuple structure on every path",
            )
        merged_leaves = []
        for position, leaves in enumerate(zip(*[leaves for leaves, _ in flat], strict=True)):
            if all(_same(leaves[0], leaf) for leaf in leaves[1:]):
                merged_leaves.append(leaves[0])
                continue
            merged_leaves.append(self._join_argument(name, position, leaves, edges, target, node))
        return unflatten(flat[0][1], merged_leaves)

    def _join_argument(
        self, name: str, position: int, leaves: Sequence[Any], edges: list[Edge], target: Block, node: ast.AST
    ) -> SSAValue:
        arg = self.graph.add_argument(target, name)
        for leaf, edge in zip(leaves, edges, strict=True):
            edge.args.append(self.materialize(leaf, node, edge.source))
        self.aliases.joined(arg, leaves, self._join_kind(leaves))
        if all(leaf in self.booleans or _is_static_bool(leaf) for leaf in leaves):
            self.booleans.add(arg)
        return arg

    def _join_kind(self, leaves: Sequence[Any]) -> str:
        """How a join of `leaves` relates to their arrays: a scalar copy or a view when each leaf
        is an integer-index read or a scalar by construction (a join has one type), else a view."""
        kinds = [self.aliases.kind(leaf) for leaf in leaves]
        if SCALAR_OR_VIEW in kinds and all(
            kind == SCALAR_OR_VIEW or self.known_scalar(leaf) for leaf, kind in zip(leaves, kinds, strict=True)
        ):
            return SCALAR_OR_VIEW
        return VIEW


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Static) and isinstance(b, Static):
        return a.same_as(b)
    if isinstance(a, SSAValue) or isinstance(b, SSAValue):
        return a is b
    if isinstance(a, tuple | list) and isinstance(b, tuple | list):
        return (
            type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    return a is b


def _placeholders_for_pending(values: list[Any]) -> list[Any]:
    """Helper results whose structure type inference has not learned yet, shaped like the other
    paths' common structure (the program is lowered again once the structure is known)."""
    known = {flatten(v)[1] for v in values if not awaits_result_structure(v)}
    if len(known) != 1 or LEAF in known:  # a leaf is the call's own flat result: no placeholder
        return values
    structure = known.pop()
    return [
        unflatten(structure, [stand_in(v)] * structure.num_leaves) if awaits_result_structure(v) else v
        for v in values
    ]


def _is_static_bool(value: Any) -> bool:
    return isinstance(value, Static) and isinstance(value.value, bool)


def _ordered_union(envs: list[Env]) -> list[str]:
    names: dict[str, None] = {}
    for env in envs:
        names.update(dict.fromkeys(env))
    return list(names)
