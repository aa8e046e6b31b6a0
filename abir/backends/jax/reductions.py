"""Reductions of a [B] array over the batch, by chunks where XLA fuses them into one kernel.

XLA's CPU compiler splits a reduction of more than `REDUCTION_CHUNK` elements into a tree of
three kernels, while reductions of up to that many, combined elementwise, fuse into one kernel
for up to `CHUNKED_REDUCTION_MAX` elements (six chunks; beyond that they split again). The
machine loop reduces its [B] masks and program counters several times per sweep ("any member
here?", the smallest pc), each a kernel launch, so batches up to that size reduce by chunks
(docs/performance.md#jax-and-tf-backends, "Chunked reductions").
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

REDUCTION_CHUNK = 32
CHUNKED_REDUCTION_MAX = 192


def _batch_reduce(x: Any, reduce: Callable[[Any], Any], combine: Callable[[Any, Any], Any]) -> Any:
    """`reduce(x)` of a [B] array, by chunks of `REDUCTION_CHUNK` when B allows (see above)."""
    size = x.shape[0]
    if size <= REDUCTION_CHUNK or size > CHUNKED_REDUCTION_MAX:
        return reduce(x)
    parts = [reduce(x[start : start + REDUCTION_CHUNK]) for start in range(0, size, REDUCTION_CHUNK)]
    return functools.reduce(combine, parts)


def batch_any(x: Any) -> Any:
    return _batch_reduce(x, jnp.any, jnp.logical_or)


def batch_min(x: Any) -> Any:
    return _batch_reduce(x, jnp.min, jnp.minimum)


def batch_sum(x: Any) -> Any:
    return _batch_reduce(x, jnp.sum, jnp.add)
