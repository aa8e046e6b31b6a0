"""The registry of opaque primitives: Python callables referenced from the IR by symbol.

`functional.prim @name(...)` names a callable registered here; `functional.opaque @name "src"`
records its source text in the module. Programs built by a `Context` register their callables
automatically; a program read from text can run only after `register_opaque` supplies them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

_REGISTRY: dict[str, Callable[..., Any]] = {}
_COUNTER = itertools.count()


def register_opaque(name: str, fn: Callable[..., Any]) -> str:
    """Register `fn` under symbol `name` (replacing any earlier one) and return the name."""
    if not callable(fn):
        raise TypeError(f"opaque primitive @{name} must be callable, got {type(fn).__name__}")
    _REGISTRY[name] = fn
    return name


def fresh_opaque_name(hint: str) -> str:
    """A symbol name not used by any registered callable, readable and derived from `hint`."""
    base = re.sub(r"[^A-Za-z0-9_]+", "_", hint).strip("_") or "opaque"
    while True:
        name = f"{base}_{next(_COUNTER)}"
        if name not in _REGISTRY:
            return name


def lookup_opaque(name: str) -> Callable[..., Any]:
    """The callable registered under `name`, or a clear error saying how to supply it."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"opaque primitive @{name} is not registered; call abir.opaque.register_opaque({name!r}, fn) "
            "before running a program read from text"
        ) from None
