"""Lowering of one function specialization's statements to a `functional.func`.

SSA construction follows the structure of the Python source: each branch and loop body is
lowered with its own copy of the environment; at joins (`merge`) variables with different values
become block arguments, and loop headers get a block argument for every leaf of every variable
the loop assigns (or assigns items of: `abir.frontend.item_assignment`). `finalize` later drops
the arguments that turn out to be trivial. A `range()` bound of unknown dtype puts its located
error on the loop's comparisons (`INTEGER_OPERANDS_ATTR`): type inference raises it for a float.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optree
from xdsl.dialects.builtin import IntegerType, StringAttr
from xdsl.ir import Block, Region, SSAValue

from abir.dialects.functional import INTEGER_OPERANDS_ATTR, ConstantOp, FuncOp, PrimOp, UnknownType
from abir.frontend.aliases import item_assigned_names
from abir.frontend.cfg import FunctionGraph
from abir.frontend.expressions import _drop_none
from abir.frontend.item_assignment import ItemAssignmentLowering, OwnedHeaderLeaf
from abir.frontend.range_membership import integer_requirement
from abir.frontend.source import FunctionSource
from abir.frontend.state import (
    Arrival,
    ProgramServices,
    ReturnSite,
    UnknownResultStructure,
    describe_structure,
)
from abir.frontend.values import (
    MaybeUndefined,
    Static,
    awaits_result_structure,
    flatten,
    is_materializable,
    stand_in,
    unflatten,
)

UNSUPPORTED_STATEMENTS: dict[str, tuple[str, str]] = {
    "With": ("`with` statements are not supported", "move the `with` block into a helper function"),
    "AsyncWith": ("`async with` is not supported", "write a plain synchronous function"),
    "Try": ("`try` statements are not supported", "test the condition with `if` instead of catching exceptions"),
    "TryStar": ("`try` statements are not supported", "test the condition with `if` instead"),
    "Raise": ("`raise` is not supported", "return a status value, or check inputs before calling"),
    "Assert": ("`assert` is not supported", "check the inputs before calling the batched function"),
    "Global": ("`global` declarations are not supported", "pass the value as an argument and return the new one"),
    "Nonlocal": ("`nonlocal` declarations are not supported", "pass the value as an argument and return the new one"),
    "Delete": ("`del` is not supported", "stop using the variable, or assign it a new value"),
    "FunctionDef": (
        "nested function definitions are not supported",
        "define the function at module level (decorate it too if it should be batched)",
    ),
    "AsyncFunctionDef": ("nested function definitions are not supported", "define the function at module level"),
    "ClassDef": ("class definitions inside a batched function are not supported", "define the class at module level"),
    "Import": ("imports inside a batched function are not supported", "import at module level"),
    "ImportFrom": ("imports inside a batched function are not supported", "import at module level"),
    "Match": ("`match` statements are not supported", "use if/elif/else"),
    "AsyncFor": ("`async for` is not supported", "use `for i in range(...)`"),
    "TypeAlias": ("`type` aliases are not supported", "define the alias at module level"),
}


INTEGER_CLOSED_PRIMS = {"add", "subtract", "multiply", "floor_divide", "remainder", "minimum", "maximum", "abs",
                        "negative", "positive"}
"""Builtin prims whose result is an integer when every operand is."""


@dataclass(eq=False)
class LoopFrame:
    """Where `break` and `continue` in the innermost loop go."""

    breaks: list[Arrival] = field(default_factory=list)
    continues: list[Arrival] = field(default_factory=list)


@dataclass(frozen=True)
class Carried:
    """A variable carried around a loop: its structure, the header's leaves and the leaves the
    loop is entered with."""

    name: str
    treedef: optree.PyTreeSpec
    header_leaves: list[Any]
    entry_leaves: list[Any]


@dataclass
class LoweredFunction:
    """One specialization's function and what its lowering learnt."""

    func: FuncOp
    output: optree.PyTreeSpec | None
    """The structure every return has (None when no return was lowered)."""
    unknown: UnknownResultStructure | None
    """The first call whose callee's result structure was unknown (the body is incomplete)."""


class FunctionLowering(ItemAssignmentLowering):
    """Lowers the body of `source` for the given parameter structures into `functional.func`."""

    def __init__(
        self,
        source: FunctionSource,
        services: ProgramServices,
        symbol: str,
        arg_treedefs: tuple[optree.PyTreeSpec, ...],
    ):
        n_inputs = sum(t.num_leaves for t in arg_treedefs)
        self.region = Region(Block(arg_types=[UnknownType()] * n_inputs))
        super().__init__(source, FunctionGraph(self.region, source.location(source.tree)), services)
        self.graph.locate(self.graph.entry)
        self.symbol = symbol
        self.arg_treedefs = arg_treedefs
        self.local_names = local_names(source.tree)
        self.loops: list[LoopFrame] = []
        self.returns: list[ReturnSite] = []
        self.unknown: UnknownResultStructure | None = None
        self.abandoned: list[UnknownResultStructure] = []
        self._owned_at_header: dict[Block, tuple[list[OwnedHeaderLeaf], int]] = {}
        """Per loop header: its owned arguments, and how many in-place updates preceded the body."""
        self._hidden_names = 0

    def lower(self) -> LoweredFunction:
        self._bind_parameters()
        self.statements(self.source.tree.body)
        if self.current is not None:
            last = self.source.tree.body[-1]
            self._return(Static(None), ast.Return(lineno=getattr(last, "end_lineno", last.lineno), col_offset=0))
        output = self.returns[0].treedef if self.returns else None
        n_outputs = output.num_leaves if output is not None else 0
        func = FuncOp(self.symbol, ([UnknownType()] * len(self.graph.entry.args), [UnknownType()] * n_outputs), self.region)
        self.unknown = self.unknown or next(iter(self.abandoned), None)
        if self.unknown is None:
            self.graph.finalize()
        return LoweredFunction(func, output, self.unknown)

    def _bind_parameters(self) -> None:
        params = self.source.tree.args.posonlyargs + self.source.tree.args.args
        args = iter(self.graph.entry.args)
        for param, treedef in zip(params, self.arg_treedefs, strict=True):
            leaves = [next(args) for _ in range(treedef.num_leaves)]
            for leaf in leaves:
                leaf.name_hint = param.arg
                self.aliases.foreign(leaf, f"the argument '{param.arg}' of '{self.source.name}', which the caller holds")
            self.assign_name(param.arg, unflatten(treedef, list(leaves)), param)

    # -- statements -------------------------------------------------------------------------

    def statements(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if self.current is None:
                return  # unreachable code after return, break or continue
            try:
                self.statement(stmt)
            except UnknownResultStructure as e:
                self.unknown = self.unknown or e
                self.current = None

    def statement(self, node: ast.stmt) -> None:
        kind = type(node).__name__
        if kind in UNSUPPORTED_STATEMENTS:
            message, suggestion = UNSUPPORTED_STATEMENTS[kind]
            raise self.source.error(node, message, suggestion)
        method: Callable[[Any], None] | None = getattr(self, f"stmt_{kind}", None)
        if method is None:
            raise self.source.error(node, f"the statement {kind} is not supported")
        enclosing = self.graph.location
        self.graph.location = self.source.location(node)
        self.graph.locate(self.block)
        try:
            method(node)
        finally:
            self.graph.location = enclosing

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        self.expr(node.value)

    def stmt_Assign(self, node: ast.Assign) -> None:
        n_results = None
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple | ast.List):
            n_results = len(node.targets[0].elts)
        value = self.expr(node.value, n_results) if isinstance(node.value, ast.Call) else self.expr(node.value)
        for target in node.targets:
            self.assign(target, value)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, self.expr(node.value))

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Subscript):
            self.augmented_item_assignment(node, node.target)
            return
        if not isinstance(node.target, ast.Name):
            raise self._assignment_target_error(node.target)
        self.augmented_name_assignment(node, node.target)

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, target)
            return
        if isinstance(target, ast.Tuple | ast.List):
            for element, part in zip(target.elts, self._unpack(target, value), strict=True):
                self.assign(element, part)
            return
        if isinstance(target, ast.Subscript):
            self.assign_item(target, value)
            return
        raise self._assignment_target_error(target)

    def _assignment_target_error(self, target: ast.expr):
        if isinstance(target, ast.Starred):
            return self.source.error(target, "starred assignment (`a, *rest = ...`) is not supported",
                                     "unpack every element by name")
        what = "item" if isinstance(target, ast.Subscript) else "attribute"
        return self.source.error(
            target,
            f"{what} assignment is not supported (values are immutable)",
            "build a new value and assign it to a variable, e.g. `state = state._replace(x=...)` for namedtuples",
        )

    def _unpack(self, target: ast.Tuple | ast.List, value: Any) -> list[Any]:
        for element in target.elts:
            if isinstance(element, ast.Starred):
                raise self._assignment_target_error(element)
        count = len(target.elts)
        if isinstance(value, Static) and isinstance(value.value, tuple | list):
            parts = [Static(v) for v in value.value]
        elif isinstance(value, tuple | list):
            parts = list(value)
        elif awaits_result_structure(value):  # a helper's result: lowered again once its structure is known
            parts = [stand_in(value)] * count
        else:
            raise self.source.error(
                target,
                f"cannot unpack a single array into {count} names",
                "return a tuple from the function, or call a helper directly as `a, b = helper(x)` so that "
                "it has several results",
            )
        if len(parts) != count:
            raise self.source.error(target, f"cannot unpack {len(parts)} values into {count} names")
        return parts

    def stmt_Return(self, node: ast.Return) -> None:
        self._return(Static(None) if node.value is None else self.expr(node.value), node)

    def _return(self, value: Any, node: ast.Return) -> None:
        if self.returns and awaits_result_structure(value):  # a helper's result: lowered again once known
            value = unflatten(self.returns[0].treedef, [stand_in(value)] * self.returns[0].treedef.num_leaves)
        leaves, treedef = flatten(_drop_none(value))
        site = ReturnSite(treedef, self.source.lineno(node))
        if self.returns and self.returns[0].treedef != treedef:
            first = self.returns[0]
            raise self.source.error(
                node,
                f"function '{self.source.name}' returns {describe_structure(first.treedef)} at line {first.lineno} "
                f"but {describe_structure(treedef)} at line {site.lineno}",
                "return the same tuple/list/namedtuple structure on every path",
            )
        self.returns.append(site)
        self.graph.ret(self.block, [self.materialize(leaf, node) for leaf in leaves])
        self.current = None

    # -- branches ---------------------------------------------------------------------------

    def stmt_If(self, node: ast.If) -> None:
        condition = self.as_condition(self.leaf(node.test), node.test)
        if isinstance(condition, Static):
            self.statements(node.body if condition.value else node.orelse)
            return
        saved = dict(self.env)
        true_edge, false_edge = self.graph.branch(self.block, condition)
        arrivals: list[Arrival] = []
        for edge, body in ((true_edge, node.body), (false_edge, node.orelse)):
            if not body:
                arrivals.append((edge, dict(saved)))
                continue
            self.current = self.graph.new_block()
            edge.target = self.current
            self.env = dict(saved)
            self.statements(body)
            if self.current is not None:
                arrivals.append((self.current, self.env))
        self.merge(arrivals, node)

    # -- loops ------------------------------------------------------------------------------

    def stmt_Break(self, node: ast.Break) -> None:
        self._innermost_loop(node).breaks.append((self.block, self.env))
        self.current = None

    def stmt_Continue(self, node: ast.Continue) -> None:
        self._innermost_loop(node).continues.append((self.block, self.env))
        self.current = None

    def _innermost_loop(self, node: ast.stmt) -> LoopFrame:
        if not self.loops:
            raise self.source.error(node, f"`{type(node).__name__.lower()}` outside a loop")
        return self.loops[-1]

    def stmt_While(self, node: ast.While) -> None:
        header, carried = self._enter_loop(node, assigned_names(node.body, node.test))
        condition = self.as_condition(self.leaf(node.test), node.test)
        self._loop(node, header, carried, condition)

    def stmt_For(self, node: ast.For) -> None:
        iterable = node.iter
        if isinstance(iterable, ast.Call) and self._is_range(iterable.func):
            self._range_loop(node, iterable)
            return
        self._unrolled_loop(node, self.expr(iterable))

    def _is_range(self, func: ast.expr) -> bool:
        return isinstance(func, ast.Name) and func.id not in self.local_names and self.names.get(func.id) is range

    def _range_loop(self, node: ast.For, call: ast.Call) -> None:
        if not isinstance(node.target, ast.Name):
            raise self.source.error(node.target, "the target of a `for ... in range(...)` loop must be one name")
        if call.keywords or not 1 <= len(call.args) <= 3 or any(isinstance(a, ast.Starred) for a in call.args):
            raise self.source.error(call, "range() takes 1 to 3 positional arguments")
        bounds = [self._range_bound(a) for a in call.args]
        start, stop, step = (
            (Static(0), bounds[0], Static(1)) if len(bounds) == 1 else (*bounds, Static(1))[:3]
        )
        counter = self._hidden_name("range")
        self.env[counter] = start
        header, carried = self._enter_loop(node, [counter, *assigned_names(node.body, node.target)])
        count = self.materialize(self.env[counter], node)
        if all(isinstance(b, Static) or self._known_integer(b) for b in bounds):
            self.integer_values.add(count)
            requirement = None
        else:
            requirement = self._integer_requirement(call)
        condition = self._range_condition(node, count, self.materialize(stop, node), step, requirement)

        def prologue() -> None:
            self.assign_name(node.target.id, count, node.target)

        def latch() -> None:
            self.env[counter] = self.prim("add", [count, self.materialize(step, node)])

        self._loop(node, header, carried, condition, prologue, latch)

    def _range_bound(self, node: ast.expr) -> Any:
        value = self.leaf(node)
        if isinstance(value, Static):
            if not isinstance(value.value, int | np.integer):
                raise self.source.error(node, f"range() arguments must be integers, got {value.value!r}",
                                        f"convert it: `range(int({self.source.segment(node)}))`")
            return Static(int(value.value))
        return value

    def _known_integer(self, value: SSAValue) -> bool:
        """Whether `value` is an integer by construction (an integer constant, a conversion to an
        integer type, a shape fact, a range counter, integer arithmetic of those): its range()
        needs no check."""
        if value in self.integer_values:
            return True
        op = value.owner
        if isinstance(op, ConstantOp | PrimOp) and isinstance(value.type, IntegerType):
            return True  # constants, and astype to an integer type, are typed by the frontend
        if isinstance(op, PrimOp) and op.prim_name in INTEGER_CLOSED_PRIMS:
            return all(self._known_integer(operand) for operand in op.operands)
        return False

    def _integer_requirement(self, call: ast.Call) -> StringAttr:
        """What type inference reports if a bound of `range(...)` turns out to be a float: the
        frontend does not know per-member dtypes, so the comparisons of the loop carry it."""
        return integer_requirement(self.source, call)

    def _range_condition(
        self, node: ast.For, count: Any, stop: Any, step: Any, requirement: StringAttr | None
    ) -> Any:
        def compare(name: str, operands: list[Any]) -> SSAValue:
            result = self.prim(name, operands)
            if requirement is not None:
                result.owner.attributes[INTEGER_OPERANDS_ATTR] = requirement  # type: ignore[union-attr]
            return result

        if isinstance(step, Static):
            if step.value == 0:
                raise self.source.error(node.iter, "range() step must not be zero")
            return compare("less" if step.value > 0 else "greater", [count, stop])
        zero = self.materialize(Static(0), node)
        upward = self.prim("logical_and", [compare("greater", [step, zero]), compare("less", [count, stop])])
        downward = self.prim("logical_and", [compare("less", [step, zero]), compare("greater", [count, stop])])
        return self.prim("logical_or", [upward, downward])

    def _hidden_name(self, kind: str) -> str:
        self._hidden_names += 1
        return f".{kind}{self._hidden_names}"

    def _enter_loop(self, node: ast.stmt, assigned: list[str]) -> tuple[Block, list[Carried]]:
        """Jump to a new loop header with one block argument per leaf of each carried variable
        (variables the loop assigns, or assigns items of)."""
        mutated = [n for n in item_assigned_names(node.body) if n in self.local_names and n not in assigned]
        assigned = [*assigned, *mutated]
        sharers = self.sharers_at_entry(node, assigned)
        owned: list[OwnedHeaderLeaf] = []
        entry = self.block
        header = self.graph.new_block()
        edge = self.graph.jump(entry)
        edge.target = header
        header_env = dict(self.env)
        carried: list[Carried] = []
        for name in assigned:
            value = self.env.get(name)
            if value is None or isinstance(value, MaybeUndefined):
                header_env[name] = MaybeUndefined(name, self.source.lineno(node))
                continue
            leaves, treedef = flatten(value)
            header_leaves: list[Any] = []
            entry_leaves = flatten(self.env[name])[0]  # as rebound by the copy checks of `sharers_at_entry`
            for position, leaf in enumerate(leaves):
                if isinstance(leaf, Static) and not is_materializable(leaf.value):
                    header_leaves.append(leaf)  # checked to stay the same object at the back edges
                    continue
                arg = self.graph.add_argument(header, name)
                edge.args.append(self.materialize(leaf, node, entry))
                header_leaves.append(arg)
                shared_with = sharers.get((name, position), [])
                kept = self.header_argument_roots(node, arg, name, position, leaf, shared_with, assigned)
                if kept is not None:
                    owned.append(kept)
            header_env[name] = unflatten(treedef, header_leaves)
            carried.append(Carried(name, treedef, header_leaves, entry_leaves))
        self._owned_at_header[header] = (owned, self.aliases.in_place_updates)
        self.current, self.env = header, header_env
        self.follow_at_header(node, owned)  # the same array under other names
        return header, carried

    def _loop(
        self,
        node: ast.While | ast.For,
        header: Block,
        carried: list[Carried],
        condition: Any,
        prologue: Callable[[], None] | None = None,
        latch: Callable[[], None] | None = None,
    ) -> None:
        exits: list[Arrival] = []
        normal_exit: Arrival | None = None
        if isinstance(condition, Static):
            if not condition.value:
                normal_exit = (self.block, dict(self.env))
        else:
            true_edge, false_edge = self.graph.branch(self.block, condition)
            normal_exit = (false_edge, dict(self.env))
            self.current = self.graph.new_block()
            true_edge.target = self.current
        frame = LoopFrame()
        if self.current is not None and (normal_exit is None or normal_exit[0] is not self.current):
            self._loop_body(node, header, carried, frame, prologue, latch)
        if normal_exit is not None:
            exits += self._else_clause(node, normal_exit)
        self.merge(exits + frame.breaks, node)

    def _loop_body(self, node, header, carried, frame, prologue, latch) -> None:  # noqa: ANN001
        self.loops.append(frame)
        if prologue is not None:
            prologue()
        self.statements(node.body)
        self.loops.pop()
        back = frame.continues + ([(self.block, self.env)] if self.current is not None else [])
        if latch is not None:
            self.merge(back, node)
            if self.current is None:
                return
            latch()
            back = [(self.block, self.env)]
        self._close_loop(node, header, carried, back)

    def _else_clause(self, node: ast.While | ast.For, normal_exit: Arrival) -> list[Arrival]:
        if not node.orelse:
            return [normal_exit]
        origin, env = normal_exit
        if isinstance(origin, Block):
            self.current = origin
        else:
            self.current = self.graph.new_block()
            origin.target = self.current
        self.env = dict(env)
        self.statements(node.orelse)
        return [(self.block, self.env)] if self.current is not None else []

    def _close_loop(self, node: ast.stmt, header: Block, carried: list[Carried], back: list[Arrival]) -> None:
        """Back edges to the header, passing the carried variables' values at the end of an iteration."""
        owned, updates_before = self._owned_at_header.pop(header, ([], 0))
        updates_in_body = self.aliases.in_place_updates > updates_before
        for origin, env in back:
            if owned:
                assert isinstance(origin, Block), "a back edge leaves from the end of a block"
                self.check_back_edge(node, owned, origin, env, updates_in_body)
        incoming = {
            header_leaf: [entry_leaf]
            for variable in carried
            for header_leaf, entry_leaf in zip(variable.header_leaves, variable.entry_leaves, strict=True)
            if not isinstance(header_leaf, Static)
        }  # fmt: skip
        for origin, env in back:
            edge = self._edge_to(origin, header)
            for variable in carried:
                leaves = self._carried_leaves(node, variable, env.get(variable.name))
                for header_leaf, leaf in zip(variable.header_leaves, leaves, strict=True):
                    if isinstance(header_leaf, Static):
                        self._check_static_invariant(node, variable.name, header_leaf, leaf)
                    else:
                        edge.args.append(self.materialize(leaf, node, edge.source))
                        self.aliases.union_values([header_leaf, leaf])  # one array from iteration to iteration
                        incoming[header_leaf].append(leaf)
        for header_leaf, leaves in incoming.items():
            self.aliases.loop_joined(header_leaf, leaves)
        self.current = None

    def _carried_leaves(self, node: ast.stmt, variable: Carried, value: Any) -> list[Any]:
        if value is None or isinstance(value, MaybeUndefined):
            raise self.source.error(node, f"variable '{variable.name}' may be undefined at the end of the loop body")
        leaves, treedef = flatten(value)
        if treedef != variable.treedef:
            raise self.source.error(
                node,
                f"variable '{variable.name}' is {describe_structure(variable.treedef)} when the loop starts but "
                f"{describe_structure(treedef)} at the end of an iteration",
                f"keep the structure of '{variable.name}' the same in every iteration",
            )
        return leaves

    def _check_static_invariant(self, node: ast.stmt, name: str, before: Static, after: Any) -> None:
        if not (isinstance(after, Static) and before.same_as(after)):
            raise self.source.error(
                node,
                f"variable '{name}' holds the compile-time value {before.value!r} and the loop changes it",
                "loop-carried variables must be numbers, booleans or arrays",
            )

    def _unrolled_loop(self, node: ast.For, iterable: Any) -> None:
        """`for x in <compile-time tuple/list/structure>`: one copy of the body per element."""
        if isinstance(iterable, Static) and isinstance(iterable.value, tuple | list | range):
            items: list[Any] = [Static(v) for v in iterable.value]
        elif isinstance(iterable, tuple | list):
            items = list(iterable)
        else:
            raise self.source.error(
                node.iter,
                "`for` loops iterate over range(...) or over a tuple/list known at compile time",
                "write `for i in range(n):` and index with compile-time constants, or use a `while` loop",
            )
        breaks: list[Arrival] = []
        for item in items:
            frame = LoopFrame()
            self.loops.append(frame)
            self.assign(node.target, item)
            self.statements(node.body)
            self.loops.pop()
            breaks += frame.breaks
            self.merge(frame.continues + ([(self.block, self.env)] if self.current is not None else []), node)
            if self.current is None:
                break
        if self.current is not None and node.orelse:
            self.statements(node.orelse)
        self.merge(([(self.block, self.env)] if self.current is not None else []) + breaks, node)


def local_names(tree: ast.FunctionDef) -> set[str]:
    """Names the function assigns (its local variables, as Python scopes them)."""
    names = {a.arg for a in tree.args.posonlyargs + tree.args.args}
    return names | set(assigned_names(tree.body))


def assigned_names(body: list[ast.stmt], *extra: ast.AST) -> list[str]:
    """Names assigned in `body` (and `extra` nodes), in order of first appearance."""
    names: dict[str, None] = {}
    work: list[ast.AST] = [*reversed(extra), *reversed(body)]
    while work:
        node = work.pop()
        if isinstance(node, OWN_SCOPES):
            continue  # comprehension and lambda variables are not the function's
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names[node.id] = None
        work += reversed(list(ast.iter_child_nodes(node)))
    return list(names)


OWN_SCOPES = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Lambda)


def called_names(tree: ast.FunctionDef) -> set[str]:
    """Names called directly (`name(...)`) in a function body: its possible batched callees."""
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
