"""Lowering of one function specialization to a `functional.func`, and of its statements.

`FunctionLowering` owns what lowering one function shares (`LoweringState`: the graph, the
current block, the environment) and the lowerers working on it, each given the state and the
lowerers it calls: `StatementLowering` (here), `ExpressionLowering` (`expressions.py`),
`ArrayLowering` (`arrays.py`) and `ItemAssignmentLowering` (`item_assignment.py`).

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
from abir.frontend.arrays import ArrayLowering
from abir.frontend.cfg import FunctionGraph
from abir.frontend.expressions import ExpressionLowering
from abir.frontend.item_assignment import ItemAssignmentLowering, OwnedHeaderLeaf, assignment_target_error
from abir.frontend.range_membership import integer_requirement
from abir.frontend.source import FunctionSource
from abir.frontend.state import (
    Arrival,
    LoweringState,
    ProgramServices,
    UnknownResultStructure,
    describe_structure,
)
from abir.frontend.values import (
    MaybeUndefined,
    Static,
    awaits_result_structure,
    drop_none,
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


@dataclass(frozen=True)
class ReturnSite:
    """A `return` lowered: the structure it returns and its line (every return must agree)."""

    treedef: optree.PyTreeSpec
    lineno: int


@dataclass
class LoweredFunction:
    """One specialization's function and what its lowering learnt."""

    func: FuncOp
    output: optree.PyTreeSpec | None
    """The structure every return has (None when no return was lowered)."""
    unknown: UnknownResultStructure | None
    """The first call whose callee's result structure was unknown (the body is incomplete)."""


class FunctionLowering:
    """Lowers the body of `source` for the given parameter structures into `functional.func`.

    It owns the function's `LoweringState` (graph, current block, environment) and the lowerers
    that share it: `statements` (control flow and assignment), `expressions`, `arrays` (array
    syntax on batched values) and `item_assignment` (in-place updates)."""

    def __init__(
        self,
        source: FunctionSource,
        services: ProgramServices,
        symbol: str,
        arg_treedefs: tuple[optree.PyTreeSpec, ...],
    ):
        n_inputs = sum(t.num_leaves for t in arg_treedefs)
        self.region = Region(Block(arg_types=[UnknownType()] * n_inputs))
        graph = FunctionGraph(self.region, source.location(source.tree))
        graph.locate(graph.entry)
        self.source = source
        self.symbol = symbol
        self.arg_treedefs = arg_treedefs
        self.state = LoweringState(source, graph, services, local_names(source.tree))
        self.arrays = ArrayLowering(self.state)
        self.expressions = ExpressionLowering(self.state, self.arrays)
        self.item_assignment = ItemAssignmentLowering(self.state, self.arrays, self.expressions)
        self.statements = StatementLowering(self.state, self.expressions, self.item_assignment)

    def lower(self) -> LoweredFunction:
        self._bind_parameters()
        self.statements.function_body(self.source.tree.body)
        returns = self.statements.returns
        output = returns[0].treedef if returns else None
        n_outputs = output.num_leaves if output is not None else 0
        graph = self.state.graph
        func = FuncOp(self.symbol, ([UnknownType()] * len(graph.entry.args), [UnknownType()] * n_outputs), self.region)
        unknown = self.statements.unknown or next(iter(self.expressions.abandoned), None)
        if unknown is None:
            graph.finalize()
        return LoweredFunction(func, output, unknown)

    def _bind_parameters(self) -> None:
        params = self.source.tree.args.posonlyargs + self.source.tree.args.args
        args = iter(self.state.graph.entry.args)
        for param, treedef in zip(params, self.arg_treedefs, strict=True):
            leaves = [next(args) for _ in range(treedef.num_leaves)]
            for leaf in leaves:
                leaf.name_hint = param.arg
                reason = f"the argument '{param.arg}' of '{self.source.name}', which the caller holds"
                self.state.aliases.foreign(leaf, reason)
            self.state.assign_name(param.arg, unflatten(treedef, list(leaves)), param)


class StatementLowering:
    """Statements: assignments, `return`, and the control flow of `if`, `while`, `for`,
    `break` and `continue` (joins and loop headers with block arguments), on the function's
    `state`; expressions go to `expressions`, item assignment and in-place updates to
    `item_assignment`."""

    def __init__(self, state: LoweringState, expressions: ExpressionLowering, item_assignment: ItemAssignmentLowering):
        self.state = state
        self.source = state.source
        self.expressions = expressions
        self.item_assignment = item_assignment
        self.loops: list[LoopFrame] = []
        self.returns: list[ReturnSite] = []
        self.unknown: UnknownResultStructure | None = None
        """The first call whose callee's result structure was unknown (the rest of its statements
        were abandoned)."""
        self._owned_at_header: dict[Block, tuple[list[OwnedHeaderLeaf], int]] = {}
        """Per loop header: its owned arguments, and how many in-place updates preceded the body."""
        self._hidden_names = 0

    def function_body(self, body: list[ast.stmt]) -> None:
        """The statements of a function body, and the `return None` Python adds at its end."""
        self.statements(body)
        if self.state.current is not None:
            last = body[-1]
            self._return(Static(None), ast.Return(lineno=getattr(last, "end_lineno", last.lineno), col_offset=0))

    # -- statements -------------------------------------------------------------------------

    def statements(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if self.state.current is None:
                return  # unreachable code after return, break or continue
            try:
                self.statement(stmt)
            except UnknownResultStructure as e:
                self.unknown = self.unknown or e
                self.state.current = None

    def statement(self, node: ast.stmt) -> None:
        kind = type(node).__name__
        if kind in UNSUPPORTED_STATEMENTS:
            message, suggestion = UNSUPPORTED_STATEMENTS[kind]
            raise self.source.error(node, message, suggestion)
        method: Callable[[Any], None] | None = getattr(self, f"stmt_{kind}", None)
        if method is None:
            raise self.source.error(node, f"the statement {kind} is not supported")
        enclosing = self.state.graph.location
        self.state.graph.location = self.source.location(node)
        self.state.graph.locate(self.state.block)
        try:
            method(node)
        finally:
            self.state.graph.location = enclosing

    def stmt_Pass(self, node: ast.Pass) -> None:
        pass

    def stmt_Expr(self, node: ast.Expr) -> None:
        self.expressions.expr(node.value)

    def stmt_Assign(self, node: ast.Assign) -> None:
        n_results = None
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple | ast.List):
            n_results = len(node.targets[0].elts)
        if isinstance(node.value, ast.Call):
            value = self.expressions.expr(node.value, n_results)
        else:
            value = self.expressions.expr(node.value)
        for target in node.targets:
            self.assign(target, value)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.assign(node.target, self.expressions.expr(node.value))

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Subscript):
            self.item_assignment.augmented_item_assignment(node, node.target)
            return
        if not isinstance(node.target, ast.Name):
            raise assignment_target_error(self.source, node.target)
        self.item_assignment.augmented_name_assignment(node, node.target)

    def assign(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.state.assign_name(target.id, value, target)
            return
        if isinstance(target, ast.Tuple | ast.List):
            for element, part in zip(target.elts, self._unpack(target, value), strict=True):
                self.assign(element, part)
            return
        if isinstance(target, ast.Subscript):
            self.item_assignment.assign_item(target, value)
            return
        raise assignment_target_error(self.source, target)

    def _unpack(self, target: ast.Tuple | ast.List, value: Any) -> list[Any]:
        for element in target.elts:
            if isinstance(element, ast.Starred):
                raise assignment_target_error(self.source, element)
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
        self._return(Static(None) if node.value is None else self.expressions.expr(node.value), node)

    def _return(self, value: Any, node: ast.Return) -> None:
        if self.returns and awaits_result_structure(value):  # a helper's result: lowered again once known
            value = unflatten(self.returns[0].treedef, [stand_in(value)] * self.returns[0].treedef.num_leaves)
        leaves, treedef = flatten(drop_none(value))
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
        self.state.graph.ret(self.state.block, [self.state.materialize(leaf, node) for leaf in leaves])
        self.state.current = None

    # -- branches ---------------------------------------------------------------------------

    def stmt_If(self, node: ast.If) -> None:
        condition = self.state.as_condition(self.expressions.leaf(node.test), node.test, "the condition of this `if`")
        if isinstance(condition, Static):
            self.statements(node.body if condition.value else node.orelse)
            return
        saved = dict(self.state.env)
        true_edge, false_edge = self.state.graph.branch(self.state.block, condition)
        arrivals: list[Arrival] = []
        for edge, body in ((true_edge, node.body), (false_edge, node.orelse)):
            if not body:
                arrivals.append((edge, dict(saved)))
                continue
            self.state.current = self.state.graph.new_block()
            edge.target = self.state.current
            self.state.env = dict(saved)
            self.statements(body)
            if self.state.current is not None:
                arrivals.append((self.state.current, self.state.env))
        self.state.merge(arrivals, node)

    # -- loops ------------------------------------------------------------------------------

    def stmt_Break(self, node: ast.Break) -> None:
        self._innermost_loop(node).breaks.append((self.state.block, self.state.env))
        self.state.current = None

    def stmt_Continue(self, node: ast.Continue) -> None:
        self._innermost_loop(node).continues.append((self.state.block, self.state.env))
        self.state.current = None

    def _innermost_loop(self, node: ast.stmt) -> LoopFrame:
        if not self.loops:
            raise self.source.error(node, f"`{type(node).__name__.lower()}` outside a loop")
        return self.loops[-1]

    def stmt_While(self, node: ast.While) -> None:
        header, carried = self._enter_loop(node, assigned_names(node.body, node.test))
        condition = self.state.as_condition(
            self.expressions.leaf(node.test), node.test, "the condition of this `while` loop"
        )
        self._loop(node, header, carried, condition)

    def stmt_For(self, node: ast.For) -> None:
        iterable = node.iter
        if isinstance(iterable, ast.Call) and self._is_range(iterable.func):
            self._range_loop(node, iterable)
            return
        self._unrolled_loop(node, self.expressions.expr(iterable))

    def _is_range(self, func: ast.expr) -> bool:
        state = self.state
        return isinstance(func, ast.Name) and func.id not in state.local_names and state.names.get(func.id) is range

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
        self.state.env[counter] = start
        header, carried = self._enter_loop(node, [counter, *assigned_names(node.body, node.target)])
        count = self.state.materialize(self.state.env[counter], node)
        if all(isinstance(b, Static) or self._known_integer(b) for b in bounds):
            self.state.integer_values.add(count)
            requirement = None
        else:
            requirement = self._integer_requirement(call)
        condition = self._range_condition(node, count, self.state.materialize(stop, node), step, requirement)

        def prologue() -> None:
            self.state.assign_name(node.target.id, count, node.target)

        def latch() -> None:
            self.state.env[counter] = self.state.prim("add", [count, self.state.materialize(step, node)])

        self._loop(node, header, carried, condition, prologue, latch)

    def _range_bound(self, node: ast.expr) -> Any:
        value = self.expressions.leaf(node)
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
        if value in self.state.integer_values:
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
            result = self.state.prim(name, operands)
            if requirement is not None:
                result.owner.attributes[INTEGER_OPERANDS_ATTR] = requirement  # type: ignore[union-attr]
            return result

        if isinstance(step, Static):
            if step.value == 0:
                raise self.source.error(node.iter, "range() step must not be zero")
            return compare("less" if step.value > 0 else "greater", [count, stop])
        zero = self.state.materialize(Static(0), node)
        upward = self.state.prim("logical_and", [compare("greater", [step, zero]), compare("less", [count, stop])])
        downward = self.state.prim("logical_and", [compare("less", [step, zero]), compare("greater", [count, stop])])
        return self.state.prim("logical_or", [upward, downward])

    def _hidden_name(self, kind: str) -> str:
        self._hidden_names += 1
        return f".{kind}{self._hidden_names}"

    def _enter_loop(self, node: ast.stmt, assigned: list[str]) -> tuple[Block, list[Carried]]:
        """Jump to a new loop header with one block argument per leaf of each carried variable
        (variables the loop assigns, or assigns items of)."""
        mutated = [n for n in item_assigned_names(node.body) if n in self.state.local_names and n not in assigned]
        assigned = [*assigned, *mutated]
        sharers = self.item_assignment.sharers_at_entry(node, assigned)
        owned: list[OwnedHeaderLeaf] = []
        entry = self.state.block
        header = self.state.graph.new_block()
        edge = self.state.graph.jump(entry)
        edge.target = header
        header_env = dict(self.state.env)
        carried: list[Carried] = []
        for name in assigned:
            value = self.state.env.get(name)
            if value is None or isinstance(value, MaybeUndefined):
                header_env[name] = MaybeUndefined(name, self.source.lineno(node))
                continue
            leaves, treedef = flatten(value)
            header_leaves: list[Any] = []
            entry_leaves = flatten(self.state.env[name])[0]  # as rebound by the copy checks of `sharers_at_entry`
            for position, leaf in enumerate(leaves):
                if isinstance(leaf, Static) and not is_materializable(leaf.value):
                    header_leaves.append(leaf)  # checked to stay the same object at the back edges
                    continue
                arg = self.state.graph.add_argument(header, name)
                edge.args.append(self.state.materialize(leaf, node, entry))
                header_leaves.append(arg)
                shared_with = sharers.get((name, position), [])
                kept = self.item_assignment.header_argument_roots(
                    node, arg, name, position, leaf, shared_with, assigned
                )
                if kept is not None:
                    owned.append(kept)
            header_env[name] = unflatten(treedef, header_leaves)
            carried.append(Carried(name, treedef, header_leaves, entry_leaves))
        self._owned_at_header[header] = (owned, len(self.state.aliases.updates))
        self.state.current, self.state.env = header, header_env
        self.item_assignment.follow_at_header(node, owned)  # the same array under other names
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
                normal_exit = (self.state.block, dict(self.state.env))
        else:
            true_edge, false_edge = self.state.graph.branch(self.state.block, condition)
            normal_exit = (false_edge, dict(self.state.env))
            self.state.current = self.state.graph.new_block()
            true_edge.target = self.state.current
        frame = LoopFrame()
        if self.state.current is not None and (normal_exit is None or normal_exit[0] is not self.state.current):
            self._loop_body(node, header, carried, frame, prologue, latch)
        if normal_exit is not None:
            exits += self._else_clause(node, normal_exit)
        self.state.merge(exits + frame.breaks, node)

    def _loop_body(self, node, header, carried, frame, prologue, latch) -> None:  # noqa: ANN001
        self.loops.append(frame)
        if prologue is not None:
            prologue()
        self.statements(node.body)
        self.loops.pop()
        back = frame.continues + ([(self.state.block, self.state.env)] if self.state.current is not None else [])
        if latch is not None:
            self.state.merge(back, node)
            if self.state.current is None:
                return
            latch()
            back = [(self.state.block, self.state.env)]
        self._close_loop(node, header, carried, back)

    def _else_clause(self, node: ast.While | ast.For, normal_exit: Arrival) -> list[Arrival]:
        if not node.orelse:
            return [normal_exit]
        origin, env = normal_exit
        if isinstance(origin, Block):
            self.state.current = origin
        else:
            self.state.current = self.state.graph.new_block()
            origin.target = self.state.current
        self.state.env = dict(env)
        self.statements(node.orelse)
        return [(self.state.block, self.state.env)] if self.state.current is not None else []

    def _close_loop(self, node: ast.stmt, header: Block, carried: list[Carried], back: list[Arrival]) -> None:
        """Back edges to the header, passing the carried variables' values at the end of an iteration."""
        owned, updates_before = self._owned_at_header.pop(header, ([], 0))
        for origin, env in back:
            if owned:
                assert isinstance(origin, Block), "a back edge leaves from the end of a block"
                self.item_assignment.check_back_edge(node, owned, origin, env, updates_before)
        incoming = {
            header_leaf: [entry_leaf]
            for variable in carried
            for header_leaf, entry_leaf in zip(variable.header_leaves, variable.entry_leaves, strict=True)
            if not isinstance(header_leaf, Static)
        }  # fmt: skip
        for origin, env in back:
            edge = self.state.edge_to(origin, header)
            for variable in carried:
                leaves = self._carried_leaves(node, variable, env.get(variable.name))
                for header_leaf, leaf in zip(variable.header_leaves, leaves, strict=True):
                    if isinstance(header_leaf, Static):
                        self._check_static_invariant(node, variable.name, header_leaf, leaf)
                    else:
                        edge.args.append(self.state.materialize(leaf, node, edge.source))
                        self.state.aliases.union_values([header_leaf, leaf])  # one array from iteration to iteration
                        incoming[header_leaf].append(leaf)
        for header_leaf, leaves in incoming.items():
            self.state.aliases.loop_joined(header_leaf, leaves)
        self.state.current = None

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
            open_end = [(self.state.block, self.state.env)] if self.state.current is not None else []
            self.state.merge(frame.continues + open_end, node)
            if self.state.current is None:
                break
        if self.state.current is not None and node.orelse:
            self.statements(node.orelse)
        open_end = [(self.state.block, self.state.env)] if self.state.current is not None else []
        self.state.merge(open_end + breaks, node)


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
