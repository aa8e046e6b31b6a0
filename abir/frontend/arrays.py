"""Lowering of array syntax on batched values: indexing, methods, attributes, axis-aware NumPy.

Per-example code treats a batched value as ONE member's array; the prims emitted here are the
builtin array prims of `abir.array_prims`, their static parameters (index spec, axis, shape) in
the op, which every backend runs on the event dimensions of the whole-batch array.

* `x[k]`, `x[1:]`, `x[..., 0]`, `x[None]`, `x[::-1, 2]`, `x[[0, 2]]`: compile-time indices
  (ints, slices, Ellipsis, None, one integer array/list) index the event dimensions.
* `x[i]`, `x[i, 1:]`, `x[i, j]`, `TABLE[i]`: per-member integer indices gather member by member
  (indices are clipped into range, so junk in inactive rows never fails).
* methods `sum mean max min prod any all std var argmax argmin cumsum cumprod` (compile-time
  `axis`, `keepdims`, `ddof`), `astype`, `reshape`, `transpose`, `.T`, `flatten`, `ravel`,
  `squeeze`, `copy`, `clip`, `dot`, `item`;
* `np.sum(x, axis=...)` and the other reductions, `np.dot`, `np.matmul` / `@`, `np.inner`,
  `np.outer`, `np.linalg.norm` (ord=None), `np.concatenate`, `np.stack`, `np.transpose`,
  `np.reshape`, `np.squeeze`, `np.ravel`, `np.clip`: the member's own axes, as the methods;
* `x.shape[k]`, `len(x)`, `x.ndim`, `x.size`, `np.ndim(x)`, `np.size(x)`: per-member int64
  values (the frontend does not know per-member types; the value is computed at run time, the
  same in every row, usable in arithmetic and as a loop bound, not as a compile-time shape);
* `x.astype(np.float32)`, `np.float32(x)`, `float(x)`, `int(x)`: the builtin `astype` prim with
  the dtype's IR type as result type; `x.astype(y.dtype)` the array prim `astype_like`;
* every other NumPy function (and `.real`, `.imag`, `.mT`, `.argsort()`, ...): the array prim
  `numpy` (`abir.numpy_calls`), run per member; a NumPy function it does not list, or whose
  result's shape would depend on a member's values, is an error at the call.

Each array prim carries `abir.loc = "file:line"` and `abir.source` (the construct's text), which
type inference names when the prim cannot be computed.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np
from xdsl.dialects.builtin import StringAttr, i1
from xdsl.ir import SSAValue

from abir import array_prims, numpy_calls
from abir.array_ops import ARRAY, BASIC, BATCHED, IndexComponent
from abir.dialects.functional import LOCATION_ATTR, SCALAR_CONVERSION_ATTR, SOURCE_ATTR, PrimOp, UnknownType
from abir.frontend.aliases import SCALAR_OR_VIEW, VIEW
from abir.frontend.state import LoweringState
from abir.frontend.values import Static, awaits_result_structure, flatten, stand_in, unflatten, unwrap_statics
from abir.types import element_type_of

REDUCTION_FUNCTIONS: dict[Any, str] = {
    np.sum: "sum", np.mean: "mean", np.max: "max", np.amax: "max", np.min: "min", np.amin: "min",
    np.prod: "prod", np.any: "any", np.all: "all", np.std: "std", np.var: "var", np.argmax: "argmax",
    np.argmin: "argmin",
}  # fmt: skip
SCAN_FUNCTIONS: dict[Any, str] = {np.cumsum: "cumsum", np.cumprod: "cumprod"}
SCANS = {"cumsum": "cumulative_sum", "cumprod": "cumulative_prod"}
"""NumPy's scan names and the array prims they become."""
PRODUCT_FUNCTIONS: dict[Any, str] = {np.dot: "dot", np.matmul: "matmul", np.inner: "inner", np.outer: "outer"}
PYTHON_REDUCTIONS: dict[Any, str] = {builtins.sum: "sum", builtins.max: "max", builtins.min: "min", builtins.any: "any", builtins.all: "all"}
"""Python builtins that iterate an array's first axis, and the reduction over that axis they are."""
SHAPE_ATTRIBUTES = ("ndim", "size")
ARRAY_METHODS = (
    *array_prims.REDUCTIONS, *SCANS, "astype", "reshape", "transpose", "flatten", "ravel", "squeeze",
    "copy", "clip", "dot", "item",
)  # fmt: skip
LIST_METHODS = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"})
"""Methods that change a list in place."""
FIXED_SIZE_SUGGESTION = (
    "collect the values in a fixed-size array with item assignment: `xs = np.zeros(N)` before the loop "
    "and `xs[i] = v` inside it (N a compile-time constant; keep a count if members fill different "
    "numbers of items), or, outside loops, build a new list: `xs = [*xs, v]`"
)
SHAPE_SUGGESTION = (
    "abir's frontend does not know per-member shapes at compile time: write `x.shape[k]` (k a "
    "compile-time int) or `len(x)` for a per-member int value (fine for arithmetic and loop bounds), "
    "or use a compile-time constant (a module-level DIM = 3) where a shape is needed"
)
DTYPE_SUGGESTION = (
    "abir's frontend does not know per-member dtypes at compile time: write `y.astype(x.dtype)` "
    "(supported), or name the dtype as a compile-time constant (np.float64)"
)


def aliasing(name: str, params: dict[str, Any]) -> str | None:
    """How the result of array prim `name` (with `params`) relates to its first operand in NumPy:
    None for a new array, `aliases.VIEW` or `aliases.SCALAR_OR_VIEW` (integer indices only: a
    scalar copy when they reach a scalar, else a view)."""
    if name in array_prims.VIEWS:
        return VIEW
    if name == "numpy":
        return VIEW if numpy_calls.entry_named(params["function"]).view else None
    if name != "getitem":
        return None
    components = array_prims.parse_index(params["index"])
    if any(kind == ARRAY for kind, _ in components):
        return None  # advanced indexing copies
    if all(kind == BATCHED or isinstance(value, int) for kind, value in components):
        return SCALAR_OR_VIEW
    return VIEW


class ArrayLowering:
    """Indexing, attributes and methods of batched values; axis-aware NumPy functions.

    It emits array prims into the current block of `state`, which it shares with the other
    lowerers of the function."""

    def __init__(self, state: LoweringState):
        self.state = state
        self.source = state.source

    # -- emission ---------------------------------------------------------------------------------

    def batch_op(self, node: ast.AST, name: str, params: dict[str, Any], operands: Sequence[SSAValue]) -> SSAValue:
        """The array prim `name` (`abir.array_prims`) with `params` on `operands`, located at
        `node`."""
        op = PrimOp(name, list(operands), [UnknownType()], params)
        op.attributes[LOCATION_ATTR] = StringAttr(self.source.location(node))
        op.attributes[SOURCE_ATTR] = StringAttr(self.source.segment(node))
        self.state.block.add_op(op)
        result = op.res[0]
        kind = aliasing(name, params)
        if kind is None:
            self.state.aliases.fresh(result)
        else:
            self.state.aliases.derived(result, operands[:1], kind)
        return result

    def astype_op(self, node: ast.AST, value: SSAValue, dtype: Any) -> SSAValue:
        """The builtin `astype` prim converting `value` to compile-time `dtype`."""
        try:
            element = element_type_of(np.dtype(dtype))
        except TypeError as e:
            raise self.source.error(node, f"cannot convert a batched value to {dtype!r}: {e}") from None
        op = PrimOp("astype", [value], [element])
        self.state.block.add_op(op)
        if element == i1:
            self.state.booleans.add(op.res[0])
        self.state.aliases.fresh(op.res[0])
        return op.res[0]

    def _mark_scalar_conversion(self, node: ast.AST, op: Any, builtin: str) -> None:
        """Mark the `astype` of `float(v)`/`int(v)` for type inference to check that each member's
        `v` is a scalar (`SCALAR_CONVERSION_ATTR`), located at `node`."""
        op.attributes[SCALAR_CONVERSION_ATTR] = StringAttr(builtin)
        op.attributes[LOCATION_ATTR] = StringAttr(self.source.location(node))
        op.attributes[SOURCE_ATTR] = StringAttr(self.source.segment(node))

    def array_operand(self, node: ast.AST, value: Any) -> SSAValue:
        """One array from a leaf, or from a flat list/tuple of leaves (stacked, as NumPy would)."""
        if isinstance(value, tuple | list):
            if any(isinstance(v, tuple | list) for v in value):
                raise self.source.error(node, "nested lists of batched values cannot become one array",
                                        "build the array in steps with np.stack")
            if all(isinstance(v, Static) for v in value):
                return self.state.materialize(Static(np.asarray([v.value for v in value])), node)
            leaves = [self.state.materialize(v, node) for v in value]
            return self.batch_op(node, "stack", {"axis": 0}, leaves)
        return self.state.materialize(value, node)

    def compile_time(self, node: ast.AST, value: Any, what: str) -> Any:
        """The Python value of a compile-time argument (structures of statics included)."""
        leaves, treedef = flatten(value)
        if any(isinstance(leaf, SSAValue) for leaf in leaves):
            raise self.source.error(node, f"{what} must be a compile-time constant, not a batched value",
                                    "use a literal or a module-level constant")
        return unflatten(treedef, [leaf.value for leaf in leaves])

    # -- indexing -----------------------------------------------------------------------------------

    def index_array(self, node: ast.Subscript, base: Any, index: Any) -> SSAValue:
        """`base[index]` where the base or the index is batched."""
        if isinstance(base, tuple | list):
            if not all(isinstance(v, Static) for v in base):
                raise self.source.error(
                    node, "indexing a tuple or list of batched values with a per-member index is not supported",
                    "stack them into one array first (`np.stack([a, b, c])[i]`), or branch with if/elif",
                )
            base = Static(np.asarray([v.value for v in base]))
        array = self.state.materialize(base, node.value)
        components, operands = self.index_components(node, index)
        return self.batch_op(node, "getitem", {"index": array_prims.format_index(components)}, [array, *operands])

    def index_components(
        self, node: ast.Subscript, index: Any
    ) -> tuple[list[IndexComponent], list[SSAValue]]:
        """The components of `x[index]` on a batched `x`, and its per-member index operands."""
        components: list[IndexComponent] = []
        operands: list[SSAValue] = []
        parts = index if type(index) is tuple else (index,)
        if isinstance(index, Static) and type(index.value) is tuple:
            parts = tuple(Static(v) for v in index.value)
        for part in parts:
            components.append(self._index_component(node, part, operands))
        self._check_index(node, components)
        return components, operands

    def _index_component(self, node: ast.Subscript, part: Any, operands: list[SSAValue]) -> IndexComponent:
        if isinstance(part, SSAValue):
            operands.append(part)
            return (BATCHED, None)
        if isinstance(part, list):
            if not all(isinstance(v, Static) for v in part):
                raise self.source.error(node, "a list of per-member indices is not supported as an index",
                                        "index with one per-member integer at a time, or stack them with np.stack")
            part = Static([v.value for v in part])
        if isinstance(part, tuple):
            raise self.source.error(node, "a tuple nested inside an index is not supported", "flatten the index")
        value = part.value
        if value is None or value is Ellipsis or isinstance(value, slice):
            return (BASIC, value)
        if isinstance(value, bool | np.bool_):
            raise self.source.error(node, "boolean indices are not supported on batched values",
                                    "select with np.where(mask, a, b), or use integer indices")
        if isinstance(value, int | np.integer):
            return (BASIC, int(value))
        if isinstance(value, list | tuple | np.ndarray):
            array = np.asarray(value)
            if array.dtype.kind == "b":
                raise self.source.error(node, "boolean mask indices are not supported on batched values",
                                        f"index with the positions instead (np.nonzero(mask)[0] = {np.nonzero(array)[0].tolist()})")
            if array.dtype.kind not in "iu":
                raise self.source.error(node, f"an index array must hold integers, not {array.dtype}")
            return (ARRAY, array.astype(np.int64))
        raise self.source.error(node, f"cannot index a batched value with the {type(value).__name__} {value!r}",
                                "index with ints, slices, ..., None or per-member integers")

    def _check_index(self, node: ast.Subscript, components: list[IndexComponent]) -> None:
        if sum(1 for c in components if c == (BASIC, Ellipsis)) > 1:
            raise self.source.error(node, "an index can only have a single ellipsis ('...')")
        arrays = [c for c in components if c[0] == ARRAY]
        others = [c for c in components if c[0] == BATCHED or (c[0] == BASIC and isinstance(c[1], int))]
        if arrays and (len(arrays) > 1 or others):
            raise self.source.error(
                node, "an index array can only stand beside slices, ..., and None on a batched value",
                "index in two steps, e.g. `x[i][[0, 2]]`",
            )

    def shape_fact(self, node: ast.AST, value: SSAValue, what: str, dim: int | None = None) -> SSAValue:
        """`len(x)`, `x.shape[dim]` (the array prim `dim`), `x.ndim` or `x.size` of a member."""
        if what in ("len", "shape"):
            fact = self.batch_op(node, "dim", {"axis": dim or 0}, [value])
        else:
            fact = self.batch_op(node, what, {}, [value])
        self.state.integer_values.add(fact)
        return fact

    # -- attributes ---------------------------------------------------------------------------------

    def array_attribute(self, node: ast.Attribute, base: SSAValue) -> Any:
        attr = node.attr
        if attr == "T":
            return self.batch_op(node, "permute_dims", {}, [base])
        if attr in SHAPE_ATTRIBUTES:
            return self.shape_fact(node, base, attr)
        if attr in numpy_calls.ATTRIBUTES:
            return self.numpy_call(node, _numpy_function(numpy_calls.ATTRIBUTES[attr]), [base], {})
        if attr == "shape":
            raise self.source.error(node, "attribute '.shape' of a batched value is not supported", SHAPE_SUGGESTION)
        if attr == "dtype":
            raise self.source.error(node, "attribute '.dtype' of a batched value is not supported", DTYPE_SUGGESTION)
        if attr in ARRAY_METHODS:
            raise self.source.error(node, f"the method '.{attr}' of a batched value can only be called",
                                    f"call it: `x.{attr}(...)`")
        if awaits_result_structure(base):  # a field of a helper's result: lowered again once known
            return stand_in(base)
        raise self.source.error(
            node,
            f"attribute '.{attr}' of a batched value is not supported",
            "supported: .T .ndim .size " + " ".join(f".{a}" for a in numpy_calls.ATTRIBUTES) + ", x.shape[k], and "
            "the methods " + ", ".join([*ARRAY_METHODS, *numpy_calls.METHODS])
            + "; otherwise pass the value to a helper function (it becomes an opaque primitive that sees "
            "the whole batch)",
        )

    # -- methods ------------------------------------------------------------------------------------

    def array_method(self, node: ast.Call, base: SSAValue, method: str, args: list, kwargs: dict) -> Any:
        """`base.method(*args, **kwargs)`: an array prim, or the NumPy function of that name."""
        if method in numpy_calls.METHODS:
            return self.numpy_call(node, _numpy_function(numpy_calls.METHODS[method]), [base, *args], kwargs)
        return self._prim_method(node, base, method, args, kwargs)

    def _prim_method(self, node: ast.Call, base: SSAValue, method: str, args: list, kwargs: dict) -> Any:
        if method in array_prims.REDUCTIONS:
            return self._reduction(node, method, base, args, kwargs, first=0)
        if method in SCANS:
            return self._scan(node, method, base, args, kwargs, first=0)
        if method == "astype":
            params = self._bind(node, method, args, kwargs, ["dtype"], required=1)
            return self.astype(node, base, params["dtype"])
        if method == "reshape":
            shape = args[0] if len(args) == 1 else tuple(args)
            if kwargs:
                raise self.source.error(node, "reshape takes the shape only (no keywords)")
            return self._reshape(node, base, shape)
        if method == "transpose":
            axes = args[0] if len(args) == 1 else (tuple(args) if args else Static(None))
            if kwargs:
                raise self.source.error(node, "transpose takes the axes only (no keywords)")
            return self._transpose(node, base, axes)
        if method in ("flatten", "ravel"):
            self._bind(node, method, args, kwargs, [])
            flat = self._reshape(node, base, Static((-1,)))
            if method == "flatten":  # a copy (ravel is a view when it can be)
                self.state.aliases.fresh(flat)
            return flat
        if method == "squeeze":
            params = self._bind(node, method, args, kwargs, ["axis"])
            return self._squeeze(node, base, params.get("axis", Static(None)))
        if method == "copy":
            self._bind(node, method, args, kwargs, [])
            return self.state.prim("copy", [base])
        if method == "item":
            self._bind(node, method, args, kwargs, [])
            item = self._reshape(node, base, Static(()))
            self.state.aliases.fresh(item)  # a Python number
            return item
        if method == "clip":
            params = self._bind(node, method, args, kwargs, ["min", "max"], required=2)
            return self._clip(node, base, params["min"], params["max"])
        if method == "dot":
            params = self._bind(node, method, args, kwargs, ["b"], required=1)
            return self._product(node, "dot", base, params["b"])
        raise self.source.error(
            node,
            f"the method '.{method}()' of a batched value is not supported",
            "supported methods: " + ", ".join([*ARRAY_METHODS, *numpy_calls.METHODS]) + "; otherwise call a helper function (it "
            "becomes an opaque primitive that sees the whole batch, leading batch axis included)",
        )

    def _bind(
        self, node: ast.Call, name: str, args: list, kwargs: dict, params: list[str], required: int = 0
    ) -> dict[str, Any]:
        if len(args) > len(params):
            raise self.source.error(node, f"{name}() takes at most {len(params)} positional argument(s) here",
                                    "pass the others by keyword: " + ", ".join(params) if params else "call it without arguments")
        bound = dict(zip(params, args, strict=False))
        for key, value in kwargs.items():
            if key not in params or key in bound:
                supported = ", ".join(params) or "none"
                raise self.source.error(node, f"{name}(): the argument '{key}' is not supported on batched values "
                                        f"(supported: {supported})")
            bound[key] = value
        missing = [p for p in params[:required] if p not in bound]
        if missing:
            raise self.source.error(node, f"{name}() needs the argument(s) {', '.join(missing)}")
        return bound

    def _reduction(self, node: ast.Call, name: str, x: Any, args: list, kwargs: dict, first: int) -> SSAValue:
        params = ["axis", "ddof", "keepdims"] if name in ("std", "var") else ["axis", "keepdims"]
        bound = self._bind(node, name, args[first:first + 1], kwargs, params)
        axis = self.compile_time(node, bound.get("axis", Static(None)), "axis")
        keepdims = bool(self.compile_time(node, bound.get("keepdims", Static(False)), "keepdims"))
        ddof = int(self.compile_time(node, bound.get("ddof", Static(0)), "ddof"))
        axis = self._axis_value(node, axis, allow_tuple=name not in ("argmax", "argmin"))
        if len(args) > first + 1:
            raise self.source.error(node, f"{name}(): pass axis, keepdims{', ddof' if 'ddof' in params else ''} by keyword")
        params = {"axis": axis, "keepdims": keepdims, "ddof": ddof if name in ("std", "var") and ddof else None}
        return self.batch_op(node, name, params, [self.array_operand(node, x)])

    def _axis_value(self, node: ast.AST, axis: Any, allow_tuple: bool = True) -> Any:
        if axis is None:
            return None
        if isinstance(axis, int | np.integer) and not isinstance(axis, bool):
            return int(axis)
        if allow_tuple and isinstance(axis, tuple | list) and all(isinstance(a, int | np.integer) for a in axis):
            return tuple(int(a) for a in axis)
        raise self.source.error(node, f"axis must be None, an int{' or a tuple of ints' if allow_tuple else ''}, "
                                f"got {axis!r}")

    def _scan(self, node: ast.Call, name: str, x: Any, args: list, kwargs: dict, first: int) -> SSAValue:
        bound = self._bind(node, name, args[first:], kwargs, ["axis"])
        axis = self._axis_value(node, self.compile_time(node, bound.get("axis", Static(None)), "axis"), False)
        return self.batch_op(node, SCANS[name], {"axis": axis}, [self.array_operand(node, x)])

    def astype(self, node: ast.Call, x: Any, dtype: Any) -> SSAValue:
        """`x.astype(dtype)`: a compile-time dtype, or `y.dtype` of a batched `y` (`LikeDtype`)."""
        if isinstance(dtype, LikeDtype):
            return self.batch_op(node, "astype_like", {}, [self.state.materialize(x, node), dtype.array])
        dtype = self.compile_time(node, dtype, "the dtype")
        return self.astype_op(node, self.state.materialize(x, node), dtype)

    def _reshape(self, node: ast.AST, x: Any, shape: Any) -> SSAValue:
        shape = self.compile_time(node, shape, "the shape")
        shape = (shape,) if isinstance(shape, int | np.integer) else tuple(shape)
        if not all(isinstance(d, int | np.integer) for d in shape) or sum(1 for d in shape if d == -1) > 1:
            raise self.source.error(node, f"a per-member shape must be ints (at most one -1), got {shape!r}")
        shape = tuple(int(d) for d in shape)
        return self.batch_op(node, "reshape", {"shape": shape}, [self.state.materialize(x, node)])

    def _transpose(self, node: ast.AST, x: Any, axes: Any) -> SSAValue:
        axes = self.compile_time(node, axes, "the axes")
        axes = None if axes is None else tuple(int(a) for a in axes)
        return self.batch_op(node, "permute_dims", {"axes": axes}, [self.state.materialize(x, node)])

    def _squeeze(self, node: ast.AST, x: Any, axis: Any) -> SSAValue:
        axis = self._axis_value(node, self.compile_time(node, axis, "axis"))
        return self.batch_op(node, "squeeze", {"axis": axis}, [self.state.materialize(x, node)])

    def _clip(self, node: ast.AST, x: Any, low: Any, high: Any) -> Any:
        value = self.state.materialize(x, node)
        if not (isinstance(high, Static) and high.value is None):
            value = self.state.prim("minimum", [value, self.state.materialize(high, node)])
        if not (isinstance(low, Static) and low.value is None):
            value = self.state.prim("maximum", [value, self.state.materialize(low, node)])
        return value

    def _product(self, node: ast.AST, name: str, a: Any, b: Any) -> SSAValue:
        operands = [self.array_operand(node, a), self.array_operand(node, b)]
        return self.batch_op(node, name, {}, operands)

    # -- NumPy functions ------------------------------------------------------------------------------

    def array_function(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        """The lowering of an axis-aware NumPy (or Python) function on batched values, or
        `NotImplemented` when `fn` is not one of them."""
        try:
            known = fn in REDUCTION_FUNCTIONS or fn in SCAN_FUNCTIONS or fn in PRODUCT_FUNCTIONS
        except TypeError:  # unhashable callable
            return NotImplemented
        if known:
            if not args:
                raise self.source.error(node, f"{_name(fn)}() needs an array argument")
            if fn in REDUCTION_FUNCTIONS:
                return self._reduction(node, REDUCTION_FUNCTIONS[fn], args[0], args, kwargs, first=1)
            if fn in SCAN_FUNCTIONS:
                return self._scan(node, SCAN_FUNCTIONS[fn], args[0], args, kwargs, first=1)
            bound = self._bind(node, _name(fn), args, kwargs, ["a", "b"], required=2)
            return self._product(node, PRODUCT_FUNCTIONS[fn], bound["a"], bound["b"])
        return self._other_array_function(node, fn, args, kwargs)

    def _other_array_function(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        if fn is np.linalg.norm:
            bound = self._bind(node, "norm", args, kwargs, ["x", "ord", "axis", "keepdims"], required=1)
            if self.compile_time(node, bound.get("ord", Static(None)), "ord") is not None:
                return self.numpy_call(node, fn, args, kwargs)
            axis = self._axis_value(node, self.compile_time(node, bound.get("axis", Static(None)), "axis"))
            keepdims = bool(self.compile_time(node, bound.get("keepdims", Static(False)), "keepdims"))
            return self.batch_op(node, "vector_norm", {"axis": axis, "keepdims": keepdims},
                                 [self.array_operand(node, bound["x"])])
        if fn in (np.concatenate, np.stack):
            name = _name(fn)
            bound = self._bind(node, name, args, kwargs, ["arrays", "axis"], required=1)
            arrays = bound["arrays"]
            if not isinstance(arrays, tuple | list):
                raise self.source.error(node, f"np.{name} of a batched value needs a list or tuple of arrays",
                                        f"write np.{name}([a, b])")
            axis = self.compile_time(node, bound.get("axis", Static(0)), "axis")
            if fn is np.stack or axis is not None:
                axis = self._axis_value(node, axis, allow_tuple=False)
            leaves = [self.state.materialize(a, node) for a in arrays]
            return self.batch_op(node, "concat" if fn is np.concatenate else "stack", {"axis": axis}, leaves)
        return self._shape_changing_function(node, fn, args, kwargs)

    def _shape_changing_function(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        if fn is np.transpose:
            bound = self._bind(node, "transpose", args, kwargs, ["a", "axes"], required=1)
            return self._transpose(node, bound["a"], bound.get("axes", Static(None)))
        if fn is np.reshape:
            bound = self._bind(node, "reshape", args, kwargs, ["a", "shape"], required=2)
            return self._reshape(node, bound["a"], bound["shape"])
        if fn is np.squeeze:
            bound = self._bind(node, "squeeze", args, kwargs, ["a", "axis"], required=1)
            return self._squeeze(node, bound["a"], bound.get("axis", Static(None)))
        if fn is np.ravel:
            bound = self._bind(node, "ravel", args, kwargs, ["a"], required=1)
            return self._reshape(node, bound["a"], Static((-1,)))
        if fn is np.clip:
            bound = self._bind(node, "clip", args, kwargs, ["a", "a_min", "a_max"], required=3)
            return self._clip(node, bound["a"], bound["a_min"], bound["a_max"])
        if fn in (builtins.len, np.ndim, np.size, np.shape):
            return self._shape_function(node, fn, args, kwargs)
        if fn in (builtins.float, builtins.int, builtins.bool) or (isinstance(fn, type) and issubclass(fn, np.generic)):
            if len(args) != 1 or kwargs or not isinstance(args[0], SSAValue):
                return NotImplemented
            if fn is builtins.bool:
                return self.state.as_condition(args[0], node)
            dtype = {builtins.float: np.float64, builtins.int: np.int64}.get(fn, fn)
            converted = self.astype_op(node, args[0], dtype)
            if fn in (builtins.float, builtins.int):
                self._mark_scalar_conversion(node, converted.owner, fn.__name__)
            return converted
        return NotImplemented

    def _shape_function(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> SSAValue:
        name = _name(fn)
        if len(args) != 1 or kwargs or not isinstance(args[0], SSAValue):
            raise self.source.error(node, f"{name}() of a batched value takes exactly that value")
        if fn is np.shape:
            raise self.source.error(node, "np.shape() of a batched value is not supported", SHAPE_SUGGESTION)
        what = {builtins.len: "len", np.ndim: "ndim", np.size: "size"}[fn]
        return self.shape_fact(node, args[0], what, 0 if what == "len" else None)


    # -- Python's builtins over a member's array -----------------------------------------------

    def python_reduction(self, node: ast.Call, fn: Any, args: list, kwargs: dict) -> Any:
        """`sum(v)`, `max(v)`, `min(v)`, `any(v)`, `all(v)` over a per-member array: Python
        iterates its first axis, so they reduce that axis (`sum(v, start)` adds `start`); `max`,
        `min`, `any` and `all` then compare or test whole rows, which Python refuses for rows of
        more than one element (a located error), or `NotImplemented` for other calls."""
        name = PYTHON_REDUCTIONS.get(fn) if fn in PYTHON_REDUCTIONS else None
        arity = 2 if fn is builtins.sum else 1
        if name is None or kwargs or not 1 <= len(args) <= arity or not isinstance(args[0], SSAValue):
            return NotImplemented
        reduced = self.batch_op(node, name, {"axis": 0}, [args[0]])
        if fn is builtins.sum:
            return self.state.prim("add", [reduced, self.state.materialize(args[1], node)]) if len(args) == 2 else reduced
        message = self.source.error(
            node,
            f"{fn.__name__}() over a per-member array with more than one axis {'compares' if name in ('max', 'min') else 'tests'} "
            "its rows, and Python raises: ValueError: The truth value of an array with more than one element is ambiguous",
            f"reduce every element: np.{name}(x), or name the axis: np.{name}(x, axis=...)",
        )
        return self.batch_op(node, "check_scalar", {"message": str(message)}, [reduced])

    # -- NumPy functions per member ---------------------------------------------------------------

    def numpy_call(self, node: ast.AST, fn: Any, args: list, kwargs: dict) -> Any:
        """A NumPy function with a batched argument, run per member (the array prim `numpy`),
        or `NotImplemented` when `fn` is not a NumPy function. A NumPy function abir does not
        run per member is an error: never a call on the whole batch."""
        name = numpy_calls.numpy_name(fn)
        if name is None:
            return NotImplemented
        entry = numpy_calls.resolve(fn)
        shown = f"np.{name}"
        if entry is not None and entry.name == "where" and len(args) + len(kwargs) == 1:
            entry, name = None, "nonzero"  # np.where(condition) is np.nonzero(condition)
        if entry is None:
            raise self.source.error(node, _refusal(shown, name), NUMPY_SUGGESTION)
        for keyword in ("out", "where"):
            if keyword in kwargs and not (keyword == "where" and entry.name == "where"):
                raise self.source.error(node, f"{shown}(..., {keyword}=...) is not supported on per-member values",
                                        f"assign the result: `y = {shown}(...)`" if keyword == "out"
                                        else "select afterwards with np.where(mask, result, other)")
        bound = self._bind_numpy(node, fn, shown, args, kwargs)
        static = {k: v for k, v in bound.items() if k in entry.static or k in entry.axes}
        for parameter, value in static.items():
            if any(isinstance(leaf, SSAValue) for leaf in flatten(value)[0]):
                raise self.source.error(
                    node, f"the argument '{parameter}' of {shown} is a per-member value here; it must be a compile-time "
                    "value, because it decides the shape of the result, and members' results must share one shape",
                    "use a compile-time constant (a literal, or a module-level DIM = 3); for an array shaped like `x`, "
                    "use the *_like functions (np.zeros_like(x))",
                )
        template, operands = self._numpy_template(node, shown, args, kwargs)
        try:
            outputs = entry.output_count({k: unwrap_statics(v) for k, v in static.items()})
        except (TypeError, KeyError):
            outputs = 1
        results = [
            self.batch_op(node, "numpy", {"function": entry.name, "arguments": template, "output": k or None}, operands)
            for k in range(outputs)
        ]
        return results[0] if outputs == 1 else tuple(results)

    def _bind_numpy(self, node: ast.AST, fn: Any, shown: str, args: list, kwargs: dict) -> dict[str, Any]:
        signature = numpy_calls.parameters(fn)
        if signature is None:
            return {f"#{i}": a for i, a in enumerate(args)} | kwargs
        try:
            return dict(signature.bind(*args, **kwargs).arguments)
        except TypeError as e:
            raise self.source.error(node, f"{shown}{signature}: {e}") from None

    def _numpy_template(self, node: ast.AST, shown: str, args: list, kwargs: dict) -> tuple[str, list[SSAValue]]:
        """The call's argument template (`abir.numpy_calls`) and its batched operands, in order."""
        leaves, treedef = flatten((args, kwargs))
        operands: list[SSAValue] = []
        placed = []
        for leaf in leaves:
            if isinstance(leaf, SSAValue):
                placed.append(numpy_calls.Operand(len(operands)))
                operands.append(leaf)
            else:
                placed.append(leaf.value)
        call_args, call_kwargs = unflatten(treedef, placed)
        try:
            return numpy_calls.encode_arguments(call_args, call_kwargs), operands
        except numpy_calls.UnencodableArgument as e:
            raise self.source.error(node, f"{shown} takes {e} here, which abir cannot pass per member",
                                    "pass numbers, strings, dtypes, tuples or NumPy arrays") from None


def _numpy_function(name: str) -> Any:
    return getattr(np, name)


def _refusal(shown: str, name: str) -> str:
    if name in numpy_calls.VALUE_DEPENDENT:
        return (f"{shown} on per-member values is not supported: the shape of its result depends on each "
                "member's values (or it writes into its argument), so members' results cannot form one array")
    return f"{shown} on per-member values is not supported: abir does not know how to run it per member"


NUMPY_SUGGESTION = (
    "write it with the supported NumPy functions (docs/language.md lists them), with fixed-size arrays and "
    "masks (np.where) where the size would depend on the values; or, for code written for whole batches, "
    "call it inside a helper declared batch-aware with @ctx.primitive"
)


class LikeDtype:
    """`y.dtype` where `y` is batched: only usable as the argument of `astype` (`x.astype(y.dtype)`)."""

    def __init__(self, array: SSAValue):
        self.array = array


def _name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__

