"""Random programs over abir's Python subset, as typed Python ASTs, with inputs for their entry.

A program is a module of functions: an entry `f`, a group of recursive functions `r1`, `r2`
(mutually recursive when there are two), plain batched helpers `h1`, `h2` and opaque helpers
`o1`, `o2` (module-level functions that are not decorated: abir calls them on whole batches).
Bodies use if/elif/else, while and for loops (over `range` or over a tuple, with `else:`
clauses), break/continue, early returns, conditional expressions, and/or, `:=`, tuples and a
namedtuple `P(a, b)` (fields, `_replace`, unpacking), small per-member float arrays with indexing,
reductions and elementwise arithmetic, and module-level constants `N` and `C` (an array). The
features (`ALL_FEATURES`) switch groups of these off, item assignment (`w[i] = x`) and calls in
the arms of conditional expressions included (all are on by default but `range_membership`,
`a in range(...)` tests, which `--features +range_membership` turns on, and `descents`: a
recursive function then first calls itself, with `d - 1` and its own other parameters, before
any other statement, the shape `summarize-descents` turns into one `vm.descend`).

With the feature "library_calls", a program also computes on per-member arrays of several shapes
(vectors of two lengths and the matrices over them, e.g. (3,), (2,), (2, 3), (3, 3)): parameters,
variables and results of those types, and the NumPy calls and array operations of
`LIBRARY_CALLS` on them (reductions with and without axis, elementwise math, shape
manipulation, sorting and searching, linear algebra, indexing), nested in expressions, so that
their results decide conditions (`if np.sum(v) > 0:`), index arrays and go into loops and
recursive calls. Each call's result is tagged with its name (`fz_call`) for the reports.

Programs are valid plain Python by construction, so that any difference between the batched run
and the plain one is abir's:

* they terminate: a `while` loop counts a counter down (`k1 -= 1` first thing in its body), a
  `for` loop runs over a short `range`, and recursive functions take a depth `d` that every
  recursive call decreases (`d - 1`) and that the entry bounds (`min(abs(...), 5)`);
* values stay bounded: every expression carries a bound of its magnitude (`fz_mag`), and
  assignments, arguments and results that could exceed `LIMIT` are clamped
  (`max(min(e, 1000), -1000)`), so that no integer overflows int64;
* nothing divides by zero and indices stay in range (`a // (abs(b) + 1)`, `v[i % 3]`), unless
  the program itself guards the operation (`if b != 0: x = a // b`), which is part of the test:
  abir computes such blocks on junk rows of the members that stand elsewhere;
* floats are multiples of 1/4 where possible, so that sums are exact in any order; library
  results that libraries may round differently are put on a grid (`quantized`), and library
  calls guard their domains (`np.exp(np.clip(x, -4.0, 4.0))`, determinants of diagonally
  dominant matrices).

Every expression node carries its type (`fz_type`: "int", "float", "bool", "vec", "pair", an
array type `"f64[2, 3]"` or a tuple of those) for the shrinker, which replaces expressions only by others of the same type.
"""

from __future__ import annotations

import ast
import copy
import functools
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from abir.types import TensorType

INT, FLOAT, BOOL, VEC, PAIR = "int", "float", "bool", "vec", "pair"
MASK = "mask"
"""A per-member bool array (`v > 0.5`), only ever reduced (`.any()`) or selected with."""
ValueType = str | tuple[str, ...]
"""A scalar kind, "vec", "pair", or a tuple of scalar kinds and "vec"."""
PAIR_FIELDS = (("a", INT), ("b", FLOAT))

LIMIT = 1000
"""Bound of every variable, argument and function result (ints and floats alike)."""
WRAP_ABOVE = 10**6
"""Operands that could exceed this are clamped before they are combined (no int64 overflow)."""
MAX_ENTRY_DEPTH = 5
"""Recursion depth the entry passes at most (call chains stay well under max_stack_depth=15)."""

ALL_FEATURES = frozenset({
    "recursion", "mutual_recursion", "loops", "arrays", "namedtuples", "tuples", "helpers", "opaque_helpers",
    "type_inference", "guarded_operations", "broadcast_inputs", "constants", "item_assignment", "ternary_calls",
    "range_membership", "descents", "library_calls",
})  # fmt: skip
OFF_BY_DEFAULT: frozenset[str] = frozenset({"range_membership", "descents"})
"""Features `--features +name` turns on: off so that the programs of the seeds run so far stay the
same (turning one on changes what later draws of a seed produce)."""
DEFAULT_FEATURES = ALL_FEATURES - OFF_BY_DEFAULT


def parse_features(text: str, base: frozenset[str] = DEFAULT_FEATURES) -> frozenset[str]:
    """`"+item_assignment,-arrays"` (or plain names, meaning `+`) applied to `base`."""
    features = set(base)
    for item in filter(None, (part.strip() for part in text.split(","))):
        name = item.lstrip("+-")
        if name not in ALL_FEATURES:
            raise ValueError(f"unknown fuzz feature '{name}'; the features are {', '.join(sorted(ALL_FEATURES))}")
        (features.discard if item.startswith("-") else features.add)(name)
    return frozenset(features)


# ----- the generated program -------------------------------------------------------------------


@dataclass
class FuzzProgram:
    """A generated module, its entry's inputs, and what the runner needs to batch it."""

    module: ast.Module
    entry: str
    batched: list[str]
    """Names of the functions decorated in the Context (the entry first)."""
    declared_results: dict[str, ValueType]
    """Functions decorated with a `type_inference` that declares these result types."""
    vector_size: int
    input_types: list[ValueType]
    inputs: list[Any]
    """One batched value per entry parameter: arrays with a leading member dimension (of size
    1 when broadcast), tuples of those for tuple and "pair" parameters."""
    label: str = ""

    def source(self) -> str:
        return ast.unparse(self.module) + "\n"

    def batch_size(self) -> int:
        sizes = {np.shape(leaf)[0] for value in self.inputs for leaf in _leaves(value)}
        sizes.discard(1)
        return sizes.pop() if sizes else 1

    def function(self, name: str) -> ast.FunctionDef:
        for node in self.module.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return node
        raise KeyError(name)

    def copy(self) -> FuzzProgram:
        return copy.deepcopy(self)

    def library_calls(self) -> list[str]:
        """The names of the `LIBRARY_CALLS` the program makes, sorted."""
        return library_calls_in(self.module)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, tuple):
        return [leaf for part in value for leaf in _leaves(part)]
    return [value]


def tensor_types(t: ValueType, vector_size: int) -> list[Any]:
    """The per-member `abir.TensorType` leaves of a value of type `t`."""
    if isinstance(t, tuple):
        return [leaf for part in t for leaf in tensor_types(part, vector_size)]
    if t == PAIR:
        return [leaf for _, kind in PAIR_FIELDS for leaf in tensor_types(kind, vector_size)]
    shape = array_shape(t, vector_size)
    if shape is not None:
        return [TensorType(np.dtype(np.float64), shape)]
    dtype = {INT: np.int64, FLOAT: np.float64, BOOL: np.bool_}[t]
    return [TensorType(np.dtype(dtype), ())]


# ----- typed AST construction -----------------------------------------------------------------


def typed(node: ast.expr, t: ValueType, mag: float) -> ast.expr:
    """Annotate `node` with its type and magnitude bound."""
    node.fz_type = t  # type: ignore[attr-defined]
    node.fz_mag = float(mag)  # type: ignore[attr-defined]
    return node


def type_of(node: ast.AST) -> ValueType | None:
    return getattr(node, "fz_type", None)


def mag_of(node: ast.AST) -> float:
    return getattr(node, "fz_mag", float(LIMIT))


def load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def store(name: str) -> ast.Name:
    return ast.Name(name, ast.Store())


def literal(value: Any, t: ValueType) -> ast.expr:
    """A literal of type `t`; negative numbers as unary minus (so that `(-3) ** 2` unparses right)."""
    if isinstance(value, bool) or value >= 0:
        return typed(ast.Constant(value), t, abs(value))
    return typed(ast.UnaryOp(ast.USub(), ast.Constant(-value)), t, abs(value))


def call(func: str | ast.expr, *args: ast.expr, **keywords: ast.expr) -> ast.Call:
    target = load(func) if isinstance(func, str) else func
    return ast.Call(target, list(args), [ast.keyword(k, v) for k, v in keywords.items()])


def np_attr(name: str) -> ast.Attribute:
    return ast.Attribute(load("np"), name, ast.Load())


def method(receiver: ast.expr, name: str, *args: ast.expr) -> ast.Call:
    return call(ast.Attribute(receiver, name, ast.Load()), *args)


def binop(left: ast.expr, op: ast.operator, right: ast.expr, t: ValueType, mag: float) -> ast.expr:
    return typed(ast.BinOp(left, op, right), t, mag)


def compare(left: ast.expr, ops: list[ast.cmpop], rights: list[ast.expr]) -> ast.expr:
    return typed(ast.Compare(left, ops, rights), BOOL, 1)


def clamp(node: ast.expr, limit: float = LIMIT) -> ast.expr:
    """`node` bounded by `limit` in magnitude (unchanged when its bound already is)."""
    t = type_of(node)
    if mag_of(node) <= limit or not (t in (INT, FLOAT) or is_array(t)):
        return node
    bound: Any = int(limit) if t == INT else float(limit)
    if is_array(t):
        return typed(call(np_attr("clip"), node, literal(-bound, FLOAT), literal(bound, FLOAT)), t, limit)  # type: ignore[arg-type]
    inner = typed(call("min", node, literal(bound, t)), t, mag_of(node))
    return typed(call("max", inner, literal(-bound, t)), t, limit)


def modulo_bound(node: ast.expr, modulus: int) -> ast.expr:
    """`node % modulus`: an int in [0, modulus)."""
    return binop(node, ast.Mod(), literal(modulus, INT), INT, modulus - 1)


# ----- per-member arrays and library calls ----------------------------------------------------


def array_type(shape: tuple[int, ...], vector_size: int) -> ValueType:
    """The type of a per-member float array of `shape`: VEC for `(vector_size,)`, else
    `"f64[2, 3]"`-style."""
    return VEC if shape == (vector_size,) else f"f64{list(shape)}"


def array_shape(t: ValueType | None, vector_size: int) -> tuple[int, ...] | None:
    """The member shape of an array type, None for any other type."""
    if t == VEC:
        return (vector_size,)
    if isinstance(t, str) and t.startswith("f64["):
        return tuple(int(part) for part in t[4:-1].split(",") if part.strip())
    return None


def is_array(t: ValueType | None) -> bool:
    return t == VEC or (isinstance(t, str) and t.startswith("f64["))


Magnitude = Callable[[list[float], dict[str, int]], float]
"""A call's result bound from its arguments' bounds and its signature's dimensions."""


def largest_argument(mags: list[float], dims: dict[str, int]) -> float:
    return max(mags)


@dataclass(frozen=True)
class LibraryCall:
    """A NumPy call (or array operation) that programs make on per-member arrays.

    `template` is its text: `_0`, `_1`, ... stand for the arguments, `{a}`, `{b}` for the
    dimensions of `signature`; it may guard the arguments' domain (`np.clip`, `np.abs`) so that
    results stay finite and well defined. `signature` reads `"arguments -> result"`, each an
    array shape over dimension names (`(a, b)`, `(a-1,)`, `(2, a)`), `A` (any array shape, the
    same wherever it appears; `A` also names its size), `float`, `int`, `bool`, `index<a` (an
    argument kept in [0, a)) or, as a result, `int<a` (an int in [0, a)). `magnitude` bounds the
    result's magnitude. `exact` is False for results that libraries may round differently
    (transcendental functions, factorizations): programs put them on a grid (`quantized`), so
    that a last-bit difference cannot change a later comparison."""

    name: str
    template: str
    signature: str
    magnitude: Magnitude = largest_argument
    exact: bool = True


LIBRARY_CALLS: tuple[LibraryCall, ...] = (
    # reductions
    LibraryCall("sum", "np.sum(_0)", "A -> float", lambda x, d: d["A"] * x[0]),
    LibraryCall("sum_axis0", "np.sum(_0, axis=0)", "(a, b) -> (b,)", lambda x, d: d["a"] * x[0]),
    LibraryCall("sum_axis1", "_0.sum(axis=1)", "(a, b) -> (a,)", lambda x, d: d["b"] * x[0]),
    LibraryCall("max", "_0.max()", "A -> float"),
    LibraryCall("min", "np.min(_0)", "A -> float"),
    LibraryCall("max_axis1", "_0.max(axis=1)", "(a, b) -> (a,)"),
    LibraryCall("min_axis0", "np.min(_0, axis=0)", "(a, b) -> (b,)"),
    LibraryCall("mean", "np.mean(_0)", "A -> float"),
    LibraryCall("mean_axis0", "np.mean(_0, axis=0)", "(a, b) -> (b,)"),
    LibraryCall("std", "np.std(_0)", "A -> float", exact=False),
    LibraryCall("any", "np.any(_0 > 0.5)", "A -> bool", lambda x, d: 1),
    # elementwise
    LibraryCall("exp", "np.exp(np.clip(_0, -4.0, 4.0))", "A -> A", lambda x, d: 55, exact=False),
    LibraryCall("tanh", "np.tanh(_0)", "A -> A", lambda x, d: 1, exact=False),
    LibraryCall("abs", "np.abs(_0)", "A -> A"),
    LibraryCall("square", "np.square(_0)", "A -> A", lambda x, d: x[0] ** 2),
    LibraryCall("arctan2", "np.arctan2(np.abs(_0) + 0.25, _1)", "A, A -> A", lambda x, d: 4, exact=False),
    LibraryCall("hypot", "np.hypot(_0, _1)", "A, A -> A", lambda x, d: x[0] + x[1], exact=False),
    # shapes
    LibraryCall("flip", "np.flip(_0)", "A -> A"),
    LibraryCall("flip_axis1", "np.flip(_0, axis=1)", "(a, b) -> (a, b)"),
    LibraryCall("roll", "np.roll(_0, 1)", "A -> A"),
    LibraryCall("roll_by", "np.roll(_0, _1)", "(a,), int -> (a,)"),
    LibraryCall("transpose", "np.transpose(_0)", "(a, b) -> (b, a)"),
    LibraryCall("T", "_0.T", "(a, b) -> (b, a)"),
    LibraryCall("reshape", "_0.reshape({b}, {a})", "(a, b) -> (b, a)"),
    LibraryCall("reshape_flat", "_0.reshape(-1)", "(a, b) -> (a*b,)"),
    LibraryCall("reshape_square", "_0.reshape({a}, {a})", "(a*a,) -> (a, a)"),
    LibraryCall("concatenate", "np.concatenate([_0, _1])", "(a,), (b,) -> (a+b,)"),
    LibraryCall("concatenate_rows", "np.concatenate([_0, _1], axis=0)", "(a, c), (b, c) -> (a+b, c)"),
    LibraryCall("stack", "np.stack([_0, _1])", "(a,), (a,) -> (2, a)"),
    LibraryCall("stack_axis1", "np.stack([_0, _1], axis=1)", "(a,), (a,) -> (a, 2)"),
    # sorting and searching
    LibraryCall("sort", "np.sort(_0)", "(a,) -> (a,)"),
    LibraryCall("sort_rows", "np.sort(_0, axis=1)", "(a, b) -> (a, b)"),
    LibraryCall("argsort", "np.argsort(_0)[0]", "(a,) -> int<a"),
    LibraryCall("take_argsort", "_0[np.argsort(_1)]", "(a,), (a,) -> (a,)"),
    LibraryCall("cumsum", "np.cumsum(_0)", "(a,) -> (a,)", lambda x, d: d["a"] * x[0]),
    LibraryCall("cumsum_axis0", "np.cumsum(_0, axis=0)", "(a, b) -> (a, b)", lambda x, d: d["a"] * x[0]),
    LibraryCall("diff", "np.diff(_0)", "(a,) -> (a-1,)", lambda x, d: 2 * x[0]),
    LibraryCall("argmax", "np.argmax(_0)", "A -> int<A"),
    LibraryCall("argmin", "_0.argmin()", "(a,) -> int<a"),
    # linear algebra
    LibraryCall("matmul", "_0 @ _1", "(a,), (a,) -> float", lambda x, d: d["a"] * x[0] * x[1]),
    LibraryCall("matmul_mv", "_0 @ _1", "(a, b), (b,) -> (a,)", lambda x, d: d["b"] * x[0] * x[1]),
    LibraryCall("matmul_vm", "_0 @ _1", "(a,), (a, b) -> (b,)", lambda x, d: d["a"] * x[0] * x[1]),
    LibraryCall("matmul_mm", "_0 @ _1", "(a, b), (b, c) -> (a, c)", lambda x, d: d["b"] * x[0] * x[1]),
    LibraryCall("dot", "np.dot(_0, _1)", "(a,), (a,) -> float", lambda x, d: d["a"] * x[0] * x[1]),
    LibraryCall("dot_mv", "np.dot(_0, _1)", "(a, b), (b,) -> (a,)", lambda x, d: d["b"] * x[0] * x[1]),
    LibraryCall("outer", "np.outer(_0, _1)", "(a,), (b,) -> (a, b)", lambda x, d: x[0] * x[1]),
    LibraryCall("norm", "np.linalg.norm(_0)", "A -> float", lambda x, d: d["A"] * x[0]),
    LibraryCall("trace", "np.trace(_0)", "(a, a) -> float", lambda x, d: d["a"] * x[0]),
    LibraryCall("det", "np.linalg.det(np.clip(_0, -2.0, 2.0) + 10.0 * np.eye({a}))", "(a, a) -> float",
                lambda x, d: 12.0 ** d["a"], exact=False),  # fmt: skip
    # indexing
    LibraryCall("v[i]", "_0[_1]", "(a,), index<a -> float"),
    LibraryCall("m[i]", "_0[_1]", "(a, b), index<a -> (b,)"),
    LibraryCall("m[i, j]", "_0[_1, _2]", "(a, b), index<a, index<b -> float"),
    LibraryCall("m[:, j]", "_0[:, _1]", "(a, b), index<b -> (a,)"),
    LibraryCall("v[1:]", "_0[1:]", "(a,) -> (a-1,)"),
    LibraryCall("v[::-1]", "_0[::-1]", "(a,) -> (a,)"),
    LibraryCall("m[::-1]", "_0[::-1]", "(a, b) -> (a, b)"),
)
"""The NumPy calls and array operations generated programs make (with the feature
"library_calls"), one per line: name (what reports count refusals and differences by), call text,
signature, result bound, exactness."""

LIBRARY_WEIGHTS: dict[ValueType, int] = {INT: 1, FLOAT: 3, BOOL: 1, VEC: 4}
"""How often an expression of a type is a library call, against the other builders (other arrays: 6)."""
QUANTUM = 8
"""Inexact results are rounded to multiples of 1 / QUANTUM (see `quantized`)."""


def parse_calls(text: str, base: tuple[LibraryCall, ...] = LIBRARY_CALLS) -> tuple[LibraryCall, ...]:
    """The library calls `text` names: `"flip,roll"` only those, `"-flip,-roll"` all of `base`
    but those (`"+name"` adds a call back); an empty text is `base`."""
    by_name = {c.name: c for c in LIBRARY_CALLS}
    items = [part.strip() for part in text.split(",") if part.strip()]
    for item in items:
        if item.lstrip("+-") not in by_name:
            raise ValueError(f"unknown library call '{item.lstrip('+-')}'; the calls are {', '.join(by_name)}")
    names = {c.name for c in base}
    if any(not item.startswith(("+", "-")) for item in items):
        names = set()
    for item in items:
        (names.discard if item.startswith("-") else names.add)(item.lstrip("+-"))
    return tuple(c for c in LIBRARY_CALLS if c.name in names)


@dataclass(frozen=True)
class ArgumentKind:
    """One parsed item of a signature: `kind` is "array" (with `dims`), "any", "float", "int",
    "bool", "index" or "int<" (with `bound`)."""

    kind: str
    dims: tuple[str, ...] = ()
    bound: str = ""


def _parse_item(text: str) -> ArgumentKind:
    text = text.strip()
    if text.startswith("("):
        return ArgumentKind("array", tuple(d.strip() for d in text.strip("()").split(",") if d.strip()))
    for prefix, kind in (("index<", "index"), ("int<", "int<")):
        if text.startswith(prefix):
            return ArgumentKind(kind, bound=text[len(prefix):])
    return ArgumentKind({"A": "any"}.get(text, text))


def _split_items(text: str) -> list[str]:
    """`text` split at the commas outside parentheses."""
    items, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    return [item for item in [*items, current] if item.strip()]


def parse_signature(signature: str) -> tuple[list[ArgumentKind], ArgumentKind]:
    arguments, result = signature.split("->")
    return [_parse_item(item) for item in _split_items(arguments)], _parse_item(result)


def _dimension(expression: str, dims: dict[str, int]) -> int:
    """The value of a dimension expression (`a`, `a-1`, `a*b`, `2`) under `dims`."""

    def evaluate(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return dims[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Sub | ast.Mult):
            left, right = evaluate(node.left), evaluate(node.right)
            return left + right if isinstance(node.op, ast.Add) else left - right if isinstance(node.op, ast.Sub) else left * right
        raise ValueError(f"bad dimension expression '{expression}'")

    return evaluate(_parsed(expression))


@functools.cache
def _parsed(expression: str) -> ast.expr:
    return ast.parse(expression, mode="eval").body


@dataclass(frozen=True)
class Signature:
    """A library call at concrete types: its argument types (`index` arguments as ("index", n)),
    result type, result bound for `int<` results, and its dimensions."""

    call: LibraryCall
    arguments: tuple[Any, ...]
    result: ValueType
    dims: tuple[tuple[str, int], ...]


@functools.cache
def signatures(call_: LibraryCall, shapes: tuple[tuple[int, ...], ...], vector_size: int) -> tuple[Signature, ...]:
    """Every instance of `call_` whose array arguments and result have shapes in `shapes`."""
    arguments, result = parse_signature(call_.signature)
    items = [*arguments, result]
    names = sorted({n.id for item in items for text in (*item.dims, item.bound) if text
                    for n in ast.walk(_parsed(text)) if isinstance(n, ast.Name)} - {"A"})  # fmt: skip
    lengths = sorted({d for shape in shapes for d in shape})
    uses_any = any(item.kind == "any" or item.bound == "A" for item in items)
    found = []
    for values in itertools.product(lengths, repeat=len(names)):
        for any_shape in shapes if uses_any else [()]:
            dims = dict(zip(names, values, strict=True))
            dims["A"] = int(np.prod(any_shape))
            concrete = [_concrete(item, dims, any_shape, shapes, vector_size) for item in items]
            if all(c is not None for c in concrete):
                *args, res = concrete
                found.append(Signature(call_, tuple(args), res, tuple(sorted(dims.items()))))
    return tuple(found)


def _concrete(item: ArgumentKind, dims: dict[str, int], any_shape: tuple[int, ...],
              shapes: tuple[tuple[int, ...], ...], vector_size: int) -> Any:  # fmt: skip
    """The concrete type of a signature item, None when its shape is not one of `shapes`."""
    if item.kind in ("array", "any"):
        shape = any_shape if item.kind == "any" else tuple(_dimension(d, dims) for d in item.dims)
        return array_type(shape, vector_size) if shape in shapes else None
    if item.kind in ("index", "int<"):
        return (item.kind, _dimension(item.bound, dims))
    return {"float": FLOAT, "int": INT, "bool": BOOL}[item.kind]


def result_type(signature: Signature) -> ValueType:
    result = signature.result
    return INT if isinstance(result, tuple) else result


def emit(signature: Signature, arguments: list[ast.expr]) -> ast.expr:
    """The call's expression over the typed `arguments`, typed and tagged with the call's name
    (`fz_call`), its inexact results quantized."""
    call_ = signature.call
    dims = dict(signature.dims)
    tree = ast.parse(call_.template.format(**dims), mode="eval").body
    arguments = list(arguments)

    class Substitute(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id.startswith("_") and node.id[1:].isdigit():
                return copy.deepcopy(arguments[int(node.id[1:])])
            return node

    node = Substitute().visit(tree)
    t = result_type(signature)
    if isinstance(signature.result, tuple):
        mag = float(signature.result[1])
    else:
        mag = float(call_.magnitude([mag_of(a) for a in arguments if type_of(a) is not None] or [0.0], dims))
    node = typed(node, t, mag)
    node.fz_call = call_.name  # type: ignore[attr-defined]
    return node if call_.exact else quantized(node)


def quantized(node: ast.expr) -> ast.expr:
    """`np.round(8 * x + 0.3) / 8`: `x` on the grid of eighths. A rounding boundary of this grid
    is no dyadic rational, so an exact value computed with a last-bit error never falls on either
    side of one, and an irrational value lies within a few ulps of one with negligible odds."""
    t, mag = type_of(node), mag_of(node)
    scaled = binop(binop(literal(float(QUANTUM), FLOAT), ast.Mult(), node, t, QUANTUM * mag), ast.Add(),  # type: ignore[arg-type]
                   literal(0.3, FLOAT), t, QUANTUM * mag + 1)  # type: ignore[arg-type]  # fmt: skip
    rounded = typed(call(np_attr("round"), scaled), t, QUANTUM * mag + 1)  # type: ignore[arg-type]
    return binop(rounded, ast.Div(), literal(float(QUANTUM), FLOAT), t, mag + 1)  # type: ignore[arg-type]


def library_calls_in(module: ast.AST) -> list[str]:
    """The names of the library calls in `module` (tagged by `emit`), sorted."""
    return sorted({node.fz_call for node in ast.walk(module) if hasattr(node, "fz_call")})


# ----- function plans -------------------------------------------------------------------------


@dataclass
class FunctionSpec:
    """A function's name, role, signature and the functions it may call."""

    name: str
    role: str
    """"entry", "recursive", "helper" or "opaque"."""
    params: list[tuple[str, ValueType]]
    result: ValueType
    callees: list[FunctionSpec] = field(default_factory=list)
    result_mag: float = LIMIT


@dataclass
class Scope:
    """The variables visible at a point of a function body, and the loops around it."""

    variables: dict[str, ValueType]
    loop_depth: int = 0
    depth: int = 0
    in_base_case: bool = False

    def nested(self, loop: bool = False) -> Scope:
        return Scope(dict(self.variables), self.loop_depth + int(loop), self.depth + 1, self.in_base_case)

    def of_type(self, t: ValueType) -> list[str]:
        return [name for name, kind in self.variables.items() if kind == t]


class ProgramGenerator:
    """Draws one `FuzzProgram` from `rng` using only the given features."""

    def __init__(self, rng: random.Random, features: frozenset[str] = DEFAULT_FEATURES,
                 calls: tuple[LibraryCall, ...] = LIBRARY_CALLS):  # fmt: skip
        self.rng = rng
        self.features = features
        self.vector_size = rng.choice((2, 3, 4))
        self.constants: dict[str, tuple[ValueType, ast.expr]] = {}
        """Module-level constants the functions read (closure constants): name -> type, value."""
        if self.has("constants"):
            self.constants["N"] = (INT, literal(rng.randint(-5, 9), INT))
            if self.has("arrays"):
                values = [literal(rng.randint(-12, 12) / 4, FLOAT) for _ in range(self.vector_size)]
                self.constants["C"] = (VEC, typed(call(np_attr("array"), ast.List(values, ast.Load())), VEC, 3))
        self.shapes: tuple[tuple[int, ...], ...] = ((self.vector_size,),)
        """The member shapes of the program's arrays."""
        self.signatures: list[Signature] = []
        """The library calls the program may make, at the program's shapes."""
        if self.has("library_calls") and self.has("arrays") and calls:
            lengths = sorted({self.vector_size, rng.choice((2, 3))})
            self.shapes = (*((k,) for k in lengths), *((i, j) for i in lengths for j in lengths))
            self.signatures = [s for c in calls for s in signatures(c, self.shapes, self.vector_size)]

    @property
    def library(self) -> bool:
        """Whether the program makes library calls on arrays of several shapes."""
        return bool(self.signatures)

    def array_type(self) -> ValueType:
        """One of the program's array types, drawn (VEC when the program makes no library calls)."""
        return array_type(self.rng.choice(self.shapes), self.vector_size)

    def constant_names(self, t: ValueType) -> list[str]:
        return [name for name, (kind, _) in self.constants.items() if kind == t]

    def has(self, feature: str) -> bool:
        return feature in self.features

    def generate(self, label: str = "") -> FuzzProgram:
        specs = self._plan()
        entry = specs[0]
        opaque = {spec.name: self._opaque_function(spec) for spec in specs if spec.role == "opaque"}
        functions = [opaque.get(spec.name) or FunctionBuilder(self, spec).build() for spec in specs]
        module = ast.Module([*self._preamble(), *functions], [])
        ast.fix_missing_locations(module)
        batched = [s.name for s in specs if s.role != "opaque"]
        declared = {}
        if self.has("type_inference"):
            declared = {s.name: s.result for s in specs if s.role != "opaque" and self.rng.random() < 0.3}
        input_types = [t for _, t in entry.params]
        return FuzzProgram(module, entry.name, batched, declared, self.vector_size, input_types,
                           self._inputs(input_types), label)  # fmt: skip

    # -- plan ---------------------------------------------------------------------------------

    def _plan(self) -> list[FunctionSpec]:
        rng = self.rng
        opaque = [self._opaque_spec(f"o{i + 1}") for i in range(rng.choice((0, 1, 2)))] if self.has("opaque_helpers") else []
        helpers: list[FunctionSpec] = []
        if self.has("helpers"):
            for i in range(rng.choice((0, 1, 1, 2))):
                helpers.append(FunctionSpec(f"h{i + 1}", "helper", self._params(rng.randint(1, 2)), self._result_type()))
        for i, helper in enumerate(helpers):
            helper.callees = helpers[i + 1:] + opaque
        recursive: list[FunctionSpec] = []
        if self.has("recursion") and rng.random() < 0.7:
            count = 2 if self.has("mutual_recursion") and rng.random() < 0.4 else 1
            for i in range(count):
                params = [("d", INT), *self._params(rng.randint(0, 2), first=1)]
                recursive.append(FunctionSpec(f"r{i + 1}", "recursive", params, self._result_type()))
        for spec in recursive:
            spec.callees = recursive + helpers + opaque
        entry = FunctionSpec("f", "entry", self._params(rng.randint(1, 3)), self._result_type(), recursive + helpers + opaque)
        return [entry, *recursive, *helpers, *opaque]

    def _params(self, count: int, first: int = 0) -> list[tuple[str, ValueType]]:
        return [(f"p{first + i}", self._param_type()) for i in range(count)]

    def _param_type(self) -> ValueType:
        choices: list[tuple[ValueType, int]] = [(INT, 6), (FLOAT, 3), (BOOL, 1)]
        if self.has("arrays"):
            choices.append((VEC, 3))
        if self.library:
            choices.append((self.array_type(), 6))
        if self.has("namedtuples"):
            choices.append((PAIR, 1))
        if self.has("tuples"):
            choices.append(((INT, VEC) if self.has("arrays") else (INT, FLOAT), 1))
        return weighted(self.rng, choices)

    def _result_type(self) -> ValueType:
        choices: list[tuple[ValueType, int]] = [(INT, 6), (FLOAT, 4), (BOOL, 1)]
        if self.has("arrays"):
            choices.append((VEC, 2))
        if self.library:
            choices.append((self.array_type(), 3))
        if self.has("namedtuples"):
            choices.append((PAIR, 1))
        if self.has("tuples"):
            choices.append(((FLOAT, VEC) if self.has("arrays") else (FLOAT, INT), 1))
            choices.append(((INT, FLOAT), 1))
        return weighted(self.rng, choices)

    def _opaque_spec(self, name: str) -> FunctionSpec:
        signatures: list[tuple[list[ValueType], ValueType]] = [([INT, INT], INT), ([INT], INT), ([FLOAT, FLOAT], FLOAT),
                                                               ([FLOAT, INT], FLOAT)]  # fmt: skip
        if self.has("arrays"):
            signatures += [([VEC], VEC), ([VEC, VEC], VEC)]
        kinds, result = self.rng.choice(signatures)
        return FunctionSpec(name, "opaque", [(f"p{i}", k) for i, k in enumerate(kinds)], result)

    def _opaque_function(self, spec: FunctionSpec) -> ast.FunctionDef:
        """`def o1(p0, p1): return p0 * 2 - p1`: operators only, so it runs on NumPy arrays, JAX
        arrays and TF tensors alike, and no division (it sees junk rows)."""
        body = OpaqueBody(self.rng, spec).body()
        spec.result_mag = mag_of(body)
        return _function_def(spec, [ast.Return(body)])

    def _preamble(self) -> list[ast.stmt]:
        """`import collections`, `import numpy as np`, `P = collections.namedtuple('P', ['a', 'b'])`."""
        statements: list[ast.stmt] = [ast.Import([ast.alias("collections")]), ast.Import([ast.alias("numpy", "np")])]
        fields = ast.List([ast.Constant(name) for name, _ in PAIR_FIELDS], ast.Load())
        definition = call(ast.Attribute(load("collections"), "namedtuple", ast.Load()), ast.Constant("P"), fields)
        statements.append(ast.Assign([store("P")], definition))
        statements += [ast.Assign([store(name)], value) for name, (_, value) in self.constants.items()]
        return statements

    # -- inputs -------------------------------------------------------------------------------

    def _inputs(self, types: list[ValueType]) -> list[Any]:
        batch = self.rng.randint(2 if self.library else 1, 8)  # a call computed across the batch shows
        values = [self.input_value(t, batch) for t in types]
        if self.has("broadcast_inputs") and batch > 1 and values and self.rng.random() < 0.2:
            i = self.rng.randrange(len(values))
            values[i] = _first_member(values[i])
        return values

    def input_value(self, t: ValueType, batch: int) -> Any:
        rng = self.rng
        if isinstance(t, tuple):
            return tuple(self.input_value(part, batch) for part in t)
        if t == PAIR:
            return tuple(self.input_value(kind, batch) for _, kind in PAIR_FIELDS)
        if t == INT:
            return np.array([rng.randint(-12, 12) for _ in range(batch)], dtype=np.int64)
        if t == FLOAT:
            return np.array([rng.randint(-24, 24) / 4 for _ in range(batch)], dtype=np.float64)
        if t == BOOL:
            return np.array([rng.random() < 0.5 for _ in range(batch)], dtype=np.bool_)
        shape = array_shape(t, self.vector_size)
        assert shape is not None, t
        values = [rng.randint(-16, 16) / 4 for _ in range(batch * int(np.prod(shape)))]
        return np.array(values, dtype=np.float64).reshape(batch, *shape)


def _first_member(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_first_member(part) for part in value)
    return value[:1]


def _function_def(spec: FunctionSpec, body: list[ast.stmt]) -> ast.FunctionDef:
    arguments = ast.arguments([], [ast.arg(name) for name, _ in spec.params], None, [], [], None, [])
    return ast.FunctionDef(name=spec.name, args=arguments, body=body, decorator_list=[], returns=None)


def weighted(rng: random.Random, choices: list[tuple[Any, int]]) -> Any:
    values, weights = zip(*choices, strict=True)
    return rng.choices(values, weights)[0]


class OpaqueBody:
    """The expression of an opaque helper over its parameters (elementwise operators only)."""

    def __init__(self, rng: random.Random, spec: FunctionSpec):
        self.rng = rng
        self.spec = spec

    def body(self) -> ast.expr:
        """The expression; it reads every parameter, so that its result has the batch dimension
        whichever arguments are batched (the others are compile-time constants)."""
        expression = self.expression(2)
        read = {node.id for node in ast.walk(expression) if isinstance(node, ast.Name)}
        for name, kind in self.spec.params:
            if name not in read:
                expression = binop(expression, ast.Add(), typed(load(name), kind, LIMIT), self.spec.result,
                                   LIMIT + mag_of(expression))  # fmt: skip
        return expression

    def expression(self, depth: int) -> ast.expr:
        t = self.spec.result
        if depth == 0 or self.rng.random() < 0.3:
            return self._leaf(t)
        left, right = self.expression(depth - 1), self.expression(depth - 1)
        op, mag = self.rng.choice([(ast.Add(), mag_of(left) + mag_of(right)), (ast.Sub(), mag_of(left) + mag_of(right)),
                                   (ast.Mult(), mag_of(left) * mag_of(right))])  # fmt: skip
        return binop(left, op, right, t, mag)

    def _leaf(self, t: ValueType) -> ast.expr:
        names = [name for name, kind in self.spec.params if kind == t or (t == FLOAT and kind == INT)]
        if names and self.rng.random() < 0.75:
            return typed(load(self.rng.choice(names)), t, LIMIT)
        if t == INT:
            return literal(self.rng.randint(-5, 5), INT)
        return literal(self.rng.randint(-8, 8) / 4, FLOAT)


# ----- function bodies ------------------------------------------------------------------------

Builder = Callable[[], ast.expr | None]


class FunctionBuilder:
    """Generates the body of one batched function."""

    MAX_STATEMENTS = 14
    MAX_CALLS = 4
    MAX_RECURSIVE_CALLS = 2

    def __init__(self, generator: ProgramGenerator, spec: FunctionSpec):
        self.g = generator
        self.rng = generator.rng
        self.spec = spec
        self.statements_left = self.MAX_STATEMENTS
        self.calls = 0
        self.recursive_calls = 0
        self.fresh = 0
        self.frozen: set[str] = {"d"} if spec.role == "recursive" else set()
        """Names no statement may assign (the depth, loop variables and counters)."""
        self.owned: set[str] = set()
        """Array variables holding a copy of their own (item assignment may write into them)."""

    def new_name(self, prefix: str) -> str:
        self.fresh += 1
        return f"{prefix}{self.fresh}"

    def build(self) -> ast.FunctionDef:
        scope = Scope(dict(self.spec.params))
        body: list[ast.stmt] = []
        if self.spec.role == "recursive":
            base_scope = scope.nested()
            base_scope.in_base_case = True
            test = self.rng.choice([
                compare(load("d"), [ast.LtE()], [literal(0, INT)]),
                compare(load("d"), [ast.Lt()], [literal(1, INT)]),
            ])  # fmt: skip
            body.append(ast.If(test, [self.return_statement(base_scope)], []))
        if not self.descends_first():
            body += self.block(scope, self.rng.randint(1, 3))
        for callee in self.required_callees():
            body.append(self.call_statement(callee, scope))
        body += self.block(scope, self.rng.randint(1, 3))
        body.append(self.return_statement(scope))
        return _function_def(self.spec, body)

    def descends_first(self) -> bool:
        """With `descents`, a lone recursive function's body begins with its recursive call."""
        group = [s for s in self.spec.callees if s.role == "recursive"]
        return self.g.has("descents") and self.spec.role == "recursive" and group == [self.spec]

    def required_callees(self) -> list[FunctionSpec]:
        """Callees called unconditionally at the top level of the body (besides the calls that
        expressions draw), so that recursion and helpers run in most programs."""
        group = [s for s in self.spec.callees if s.role == "recursive"]
        if self.spec.role == "entry":
            helpers = [s for s in self.spec.callees if s.role == "helper" and self.rng.random() < 0.6]
            return group[:1] + helpers
        if self.spec.role == "recursive" and self.rng.random() < 0.8:
            mine = group.index(self.spec)
            return [group[(mine + 1) % len(group)]]
        return []

    def call_statement(self, callee: FunctionSpec, scope: Scope) -> ast.stmt:
        """`v = callee(...)`, or `a, b = callee(...)` for a tuple result."""
        value = self.call_to(callee, scope, 1)
        parts = list(callee.result) if isinstance(callee.result, tuple) else [callee.result]
        names = [self.new_name("v") for _ in parts]
        scope.variables.update(zip(names, parts, strict=True))
        if isinstance(callee.result, tuple):
            return ast.Assign([ast.Tuple([store(n) for n in names], ast.Store())], value)
        return ast.Assign([store(names[0])], value)

    # -- statements ---------------------------------------------------------------------------

    def block(self, scope: Scope, size: int) -> list[ast.stmt]:
        statements: list[ast.stmt] = []
        for _ in range(size):
            if self.statements_left <= 0:
                break
            self.statements_left -= 1
            statements += self.statement(scope)
            if isinstance(statements[-1], ast.Return | ast.Break | ast.Continue):
                break
        return statements or [ast.Pass()]

    def statement(self, scope: Scope) -> list[ast.stmt]:
        nest = scope.depth < 3
        loops = self.g.has("loops") and nest and scope.loop_depth < 2
        choices: list[tuple[Callable[[Scope], list[ast.stmt]], int]] = [
            (self.assign_new, 8), (self.reassign, 6), (self.augmented_assign, 2),
            (self.if_statement, 5 if nest else 0), (self.while_loop, 3 if loops else 0),
            (self.for_loop, 3 if loops else 0), (self.early_return, 2 if scope.depth > 0 else 0),
            (self.loop_exit, 3 if scope.loop_depth > 0 else 0), (self.unpack, 2 if self.g.has("tuples") else 0),
            (self.guarded, 2 if self.g.has("guarded_operations") else 0),
            (self.item_assignment, 3 if self.g.has("item_assignment") else 0),
        ]  # fmt: skip
        return weighted(self.rng, [(c, w) for c, w in choices if w])(scope)

    def value_type(self) -> ValueType:
        choices: list[tuple[ValueType, int]] = [(INT, 6), (FLOAT, 4), (BOOL, 2)]
        if self.g.has("arrays"):
            choices.append((VEC, 3))
        if self.g.library:
            choices.append((self.g.array_type(), 5))
        if self.g.has("namedtuples"):
            choices.append((PAIR, 1))
        if self.g.has("tuples"):
            choices.append(((INT, FLOAT), 1))
        return weighted(self.rng, choices)

    def assign_new(self, scope: Scope) -> list[ast.stmt]:
        t = self.value_type()
        name = self.new_name("v")
        value = self.bounded(self.expr(t, scope, self.rng.randint(1, 3)))
        targets = [store(name)]
        if t == VEC and self.g.has("item_assignment") and self.rng.random() < 0.5:
            value = typed(method(value, "copy"), VEC, mag_of(value))
            self.owned.add(name)
        elif self.rng.random() < 0.05:  # `a = b = e`
            other = self.new_name("v")
            scope.variables[other] = t
            targets.append(store(other))
        scope.variables[name] = t
        return [ast.Assign(targets, value)]

    def assignable(self, scope: Scope) -> list[str]:
        return [name for name in scope.variables if name not in self.frozen]

    def reassign(self, scope: Scope) -> list[ast.stmt]:
        names = self.assignable(scope)
        if not names:
            return self.assign_new(scope)
        name = self.rng.choice(names)
        t = scope.variables[name]
        value = self.bounded(self.expr(t, scope, self.rng.randint(1, 3)))
        if name in self.owned:
            value = typed(method(value, "copy"), VEC, mag_of(value))
        return [ast.Assign([store(name)], value)]

    def augmented_assign(self, scope: Scope) -> list[ast.stmt]:
        """`x += e` then `x = max(min(x, 1000), -1000)` (keeps the bound). Scalars only: on an
        array `+=` writes into the array in place, which Python shares with its other names."""
        names = [n for n in self.assignable(scope) if scope.variables[n] in (INT, FLOAT)]
        if not names:
            return self.assign_new(scope)
        name = self.rng.choice(names)
        t = scope.variables[name]
        op = self.rng.choice([ast.Add(), ast.Sub(), ast.Mult()])
        value = self.bounded(self.expr(t, scope, 2))
        statements: list[ast.stmt] = [ast.AugAssign(store(name), op, value)]
        grown = LIMIT * mag_of(value) if isinstance(op, ast.Mult) else LIMIT + mag_of(value)
        if grown > LIMIT:
            statements.append(ast.Assign([store(name)], clamp(typed(load(name), t, grown))))
        return statements

    def if_statement(self, scope: Scope) -> list[ast.stmt]:
        test = self.walrus_test(scope) if self.rng.random() < 0.1 else self.condition(scope)
        body = self.block(scope.nested(), self.rng.randint(1, 3))
        orelse: list[ast.stmt] = []
        roll = self.rng.random()
        if roll < 0.3:
            orelse = [self.if_statement(scope.nested())[0]]  # elif
        elif roll < 0.65:
            orelse = self.block(scope.nested(), self.rng.randint(1, 3))
        return [ast.If(test, body, orelse)]

    def walrus_test(self, scope: Scope) -> ast.expr:
        """`(v := e) > c`: `v` is assigned whenever the test runs (the test of an `elif` is
        generated in a nested scope, so `v` is used only where it exists)."""
        t = self.rng.choice([INT, FLOAT])
        value = self.bounded(self.expr(t, scope, 2))
        name = self.new_name("v")
        scope.variables[name] = t
        target = typed(ast.NamedExpr(store(name), value), t, mag_of(value))
        return compare(target, [self.rng.choice([ast.Gt(), ast.LtE()])], [self.constant(t, scope)])

    def loop_else(self, scope: Scope) -> list[ast.stmt]:
        """The `else:` block of a loop (runs when the loop ends without `break`), sometimes."""
        return self.block(scope.nested(), self.rng.randint(1, 2)) if self.rng.random() < 0.2 else []

    def while_loop(self, scope: Scope) -> list[ast.stmt]:
        counter = self.new_name("k")
        self.frozen.add(counter)
        start = self.rng.choice([
            lambda: literal(self.rng.randint(0, 6), INT),
            lambda: typed(call("min", typed(call("abs", self.expr(INT, scope, 1)), INT, LIMIT),
                               literal(self.rng.randint(2, 6), INT)), INT, 6),
            lambda: modulo_bound(self.expr(INT, scope, 1), self.rng.randint(2, 7)),
        ])()  # fmt: skip
        scope.variables[counter] = INT
        body_scope = scope.nested(loop=True)
        running = compare(load(counter), [ast.Gt()], [literal(0, INT)])
        if self.rng.random() < 0.5:
            extra = self.condition(scope)
            pair = [running, extra] if self.rng.random() < 0.5 else [extra, running]
            running = typed(ast.BoolOp(ast.And(), pair), BOOL, 1)
        countdown = ast.AugAssign(store(counter), ast.Sub(), literal(1, INT))
        body = [countdown, *self.block(body_scope, self.rng.randint(1, 4))]
        return [ast.Assign([store(counter)], start), ast.While(running, body, self.loop_else(scope))]

    def for_loop(self, scope: Scope) -> list[ast.stmt]:
        """`for i in range(...)`, or (unrolled by abir) `for i in (a, b, c)` over a tuple."""
        variable = self.new_name("i")
        body_scope = scope.nested(loop=True)
        kind = INT if self.rng.random() < 0.75 else FLOAT
        body_scope.variables[variable] = kind
        self.frozen.add(variable)
        body = self.block(body_scope, self.rng.randint(1, 4))
        if kind == INT and self.rng.random() < 0.8:
            iterable = call("range", *self.range_arguments(scope))
        else:
            items = [self.bounded(self.expr(kind, scope, 1)) for _ in range(self.rng.randint(1, 3))]
            iterable = ast.Tuple(items, ast.Load())
        return [ast.For(store(variable), iterable, body, self.loop_else(scope))]

    def range_arguments(self, scope: Scope) -> list[ast.expr]:
        rng = self.rng

        def short_stop() -> ast.expr:
            return rng.choice([
                lambda: literal(rng.randint(0, 5), INT),
                lambda: typed(call("min", typed(call("abs", self.expr(INT, scope, 1)), INT, LIMIT),
                                   literal(rng.randint(1, 5), INT)), INT, 5),
                lambda: modulo_bound(self.expr(INT, scope, 1), rng.randint(2, 6)),
            ])()  # fmt: skip

        form = rng.randrange(4)
        if form == 0:
            return [short_stop()]
        if form == 1:
            return [literal(rng.randint(-2, 2), INT), short_stop()]
        if form == 2:
            return [literal(rng.randint(3, 6), INT), literal(rng.randint(-2, 2), INT), literal(rng.choice((-1, -2)), INT)]
        step = binop(binop(modulo_bound(self.expr(INT, scope, 1), 2), ast.Mult(), literal(2, INT), INT, 2),
                     ast.Sub(), literal(1, INT), INT, 1)  # fmt: skip
        return [literal(rng.randint(-2, 2), INT), literal(rng.randint(-3, 4), INT), step]

    def early_return(self, scope: Scope) -> list[ast.stmt]:
        return [ast.If(self.condition(scope), [self.return_statement(scope.nested())], [])]

    def return_statement(self, scope: Scope) -> ast.Return:
        return ast.Return(self.bounded(self.expr(self.spec.result, scope, self.rng.randint(1, 3))))

    def loop_exit(self, scope: Scope) -> list[ast.stmt]:
        jump = ast.Break() if self.rng.random() < 0.5 else ast.Continue()
        if self.rng.random() < 0.15:
            return [jump]
        return [ast.If(self.condition(scope), [jump], [])]

    def unpack(self, scope: Scope) -> list[ast.stmt]:
        """`a, b = <tuple>`: a tuple variable, a call returning a tuple, or a literal tuple."""
        t = (INT, FLOAT)
        callables = [s for s in self.callable_specs(scope) if isinstance(s.result, tuple)]
        if callables and self.rng.random() < 0.6:
            spec = self.rng.choice(callables)
            t = spec.result  # type: ignore[assignment]
            value = self.call_to(spec, scope, 1)
        else:
            value = self.expr(t, scope, 2)
        names = []
        for part in t:
            name = self.new_name("v")
            scope.variables[name] = part
            names.append(name)
        return [ast.Assign([ast.Tuple([store(n) for n in names], ast.Store())], value)]

    def guarded(self, scope: Scope) -> list[ast.stmt]:
        """An operation that is only valid where the program's own test holds:
        `if b != 0: x = a // b` or `if 0 <= i < 3: x = v[i]`."""
        vectors = scope.of_type(VEC)
        ints = scope.of_type(INT)
        if vectors and ints and self.rng.random() < 0.5:
            index = self.rng.choice(ints)
            target = self.new_name("v")
            lower = literal(self.rng.choice((0, -self.g.vector_size)), INT)
            test = compare(lower, [ast.LtE(), ast.Lt()], [load(index), literal(self.g.vector_size, INT)])
            element = typed(ast.Subscript(load(self.rng.choice(vectors)), load(index), ast.Load()), FLOAT, LIMIT)
            fallback = self.expr(FLOAT, scope, 1)
            scope.variables[target] = FLOAT
            return [ast.Assign([store(target)], fallback), ast.If(test, [ast.Assign([store(target)], element)], [])]
        if not ints:
            return self.assign_new(scope)
        divisor = self.rng.choice(ints)
        target = self.new_name("v")
        dividend = self.bounded(self.expr(INT, scope, 1))
        op = self.rng.choice([ast.FloorDiv(), ast.Mod()])
        quotient = binop(dividend, op, typed(load(divisor), INT, LIMIT), INT, max(mag_of(dividend), LIMIT))
        test = compare(load(divisor), [ast.NotEq()], [literal(0, INT)])
        fallback = self.expr(INT, scope, 1)
        scope.variables[target] = INT
        if self.rng.random() < 0.5:
            ternary = typed(ast.IfExp(test, quotient, fallback), INT, max(mag_of(quotient), mag_of(fallback)))
            return [ast.Assign([store(target)], self.bounded(ternary))]
        return [ast.Assign([store(target)], fallback), ast.If(test, [ast.Assign([store(target)], quotient)], [])]

    def item_assignment(self, scope: Scope) -> list[ast.stmt]:
        """`w[i % 3] = e` on an array variable that holds its own copy."""
        owned = [n for n in scope.of_type(VEC) if n in self.owned]
        if not owned:
            name = self.new_name("w")
            value = typed(method(self.expr(VEC, scope, 1), "copy"), VEC, LIMIT)
            self.owned.add(name)
            scope.variables[name] = VEC
            return [ast.Assign([store(name)], value)]
        target = ast.Subscript(load(self.rng.choice(owned)), self.index(scope), ast.Store())
        return [ast.Assign([target], self.bounded(self.expr(FLOAT, scope, 2)))]

    # -- expressions --------------------------------------------------------------------------

    def bounded(self, node: ast.expr) -> ast.expr:
        return clamp(node)

    def operand(self, t: ValueType, scope: Scope, depth: int, calls: bool = True) -> ast.expr:
        """A sub-expression, clamped if it could grow past `WRAP_ABOVE`."""
        node = self.expr(t, scope, depth, calls)
        return clamp(node, LIMIT) if mag_of(node) > WRAP_ABOVE else node

    def expr(self, t: ValueType, scope: Scope, depth: int, calls: bool = True) -> ast.expr:
        builders = self.builders(t, scope, depth, calls)
        while builders:
            builder = weighted(self.rng, builders)
            node = builder()
            if node is not None:
                return node
            builders = [(b, w) for b, w in builders if b is not builder]
        raise AssertionError(f"no expression of type {t}")  # leaves always exist

    def builders(self, t: ValueType, scope: Scope, depth: int, calls: bool) -> list[tuple[Builder, int]]:
        choices: list[tuple[Builder, int]] = [(lambda: self.leaf(t, scope), 3)]
        if depth > 0:
            table = {INT: self.int_builders, FLOAT: self.float_builders, BOOL: self.bool_builders,
                     VEC: self.vec_builders, PAIR: self.pair_builders}  # fmt: skip
            if isinstance(t, tuple):
                choices += self.tuple_builders(t, scope, depth - 1)
            elif t in table:
                choices += table[t](scope, depth - 1)
            else:
                choices += self.array_builders(t, scope, depth - 1)
            if self.g.library and isinstance(t, str) and t != PAIR:
                choices.append((lambda: self.library_call(t, scope, depth - 1), LIBRARY_WEIGHTS.get(t, 6)))
            if calls and self.calls < self.MAX_CALLS:
                callees = [s for s in self.callable_specs(scope) if s.result == t]
                if callees:
                    choices.append((lambda: self.call_to(self.rng.choice(callees), scope, depth - 1), 3))
            if isinstance(t, str) and not is_array(t):
                choices.append((lambda: self.ternary(t, scope, depth - 1, calls), 1))
            choices.append((lambda: self.structure_part(t, scope), 2))
        return choices

    def leaf(self, t: ValueType, scope: Scope) -> ast.expr:
        constants = self.g.constant_names(t)
        if constants and self.rng.random() < 0.1:
            return typed(load(self.rng.choice(constants)), t, mag_of(self.g.constants[constants[0]][1]))
        names = scope.of_type(t)
        if names and self.rng.random() < 0.85:
            return self.variable(self.rng.choice(names), t)
        numbers = scope.of_type(INT) + scope.of_type(FLOAT)
        if t == BOOL and numbers and self.rng.random() < 0.8:  # a test of a variable rather than True
            name = self.rng.choice(numbers)
            threshold = self.constant(scope.variables[name], scope)
            return compare(typed(load(name), scope.variables[name], LIMIT), [self.rng.choice([ast.Gt(), ast.Lt()])],
                           [threshold])  # fmt: skip
        return self.constant(t, scope)

    def variable(self, name: str, t: ValueType) -> ast.expr:
        if name in self.owned:
            return typed(method(load(name), "copy"), VEC, LIMIT)  # no aliasing of arrays written in place
        return typed(load(name), t, LIMIT)

    def constant(self, t: ValueType, scope: Scope) -> ast.expr:
        rng = self.rng
        if t == INT:
            return literal(rng.randint(-9, 9) if rng.random() < 0.9 else rng.randint(-100, 100), INT)
        if t == FLOAT:
            return literal(rng.randint(-16, 16) / 4, FLOAT)
        if t == BOOL:
            return literal(rng.random() < 0.5, BOOL)
        if t == VEC:
            values = ast.List([literal(rng.randint(-8, 8) / 4, FLOAT) for _ in range(self.g.vector_size)], ast.Load())
            return typed(call(np_attr("array"), values), VEC, 2)
        shape = array_shape(t, self.g.vector_size)
        if shape is not None:
            return typed(call(np_attr("array"), self.nested_list(shape)), t, 2)
        if t == PAIR:
            return typed(call("P", self.constant(INT, scope), self.constant(FLOAT, scope)), PAIR, LIMIT)
        return typed(ast.Tuple([self.constant(part, scope) for part in t], ast.Load()), t, LIMIT)

    def nested_list(self, shape: tuple[int, ...]) -> ast.List:
        """A literal list of lists of quarters, of `shape`."""
        if len(shape) == 1:
            return ast.List([literal(self.rng.randint(-8, 8) / 4, FLOAT) for _ in range(shape[0])], ast.Load())
        return ast.List([self.nested_list(shape[1:]) for _ in range(shape[0])], ast.Load())

    def structure_part(self, t: ValueType, scope: Scope) -> ast.expr | None:
        """`p.a`, `p[1]`, `t[0]` of a namedtuple or tuple variable holding a `t`."""
        options = []
        for name, kind in scope.variables.items():
            if kind == PAIR:
                options += [(name, i, fname) for i, (fname, ftype) in enumerate(PAIR_FIELDS) if ftype == t]
            elif isinstance(kind, tuple):
                options += [(name, i, None) for i, part in enumerate(kind) if part == t]
        if not options:
            return None
        name, index, field_name = self.rng.choice(options)
        if field_name is not None and self.rng.random() < 0.7:
            return typed(ast.Attribute(load(name), field_name, ast.Load()), t, LIMIT)
        return typed(ast.Subscript(load(name), ast.Constant(index), ast.Load()), t, LIMIT)

    def ternary(self, t: ValueType, scope: Scope, depth: int, calls: bool) -> ast.expr:
        """`a if c else b`; with the feature "ternary_calls", an arm may call a function (often a
        recursive one: only the chosen arm may run)."""
        arm_calls = calls and self.g.has("ternary_calls")
        callees = [s for s in self.callable_specs(scope) if s.result == t] if arm_calls else []
        test = self.condition(scope, depth, calls=False)
        if callees and self.calls < self.MAX_CALLS and self.rng.random() < 0.7:
            body = self.call_to(self.rng.choice(callees), scope, depth)
            orelse = self.operand(t, scope, depth, calls=False)
            if self.rng.random() < 0.5:
                body, orelse = orelse, body
        else:
            body, orelse = self.operand(t, scope, depth, arm_calls), self.operand(t, scope, depth, arm_calls)
        return typed(ast.IfExp(test, body, orelse), t, max(mag_of(body), mag_of(orelse)))

    def condition(self, scope: Scope, depth: int = 2, calls: bool = True) -> ast.expr:
        return self.expr(BOOL, scope, max(depth, 1), calls)

    def int_builders(self, scope: Scope, depth: int) -> list[tuple[Builder, int]]:
        rng = self.rng

        def arithmetic() -> ast.expr:
            a, b = self.operand(INT, scope, depth), self.operand(INT, scope, depth)
            op = rng.choice([ast.Add(), ast.Sub(), ast.Mult()])
            mag = mag_of(a) * mag_of(b) if isinstance(op, ast.Mult) else mag_of(a) + mag_of(b)
            return binop(a, op, b, INT, mag)

        def division() -> ast.expr:
            a = self.operand(INT, scope, depth)
            if rng.random() < 0.5:
                b = self.operand(INT, scope, depth)
                divisor = binop(typed(call("abs", b), INT, mag_of(b)), ast.Add(), literal(1, INT), INT, mag_of(b) + 1)
            else:
                divisor = literal(rng.choice((2, 3, 5, -2, -3)), INT)
            if rng.random() < 0.5:
                return binop(a, ast.FloorDiv(), divisor, INT, mag_of(a))
            return binop(a, ast.Mod(), divisor, INT, mag_of(divisor))

        def extreme() -> ast.expr:
            a, b = self.operand(INT, scope, depth), self.operand(INT, scope, depth)
            return typed(call(rng.choice(("min", "max")), a, b), INT, max(mag_of(a), mag_of(b)))

        def truncate() -> ast.expr:
            a = self.operand(FLOAT, scope, depth)
            return typed(call("int", a), INT, mag_of(a))

        def boolean_value() -> ast.expr:
            a, b = self.operand(INT, scope, depth, calls=False), self.operand(INT, scope, depth, calls=False)
            return typed(ast.BoolOp(rng.choice([ast.And(), ast.Or()]), [a, b]), INT, max(mag_of(a), mag_of(b)))

        choices: list[tuple[Builder, int]] = [
            (arithmetic, 6), (division, 3), (lambda: self.int_bitwise(scope, depth), 1),
            (lambda: self.int_unary(scope, depth), 2), (extreme, 2), (truncate, 1), (boolean_value, 1),
        ]  # fmt: skip
        vectors = scope.of_type(VEC)
        if vectors:
            choices.append((lambda: self.vector_int(rng.choice(vectors)), 1))
        return choices

    def int_bitwise(self, scope: Scope, depth: int) -> ast.expr:
        rng = self.rng
        a, b = self.operand(INT, scope, depth), self.operand(INT, scope, depth)
        if rng.random() < 0.3:
            shift = literal(rng.randint(0, 3), INT)
            if rng.random() < 0.5:
                return binop(a, ast.RShift(), shift, INT, mag_of(a))
            return binop(a, ast.LShift(), shift, INT, mag_of(a) * 8)
        op = rng.choice([ast.BitAnd(), ast.BitOr(), ast.BitXor()])
        return binop(a, op, b, INT, 2 * max(mag_of(a), mag_of(b)))

    def int_unary(self, scope: Scope, depth: int) -> ast.expr:
        a = self.operand(INT, scope, depth)
        form = self.rng.randrange(4)
        if form == 0:
            return typed(ast.UnaryOp(ast.USub(), a), INT, mag_of(a))
        if form == 1:
            return typed(call("abs", a), INT, mag_of(a))
        if form == 2:
            return binop(a, ast.Pow(), literal(2, INT), INT, mag_of(a) ** 2)
        return typed(ast.UnaryOp(ast.Invert(), a), INT, mag_of(a) + 1)

    def vector_int(self, name: str) -> ast.expr:
        rng = self.rng
        form = rng.randrange(4)
        v = load(name)
        if form == 0:
            return typed(call("len", v), INT, self.g.vector_size)
        if form == 1:
            return typed(ast.Subscript(ast.Attribute(v, "shape", ast.Load()), ast.Constant(0), ast.Load()), INT,
                         self.g.vector_size)  # fmt: skip
        if form == 2:
            return typed(method(v, rng.choice(("argmax", "argmin"))), INT, self.g.vector_size)
        return typed(call(np_attr(rng.choice(("argmax", "argmin"))), v), INT, self.g.vector_size)

    def float_builders(self, scope: Scope, depth: int) -> list[tuple[Builder, int]]:
        rng = self.rng

        def arithmetic() -> ast.expr:
            kinds = rng.choice([(FLOAT, FLOAT), (FLOAT, FLOAT), (FLOAT, INT), (INT, FLOAT)])
            a, b = (self.operand(k, scope, depth) for k in kinds)
            op = rng.choice([ast.Add(), ast.Sub(), ast.Mult()])
            mag = mag_of(a) * mag_of(b) if isinstance(op, ast.Mult) else mag_of(a) + mag_of(b)
            return binop(a, op, b, FLOAT, mag)

        def division() -> ast.expr:
            a = self.operand(rng.choice([FLOAT, FLOAT, INT]), scope, depth)
            form = rng.randrange(3)
            if form == 0:
                return binop(a, ast.Div(), literal(rng.choice((2.0, 4.0, 0.5, -2.0)), FLOAT), FLOAT, 2 * mag_of(a))
            b = self.operand(rng.choice([FLOAT, INT]), scope, depth)
            one = literal(1.0 if type_of(b) == FLOAT else 1, type_of(b))  # type: ignore[arg-type]
            divisor = binop(typed(call("abs", b), type_of(b), mag_of(b)), ast.Add(), one, type_of(b), mag_of(b) + 1)  # type: ignore[arg-type]
            if form == 1:
                return binop(a, ast.Div(), divisor, FLOAT, mag_of(a))
            op = rng.choice([ast.FloorDiv(), ast.Mod()])
            if type_of(a) == INT and type_of(b) == INT:
                a = typed(call("float", a), FLOAT, mag_of(a))
            return binop(a, op, divisor, FLOAT, mag_of(a) if isinstance(op, ast.FloorDiv) else mag_of(divisor))

        def unary() -> ast.expr:
            a = self.operand(FLOAT, scope, depth)
            form = rng.randrange(5)
            if form == 0:
                return typed(ast.UnaryOp(ast.USub(), a), FLOAT, mag_of(a))
            if form == 1:
                return typed(call("abs", a), FLOAT, mag_of(a))
            if form == 2:
                return typed(call(np_attr("sqrt"), typed(call("abs", a), FLOAT, mag_of(a))), FLOAT, mag_of(a) ** 0.5 + 1)
            if form == 3:
                return typed(call(np_attr("floor"), a), FLOAT, mag_of(a) + 1)
            i = self.operand(INT, scope, depth)
            return typed(call("float", i), FLOAT, mag_of(i))

        def extreme() -> ast.expr:
            """`max(a, b)`; an int operand converted first: Python's `max(0.0, 1)` is the int 1."""
            a, b = self.operand(FLOAT, scope, depth), self.operand(rng.choice([FLOAT, FLOAT, INT]), scope, depth)
            if type_of(b) == INT:
                b = typed(call("float", b), FLOAT, mag_of(b))
            return typed(call(rng.choice(("min", "max")), a, b), FLOAT, max(mag_of(a), mag_of(b)))

        choices: list[tuple[Builder, int]] = [(arithmetic, 6), (division, 3), (unary, 2), (extreme, 2)]
        vectors = scope.of_type(VEC) + self.g.constant_names(VEC)
        if vectors:
            choices.append((lambda: self.vector_float(vectors, scope, depth), 4))
        return choices

    def index(self, scope: Scope, size: int | None = None) -> ast.expr:
        """An index into a per-member array of length `size` (the vector size by default) that is
        always in range."""
        rng = self.rng
        size = size or self.g.vector_size
        form = rng.randrange(3)
        if form == 0:
            return literal(rng.randint(-size, size - 1), INT)
        i = self.operand(INT, scope, 1, calls=False)
        if form == 1:
            return modulo_bound(i, size)
        inner = typed(call("max", i, literal(0, INT)), INT, mag_of(i))
        return typed(call("min", inner, literal(size - 1, INT)), INT, size - 1)

    def vector_float(self, vectors: list[str], scope: Scope, depth: int) -> ast.expr:
        rng = self.rng
        size = self.g.vector_size
        v = typed(load(rng.choice(vectors)), VEC, LIMIT)
        form = rng.randrange(5)
        if form in (0, 1):
            return typed(ast.Subscript(v, self.index(scope), ast.Load()), FLOAT, LIMIT)
        if form == 2:
            name = rng.choice(["sum", "max", "min", "mean"])
            if rng.random() < 0.5:
                return typed(method(v, name), FLOAT, size * LIMIT)
            return typed(call(np_attr(name), v), FLOAT, size * LIMIT)
        if form == 3:
            w = self.operand(VEC, scope, depth, calls=False)
            if rng.random() < 0.5:
                return typed(call(np_attr("dot"), v, w), FLOAT, size * LIMIT * mag_of(w))
            return typed(ast.BinOp(v, ast.MatMult(), w), FLOAT, size * LIMIT * mag_of(w))
        return typed(call(ast.Attribute(np_attr("linalg"), "norm", ast.Load()), v), FLOAT, size * LIMIT)

    def bool_builders(self, scope: Scope, depth: int) -> list[tuple[Builder, int]]:
        rng = self.rng

        def numeric_comparison() -> ast.expr:
            kinds = rng.choice([(INT, INT), (INT, INT), (FLOAT, FLOAT), (INT, FLOAT), (FLOAT, INT)])
            a, b = (self.operand(k, scope, depth) for k in kinds)
            ops = [ast.Lt(), ast.LtE(), ast.Gt(), ast.GtE()]
            if kinds == (INT, INT):
                ops += [ast.Eq(), ast.NotEq()]
            if rng.random() < 0.15:
                c = self.operand(INT, scope, depth, calls=False)
                return compare(a, [rng.choice(ops[:4]), rng.choice(ops[:4])], [b, c])
            return compare(a, [rng.choice(ops)], [b])

        def parity() -> ast.expr:
            a = self.operand(INT, scope, depth)
            return compare(modulo_bound(a, rng.choice((2, 3))), [ast.Eq()], [literal(0, INT)])

        def logic() -> ast.expr:
            if rng.random() < 0.3:
                operand = self.operand(rng.choice([BOOL, BOOL, INT]), scope, depth)
                return typed(ast.UnaryOp(ast.Not(), operand), BOOL, 1)
            values = [self.operand(BOOL, scope, depth) for _ in range(rng.choice((2, 2, 3)))]
            return typed(ast.BoolOp(rng.choice([ast.And(), ast.Or()]), values), BOOL, 1)

        choices: list[tuple[Builder, int]] = [(numeric_comparison, 6), (parity, 1), (logic, 3)]
        vectors = scope.of_type(VEC)
        if vectors:
            choices.append((lambda: self.vector_bool(rng.choice(vectors), scope, depth), 1))
        if self.g.has("range_membership"):
            choices.append((lambda: self.range_membership(scope, depth), 2))
        return choices

    def range_membership(self, scope: Scope, depth: int) -> ast.expr:
        """`a in range(...)` or `a not in range(...)`: an int or float `a`, one to three bounds of
        either sign, the step a nonzero literal or a per-member `abs(e) + 1`, possibly negated."""
        rng = self.rng
        a = self.operand(rng.choice([INT, INT, FLOAT]), scope, depth)
        bounds = [self.operand(INT, scope, depth, calls=False) for _ in range(rng.choice((1, 2, 2, 3)))]
        if len(bounds) == 3 and rng.random() < 0.5:
            bounds[2] = literal(rng.choice((1, 2, 3, -1, -2, -3)), INT)
        elif len(bounds) == 3:
            b = bounds[2]
            step = binop(typed(call("abs", b), INT, mag_of(b)), ast.Add(), literal(1, INT), INT, mag_of(b) + 1)
            bounds[2] = typed(ast.UnaryOp(ast.USub(), step), INT, mag_of(step)) if rng.random() < 0.5 else step
        return compare(a, [rng.choice([ast.In(), ast.NotIn()])], [call("range", *bounds)])

    def vector_bool(self, name: str, scope: Scope, depth: int) -> ast.expr:
        rng = self.rng
        threshold = self.operand(FLOAT, scope, depth, calls=False)
        mask = typed(ast.Compare(load(name), [rng.choice([ast.Gt(), ast.LtE()])], [threshold]), MASK, 1)
        reduction = rng.choice(("any", "all"))
        if rng.random() < 0.5:
            return typed(method(mask, reduction), BOOL, 1)
        return typed(call(np_attr(reduction), mask), BOOL, 1)

    def vec_builders(self, scope: Scope, depth: int) -> list[tuple[Builder, int]]:
        rng = self.rng
        size = self.g.vector_size

        def arithmetic() -> ast.expr:
            kinds = rng.choice([(VEC, VEC), (VEC, FLOAT), (FLOAT, VEC), (VEC, INT)])
            a, b = (self.operand(k, scope, depth) for k in kinds)
            op = rng.choice([ast.Add(), ast.Sub(), ast.Mult()])
            mag = mag_of(a) * mag_of(b) if isinstance(op, ast.Mult) else mag_of(a) + mag_of(b)
            return binop(a, op, b, VEC, mag)

        def elementwise() -> ast.expr:
            a = self.operand(VEC, scope, depth)
            form = rng.randrange(6)
            if form == 0:
                return typed(ast.UnaryOp(ast.USub(), a), VEC, mag_of(a))
            if form == 1:
                return typed(call(np_attr("abs"), a), VEC, mag_of(a))
            if form == 2:
                return binop(a, ast.Div(), literal(rng.choice((2.0, 4.0, -2.0)), FLOAT), VEC, mag_of(a))
            if form == 3:
                b = self.operand(rng.choice([VEC, FLOAT]), scope, depth)
                return typed(call(np_attr(rng.choice(("maximum", "minimum"))), a, b), VEC, max(mag_of(a), mag_of(b)))
            if form == 4:
                low = rng.randint(-12, 0) / 4
                return typed(call(np_attr("clip"), a, literal(low, FLOAT), literal(low + rng.randint(0, 12) / 4, FLOAT)),
                             VEC, 3)  # fmt: skip
            b = self.operand(VEC, scope, depth)
            threshold = self.operand(FLOAT, scope, depth, calls=False)
            mask = typed(ast.Compare(a, [rng.choice([ast.Gt(), ast.Lt()])], [threshold]), MASK, 1)
            return typed(call(np_attr("where"), mask, a, b), VEC, max(mag_of(a), mag_of(b)))

        def rearranged() -> ast.expr:
            a = self.operand(VEC, scope, depth)
            form = rng.randrange(3)
            if form == 0:
                return typed(ast.Subscript(a, ast.Slice(None, None, literal(-1, INT)), ast.Load()), VEC, mag_of(a))
            if form == 1:
                head = ast.Subscript(a, ast.Slice(literal(1, INT), None, None), ast.Load())
                tail = ast.Subscript(copy.deepcopy(a), ast.Slice(None, literal(1, INT), None), ast.Load())
                return typed(call(np_attr("concatenate"), ast.List([head, tail], ast.Load())), VEC, mag_of(a))
            return typed(method(a, "cumsum"), VEC, size * mag_of(a))

        def filled() -> ast.expr:
            s = self.operand(FLOAT, scope, depth)
            zeros = call(np_attr("zeros"), literal(size, INT))
            return binop(zeros, ast.Add(), s, VEC, mag_of(s))

        return [(arithmetic, 5), (elementwise, 4), (rearranged, 2), (filled, 1)]

    def array_builders(self, t: ValueType, scope: Scope, depth: int) -> list[tuple[Builder, int]]:
        """Elementwise arithmetic on arrays of type `t` (other than VEC, whose builders know more)."""
        rng = self.rng

        def arithmetic() -> ast.expr:
            kinds = rng.choice([(t, t), (t, t), (t, FLOAT), (FLOAT, t), (t, INT)])
            a, b = (self.operand(k, scope, depth) for k in kinds)
            op = rng.choice([ast.Add(), ast.Sub(), ast.Mult()])
            mag = mag_of(a) * mag_of(b) if isinstance(op, ast.Mult) else mag_of(a) + mag_of(b)
            return binop(a, op, b, t, mag)

        def elementwise() -> ast.expr:
            a = self.operand(t, scope, depth)
            if rng.random() < 0.5:
                return typed(ast.UnaryOp(ast.USub(), a), t, mag_of(a))
            return binop(a, ast.Div(), literal(rng.choice((2.0, 4.0, -2.0)), FLOAT), t, mag_of(a))

        return [(arithmetic, 5), (elementwise, 2)]

    def library_call(self, t: ValueType, scope: Scope, depth: int) -> ast.expr | None:
        """A call of `LIBRARY_CALLS` whose result has type `t` (None when none has)."""
        options = [s for s in self.g.signatures if result_type(s) == t]
        if not options:
            return None
        present = set(scope.variables.values())
        on_variables = [s for s in options if any(kind in present for kind in s.arguments if is_array(kind))]
        if on_variables and self.rng.random() < 0.8:  # on the members' arrays rather than on literals
            options = on_variables
        signature = self.rng.choice(options)
        return emit(signature, [self.library_argument(kind, scope, depth) for kind in signature.arguments])

    def library_argument(self, kind: Any, scope: Scope, depth: int) -> ast.expr:
        """An argument of a library call: often an array variable as it is (the members' own arrays)."""
        if isinstance(kind, tuple):  # ("index", n): kept in range
            return self.index(scope, kind[1])
        names = scope.of_type(kind) if is_array(kind) else []
        if names and self.rng.random() < 0.6:
            return self.variable(self.rng.choice(names), kind)
        return self.operand(kind, scope, depth, calls=kind != INT)

    def pair_builders(self, scope: Scope, depth: int) -> list[tuple[Builder, int]]:
        def construct() -> ast.expr:
            a, b = self.bounded(self.expr(INT, scope, depth)), self.bounded(self.expr(FLOAT, scope, depth))
            return typed(call("P", a, b), PAIR, LIMIT)

        def replace() -> ast.expr | None:
            pairs = scope.of_type(PAIR)
            if not pairs:
                return None
            field_name, kind = self.rng.choice(PAIR_FIELDS)
            value = self.bounded(self.expr(kind, scope, depth))
            receiver = ast.Attribute(load(self.rng.choice(pairs)), "_replace", ast.Load())
            return typed(call(receiver, **{field_name: value}), PAIR, LIMIT)

        return [(construct, 3), (replace, 3)]

    def tuple_builders(self, t: tuple[str, ...], scope: Scope, depth: int) -> list[tuple[Builder, int]]:
        def construct() -> ast.expr:
            return typed(ast.Tuple([self.bounded(self.expr(part, scope, depth)) for part in t], ast.Load()), t, LIMIT)

        return [(construct, 3)]

    # -- calls --------------------------------------------------------------------------------

    def callable_specs(self, scope: Scope) -> list[FunctionSpec]:
        specs = self.spec.callees
        if scope.in_base_case or self.recursive_calls >= self.MAX_RECURSIVE_CALLS:
            specs = [s for s in specs if s.role != "recursive"]
        return specs

    def call_to(self, spec: FunctionSpec, scope: Scope, depth: int) -> ast.expr:
        self.calls += 1
        args = []
        params = spec.params
        if spec.role == "recursive":
            self.recursive_calls += 1
            if spec is self.spec and self.descends_first() and self.recursive_calls == 1:
                # the descent: d - 1 and the other parameters passed down unchanged
                return typed(call(spec.name, binop(load("d"), ast.Sub(), literal(1, INT), INT, LIMIT),
                                  *(load(name) for name, _ in params[1:])), spec.result, spec.result_mag)  # fmt: skip
            args.append(self.depth_argument(scope))
            params = params[1:]
        args += [self.bounded(self.expr(t, scope, max(depth, 0), calls=depth > 0)) for _, t in params]
        return typed(call(spec.name, *args), spec.result, spec.result_mag)

    def depth_argument(self, scope: Scope) -> ast.expr:
        """A recursive callee's depth: smaller than ours, or bounded when we are not recursive."""
        rng = self.rng
        if self.spec.role == "recursive":
            smaller = binop(load("d"), ast.Sub(), literal(rng.choice((1, 1, 1, 2)), INT), INT, LIMIT)
            if rng.random() < 0.2:
                return typed(call("min", smaller, self.operand(INT, scope, 1, calls=False)), INT, LIMIT)
            return smaller
        value = self.operand(INT, scope, 1, calls=False)
        if rng.random() < 0.5:
            return typed(call("min", typed(call("abs", value), INT, mag_of(value)), literal(MAX_ENTRY_DEPTH, INT)), INT,
                         MAX_ENTRY_DEPTH)  # fmt: skip
        return modulo_bound(value, MAX_ENTRY_DEPTH + 1)
