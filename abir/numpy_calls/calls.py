"""A NumPy call bound to its argument template (`Call`), and what every batching rule reads of it."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from abir.numpy_calls.registry import FUNCTIONS, NumpyFunction, numpy_object, parameters, resolve
from abir.numpy_calls.templates import Operand, decode_arguments, fill_template, template_operands


@dataclass(frozen=True)
class Call:
    """One NumPy function with its argument template, bound for running on whole batches."""

    entry: NumpyFunction
    args: list[Any]
    kwargs: dict[str, Any]
    output: int
    bound: dict[str, Any] = field(default_factory=dict)
    """The template's arguments by parameter name (positional ones included, when the
    function has a signature)."""

    def member(self, operands: Sequence[Any]) -> Any:
        """The function on one member's operands (NumPy), the selected output as an array."""
        fn = numpy_object(self.entry.name)
        result = fn(*fill_template(self.args, operands), **fill_template(self.kwargs, operands))
        if self.entry.output_count(self.bound) > 1 or isinstance(result, tuple | list):
            result = result[self.output]
        return np.asarray(result)


@cache
def bind_call(function: str, arguments: str, output: int) -> Call:
    """The call of NumPy `function` with the argument template `arguments`, its `output` selected."""
    entry = entry_named(function)
    args, kwargs = decode_arguments(arguments)
    signature = parameters(numpy_object(function))
    bound: dict[str, Any] = dict(kwargs)
    if signature is not None:
        with contextlib.suppress(TypeError):
            bound = dict(signature.bind_partial(*args, **kwargs).arguments)
    return Call(entry, args, kwargs, output, bound)


def entry_named(function: str) -> NumpyFunction:
    """The entry of the NumPy function named `function`; a ValueError if abir does not know it."""
    if function in FUNCTIONS:
        return FUNCTIONS[function]
    fn = numpy_object(function)
    entry = resolve(fn) if fn is not None else None
    if entry is None:
        raise ValueError(f'"{function}" is not a NumPy function abir runs per member')
    return entry


def quietly(fn: Callable[[], Any]) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()




def member_rank(x: Any) -> int:
    return len(x.shape)


def select_output(call: Call, result: Any, xp: Any) -> Any:
    if call.entry.output_count(call.bound) > 1 or isinstance(result, tuple | list):
        result = result[call.output]
    return xp.asarray(result)


def top_level_operands(call: Call) -> dict[str, Operand] | None:
    """The parameter each operand is passed as (a whole argument), or None if one sits inside a
    structure."""
    placed: dict[str, Operand] = {}
    for name, value in named_arguments(call).items():
        if isinstance(value, Operand):
            placed[name] = value
        elif template_operands(value):
            return None
    return placed


def named_arguments(call: Call) -> dict[str, Any]:
    """The template's arguments by parameter name (`#0`, `#1`, ... without a signature)."""
    return call.bound or {**{f"#{i}": a for i, a in enumerate(call.args)}, **call.kwargs}


def as_jax_arguments(call: Call, fn: Callable[..., Any]) -> tuple[list[Any], dict[str, Any]]:
    """The template for `jax.numpy`: compile-time lists of numbers as arrays (it takes no
    lists), and no `dtype=` where the function has none (the result is cast to NumPy's dtype)."""
    args = [_static_lists_as_arrays(a) for a in call.args]
    kwargs = {k: _static_lists_as_arrays(v) for k, v in call.kwargs.items()}
    signature = parameters(fn)
    if "dtype" in kwargs and (signature is None or "dtype" not in signature.parameters):
        del kwargs["dtype"]
    return args, kwargs


def _static_lists_as_arrays(value: Any) -> Any:
    if isinstance(value, list) and not template_operands(value):
        return np.asarray(value)
    if isinstance(value, list):
        return [_static_lists_as_arrays(v) for v in value]
    return value
