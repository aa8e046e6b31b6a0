"""`infer-types`: per-member dtype and shape of every functional value, as a fixed point over the
call graph.

Facts are types plus a `weak` flag that only constants marked `weak` (Python literals) carry
(`abir.passes.type_lattice`); prims are evaluated by `abir.passes.prim_evaluation`; this module
is the driver.
Each round re-infers every reachable function from the current parameter and result tables:
block arguments join their incoming values, builtin prims are evaluated by NumPy on zero-size
dummies (NEP 50: weak literals are passed as Python scalars), opaque prims by abstract evaluation
on NumPy zero dummies with a small batch dimension (callables written with jax.numpy or TF accept
NumPy arrays too), calls read the callee's
current results (unknown at first for recursive functions; base cases give the first facts).
An undecorated helper (`abir.opaque.Helper`) that fails on its dummies raises a `HelperError`
naming it; one returning a structure its call was not lowered for teaches the helper that
structure and raises `HelperStructureLearned` (a `Context` lowers the program again). The entry's
arguments may be weak (Python numbers passed to a batched call).
Results join over all returns. Rounds repeat until nothing changes; the last round reports
conflicts (a join of two different types at a block argument or a return) as errors.

Functions are polymorphic, as in Python: each function gets one specialization per tuple of
argument facts its call sites pass (`@scale` for the first signature seen, `@scale.t1`,
`@scale.t2`, ... for the others, weak arguments being their own kind), and every call is
redirected to the specialization of its argument facts; see `abir.passes.specialize_types` for
the policy (sticky call keys, recursion, the limit of 8 per function). User `type_inference`
callables apply to every specialization of their function; a declared result type wins over weak
values of its kind (`ans = 1` returned where int32 is declared is an int32, NEP 50).

Afterwards every weak constant takes the type its use wants (`x_i32 - 1` makes the `1` an i32),
duplicated when uses disagree, and loses its `weak` mark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects import cf
from xdsl.dialects.builtin import FloatAttr, FunctionType, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, BlockArgument, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from abir import numpy_calls
from abir.dialects import functional, mark_failing_op
from abir.dialects.functional import (
    INTEGER_OPERANDS_ATTR,
    LOCATION_ATTR,
    SCALAR_CONVERSION_ATTR,
    SELECT_ATTR,
    SOURCE_ATTR,
    TRUTH_VALUE_ATTR,
)
from abir.dialects.symbols import lookup_symbol
from abir.errors import TypeInferenceError
from abir.passes.analysis import ENTRY_ATTR, call_graph, functions_of, reachable
from abir.passes.prim_evaluation import (
    LocatedTypeInferenceError,
    PrimEvaluator,
    check_in_place,
    check_integer_operands,
    check_scalar_conversion,
    constant_value,
    located_error,
    located_message,
    truth_value_fact,
    user_result_facts,
)
from abir.passes.specialize_types import Specializations, base_names
from abir.passes.type_lattice import (
    Conflict,
    Conflicts,
    Fact,
    absorbs,
    describe_fact,
    fmt,
    fmt_signature,
    join_facts,
    scalar_of,
    weak_probe,
    widen_param,
)
from abir.types import ir_type, is_value_type, tensor_type_of

MAX_ROUNDS = 200


@dataclass(frozen=True)
class Edge:
    """An edge into a block: the operands it passes to the block's arguments, the `abir.loc` of
    the block it leaves (None if unknown), and whether it goes backward in the block order (the
    frontend's order: a loop's back edge)."""

    operands: Sequence[SSAValue]
    location: str | None
    backward: bool


def incoming_edges(func: functional.FuncOp) -> dict[Block, list[Edge]]:
    """For each block, the edges from its predecessors."""
    edges: dict[Block, list[Edge]] = {b: [] for b in func.body.blocks}
    order = {block: i for i, block in enumerate(func.body.blocks)}
    for block in func.body.blocks:
        term = block.last_op
        location = location_of(term) if term is not None else None
        if isinstance(term, cf.BranchOp):
            targets = [(term.successor, term.arguments)]
        elif isinstance(term, cf.ConditionalBranchOp):
            targets = [(term.then_block, term.then_arguments), (term.else_block, term.else_arguments)]
        else:
            continue
        for target, operands in targets:
            edges[target].append(Edge(operands, location, order[target] <= order[block]))
    return edges


def location_of(op: Operation) -> str | None:
    location = op.attributes.get(LOCATION_ATTR)
    return location.data if isinstance(location, StringAttr) else None


@dataclass
class LocalResult:
    """What one round learned about one function."""

    facts: dict[SSAValue, Fact]
    calls: list[tuple[functional.CallOp, list[Fact | None]]]
    returns: list[list[Fact | None]]
    return_locations: list[str | None] = field(default_factory=list)
    """The `abir.loc` of each return (None where unknown)."""


PrimMemo = dict[tuple[functional.PrimOp, tuple[Fact, ...]], list[Fact | None]]
"""The result facts of each prim op evaluated on each tuple of operand facts (a prim's facts
depend on nothing else), kept over the rounds of one inference: each round, and each pass over a
function's blocks, asks again for most of them."""


class FunctionInference:
    """Infers one function's values given its parameter facts and the callees' result facts;
    prims already evaluated on the same operand facts are answered from `memo`."""

    def __init__(
        self, func: functional.FuncOp, evaluator: PrimEvaluator, conflicts: Conflicts, memo: PrimMemo | None = None
    ):
        self.func = func
        self.name = func.sym_name.data
        self.evaluator = evaluator
        self.conflicts = conflicts
        self.memo: PrimMemo = {} if memo is None else memo
        self.edges = incoming_edges(func)

    def run(
        self, params: Sequence[Fact | None], results: Mapping[str, Sequence[Fact | None] | None]
    ) -> LocalResult:
        facts: dict[SSAValue, Fact] = {}
        for arg, fact in zip(self.func.entry_block.args, params, strict=True):
            if fact is not None:
                facts[arg] = fact
        for _ in range(MAX_ROUNDS):
            changed = False
            for block in self.func.body.blocks:
                changed |= self._block(block, facts, results)
            if not changed:
                break
        else:
            raise TypeInferenceError(f"type inference of @{self.name} does not converge")
        return self._summary(facts)

    def _set(self, facts: dict[SSAValue, Fact], value: SSAValue, fact: Fact | None) -> bool:
        if fact is None or facts.get(value) == fact:
            return False
        facts[value] = fact
        return True

    def _block(self, block: Block, facts: dict[SSAValue, Fact], results: Mapping[str, Any]) -> bool:
        changed = False
        if block is not self.func.entry_block:
            edges = self.edges[block]
            for i, arg in enumerate(block.args):
                joined = self.conflicts.join_all(
                    [facts.get(edge.operands[i]) for edge in edges], f"in @{self.name}, block argument #{i}",
                    self.name, edges, partial(argument_conflict, self.name, arg),
                )  # fmt: skip
                changed |= self._set(facts, arg, joined)
        for op in block.ops:
            for value, fact in zip(op.results, self._op(op, facts, results), strict=True):
                changed |= self._set(facts, value, fact)
        return changed

    def _op(
        self, op: Operation, facts: Mapping[SSAValue, Fact], results: Mapping[str, Any]
    ) -> list[Fact | None]:
        if isinstance(op, functional.ConstantOp):
            return [Fact(op.value.get_type(), op.weak is not None)]  # type: ignore[attr-defined]
        if isinstance(op, functional.CallOp):
            known = results.get(op.callee.string_value())
            return list(known) if known is not None else [None] * len(op.res)
        if isinstance(op, functional.PrimOp):
            operands = tuple([facts.get(v) for v in op.arguments])
            if None in operands:
                return [None] * len(op.res)
            key = (op, operands)
            known = self.memo.get(key)
            if known is None:
                known = self.memo[key] = self._prim(op, list(operands))  # type: ignore[arg-type]
            return list(known)
        if op.results:
            names = ", ".join(f"%{r.name_hint}" for r in op.results if r.name_hint)
            error = TypeInferenceError(
                f"@{self.name}: infer-types cannot type {op.name}{f' ({names})' if names else ''}, not an op of the "
                'functional dialect; compute with functional.prim (such as functional.prim "add"), '
                "functional.constant and functional.call"
            )
            mark_failing_op(error, op)
            raise error
        return []

    def _prim(self, op: functional.PrimOp, operands: list[Fact]) -> list[Fact | None]:
        if TRUTH_VALUE_ATTR in op.attributes:
            return [truth_value_fact(op, operands[0], self.name)]
        if (requirement := op.attributes.get(INTEGER_OPERANDS_ATTR)) is not None:
            check_integer_operands(requirement, operands)
        check_in_place(op, operands)
        if SELECT_ATTR in op.attributes:
            check_select_arms(op, operands, self.name)
        if SCALAR_CONVERSION_ATTR in op.attributes:
            check_scalar_conversion(op, operands[0], self.name)
        try:
            if op.is_array_prim:
                results = [self.evaluator.array(op, [f.strong() for f in operands])]
            elif not op.is_builtin:
                results = list(self.evaluator.opaque(op, [f.strong() for f in operands]))
            else:
                constants = [constant_value(v) for v in op.arguments]
                results = [self.evaluator.builtin(op, operands, constants)]
            check_in_place(op, operands, results)
            return results
        except LocatedTypeInferenceError:
            raise
        except TypeInferenceError as exc:
            error = TypeInferenceError(f"in @{self.name}: {exc}")
            mark_failing_op(error, op)
            raise error from exc

    def _summary(self, facts: dict[SSAValue, Fact]) -> LocalResult:
        calls: list[tuple[functional.CallOp, list[Fact | None]]] = []
        returns: list[list[Fact | None]] = []
        locations: list[str | None] = []
        for op in self.func.walk():
            if isinstance(op, functional.CallOp):
                calls.append((op, [facts.get(v) for v in op.arguments]))
            elif isinstance(op, functional.ReturnOp):
                returns.append([facts.get(v) for v in op.arguments])
                locations.append(location_of(op))
        return LocalResult(facts, calls, returns, locations)


@dataclass
class ModuleInference:
    """The fixed point over the call graph, specializing functions per argument facts.

    Each round infers every function reachable from the entry (parameters: the facts of the
    specialization's signature; callee results: the current result table), then points every
    call whose argument facts are all known at the specialization of those facts (cloning the
    function for a new signature, see `abir.passes.specialize_types`), then joins each function's
    returns into the result table. Rounds repeat until no call moves and no result changes."""

    module: ModuleOp
    entry: str
    evaluator: PrimEvaluator
    user: Mapping[str, Callable[..., Any]]
    specs: Specializations = field(init=False)
    memo: PrimMemo = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.specs = Specializations(self.module, join_facts, widen_param, fmt_signature)

    def run(
        self, arg_types: Sequence[Attribute], weak_args: Sequence[bool] | None = None
    ) -> tuple[dict[str, LocalResult], dict[str, Any]]:
        funcs = functions_of(self.module)
        if self.entry not in funcs:
            raise TypeInferenceError(f"no function @{self.entry} in the module")
        weak_args = weak_args if weak_args is not None else [False] * len(arg_types)
        entry_facts = tuple(Fact(t, weak) for t, weak in zip(arg_types, weak_args, strict=True))
        n_params = len(funcs[self.entry].entry_block.args)
        if len(entry_facts) != n_params:
            raise TypeInferenceError(
                f"@{self.entry} takes {n_params} argument(s), got {len(entry_facts)} type(s)"
            )
        self.specs.assign(self.entry, entry_facts)
        results: dict[str, list[Fact | None] | None] = {}
        for _ in range(MAX_ROUNDS):
            funcs = functions_of(self.module)
            graph = call_graph(self.module)
            live = reachable(graph, self.entry)
            order = [n for n in funcs if n in live]
            conflicts = Conflicts()
            locals_ = {
                n: FunctionInference(funcs[n], self.evaluator, conflicts, self.memo).run(self._params(funcs[n]), results)
                for n in order
            }
            calls = [(n, op, facts) for n in order for op, facts in locals_[n].calls]
            moved = self.specs.redirect(calls, graph)
            new_results = self._results(funcs, order, locals_, conflicts)
            if not moved and new_results == results:
                if conflicts.found:
                    raise self._conflict_error(conflicts.found[0])
                self._check_user(order, locals_)
                return locals_, new_results
            results = new_results
        raise TypeInferenceError(f"type inference from @{self.entry} does not converge")

    def _conflict_error(self, conflict: Conflict) -> TypeInferenceError:
        note = self._recursion_note(conflict.function)
        if conflict.located:
            return LocatedTypeInferenceError(conflict.message + (f"\n{note}" if note else ""))
        return TypeInferenceError(conflict.message + (f". {note}" if note else ""))

    def _recursion_note(self, function: str) -> str:
        """For a conflict in a function whose recursion calls another specialization of itself: the
        types change along the recursion (e.g. `x / 2` makes a float of an int), say where."""
        root = self.specs.root_of(function)
        funcs = functions_of(self.module)
        for name, func in funcs.items():
            if self.specs.root_of(name) != root:
                continue
            for op in func.walk():
                callee = op.callee.string_value() if isinstance(op, functional.CallOp) else None
                if callee is None or callee == name or self.specs.root_of(callee) != root:
                    continue
                return (
                    f"The argument types of @{root} change along its recursion: @{name} receives "
                    f"{fmt_signature(self.specs.params(name) or ())} but calls @{callee} with "
                    f"{fmt_signature(self.specs.params(callee) or ())}, and the specializations must still "
                    "produce one type per value; make the recursive call pass the types the function receives"
                )
        return ""

    def _params(self, func: functional.FuncOp) -> list[Fact | None]:
        known = self.specs.params(func.sym_name.data)
        return list(known) if known is not None else [None] * len(func.entry_block.args)

    def user_callable(self, name: str) -> Callable[..., Any] | None:
        """The user's `type_inference` of specialization `name`: its own, its function's (a symbol
        `f.t1` is function `f`), or that of the function the frontend specialized (`f.s1` -> `f`)."""
        for candidate in [name, *base_names(self.specs.root_of(name))]:
            if candidate in self.user:
                return self.user[candidate]
        return None

    def _results(self, funcs, order, locals_, conflicts):  # noqa: ANN001, ANN202
        results: dict[str, list[Fact | None] | None] = {}
        for name in order:
            n_out = len(funcs[name].function_type.outputs)
            local = locals_[name]
            joined = [
                conflicts.join_all(
                    [r[i] for r in local.returns], f"in @{name}, result #{i}", name, local.return_locations,
                    partial(result_conflict, name, i if n_out > 1 else None),
                )
                for i in range(n_out)
            ]  # fmt: skip
            fn_params = self.specs.params(name)
            user = self.user_callable(name)
            if user is not None and fn_params and all(p is not None for p in fn_params):
                joined = self._declared_if_counts_agree(name, user, fn_params, n_out)
            results[name] = joined if all(j is not None for j in joined) else None
        return results

    def _declared_if_counts_agree(
        self, name: str, user: Callable[..., Any], params: Sequence[Fact], n_out: int
    ) -> list[Fact | None]:
        """The declared result facts, or unknown ones while their count differs from the
        function's results: a primitive in its body may yet return a structure the frontend
        lowers again (`HelperStructureLearned`) once the body is inferred with these parameters;
        `_check_user` reports a count that still differs at the fixed point."""
        declared = user_result_facts(name, user, params)
        return list(declared) if len(declared) == n_out else [None] * n_out

    def _declared(self, name: str, user: Callable[..., Any], params: Sequence[Fact], n_out: int) -> list[Fact | None]:
        """The result facts a user's `type_inference` declares (strong: a declared type wins over
        weak literals, which take it as the reference casts them)."""
        declared = user_result_facts(name, user, params)
        if len(declared) != n_out:
            raise TypeInferenceError(
                f"the type_inference of @{name} gives {len(declared)} result type(s), but the function "
                f"returns {n_out} array(s); give one abir.TensorType per returned array"
            )
        return list(declared)

    def _check_user(self, order, locals_) -> None:  # noqa: ANN001
        for name in order:
            user = self.user_callable(name)
            if user is None:
                continue
            n_out = len(functions_of(self.module)[name].function_type.outputs)
            declared = self._declared(name, user, self.specs.params(name) or (), n_out)
            conflicts = Conflicts()
            for i, want in enumerate(declared):
                found = conflicts.join_all([r[i] for r in locals_[name].returns], f"@{name}")
                if found is not None and not _declared_type_holds(want, found):
                    weak = " from Python numbers (which take a declared type of their own kind only)"
                    raise TypeInferenceError(
                        f"the type_inference of @{name} says result #{i} is {fmt(want.type)}, but its "
                        f"returns produce {fmt(found.type)}{weak if found.weak else ''}"
                    )


def argument_conflict(function: str, arg: BlockArgument, a: Fact, a_edge: Edge, b: Fact, b_edge: Edge) -> str | None:
    """The located error text for values of types `a` and `b` meeting at block argument `arg` (a
    variable where the paths of an `if` or a loop meet) along `a_edge` and `b_edge`; None when a
    location is unknown."""
    header = location_of(arg.block.last_op) if arg.block.last_op is not None else None
    if a_edge.location is None or b_edge.location is None or header is None:
        return None
    loop = any(edge.backward for edge in (a_edge, b_edge))

    def path(fact: Fact, edge: Edge) -> str:
        if not loop:
            return f"{describe_fact(fact)} on the path from line {_line(edge.location or '?')}"
        if edge.backward:
            return f"{describe_fact(fact)} at the end of an iteration (line {_line(edge.location or '?')})"
        return f"{describe_fact(fact)} when the loop at line {_line(header)} starts"

    name = arg.name_hint
    what = f"variable '{name}'" if name else "the value of this conditional expression (`... if ... else ...`, `and`, `or`)"
    message = (
        f"{what} is {path(a, a_edge)} and {path(b, b_edge)}; where paths meet, abir gives a value one type for "
        f"every member (as NumPy stacking the members' values would need). Instead: "
        f"{_one_type_fix(f'{name!r}' if name else 'it', a, b)}"
    )
    return str(located_error(header if loop else b_edge.location, function, message))


def check_select_arms(op: functional.PrimOp, operands: Sequence[Fact], function: str) -> None:
    """The `where` of a conditional expression, `and` or `or` (`SELECT_ATTR`) gives each member
    one of its two operands itself: they must have one shape (a `where` would broadcast them)."""
    a, b = operands[1], operands[2]
    if a.tensor.shape == b.tensor.shape:
        return
    construct = op.attributes[SELECT_ATTR]
    construct = construct.data if isinstance(construct, StringAttr) else str(construct)
    source = op.attributes.get(SOURCE_ATTR)
    what = f"`{source.data}`" if isinstance(source, StringAttr) else "this value"
    message = (
        f"{what} ({construct}) gives each member one of two values itself: {describe_fact(a)} or "
        f"{describe_fact(b)}; abir gives a value one type for every member (as NumPy stacking the members' "
        f"values would need). Instead: {_one_type_fix('both values', a, b)}"
    )
    raise LocatedTypeInferenceError(located_message(op, function, message))


def result_conflict(
    function: str, leaf: int | None, a: Fact, a_location: str | None, b: Fact, b_location: str | None
) -> str | None:
    """The located error text for two returns of `function` giving result `leaf` (None: the only
    one) types `a` and `b`; None when a location is unknown."""
    if a_location is None or b_location is None:
        return None
    what = "returns" if leaf is None else f"returns, as leaf #{leaf} of its result structure,"
    message = (
        f"function '{function.split('.', 1)[0]}' {what} {describe_fact(a)} at line {_line(a_location)} and "
        f"{describe_fact(b)} at line {_line(b_location)}; abir gives a result one type for every member (as NumPy "
        f"stacking the members' results would need). Instead: {_one_type_fix('the returned value', a, b)}"
    )
    return str(located_error(b_location, function, message))


def _line(location: str) -> str:
    return location.rpartition(":")[2]


def _one_type_fix(what: str, a: Fact, b: Fact) -> str:
    """How to give `what` one type where `a` and `b` meet."""
    if a.tensor.shape != b.tensor.shape:
        shapes = [f.tensor.shape for f in (a, b) if f.tensor.shape]
        zeros = shapes[0][0] if len(shapes) == 1 and len(shapes[0]) == 1 else tuple(shapes[0]) if shapes else ()
        start = f", e.g. start with `np.zeros({zeros})` instead of a number" if len(shapes) == 1 else ""
        return f"give {what} the same shape on every path{start}"
    try:
        target = np.result_type(a.tensor.dtype, b.tensor.dtype).name
    except TypeError:
        return f"give {what} one dtype on every path"
    python = {"float64": "float", "int64": "int", "complex128": "complex"}.get(target)
    if a.tensor.shape:
        ways = [f"`(...).astype(np.{target})`"]
    else:
        ways = [f"`{python}(...)`"] if python is not None else []
        ways.append(f"`np.{target}(...)`")
    return f"give {what} one dtype on every path: convert it where it gets the other one, e.g. {' or '.join(ways)}"


def _declared_type_holds(want: Fact, found: Fact) -> bool:
    """A declared result type holds for the returned values: the same type, or weak values (Python
    literals and numbers computed from them) that take it without changing kind (NEP 50)."""
    if found.type == want.type:
        return True
    return found.weak and absorbs(want, found)


# ---------------------------------------------------------------------------------------------
# Applying the facts to the IR
# ---------------------------------------------------------------------------------------------


def infer_types(
    module: ModuleOp,
    entry: str,
    arg_types: Sequence[Attribute] | None = None,
    *,
    user_type_inference: Mapping[str, Callable[..., Any]] | None = None,
    weak_args: Sequence[bool] | None = None,
) -> None:
    """Type `module` in place from `entry` (its declared parameter types if `arg_types` is None);
    clone functions called with several argument type signatures (one specialization each, calls
    redirected); drop functions not reachable from `entry`. `weak_args` marks the entry's
    arguments that are Python numbers: weak like literals (NEP 50)."""
    funcs = functions_of(module)
    if entry not in funcs:
        raise TypeInferenceError(f"no function @{entry} in the module")
    if arg_types is None:
        arg_types = list(funcs[entry].function_type.inputs.data)
        if not all(is_value_type(t) for t in arg_types):
            raise TypeInferenceError(
                f"@{entry} has untyped parameters {list(map(str, arg_types))}; give their types, e.g. "
                f"-p 'infer-types{{entry={entry} arg-types={example_arg_types(arg_types)}}}' (one type per "
                "parameter, separated by commas)"
            )
    sources = {op.sym_name.data: op.source.data for op in module.ops if isinstance(op, functional.OpaqueOp)}
    inference = ModuleInference(
        module, entry, PrimEvaluator(sources), dict(user_type_inference or {})
    )
    locals_, results = inference.run(list(arg_types), weak_args)
    funcs = functions_of(module)
    for name, func in funcs.items():
        if name not in locals_:
            Rewriter.erase_op(func, safe_erase=False)
    weak: dict[str, list[tuple[Operation | Block, int]]] = {}
    for name, local in locals_.items():
        weak[name] = weak_positions(local)
        apply_function(funcs[name], local)
    for name in locals_:
        set_function_type(funcs[name], results.get(name))
    for op in module.walk():
        if isinstance(op, functional.CallOp):
            retype_call(op, funcs[op.callee.string_value()])
    for name in locals_:
        weak_values = [value_at(owner, index) for owner, index in weak[name]]
        convert_weak_values(weak_values)
        concretize_weak_constants(funcs[name], set(weak_values))
    for name in locals_:
        cast_at_joins(funcs[name])
        reduce_truth_values(funcs[name])
    inference.specs.finalize(module)
    drop_locations(module)
    module.attributes[ENTRY_ATTR] = StringAttr(entry)


def drop_locations(module: ModuleOp) -> None:
    """Remove the frontend's `abir.loc`/`abir.source` once types are known (they only located
    type errors), so that equal array prims from different lines are equal ops for CSE."""
    for op in module.walk():
        if isinstance(op, functional.PrimOp):
            remember_numpy_call_site(op)
            op.attributes.pop(LOCATION_ATTR, None)
            op.attributes.pop(SOURCE_ATTR, None)


def remember_numpy_call_site(op: functional.PrimOp) -> None:
    """Keep where a `numpy` prim was written, for its run-time errors (`abir.numpy_calls`)."""
    location, source = op.attributes.get(LOCATION_ATTR), op.attributes.get(SOURCE_ATTR)
    if op.is_array_prim and op.prim_name == "numpy" and isinstance(location, StringAttr):
        params = op.param_values
        text = source.data if isinstance(source, StringAttr) else ""
        numpy_calls.remember_call_site(params["function"], params["arguments"], params.get("output", 0), location.data, text)


def reduce_truth_values(func: functional.FuncOp) -> None:
    """The truth values the frontend marked (`TRUTH_VALUE_ATTR`), checked by inference, become
    plain `astype`s to i1; an operand with per-member axes (of one element, or none where NumPy
    allows it) is first reduced with `any`, which gives NumPy's truth value of such an array."""
    for op in list(func.walk()):
        if not isinstance(op, functional.PrimOp) or op.attributes.pop(TRUTH_VALUE_ATTR, None) is None:
            continue
        operand = op.arguments[0]
        if tensor_type_of(operand.type).shape:
            reduced = functional.PrimOp("any", [operand], [op.res[0].type])
            Rewriter.insert_op(reduced, InsertPoint.before(op))
            op.operands[0] = reduced.res[0]


def weak_positions(local: LocalResult) -> list[tuple[Operation | Block, int]]:
    """Where the weak values that are not literals live (block arguments, prim and call results):
    positions, because typing the IR replaces the value objects."""
    return [(v.owner, v.index) for v, f in local.facts.items() if f.weak and not is_weak(v)]  # type: ignore[attr-defined]


def value_at(owner: Operation | Block, index: int) -> SSAValue:
    return owner.args[index] if isinstance(owner, Block) else owner.results[index]


def convert_weak_values(weak_values: Sequence[SSAValue]) -> None:
    """A weak value (a Python number computed from literals only, e.g. a counter started at 0)
    keeps its default type (i64, f64, i1); where it meets a typed value, convert it as NEP 50
    would: `x_i32 + count` computes in int32, so `count` is cast to i32 at that use."""
    weak_set = set(weak_values)
    for value in weak_values:
        for use in list(value.uses):
            want = wanted_type(use.operation, use.index, value, weak_set)
            if want == value.type:
                continue
            cast = functional.PrimOp("astype", [value], [want])
            Rewriter.insert_op(cast, InsertPoint.before(use.operation))
            use.operation.operands[use.index] = cast.res[0]


def apply_function(func: functional.FuncOp, local: LocalResult) -> None:
    name = func.sym_name.data
    remove_unreachable_blocks(func)
    for block in func.body.blocks:
        for value in [*block.args, *(r for op in block.ops for r in op.results)]:
            fact = local.facts.get(value)
            if fact is None:
                what = (
                    f"the result of {value.owner.name}"
                    if not isinstance(value.owner, Block)
                    else "a block argument"
                )
                raise TypeInferenceError(
                    f"cannot determine the type of {what} (%{value.name_hint or '?'}) in @{name}: it depends only on "
                    "calls that never return (a recursion without a base case?)"
                )
            if value.type != fact.type and not isinstance(value.owner, functional.CallOp):
                Rewriter.replace_value_with_new_type(value, fact.type)


def remove_unreachable_blocks(func: functional.FuncOp) -> None:
    entry = func.entry_block
    seen = {entry}
    todo = [entry]
    while todo:
        term = todo.pop().last_op
        for succ in term.successors if term is not None else ():
            if succ not in seen:
                seen.add(succ)
                todo.append(succ)
    dead = [b for b in func.body.blocks if b not in seen]
    for block in dead:  # first all: dead blocks may use each other's values and branch to live ones
        for op in block.ops:
            op.drop_all_references()
    for block in dead:
        func.body.detach_block(block)


def set_function_type(func: functional.FuncOp, results: Sequence[Fact | None] | None) -> None:
    if results is None:
        raise TypeInferenceError(
            f"the result types of @{func.sym_name.data} cannot be determined: it never returns, or only "
            "through calls that never return (a recursion without a base case?)"
        )
    outputs = [f.type for f in results if f is not None]
    func.function_type = FunctionType.from_lists(func.entry_block.arg_types, outputs)


def cast_at_joins(func: functional.FuncOp) -> None:
    """Convert the values that flow into a join of another type (a bool into a number's block
    argument or result, see `join_values`) with `astype` just before the jump or return."""
    results = list(func.function_type.outputs.data)
    for block in func.body.blocks:
        term = block.last_op
        if isinstance(term, cf.BranchOp):
            targets = list(term.successor.arg_types)
            positions = range(len(term.operands))
        elif isinstance(term, cf.ConditionalBranchOp):
            targets = [*term.then_block.arg_types, *term.else_block.arg_types]
            positions = range(1, len(term.operands))
        elif isinstance(term, functional.ReturnOp):
            targets, positions = results, range(len(term.operands))
        else:
            continue
        for position, want in zip(positions, targets, strict=True):
            value = term.operands[position]
            if value.type != want:
                cast = functional.PrimOp("astype", [value], [want])
                Rewriter.insert_op(cast, InsertPoint.before(term))
                term.operands[position] = cast.res[0]


def retype_call(call: functional.CallOp, callee: functional.FuncOp) -> None:
    for result, want in zip(call.res, callee.function_type.outputs.data, strict=True):
        if result.type != want:
            Rewriter.replace_value_with_new_type(result, want)


def wanted_type(use_op: Operation, index: int, constant: SSAValue, weak_values: set[SSAValue]) -> Attribute:
    """The type a weak constant or value must have at one use."""
    fact = Fact(constant.type, True)
    if isinstance(use_op, functional.PrimOp) and use_op.is_builtin:
        strong = [v.type for v in use_op.arguments if not is_weak(v) and v not in weak_values]
        dtypes = [tensor_type_of(t).dtype for t in strong]
        if not dtypes:
            return constant.type
        return ir_type(np.result_type(*dtypes, weak_probe(fact)), fact.tensor.shape)
    target = destination_type(use_op, index)
    return target if target is not None else constant.type


def is_weak(value: SSAValue) -> bool:
    return isinstance(value.owner, functional.ConstantOp) and value.owner.weak is not None


def destination_type(op: Operation, index: int) -> Attribute | None:
    """The type of the block argument / callee parameter / result an operand flows into."""
    if isinstance(op, cf.BranchOp):
        return op.successor.args[index].type
    if isinstance(op, cf.ConditionalBranchOp):
        n_then = len(op.then_arguments)
        if index == 0:
            return None
        if index - 1 < n_then:
            return op.then_block.args[index - 1].type
        return op.else_block.args[index - 1 - n_then].type
    if isinstance(op, functional.ReturnOp):
        func = op.parent_op()
        assert isinstance(func, functional.FuncOp)
        return func.function_type.outputs.data[index]
    if isinstance(op, functional.CallOp):
        callee = lookup_symbol(op, op.callee)
        assert isinstance(callee, functional.FuncOp)
        return callee.function_type.inputs.data[index]
    return None


def concretize_weak_constants(func: functional.FuncOp, weak_values: set[SSAValue]) -> None:
    """Give every weak constant the type each use wants, duplicating it when uses disagree."""
    for op in list(func.walk()):
        if not isinstance(op, functional.ConstantOp) or op.weak is None:
            continue
        by_type: dict[Attribute, list[tuple[Operation, int]]] = {}
        for use in list(op.res.uses):
            by_type.setdefault(wanted_type(use.operation, use.index, op.res, weak_values), []).append(
                (use.operation, use.index)
            )
        if not by_type:
            by_type[op.res.type] = []
        for want, uses in by_type.items():
            new = functional.ConstantOp(convert_constant(op.value, want, func.sym_name.data), weak=False)
            new.res.name_hint = op.res.name_hint
            Rewriter.insert_op(new, InsertPoint.before(op))
            for user, index in uses:
                user.operands[index] = new.res
        Rewriter.erase_op(op, safe_erase=False)


def convert_constant(value: Attribute, want: Attribute, where: str) -> Attribute:
    scalar = scalar_of(value)
    if scalar is None:
        if value.get_type() != want:  # type: ignore[attr-defined]
            raise TypeInferenceError(
                f"in @{where}: a tensor literal of type {value.get_type()} is used as {want}"
            )  # type: ignore[attr-defined]
        return value
    dtype = tensor_type_of(want).dtype
    try:
        np.array(scalar, dtype=dtype)  # raises OverflowError for out-of-range literals
    except OverflowError as exc:
        raise TypeInferenceError(f"in @{where}: the literal {scalar!r} does not fit a {want}") from exc
    if dtype.kind == "f":
        return FloatAttr(float(scalar), want)
    if dtype.kind == "c":  # a real literal: the complex operation promotes it as NumPy does
        if isinstance(scalar, complex) and scalar.imag:
            raise TypeInferenceError(f"in @{where}: the complex literal {scalar!r} is not supported; build it from reals")
        return FloatAttr(float(np.real(scalar)), want.element_type)  # type: ignore[attr-defined]
    return IntegerAttr(int(scalar), want)


@dataclass(frozen=True)
class InferTypesPass(ModulePass):
    """Infer per-member types from `entry` (default: the module's `abir.entry` attribute, else its
    only function, its only function with typed parameters, or the only function no other function
    calls; an error names the candidates when several remain); records the entry as `abir.entry`. Options:
    entry; arg-types, the entry's parameter types when the IR leaves them unknown, one per
    parameter, separated by commas (quote types with punctuation:
    `infer-types{entry=f arg-types=i64,"tensor<3xf64>"}`)."""

    name = "infer-types"

    entry: str | None = None
    arg_types: tuple[str, ...] = ()

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        infer_types(op, self.entry or default_entry(op), parse_arg_types(ctx, self.arg_types))


def example_arg_types(declared: Sequence[Attribute]) -> str:
    """An `arg-types` value for parameters of the `declared` types: each typed one as declared
    (in double quotes when it has punctuation), i64 for each untyped one."""
    texts = [str(t) if is_value_type(t) else "i64" for t in declared]
    return ",".join(text if text.isalnum() else f'"{text}"' for text in texts)


def parse_arg_types(ctx: Context, texts: tuple[str, ...] | str) -> list[Attribute] | None:
    """Builtin types written in a pass option (None when the option is empty)."""
    if isinstance(texts, str):
        texts = (texts,)
    if not texts:
        return None
    from xdsl.parser import Parser

    types = []
    for text in texts:  # a quoted value may hold several types: `arg-types="i64,tensor<3xf64>"`
        parser = Parser(ctx, text, "arg-types")
        for attr in parser.parse_comma_separated_list(parser.Delimiter.NONE, parser.parse_type):
            if not is_value_type(attr):
                raise TypeInferenceError(
                    f"arg-types: {attr} is not a per-member type (i1, i64, f32, tensor<3xf64>, ...)"
                )
            types.append(attr)
        if parser.pos < len(text.rstrip()):
            raise TypeInferenceError(f"arg-types: {text!r} has text after its types: separate types with ','")
    return types


def default_entry(module: ModuleOp) -> str:
    """The module's `abir.entry` attribute, else its only function, else the only function whose
    parameters are all typed, else the only one of those (or, when none is typed, of all the
    functions) that no other function calls; a TypeInferenceError naming the candidates when
    that leaves several."""
    if isinstance(attr := module.attributes.get(ENTRY_ATTR), StringAttr):
        return attr.data
    functions = functions_of(module)
    if not functions:
        raise TypeInferenceError("the module has no functional.func to infer the types of")
    if len(functions) == 1:
        return next(iter(functions))
    typed = [name for name, func in functions.items() if all(is_value_type(t) for t in func.function_type.inputs.data)]
    if len(typed) == 1:
        return typed[0]
    candidates = typed or list(functions)
    graph = call_graph(module)
    roots = [name for name in candidates if not any(name in graph[caller] for caller in graph if caller != name)]
    if len(roots) == 1:
        return roots[0]
    names = roots or candidates
    raise TypeInferenceError(
        f"cannot choose the entry function among {', '.join('@' + n for n in names)} (the module has no "
        f"`{ENTRY_ATTR}` attribute); name it with the pass option entry, e.g. infer-types{{entry={names[0]}}}"
    )
