"""Lowering of Python expressions to functional-dialect operations.

Operators on batched values become builtin prims (`add`, `less`, `logical_and`, `where`, ...);
expressions over compile-time values are evaluated at compile time; calls become batched calls
(functions of the same Context, by name), structure constructors (namedtuple classes), builtin
prims (NumPy functions with an Array-API name) or opaque prims (any other callable).
Conditional expressions and `and`/`or` evaluate an operand only for the members Python
evaluates it for, unless evaluating it for every member is cheap and cannot fail (`eager_safe`):
then both operands are computed and `where` selects. Cheap and safe are names, literals,
attribute reads, tuples, indexing, arithmetic, comparison and boolean operators, and nested
conditional expressions of those: a row never raises on them (the backends make integer
division by zero give 0, per-member indices are clipped into range), and what a member did not
choose is discarded. (Type inference runs every operation once on placeholder values of the
member's types whichever way the program branches, so a compile-time index out of range for the
member's shape is an error either way.) Everything else branches, so that only the chosen
operand runs: calls (batched functions, NumPy functions, helpers, array methods: a recursive
call must not run on every path, a helper may do anything), `@` (not cheap) and assignment
expressions (`:=` binds a name). An operand calling a function whose result structure is still
unknown (a recursion being lowered) is left out of the join for that round: the other operand
gives the structure, as a base case would.
"""

from __future__ import annotations

import ast
import inspect
import math
import operator
import random
import types
from typing import Any

import numpy as np
from xdsl.dialects.builtin import StringAttr, SymbolRefAttr
from xdsl.ir import SSAValue

from abir import prims
from abir.dialects.functional import LOCATION_ATTR, SELECT_ATTR, SOURCE_ATTR, CallOp, UnknownType
from abir.dry_run import truthy
from abir.errors import UnsupportedSyntaxError
from abir.frontend.arrays import FIXED_SIZE_SUGGESTION, LIST_METHODS, ArrayLowering, LikeDtype
from abir.frontend.range_membership import range_arguments, range_membership
from abir.frontend.source import FunctionSource
from abir.frontend.state import LoweringState, UnknownResultStructure, describe_structure
from abir.frontend.values import (
    MaybeUndefined,
    Static,
    awaits_result_structure,
    describe_object,
    drop_none,
    flatten,
    is_materializable,
    stand_in,
    unflatten,
    unwrap_statics,
)
from abir.opaque import (
    CallSite,
    Helper,
    UncompilableHelperError,
    helper_result_structure,
    is_user_function,
    library_package,
    qualified_name,
)

BINARY_PRIMS: dict[type[ast.operator], str] = {
    ast.Add: "add",
    ast.Sub: "subtract",
    ast.Mult: "multiply",
    ast.Div: "divide",
    ast.FloorDiv: "floor_divide",
    ast.Mod: "remainder",
    ast.Pow: "pow",
    ast.LShift: "bitwise_left_shift",
    ast.RShift: "bitwise_right_shift",
    ast.BitAnd: "bitwise_and",
    ast.BitOr: "bitwise_or",
    ast.BitXor: "bitwise_xor",
}
BINARY_OPERATORS: dict[type[ast.operator], Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.MatMult: operator.matmul,
}
COMPARE_PRIMS: dict[type[ast.cmpop], str] = {
    ast.Lt: "less",
    ast.LtE: "less_equal",
    ast.Gt: "greater",
    ast.GtE: "greater_equal",
    ast.Eq: "equal",
    ast.NotEq: "not_equal",
}
COMPARE_OPERATORS: dict[type[ast.cmpop], Any] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
MAX_MEMBERSHIP_ELEMENTS = 64
"""The most elements `x in container` compares a per-member `x` with (one prim each)."""
UNARY_PRIMS: dict[type[ast.unaryop], str] = {
    ast.USub: "negative",
    ast.UAdd: "positive",
    ast.Invert: "bitwise_invert",
}
UNARY_OPERATORS: dict[type[ast.unaryop], Any] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}
PYTHON_BUILTIN_PRIMS: dict[Any, tuple[str, int]] = {abs: ("abs", 1), max: ("maximum", 2), min: ("minimum", 2)}
RESULT = ".value"
"""Hidden variable carrying an expression's value across a join."""


def _numpy_prim(fn: Any, n_args: int) -> str | None:
    """The builtin prim a NumPy or math function is, if any."""
    for module in (np, math):
        name = getattr(fn, "__name__", None)
        if name is None or getattr(module, name, None) is not fn:
            continue
        name = {"absolute": "abs", "fabs": "abs", "power": "pow", "mod": "remainder", "true_divide": "divide"}.get(
            name, name
        )
        if prims.is_builtin(name) and prims.ARITY[name] == n_args and name != "astype":
            return name
    return None


EAGER_SAFE_NODES = (
    ast.Name, ast.Constant, ast.Attribute, ast.Tuple, ast.List, ast.BinOp, ast.UnaryOp, ast.BoolOp,
    ast.Compare, ast.IfExp, ast.Subscript, ast.Slice, ast.expr_context, ast.operator, ast.unaryop,
    ast.boolop, ast.cmpop,
)  # fmt: skip


def eager_safe(node: ast.expr) -> bool:
    """Whether an operand of a conditional expression, `and` or `or` may be computed for every
    member and selected afterwards (see the module docstring)."""
    return all(
        isinstance(n, EAGER_SAFE_NODES) and not (isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult))
        for n in ast.walk(node)
    )


class ExpressionLowering:
    """Turns expression ASTs into frontend values, emitting operations into `state.current`;
    array syntax on batched values goes to `arrays`."""

    def __init__(self, state: LoweringState, arrays: ArrayLowering):
        self.state = state
        self.source = state.source
        self.arrays = arrays
        self.abandoned: list[UnknownResultStructure] = []
        """Calls of unknown result structure whose operand was left out of a join this round."""

    def expr(self, node: ast.expr, n_results: int | None = None) -> Any:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            return self.compile_time_value(node)
        if isinstance(node, ast.Call):
            return method(node, n_results)
        return method(node)

    def leaf(self, node: ast.expr) -> Any:
        """A single (static or batched) value; structures are rejected."""
        value = self.expr(node)
        if isinstance(value, tuple | list):
            raise self.source.error(
                node,
                "a tuple, list or namedtuple cannot be used where a single array is expected",
                "index or destructure the structure first",
            )
        return value

    def compile_time_value(self, node: ast.expr) -> Static:
        """Evaluate an expression that reads no local variable, once, at compile time."""
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        batched = sorted(used & self.state.local_names)
        if batched:
            kind = type(node).__name__
            raise self.source.error(
                node,
                f"{_describe_node(node)} over the local variable(s) {', '.join(batched)} is not supported",
                _suggestion_for(kind),
            )
        code = compile(ast.Expression(body=node), self.source.filename, "eval")
        try:
            return Static(eval(code, dict(self.state.names)))
        except Exception as e:
            raise self.source.error(node, f"evaluating this at compile time raised {type(e).__name__}: {e}") from None

    # -- names and literals -----------------------------------------------------------------

    def expr_Constant(self, node: ast.Constant) -> Static:
        return Static(node.value)

    def expr_Name(self, node: ast.Name) -> Any:
        name = node.id
        if name in self.state.env:
            value = self.state.env[name]
            if isinstance(value, MaybeUndefined):
                raise self.source.error(
                    node,
                    f"variable '{name}' may be undefined here: it is assigned (line {value.lineno}) "
                    "on some paths to this use but not on others",
                    f"assign '{name}' on every path before this use, e.g. give it an initial value "
                    "before the `if` or the loop",
                )
            return value
        if name in self.state.local_names:
            raise self.source.error(
                node, f"variable '{name}' is used before it is assigned", f"assign '{name}' before this line"
            )
        if name in self.state.names:
            return Static(self.state.names[name])
        raise self.source.error(node, f"name '{name}' is not defined", "define it or import it at module level")

    def expr_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self.elements(node.elts))

    def expr_List(self, node: ast.List) -> list:
        return self.elements(node.elts)

    def elements(self, nodes: list[ast.expr], in_call: bool = False) -> list[Any]:
        """The values of `nodes`; a starred compile-time structure (`*xs`) is spread in place."""
        values: list[Any] = []
        for e in nodes:
            if not isinstance(e, ast.Starred):
                values.append(self.expr(e))
                continue
            value = self.expr(e.value)
            if isinstance(value, tuple | list):
                values.extend(value)
                continue
            if isinstance(value, Static):
                try:
                    values.extend(Static(v) for v in value.value)
                except TypeError as error:
                    raise self.source.error(e, f"cannot unpack {describe_object(value.value)}: {error}") from None
                continue
            what = "`*args` in calls" if in_call else "starred expressions (`*x`)"
            raise self.source.error(
                e,
                f"{what} over a batched array is not supported: unpacking it needs its per-member length, "
                "which is not known at compile time",
                "index the elements (`f(x[0], x[1])`), or pass a tuple of arrays and star that",
            )
        return values

    def expr_Attribute(self, node: ast.Attribute) -> Any:
        return self.attribute(node, self.expr(node.value))

    def attribute(self, node: ast.Attribute, base: Any) -> Any:
        """`base.attr` for an already evaluated `base`."""
        if isinstance(base, SSAValue):
            return self.arrays.array_attribute(node, base)
        if isinstance(base, Static):
            try:
                return Static(getattr(base.value, node.attr))
            except AttributeError as e:
                raise self.source.error(node, str(e)) from None
        if isinstance(base, tuple) and node.attr in getattr(type(base), "_fields", ()):
            return getattr(base, node.attr)
        if isinstance(base, tuple) and node.attr == "_replace" and hasattr(base, "_fields"):
            return Static(base._replace)
        if isinstance(base, tuple | list) and node.attr in LIST_METHODS:
            raise self.source.error(
                node, f"`{self.source.segment(node)}(...)` would change a list in place, but abir's tuples and lists "
                "are structures fixed at compile time (a loop appending to one would give members lists of "
                "different lengths)",
                FIXED_SIZE_SUGGESTION,
            )
        raise self.source.error(
            node,
            f"attribute '.{node.attr}' of a batched value is not supported",
            "pass the value to a helper function (it becomes an opaque primitive), or read fields of "
            "namedtuples only",
        )

    def expr_Subscript(self, node: ast.Subscript) -> Any:
        if isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
            shape_of = self.expr(node.value.value)
            if isinstance(shape_of, SSAValue):
                dim = self.expr(node.slice)
                if not (isinstance(dim, Static) and isinstance(dim.value, int | np.integer)):
                    raise self.source.error(node, "x.shape[...] of a batched value takes one compile-time int",
                                            "write x.shape[0], x.shape[1], ... or len(x)")
                return self.arrays.shape_fact(node, shape_of, "shape", int(dim.value))
            base = self.attribute(node.value, shape_of)
        else:
            base = self.expr(node.value)
        index = self.expr(node.slice)
        if isinstance(index, tuple | list) and all(isinstance(leaf, Static) for leaf in flatten(index)[0]):
            index = Static(unwrap_statics(index))
        if isinstance(base, tuple | list | Static) and isinstance(index, Static):
            container = base.value if isinstance(base, Static) else base
            try:
                item = container[index.value]
            except Exception as e:
                raise self.source.error(node, f"indexing failed at compile time: {e}") from None
            return self.computed_static(item, [base]) if isinstance(base, Static) else item
        return self.arrays.index_array(node, base, index)

    def expr_Slice(self, node: ast.Slice) -> Static:
        parts = [None if p is None else self.leaf(p) for p in (node.lower, node.upper, node.step)]
        if not all(p is None or isinstance(p, Static) for p in parts):
            raise self.source.error(
                node, "slice bounds must be compile-time constants",
                "a per-member bound would give members different shapes: loop over per-member indices "
                "(`for k in range(n): ... x[k]`), or mask with np.where",
            )
        return Static(slice(*(None if p is None else p.value for p in parts)))

    def expr_NamedExpr(self, node: ast.NamedExpr) -> Any:
        value = self.expr(node.value)
        self.state.assign_name(node.target.id, value, node)
        return value

    # -- operators --------------------------------------------------------------------------

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        return self.binary(node, type(node.op), self.expr(node.left), self.expr(node.right))

    def binary(self, node: ast.AST, op_type: type[ast.operator], left: Any, right: Any) -> Any:
        """`left <op> right`: folded when both are compile-time values, else a builtin prim."""
        if isinstance(left, Static) and isinstance(right, Static) or _both_structures(left, right):
            return self._static_apply(node, BINARY_OPERATORS[op_type], left, right)
        if op_type not in BINARY_PRIMS:  # `@`: the members' matrix product
            return self.arrays.array_function(node, np.matmul, [left, right], {})  # type: ignore[arg-type]
        operands = [self.state.materialize(v, node) for v in (left, right)]
        return self.state.prim(BINARY_PRIMS[op_type], operands)

    def _static_apply(self, node: ast.AST, fn: Any, *values: Any) -> Any:
        try:
            result = fn(*(v.value if isinstance(v, Static) else v for v in values))
        except Exception as e:
            raise self.source.error(node, f"evaluating this at compile time raised {type(e).__name__}: {e}") from None
        return result if _both_structures(*values) else self.computed_static(result, values)

    def computed_static(self, result: Any, inputs: Any) -> Static:
        """A compile-time result: a new array of the function's unless it shares memory with the
        inputs or the enclosing scope (see `AliasTracker.fresh_static`)."""
        static = Static(result)
        self.state.aliases.fresh_static(static, inputs, self.state.names.values())
        return static

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.leaf(node.operand)
        if isinstance(operand, Static):
            return self._static_apply(node, UNARY_OPERATORS[type(node.op)], operand)
        if isinstance(node.op, ast.Not):
            condition = self.state.as_condition(operand, node.operand, "the operand of `not`")
            assert isinstance(condition, SSAValue)
            return self.state.prim("logical_not", [condition])
        return self.state.prim(UNARY_PRIMS[type(node.op)], [operand])

    def expr_Compare(self, node: ast.Compare) -> Any:
        result: Any = None
        left = self.leaf(node.left)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, ast.In | ast.NotIn):
                if self._is_range_call(comparator):
                    if len(node.ops) > 1:
                        raise self.source.error(node, f"`{_op_text(op)} range(...)` in a chained comparison is not "
                                                "supported", "test it on its own: `(a < b) and (b in range(n))`")
                    bounds = range_arguments(self, comparator)  # type: ignore[arg-type]
                    found = range_membership(self, node, left, bounds, comparator)  # type: ignore[arg-type]
                    return self._negated(found) if isinstance(op, ast.NotIn) else found
                container = self.expr(comparator)
                if not (isinstance(left, Static) and isinstance(container, Static)):
                    if len(node.ops) > 1:
                        raise self.source.error(node, f"`{_op_text(op)}` in a chained comparison is not supported",
                                                "test it on its own: `(a < b) and (b in (1, 2))`")
                    return self._membership(node, op, left, container)
                right = container
            else:
                right = self.leaf(comparator)
            result = self._and(result, self._compare(node, op, left, right), node)
            left = right
        return result

    def _is_range_call(self, node: ast.expr) -> bool:
        """Whether `node` calls the builtin `range` (by its own name, not shadowed)."""
        return (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in self.state.local_names
            and self.state.names.get(node.func.id) is range
        )  # fmt: skip

    def _negated(self, found: Any) -> Any:
        return Static(not found.value) if isinstance(found, Static) else self.state.prim("logical_not", [found])

    def _membership(self, node: ast.Compare, op: ast.In | ast.NotIn, left: Any, container: Any) -> Any:
        """`x in (a, b, ...)` with per-member values: Python compares `x` with each element in
        turn (an element that is `x` itself matches at once), which for numbers is `x == a or x ==
        b ...` as a bool; the comparisons cannot fail, so all run and are or-ed. Each member's
        comparison must be one truth value, which is checked once types are known. A compile-time
        range is tested arithmetically, whatever its length (`range_membership`)."""
        if isinstance(container, Static) and isinstance(container.value, range):
            r = container.value
            found = range_membership(self, node, left, (Static(r.start), Static(r.stop), Static(r.step)), node)  # type: ignore[arg-type]
            return self._negated(found) if isinstance(op, ast.NotIn) else found
        matches: Any = Static(False)
        for element in self._membership_elements(node, op, container):
            found = Static(True) if element is left else self._compare(node, ast.Eq(), left, element)
            matches = self._or(matches, found)
        if isinstance(matches, SSAValue):
            error = self.source.error(
                node, f"`{self.source.segment(node)}` compares `{self.source.segment(node.left)}` with each element, "
                "and here a comparison gives a per-member array, not one truth value (Python raises ValueError: "
                "the truth value of an array is ambiguous)",
                "test single numbers with `in`; for an element-wise test of an array write `(x == 1) | (x == 2)`",
            )
            matches = self.arrays.batch_op(node, "check_scalar", {"message": str(error)}, [matches])
            self.state.booleans.add(matches)
        return self._negated(matches) if isinstance(op, ast.NotIn) else matches

    def _membership_elements(self, node: ast.Compare, op: ast.cmpop, container: Any) -> list[Any]:
        """The elements `x in container` compares with: the leaves of a tuple or list, or the
        numbers of a compile-time tuple, list, set or range (a module-level one)."""
        elements: list[Any] | None = None
        if isinstance(container, tuple | list):
            elements = list(container)
        elif (
            isinstance(container, Static) and isinstance(container.value, tuple | list | set | frozenset | range)
            and len(container.value) <= MAX_MEMBERSHIP_ELEMENTS
        ):  # fmt: skip
            elements = [Static(v) for v in container.value]
        if elements is not None and len(elements) <= MAX_MEMBERSHIP_ELEMENTS and all(map(_is_number, elements)):
            return elements
        what = describe_object(container.value) if isinstance(container, Static) else (
            "a per-member array" if isinstance(container, SSAValue) else "this structure"
        )  # fmt: skip
        left = self.source.segment(node.left)
        raise self.source.error(
            node, f"`{_op_text(op)}` with per-member values is supported over a tuple, list or set of at most "
            f"{MAX_MEMBERSHIP_ELEMENTS} numbers or per-member numbers, not over {what}",
            f"for an array write `np.any(arr == {left})`; otherwise compare with each element: "
            f"`{left} == a or {left} == b`",
        )

    def _or(self, accumulated: Any, value: Any) -> Any:
        """Disjunction of two truth values, folding compile-time ones."""
        if isinstance(accumulated, Static):
            return accumulated if accumulated.value else value
        if isinstance(value, Static):
            return value if value.value else accumulated
        return self.state.prim("logical_or", [accumulated, value])

    def _compare(self, node: ast.Compare, op: ast.cmpop, left: Any, right: Any) -> Any:
        if isinstance(left, Static) and isinstance(right, Static):
            return self._static_apply(node, COMPARE_OPERATORS[type(op)], left, right)
        if isinstance(op, ast.Is | ast.IsNot) and _is_none(left, right):
            return Static(isinstance(op, ast.IsNot))  # a batched value is never None
        if type(op) not in COMPARE_PRIMS:
            raise self.source.error(
                node, f"`{_op_text(op)}` on batched values is not supported", "compare with ==, !=, <, <=, > or >="
            )
        operands = [self.state.materialize(left, node), self.state.materialize(right, node)]
        return self.state.prim(COMPARE_PRIMS[type(op)], operands)

    def _and(self, accumulated: Any, value: Any, node: ast.AST) -> Any:
        """Conjunction of two comparison results, folding compile-time ones."""
        if accumulated is None:
            return value
        if isinstance(accumulated, Static):
            return value if accumulated.value else accumulated
        if isinstance(value, Static):
            return accumulated if value.value else value
        return self.state.prim("logical_and", [accumulated, value])

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        result = self.leaf(node.values[0])
        for left_node, operand in zip(node.values, node.values[1:], strict=False):
            result = self._bool_op(node, isinstance(node.op, ast.And), result, left_node, operand)
        return result

    def _bool_op(self, node: ast.BoolOp, is_and: bool, left: Any, left_node: ast.expr, right_node: ast.expr) -> Any:
        """`left and right` / `left or right`, `left` the value so far (Python takes its truth
        value: that of the last operand `left_node` evaluated)."""
        if isinstance(left, Static):
            decided = bool(left.value) != is_and  # `False and ...` / `True or ...`
            return left if decided else self.leaf(right_node)
        condition = self.state.as_condition(left, left_node, f"the left operand of `{'and' if is_and else 'or'}`")
        if not eager_safe(right_node):
            return self._short_circuit(node, is_and, left, condition, right_node)
        right = self.state.materialize(self.leaf(right_node), node)
        if left in self.state.booleans and right in self.state.booleans:
            return self.state.prim("logical_and" if is_and else "logical_or", [condition, right])
        chosen = [right, left] if is_and else [left, right]
        return self._where(node, "an `and`" if is_and else "an `or`", condition, *chosen)

    def _where(self, node: ast.AST, construct: str, condition: SSAValue, a: Any, b: Any) -> SSAValue:
        """`a` where `condition` holds, else `b`: in Python one of the two objects itself, so type
        inference checks that they have one shape (`SELECT_ATTR`)."""
        result = self.state.prim("where", [condition, self.state.materialize(a, node), self.state.materialize(b, node)])
        op = result.owner
        op.attributes[SELECT_ATTR] = StringAttr(construct)
        op.attributes[LOCATION_ATTR] = StringAttr(self.source.location(node))
        op.attributes[SOURCE_ATTR] = StringAttr(self.source.segment(node))
        self.state.aliases.derived(result, [a, b])
        return result

    def _short_circuit(
        self, node: ast.BoolOp, is_and: bool, left: Any, condition: SSAValue | Static, right_node: ast.expr
    ) -> Any:
        """`a and f(x)` runs `f` only where `a` holds (`condition`): branch, then join the two values."""
        assert isinstance(condition, SSAValue)
        saved = dict(self.state.env)
        true_edge, false_edge = self.state.graph.branch(self.state.block, condition)
        evaluate_edge, skip_edge = (true_edge, false_edge) if is_and else (false_edge, true_edge)
        arrivals = [(skip_edge, {**saved, RESULT: left})]
        arrivals += self._operand_arm(evaluate_edge, saved, lambda: self.state.materialize(self.leaf(right_node), node))
        return self._join_value(arrivals, node)

    def _operand_arm(self, edge: Any, saved: dict[str, Any], evaluate: Any) -> list:
        """The arrival of one operand lowered in a new block reached along `edge`; none when it
        calls a function whose result structure is unknown yet (a recursion being lowered): that
        path is abandoned for this round, and the other operand gives the structure."""
        self.state.current = self.state.graph.new_block()
        edge.target = self.state.current
        self.state.env = dict(saved)
        try:
            value = evaluate()
        except UnknownResultStructure as unknown:
            self.abandoned.append(unknown)
            return []
        return [(self.state.block, {**self.state.env, RESULT: value})]

    def _join_value(self, arrivals: list, node: ast.AST) -> Any:
        if not arrivals:  # every operand was abandoned: so is the expression
            raise self.abandoned[-1]
        structures = {flatten(env[RESULT])[1] for _, env in arrivals if not awaits_result_structure(env[RESULT])}
        if len(structures) > 1:
            raise self.source.error(
                node, "the two arms of this conditional expression have different structures "
                f"({', '.join(sorted(map(describe_structure, structures)))})",
                "make both arms tuples/lists of the same length, or both single values",
            )
        self.state.merge(arrivals, node)
        return self.state.env.pop(RESULT)

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        condition = self.state.as_condition(
            self.leaf(node.test), node.test, "the condition of this conditional expression (`... if ... else ...`)"
        )
        if isinstance(condition, Static):
            return self.expr(node.body if condition.value else node.orelse)
        if eager_safe(node.body) and eager_safe(node.orelse):
            return self._select(node, condition, self.expr(node.body), self.expr(node.orelse))
        saved = dict(self.state.env)
        true_edge, false_edge = self.state.graph.branch(self.state.block, condition)
        arrivals = []
        for edge, branch in ((true_edge, node.body), (false_edge, node.orelse)):
            arrivals += self._operand_arm(edge, saved, lambda branch=branch: self.expr(branch))
        return self._join_value(arrivals, node)

    def _select(self, node: ast.IfExp, condition: SSAValue, then_value: Any, else_value: Any) -> Any:
        (then_leaves, then_def), (else_leaves, else_def) = flatten(then_value), flatten(else_value)
        if then_def != else_def:
            raise self.source.error(
                node, "the two arms of this conditional expression have different structures",
                "make both arms tuples/lists of the same length, or both single values",
            )
        selected = [
            t if isinstance(t, SSAValue) and t is e else self._where(node, "a conditional expression", condition, t, e)
            for t, e in zip(then_leaves, else_leaves, strict=True)
        ]
        return unflatten(then_def, selected)

    # -- calls ------------------------------------------------------------------------------

    def expr_Call(self, node: ast.Call, n_results: int | None = None) -> Any:
        if isinstance(node.func, ast.Attribute):
            receiver = self.expr(node.func.value)
            if isinstance(receiver, SSAValue):
                return self._method_call(node, receiver)
            callee = self._callee(node, receiver)
        else:
            callee = self._callee(node)
        if isinstance(callee, str):
            return self._batched_call(node, callee)
        fn = callee.value
        if fn is truthy:
            return self._truthy(node)
        if fn is range:
            raise self.source.error(node, "range() is supported only as the iterable of a `for` loop "
                                    "and after `in`/`not in`", "write `for i in range(...):` or `x in range(...)`")
        self._check_per_member_meaning(node, fn)
        args, kwargs = self._arguments(node)
        leaves, _ = flatten((args, kwargs))
        if all(isinstance(leaf, Static) for leaf in leaves) or _is_structure_builder(fn):
            return self._static_call(node, fn, args, kwargs)
        if (lowered := self.arrays.array_function(node, fn, args, kwargs)) is not NotImplemented:
            return lowered
        if (builtin := self._builtin_prim(fn, args, kwargs)) is not None:
            return self.state.prim(builtin, [self.state.materialize(a, node) for a in args])
        if (per_member := self.arrays.numpy_call(node, fn, args, kwargs)) is not NotImplemented:
            return per_member
        if (reduced := self.arrays.python_reduction(node, fn, args, kwargs)) is not NotImplemented:
            return reduced
        result = self._opaque_call(node, fn, args, kwargs, n_results)
        if isinstance(result, SSAValue) and _returns_new_array(fn, kwargs):
            self.state.aliases.fresh(result)
        return result

    def _check_per_member_meaning(self, node: ast.Call, fn: Any) -> None:
        """Reject calls whose batched meaning differs from running them once per member: they
        would run once, at compile time or on the whole batch."""
        if fn is print:
            raise self.source.error(
                node,
                "print() inside a batched function would run once, at compile time, on placeholder values "
                "(not once per member)",
                "return the value you want to see, or call the function with `dry_run=True` to run the "
                "plain Python once per member (print works there)",
            )
        if _draws_from_global_generator(fn):
            raise self.source.error(
                node,
                f"`{self.source.segment(node.func)}` draws from a global random generator: abir would draw once "
                "(at compile time, or once for the whole batch), so members would not get the draws Python "
                "gives them one by one",
                "use abir.random (counter-based draws per member, e.g. `abir.random.normal(key, counter)`), "
                "passing each member's key as an argument",
            )

    def _arguments(self, node: ast.Call) -> tuple[list[Any], dict[str, Any]]:
        """Positional (starred compile-time structures spread) and keyword argument values."""
        args = self.elements(node.args, in_call=True)
        kwargs = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                raise self.source.error(keyword, "`**kwargs` in calls is not supported", "pass keyword arguments one by one")
            kwargs[keyword.arg] = self.expr(keyword.value)
        return args, kwargs

    def _method_call(self, node: ast.Call, receiver: SSAValue) -> Any:
        """`x.method(...)` on a batched `x`."""
        assert isinstance(node.func, ast.Attribute)
        method = node.func.attr
        if method == "astype":
            dtype_node = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "dtype"), None)
            if isinstance(dtype_node, ast.Attribute) and dtype_node.attr == "dtype":
                like = self.expr(dtype_node.value)
                if isinstance(like, SSAValue):
                    if len(node.args) + len(node.keywords) != 1:
                        raise self.source.error(node, "astype() takes only the dtype here")
                    return self.arrays.astype(node, receiver, LikeDtype(like))
        if method in IN_PLACE_ARRAY_METHODS:
            array = self.source.segment(node.func.value)
            raise self.source.error(
                node, f"'{array}.{method}()' changes the per-member array `{array}` in place, which abir does not "
                "support as a method call",
                f"write `{array}[...] = np.{method}({array}, ...)`, or `{array} = np.{method}({array}, ...)` if no other "
                "name shares the array" if method in ("sort", "partition") else "assign the new values with item assignment",
            )
        if method in LIST_METHODS:
            raise self.source.error(
                node, f"'.{method}()' is a list method, but `{self.source.segment(node.func.value)}` is a per-member "
                "array here (NumPy arrays have no such method: Python raises AttributeError)",
                FIXED_SIZE_SUGGESTION,
            )
        args, kwargs = self._arguments(node)
        return self.arrays.array_method(node, receiver, method, args, kwargs)

    def _callee(self, node: ast.Call, receiver: Any = None) -> str | Static:
        """The batched function name called, or the compile-time callable (`receiver`: the
        already evaluated object of an attribute call `receiver.name(...)`)."""
        func = node.func
        if isinstance(func, ast.Name) and func.id not in self.state.local_names and func.id in self.state.names:
            name = self.state.services.batched_callee(self.state.names[func.id])
            if name is not None:
                return name
        if receiver is not None:
            assert isinstance(func, ast.Attribute)
            value = self.attribute(func, receiver)
        else:
            value = self.expr(func)
        if not isinstance(value, Static):
            raise self.source.error(
                node, "calling a batched value is not supported", "call functions by their name"
            )
        if self.state.services.batched_callee(value.value) is not None:
            raise self.source.error(
                node,
                "a batched function must be called directly by its own name",
                f"write `{getattr(value.value, '__name__', 'f')}(...)` instead of calling it through "
                "a variable, an attribute or an expression",
            )
        return value

    def _truthy(self, node: ast.Call) -> Any:
        if len(node.args) != 1 or node.keywords:
            raise self.source.error(node, "truthy() takes exactly one argument")
        return self.leaf(node.args[0])

    def _batched_call(self, node: ast.Call, name: str) -> Any:
        if node.keywords:
            raise self.source.error(
                node, f"keyword arguments in calls to batched function '{name}' are not supported",
                "pass the arguments positionally",
            )
        return self._specialization_call(node, name, self.elements(node.args, in_call=True))

    def _specialization_call(self, node: ast.Call, name: str, arguments: list[Any]) -> Any:
        """A call of the decorated function or helper `name` on `arguments` (one value each)."""
        flat_args: list[SSAValue] = []
        treedefs = []
        if pending := next((a for a in arguments if awaits_result_structure(a)), None):
            return stand_in(pending)  # a helper's result of unknown structure: lowered again once known
        for arg in arguments:
            leaves, treedef = flatten(drop_none(arg))
            flat_args += [self.state.materialize(leaf, node) for leaf in leaves]
            treedefs.append(treedef)
        symbol, output = self.state.services.call_target(name, tuple(treedefs), node)
        if output is None:
            raise UnknownResultStructure(node, name)
        results = self.call_op(symbol, flat_args, output.num_leaves, node)
        return unflatten(output, results)

    def call_op(self, symbol: str, args: list[SSAValue], n_results: int, node: ast.AST) -> list[SSAValue]:
        """A `functional.call` located at `node` (the machine names the line of a call a member
        is making when its stack overflows or its steps run out there)."""
        op = CallOp(SymbolRefAttr(symbol), args, [UnknownType()] * n_results)
        op.attributes[LOCATION_ATTR] = StringAttr(self.source.location(node))
        self.state.block.add_op(op)
        for result in op.res:
            self.state.aliases.call_result(result, args)
        return list(op.res)

    def _static_call(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        builds_structure = _is_structure_builder(fn)
        if fn in (tuple, list) and len(args) == 1 and isinstance(args[0], Static):
            return Static(fn(args[0].value))
        if not builds_structure:
            args, kwargs = [unwrap_statics(a) for a in args], {k: unwrap_statics(v) for k, v in kwargs.items()}
        try:
            result = fn(*args, **kwargs)
        except Exception as e:
            raise self.source.error(
                node, f"calling {describe_object(fn)} at compile time raised {type(e).__name__}: {e}"
            ) from None
        if builds_structure:
            return result
        return self.computed_static(result, [*args, *kwargs.values()])

    def _builtin_prim(self, fn: Any, args: list, kwargs: dict) -> str | None:
        if kwargs or any(isinstance(a, tuple | list) for a in args):
            return None
        if fn in PYTHON_BUILTIN_PRIMS and PYTHON_BUILTIN_PRIMS[fn][1] == len(args):
            return PYTHON_BUILTIN_PRIMS[fn][0]
        return _numpy_prim(fn, len(args))

    def _opaque_call(self, node: ast.Call, fn: Any, args: list, kwargs: dict, n_results: int | None) -> Any:
        """A call of a callable that is neither a batched function nor lowered by abir itself: an
        undecorated function of the user's is compiled per member (`_helper_call`); a declared
        primitive, a NumPy callable or one of abir's own runs once on whole-batch arrays (a
        `Helper` prim); anything else is refused (`_refused_callable`)."""
        declared = self.state.services.is_primitive(fn)
        if not declared and is_user_function(fn):
            return self._helper_call(node, fn, args, kwargs)
        if not declared and not _runs_on_whole_batch(fn):
            raise self._refused_callable(node, fn)
        leaves, treedef = flatten((args, kwargs))
        batched = [leaf for leaf in leaves if isinstance(leaf, SSAValue)]
        statics = [leaf.value if isinstance(leaf, Static) else None for leaf in leaves]
        is_batched = [isinstance(leaf, SSAValue) for leaf in leaves]

        def call_with_batched_leaves(*arrays: Any) -> Any:
            supplied = iter(arrays)
            full = [next(supplied) if b else s for b, s in zip(is_batched, statics, strict=True)]
            call_args, call_kwargs = unflatten(treedef, full)
            return fn(*call_args, **call_kwargs)

        arguments_key = tuple(_static_key(leaf.value) if isinstance(leaf, Static) else BATCHED for leaf in leaves)
        key = (self.source.function, node.lineno, node.col_offset, treedef, arguments_key, n_results)
        hint = getattr(fn, "__name__", None) or type(fn).__name__
        helper = Helper(call_with_batched_leaves, fn, CallSite.of(self.source, node), declared=declared)
        symbol = self.state.services.opaque(key, hint, self.source.segment(node), helper)
        if (structure := helper_result_structure(symbol)) is not None:  # learned by type inference
            return unflatten(structure, self.state.opaque_prim(symbol, batched, structure.num_leaves))
        results = self.state.opaque_prim(symbol, batched, n_results or 1)
        return tuple(results) if n_results is not None else results[0]

    def _helper_call(self, node: ast.Call, fn: types.FunctionType, args: list, kwargs: dict) -> Any:
        """A call of an undecorated function of the user's, compiled per member as a decorated
        function is (keywords bound to its parameters by name). What keeps it from compiling (its
        source, its syntax, a construct its body uses) is an `UncompilableHelperError` here."""
        try:
            name = self.state.services.helper_callee(fn)
        except UnsupportedSyntaxError as err:
            raise self._uncompilable_helper(node, fn, err) from None
        helper = self.state.services.helper_source(name)
        assert helper is not None, f"'{name}' was just registered as a helper"
        arguments = self._helper_arguments(node, helper, args, kwargs)
        try:
            return self._specialization_call(node, name, arguments)
        except UncompilableHelperError:
            raise  # a helper it calls, or a callable its body calls: that call's own error
        except UnsupportedSyntaxError as err:
            if not _raised_in(helper, err):
                raise
            raise self._uncompilable_helper(node, fn, err) from None

    def _helper_arguments(self, node: ast.Call, helper: FunctionSource, args: list, kwargs: dict) -> list[Any]:
        """The helper's arguments in parameter order; every leaf must be able to become a
        per-member value (a number, a bool, a NumPy array, `None`, or a batched value)."""
        name = helper.name
        try:
            bound = inspect.signature(helper.function).bind(*args, **kwargs)
        except TypeError as err:
            raise self.source.error(node, f"calling '{name}' raises TypeError: {err}",
                                    f"pass '{name}' one value per parameter") from None
        arguments = list(bound.args)
        for leaf in flatten(drop_none(arguments))[0]:
            if isinstance(leaf, Static) and not is_materializable(leaf.value):
                raise _uncompilable(self.source.error(
                    node,
                    f"the helper '{name}'{_definition(helper.function)} is compiled per member, so its arguments "
                    f"become per-member values (numbers, booleans, NumPy arrays, and tuples, lists and namedtuples "
                    f"of them), but {describe_object(leaf.value)} is passed to it",
                    f"read that value inside '{name}' (from its module or closure) instead of passing it, or "
                    f"compute it before the call; or, if '{name}' works on whole batches, declare it a primitive "
                    f"(`@ctx.primitive`)",
                ))
        return arguments

    def _uncompilable_helper(self, node: ast.Call, fn: Any, err: UnsupportedSyntaxError) -> UncompilableHelperError:
        """The refusal of a call to the undecorated function `fn`, which the frontend cannot
        compile per member for the reason `err` gives."""
        name = qualified_name(fn)
        return _uncompilable(self.source.error(
            node,
            f"the helper '{name}'{_definition(fn)} is not decorated in the Context, so abir compiles it per "
            f"member, as if it were decorated, but it cannot be compiled per member: {_reason(err)}",
            f"make '{name}' compilable per member (as the reason says), or, if it works on whole batches "
            f"(arrays [B, ...], each member's row along the leading axis), declare it a primitive: "
            f"`@ctx.primitive` on its definition, or `ctx.primitive({name})`",
        ))

    def _refused_callable(self, node: ast.Call, fn: Any) -> UncompilableHelperError:
        """The refusal of a call to a callable abir neither compiles per member nor runs as a
        whole-batch primitive: a library function other than NumPy's and abir's, or a callable of
        the user's that is not a plain function (a class, a method, a callable object)."""
        call = f"`{self.source.segment(node)}`"
        name = qualified_name(fn)
        library = library_package(fn)
        if library is not None:
            return _uncompilable(self.source.error(
                node,
                f"{call} calls {name} (from {library}) on per-member values; abir neither compiles it per member "
                "nor knows it as a whole-batch primitive, and called once on whole-batch arrays [B, ...] it "
                "may not compute what it computes for one member",
                f"if it works on whole batches (each member's row along the leading axis), declare it once, "
                f"before the call: `ctx.primitive({name})`; else compute the value with operators and NumPy "
                "functions, or in a function of yours (compiled per member)",
            ))
        return _uncompilable(self.source.error(
            node,
            f"{call} calls {describe_object(fn)} on per-member values, which abir cannot compile per member: "
            "only plain `def` functions are compiled per member (a class, a method or a callable object is not)",
            "call a module-level `def` function doing the work instead (it is compiled per member), or, if the "
            f"callable works on whole batches, declare it a primitive: `ctx.primitive({name})`",
        ))


NEW_ARRAY_FUNCTIONS = (np.zeros_like, np.ones_like, np.full_like, np.empty_like, np.array, np.copy)
"""NumPy functions (lowered to helper calls) whose result is always a new array."""


IN_PLACE_ARRAY_METHODS = frozenset({"sort", "partition", "fill", "put", "resize", "itemset", "setfield", "byteswap"})
"""ndarray methods that change the array in place."""


def _returns_new_array(fn: Any, kwargs: dict[str, Any]) -> bool:
    copy = kwargs.get("copy", Static(True))
    return any(fn is f for f in NEW_ARRAY_FUNCTIONS) and isinstance(copy, Static) and copy.value is True


def _draws_from_global_generator(fn: Any) -> bool:
    """Whether `fn` is `np.random.*`, `random.*` or a method of one of their generators."""
    module = getattr(fn, "__module__", None) or ""
    if module == "random" or module == "numpy.random" or module.startswith("numpy.random."):
        return True
    generators = (random.Random, np.random.RandomState, np.random.Generator, np.random.BitGenerator)
    return isinstance(getattr(fn, "__self__", None), generators)


BATCHED = object()
"""Stands for a batched argument in the key of a helper call site."""


def _static_key(value: Any) -> Any:
    """What identifies a compile-time argument of a helper call in every lowering of the call:
    the value of numbers, strings, slices and arrays (each lowering computes them anew: `-58`,
    `2 * k`, `np.zeros(3)`), the object itself for anything else (a function, a module, a dtype:
    the same object every time). A key that changed from one lowering to the next would register a
    new helper each time, which never learns the structure the first one learned."""
    if value is None or isinstance(value, bool | int | float | complex | str | bytes | slice | range | np.generic):
        return (type(value), repr(value))
    if isinstance(value, np.ndarray) and value.dtype != object:
        return (np.ndarray, value.dtype.str, value.shape, value.tobytes())
    return id(value)


def _is_structure_builder(fn: Any) -> bool:
    """namedtuple classes, tuple, list and namedtuple `_replace`: they build structures."""
    if fn in (tuple, list):
        return True
    if isinstance(fn, type) and issubclass(fn, tuple) and hasattr(fn, "_fields"):
        return True
    return getattr(fn, "__name__", None) == "_replace" and hasattr(getattr(fn, "__self__", None), "_fields")


def _both_structures(*values: Any) -> bool:
    return all(isinstance(v, tuple | list) for v in values)


def _is_none(left: Any, right: Any) -> bool:
    return any(isinstance(v, Static) and v.value is None for v in (left, right))


def _is_number(value: Any) -> bool:
    """A per-member value, or a compile-time number or bool."""
    return isinstance(value, SSAValue) or isinstance(value, Static) and isinstance(
        value.value, int | float | bool | np.number | np.bool_
    )


def _op_text(op: ast.cmpop) -> str:
    return {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}.get(type(op), type(op).__name__)


def _describe_node(node: ast.AST) -> str:
    return {
        "ListComp": "a list comprehension",
        "SetComp": "a set comprehension",
        "DictComp": "a dict comprehension",
        "GeneratorExp": "a generator expression",
        "Lambda": "a lambda",
        "Dict": "a dict",
        "Set": "a set",
        "JoinedStr": "an f-string",
        "Await": "await",
        "Yield": "yield",
        "YieldFrom": "yield from",
        "Starred": "a starred expression",
    }.get(type(node).__name__, f"the expression {type(node).__name__}")


def _suggestion_for(kind: str) -> str:
    if kind in ("ListComp", "GeneratorExp", "SetComp", "DictComp"):
        return "write a `for i in range(...)` loop, or move the comprehension into a helper function"
    if kind == "Lambda":
        return "define a named function at module level and call it"
    return "compute it in a helper function called from the batched function"


def _runs_on_whole_batch(fn: Any) -> bool:
    """Whether a call of `fn` that abir does not lower itself stays a whole-batch opaque prim
    without being declared a primitive: NumPy's callables (functions, ufuncs, types, methods
    of NumPy arrays) and abir's own (`abir.random`)."""
    if isinstance(fn, np.ufunc) or isinstance(getattr(fn, "__self__", None), np.ndarray | np.generic):
        return True
    return library_package(fn) in ("numpy", "abir")


def _raised_in(helper: FunctionSource, err: UnsupportedSyntaxError) -> bool:
    """Whether `err` is located in the body of `helper` (not in a function it calls)."""
    first = helper.lineno(helper.tree)
    last = helper.line_offset + (helper.tree.end_lineno or helper.tree.lineno)
    return err.filename == helper.filename and err.lineno is not None and first <= err.lineno <= last


def _reason(err: UnsupportedSyntaxError) -> str:
    """The frontend's refusal `err` in one line: where, what, and its own fix in parentheses."""
    where = f"{err.filename}:{err.lineno}: " if err.filename and err.lineno else ""
    message = str(err.msg)
    if err.suggestion and message.endswith(f". Instead: {err.suggestion}"):
        message = f"{message.removesuffix(f'. Instead: {err.suggestion}')} (there: {err.suggestion})"
    return where + message


def _definition(fn: Any) -> str:
    """` (defined at file:line)` of a Python function, for messages; empty when unknown."""
    code = getattr(fn, "__code__", None)
    return "" if code is None else f" (defined at {code.co_filename}:{code.co_firstlineno})"


def _uncompilable(located: UnsupportedSyntaxError) -> UncompilableHelperError:
    """`located` (an error of the calling line) as an `UncompilableHelperError`."""
    error = UncompilableHelperError(
        located.msg,
        filename=located.filename,
        lineno=located.lineno,
        col_offset=None if located.offset is None else located.offset - 1,
        source_line=located.text,
    )
    error.suggestion = located.suggestion
    return error
