"""The dry-run flag and `truthy`, shared by the frontend and the per-member run.

`f(..., dry_run=True)` runs the plain Python function once per member (`abir.context`). While it
runs, calls to batched functions go straight to their Python functions, and `truthy` turns a
size-1 array into a Python bool; the frontend compiles `truthy(x)` as the identity.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

import numpy as np

_DRY_RUN = contextvars.ContextVar("abir_dry_run", default=False)


def in_dry_run() -> bool:
    """Whether a dry run is running (in this thread or task)."""
    return _DRY_RUN.get()


@contextlib.contextmanager
def dry_running() -> Iterator[None]:
    """Mark the code run inside as part of a dry run."""
    token = _DRY_RUN.set(True)
    try:
        yield
    finally:
        _DRY_RUN.reset(token)


def truthy(x: Any) -> Any:
    """Mark `x` as a condition: `if truthy(x):`. The compiler treats it as the identity; in a dry
    run (plain Python, one member at a time) a size-1 array becomes a Python bool."""
    if _DRY_RUN.get() or np.size(x) == 1:
        return bool(np.asarray(x).reshape(()))
    return x
