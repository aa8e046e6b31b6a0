"""Argument templates of the `numpy` prim (compile-time arguments, `Operand`s where batched
operands go), the error of calls XLA cannot compile, and where each call was written."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from abir.errors import AbirError

# -- argument templates ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Operand:
    """Where the k-th batched operand goes in a call's arguments."""

    index: int


class NotCompilableError(AbirError):
    """A NumPy call that cannot run where the program is compiled (NumPy code under XLA), at
    the call's line in the user's function."""


CALL_SITES: dict[tuple[str, str, int], dict[str, str]] = {}
"""The source lines (`file:line` to the call's text) each `numpy` prim was written at, by
(function, arguments, output): prims lose their location once typed (equal prims are merged),
so run-time errors look it up here."""


def remember_call_site(function: str, arguments: str, output: int, location: str, source: str) -> None:
    """Record that the prim (`function`, `arguments`, `output`) is the call `source` at `location`."""
    CALL_SITES.setdefault((function, arguments, output), {})[location] = source


class UnencodableArgument(TypeError):
    """A compile-time argument the IR cannot hold (a function, an arbitrary object)."""


def encode_arguments(args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    """The template of a call's arguments, a Python literal (`Operand`s where batched operands
    go): `([{'operand': 0}, 1], {'axis': -1})`."""
    return repr((_encode(list(args)), {k: _encode(kwargs[k]) for k in sorted(kwargs)}))


def decode_arguments(text: str) -> tuple[list[Any], dict[str, Any]]:
    """The arguments a template encodes (`Operand`s where batched operands go); a ValueError
    saying what is malformed."""
    try:
        args, kwargs = ast.literal_eval(text)
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ValueError
        return [_decode(a) for a in args], {str(k): _decode(v) for k, v in kwargs.items()}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, KeyError):
        raise ValueError(
            f"arguments {text[:60]!r} are not a template ([positional], {{keywords}}) of literals, "
            "{'operand': k}, {'array': [...], 'dtype': '<f8'}, {'dtype': '<f8'}, {'scalar': x, 'dtype': ...}, "
            "{'slice': (start, stop, step)}, {'float': 'nan'}, {'complex': (re, im)}, {'ellipsis': True}"
        ) from None


def operand_count(text: str) -> int:
    """How many operands the template of `text` takes (each index once, from 0)."""
    args, kwargs = decode_arguments(text)
    indices = sorted(o.index for o in template_operands((args, kwargs)))
    if indices != list(range(len(indices))):
        raise ValueError(f"the operands of arguments {text[:60]!r} are not numbered 0..n-1, once each")
    return len(indices)


def template_operands(value: Any) -> list[Operand]:
    if isinstance(value, Operand):
        return [value]
    if isinstance(value, list | tuple):
        return [o for v in value for o in template_operands(v)]
    if isinstance(value, dict):
        return [o for v in value.values() for o in template_operands(v)]
    return []


def _encode(value: Any) -> Any:
    if isinstance(value, Operand):
        return {"operand": value.index}
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, complex):
        return {"complex": (_encode(value.real), _encode(value.imag))}
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        return {"scalar": _encode(value.item()), "dtype": value.dtype.str}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufc":
        return {"array": _encode(value.tolist()), "dtype": value.dtype.str}
    if isinstance(value, np.dtype) or isinstance(value, type) and issubclass(value, np.generic | bool | int | float | complex):
        return {"dtype": np.dtype(value).str}
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_encode(v) for v in value)
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, slice):
        return {"slice": (_encode(value.start), _encode(value.stop), _encode(value.step))}
    if value is Ellipsis:
        return {"ellipsis": True}
    raise UnencodableArgument(f"a compile-time {type(value).__name__} ({value!r:.40})")


_DECODERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "operand": lambda v: Operand(int(v["operand"])),
    "float": lambda v: float(v["float"]),
    "complex": lambda v: complex(*(_decode(p) for p in v["complex"])),
    "scalar": lambda v: np.dtype(v["dtype"]).type(_decode(v["scalar"])),
    "array": lambda v: np.asarray(_decode(v["array"]), dtype=np.dtype(v["dtype"])),
    "dtype": lambda v: np.dtype(v["dtype"]).type,
    "slice": lambda v: slice(*(_decode(p) for p in v["slice"])),
    "ellipsis": lambda v: Ellipsis,
}
"""Tagged values of a template, by their first tag (`scalar` and `array` also carry `dtype`)."""


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_decode(v) for v in value)
    if not isinstance(value, dict):
        return value
    tag = next((t for t in _DECODERS if t in value and t != "dtype"), "dtype")
    if tag not in value:
        raise ValueError(f"unknown tagged value {value!r:.60}")
    return _DECODERS[tag](value)


def fill_template(template: Any, operands: Sequence[Any]) -> Any:
    if isinstance(template, Operand):
        return operands[template.index]
    if isinstance(template, list):
        return [fill_template(v, operands) for v in template]
    if isinstance(template, tuple):
        return tuple(fill_template(v, operands) for v in template)
    if isinstance(template, dict):
        return {k: fill_template(v, operands) for k, v in template.items()}
    return template
