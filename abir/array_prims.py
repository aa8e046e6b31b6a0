"""The builtin array primitives: indexing, reductions, products, shape changes and shape queries.

Besides the elementwise prims of `abir.prims`, a prim op may name one of the array operations
below. Their static parameters (index spec, axis, shape, ...) are the op's `params` dictionary,
so the IR alone says what runs: every backend builds the operation from the name and the
parameters (`implementation`), type inference runs it on NumPy dummies. Names follow the Python
Array API where it has one (`permute_dims`, `concat`, `cumulative_sum`, `vector_norm`, `matmul`)
and NumPy otherwise (`dot`, `inner`, `outer`, `getitem`).

Parameters are Python values here (the dialects encode them as builtin attributes): ints, tuples
of ints, `True` flags (absent is False), strings, and for `getitem`/`setitem` the index spec, a
list of strings, one per index component:

    "3", "-1"           a compile-time integer
    "1:", "::-1", ":"   a slice
    "..."  "newaxis"    Ellipsis, None
    "?"                 the next per-member integer operand (clipped into range per member)
    "[0, 2]"            a compile-time integer array (JSON)

`check_scalar` and `after_in_place` serve item assignment: the first passes its operand through
and fails at type inference with its `message` if the operand has axes; the second is its first
operand if that is a per-member scalar, else its second (the array updated in place).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from abir import array_ops
from abir.array_ops import ARRAY, BASIC, BATCHED, IndexComponent

INDEX_OPERAND = "?"
MAX_INDEX_ARRAY = 1 << 20
"""The largest compile-time index array a spec may hold (elements)."""

REDUCTIONS = ("sum", "mean", "max", "min", "prod", "any", "all", "std", "var", "argmax", "argmin")
SCANS = {"cumulative_sum": "cumsum", "cumulative_prod": "cumprod"}
PRODUCTS = ("matmul", "dot", "inner", "outer")

Params = Mapping[str, Any]


@dataclass(frozen=True)
class Signature:
    """What an array prim takes: its operand count (`fixed`, or at least `minimum`, plus one per
    per-member index operand of its index spec), its parameters with their kinds, and the
    required ones."""

    operands: int
    params: Mapping[str, str]
    required: tuple[str, ...] = ()
    variadic: bool = False


_AXIS = "int|ints"
SIGNATURES: dict[str, Signature] = {
    "getitem": Signature(1, {"index": "index"}, ("index",)),
    "setitem": Signature(2, {"index": "index"}, ("index",)),
    **{name: Signature(1, {"axis": _AXIS, "keepdims": "flag"}) for name in REDUCTIONS},
    "std": Signature(1, {"axis": _AXIS, "keepdims": "flag", "ddof": "int"}),
    "var": Signature(1, {"axis": _AXIS, "keepdims": "flag", "ddof": "int"}),
    "argmax": Signature(1, {"axis": "int", "keepdims": "flag"}),
    "argmin": Signature(1, {"axis": "int", "keepdims": "flag"}),
    **{name: Signature(1, {"axis": "int"}) for name in SCANS},
    **{name: Signature(2, {}) for name in PRODUCTS},
    "vector_norm": Signature(1, {"axis": _AXIS, "keepdims": "flag"}),
    "concat": Signature(1, {"axis": "int"}, variadic=True),
    "stack": Signature(1, {"axis": "int"}, ("axis",), variadic=True),
    "permute_dims": Signature(1, {"axes": "ints"}),
    "reshape": Signature(1, {"shape": "ints"}, ("shape",)),
    "squeeze": Signature(1, {"axis": _AXIS}),
    "dim": Signature(1, {"axis": "int"}, ("axis",)),
    "ndim": Signature(1, {}),
    "size": Signature(1, {}),
    "astype_like": Signature(2, {}),
    "after_in_place": Signature(2, {}),
    "check_scalar": Signature(1, {"message": "str"}, ("message",)),
    "numpy": Signature(0, {"function": "str", "arguments": "str", "output": "int"}, ("function", "arguments"), True),
}
"""Every array prim by name."""

VIEWS = ("permute_dims", "reshape", "squeeze")
"""Array prims whose result NumPy makes a view of the first operand (reshape: when it can)."""


def is_array_prim(name: str) -> bool:
    """Whether `name` is a builtin array prim."""
    return name in SIGNATURES


# -- index specs -----------------------------------------------------------------------------


def format_index(components: Sequence[IndexComponent]) -> list[str]:
    """The index spec of `components` (`array_ops.IndexComponent`s)."""
    return [_format_component(c) for c in components]


def _format_component(component: IndexComponent) -> str:
    kind, value = component
    if kind == BATCHED:
        return INDEX_OPERAND
    if kind == ARRAY:
        return json.dumps(np.asarray(value).tolist())
    if value is Ellipsis:
        return "..."
    if value is None:
        return "newaxis"
    if isinstance(value, slice):
        parts = ["" if p is None else str(p) for p in (value.start, value.stop, value.step)]
        return ":".join(parts if value.step is not None else parts[:2])
    return str(int(value))


def parse_index(spec: Sequence[str]) -> list[IndexComponent]:
    """The components of an index spec; a ValueError saying which entry is malformed."""
    components = [_parse_component(text) for text in spec]
    if sum(1 for c in components if c == (BASIC, Ellipsis)) > 1:
        raise ValueError("an index spec can hold at most one '...'")
    return components


def _parse_component(text: str) -> IndexComponent:
    text = text.strip()
    if text == INDEX_OPERAND:
        return (BATCHED, None)
    if text == "...":
        return (BASIC, Ellipsis)
    if text == "newaxis":
        return (BASIC, None)
    if text.startswith("["):
        return (ARRAY, _parse_index_array(text))
    if ":" in text:
        parts = text.split(":")
        if len(parts) > 3:
            raise ValueError(f"index entry {text!r}: a slice has at most three parts (start:stop:step)")
        values = [_parse_int(p, text) if p.strip() else None for p in parts]
        return (BASIC, slice(*values, *([None] * (3 - len(values)))))
    return (BASIC, _parse_int(text, text))


def _parse_int(text: str, entry: str) -> int:
    try:
        return int(text.strip(), 10)
    except ValueError:
        raise ValueError(
            f"index entry {entry!r} is not an integer, a slice, '...', 'newaxis', '?' or an integer array "
            "such as '[0, 2]'"
        ) from None


def _parse_index_array(text: str) -> np.ndarray:
    if len(text) > 16 * MAX_INDEX_ARRAY:
        raise ValueError(f"index array of {len(text)} characters is too large")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError(f"index entry {text[:40]!r} is not a JSON list of integers") from None
    try:
        array = np.asarray(value, dtype=np.int64) if _ints_only(value) else None
    except ValueError:
        array = None
    if array is None:
        raise ValueError(f"index entry {text[:40]!r} must be a rectangular list of integers")
    return array


def _ints_only(value: Any, depth: int = 0) -> bool:
    if isinstance(value, list):
        return depth < 32 and all(_ints_only(v, depth + 1) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 2**63


# -- checking --------------------------------------------------------------------------------


def check(name: str, params: Params, n_operands: int, n_results: int) -> None:
    """A ValueError naming what is wrong with array prim `name` taking these parameters,
    operands and results."""
    signature = SIGNATURES[name]
    for key, value in params.items():
        kind = signature.params.get(key)
        if kind is None:
            allowed = ", ".join(signature.params) or "none"
            raise ValueError(f'array prim "{name}" has no parameter "{key}" (its parameters: {allowed})')
        if not _has_kind(value, kind):
            raise ValueError(f'array prim "{name}": parameter "{key}" must be {_KIND_TEXT[kind]}, got {value!r}')
    for key in signature.required:
        if key not in params:
            raise ValueError(f'array prim "{name}" needs the parameter "{key}" ({_KIND_TEXT[signature.params[key]]})')
    expected = signature.operands
    if name == "numpy":
        _check_numpy_call(params, n_operands)
        expected = n_operands
    if "index" in params:
        expected += sum(1 for c in parse_index(params["index"]) if c[0] == BATCHED)
    if signature.variadic and n_operands < expected or not signature.variadic and n_operands != expected:
        counted = f"at least {expected}" if signature.variadic else str(expected)
        raise ValueError(f'array prim "{name}" takes {counted} operand(s) here, got {n_operands}')
    if n_results != 1:
        raise ValueError(f'array prim "{name}" has exactly one result, got {n_results}')


def _check_numpy_call(params: Params, n_operands: int) -> None:
    # numpy_calls (its call tables) loads on the first "numpy" prim: abir-opt runs that never
    # meet one start without it
    from abir import numpy_calls

    try:
        entry = numpy_calls.entry_named(params["function"])
        count = numpy_calls.operand_count(params["arguments"])
    except ValueError as e:
        raise ValueError(f'array prim "numpy": {e}') from None
    if count != n_operands:
        raise ValueError(f'array prim "numpy": its arguments place {count} operand(s), got {n_operands}')
    if params.get("output", 0) < 0:
        raise ValueError(f'array prim "numpy": output {params["output"]} of {entry.name} does not exist')


_KIND_TEXT = {
    "int": "an integer",
    "ints": "an array of integers (array<i64: ...>)",
    "int|ints": "an integer or an array of integers",
    "flag": "a unit flag (present or absent)",
    "str": "a string",
    "index": 'an index spec (an array of strings such as ["?", "1:"])',
}


def _has_kind(value: Any, kind: str) -> bool:
    if kind == "int|ints":
        return _has_kind(value, "int") or _has_kind(value, "ints")
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "ints":
        return isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if kind == "flag":
        return value is True
    if kind == "str":
        return isinstance(value, str)
    return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)


# -- implementations -------------------------------------------------------------------------


def implementation(name: str, params: Params) -> Callable[..., Any]:
    """The callable running array prim `name` with `params` on whole-batch arrays of any
    backend (NumPy, JAX, TensorFlow): built once per distinct prim."""
    frozen = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in params.items()))
    return _implementation(name, frozen)


@cache
def _implementation(name: str, frozen: tuple[tuple[str, Any], ...]) -> Callable[..., Any]:
    params = dict(frozen)
    axis = params.get("axis")
    if name in ("getitem", "setitem"):
        components = parse_index(params["index"])
        return array_ops.make_index(components) if name == "getitem" else array_ops.make_setitem(components)
    if name in REDUCTIONS:
        return array_ops.make_reduction(name, axis, "keepdims" in params, params.get("ddof", 0))
    if name in SCANS:
        return array_ops.make_scan(SCANS[name], axis)
    if name in PRODUCTS:
        return array_ops.make_product(name)
    if name == "numpy":
        from abir import numpy_calls

        return numpy_calls.make_call(params["function"], params["arguments"], params.get("output", 0))
    return _shape_implementation(name, params)


def _shape_implementation(name: str, params: dict[str, Any]) -> Callable[..., Any]:
    axis = params.get("axis")
    makers: dict[str, Callable[[], Callable[..., Any]]] = {
        "vector_norm": lambda: array_ops.make_norm(axis, "keepdims" in params),
        "concat": lambda: array_ops.make_concatenate(axis),
        "stack": lambda: array_ops.make_stack(axis),
        "permute_dims": lambda: array_ops.make_transpose(params.get("axes")),
        "reshape": lambda: array_ops.make_reshape(params["shape"]),
        "squeeze": lambda: array_ops.make_squeeze(axis),
        "dim": lambda: array_ops.make_shape_fact("shape", axis),
        "ndim": lambda: array_ops.make_shape_fact("ndim"),
        "size": lambda: array_ops.make_shape_fact("size"),
        "astype_like": lambda: array_ops.astype_like,
        "after_in_place": lambda: array_ops.after_in_place,
        "check_scalar": lambda: array_ops.make_scalar_check(lambda: ValueError(params["message"])),
    }
    return makers[name]()
