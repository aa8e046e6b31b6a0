"""A jaxpr cost model: a rough count of the element operations a traced function performs.

The JAX backend decides by it which blocks run compacted (`abir.backends.jax.compaction`) and
which helper results get buffers of their own (`abir.backends.jax.writes`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

TRANSCENDENTAL_PRIMITIVES = frozenset(
    {
        *("exp", "exp2", "log", "log1p", "expm1", "pow", "sqrt", "rsqrt", "cbrt", "logistic"),
        *("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh"),
        *("erf", "erfc", "erf_inv", "lgamma", "digamma"),
    }
)
"""Primitives counted as `TRANSCENDENTAL_COST` element operations each (XLA CPU evaluates them
in software, about as slow as that many adds)."""
TRANSCENDENTAL_COST = 10
FREE_PRIMITIVES = frozenset(
    {"reshape", "squeeze", "broadcast_in_dim", "expand_dims", "convert_element_type", "copy", "slice"}
)


def jaxpr_work(jaxpr: Any) -> int:
    """A rough count of the element operations `jaxpr` performs: each operation's output
    elements (a matrix product's multiply-adds; `TRANSCENDENTAL_COST` per element of a
    transcendental function; reshapes and casts free), through nested jaxprs (the costlier
    branch of a conditional, one iteration of a loop)."""
    from jax.extend.core import jaxprs_in_params

    total = 0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        inner = [jaxpr_work(getattr(sub, "jaxpr", sub)) for sub in jaxprs_in_params(eqn.params)]
        if inner:
            total += max(inner) if name == "cond" else sum(inner)
            continue
        size = sum(int(np.prod(v.aval.shape)) for v in eqn.outvars if hasattr(v.aval, "shape"))
        if name in FREE_PRIMITIVES:
            continue
        if name == "dot_general":
            (lhs_contract, _), _ = eqn.params["dimension_numbers"]
            lhs_shape = eqn.invars[0].aval.shape
            total += size * int(np.prod([lhs_shape[d] for d in lhs_contract]))
        elif name in TRANSCENDENTAL_PRIMITIVES:
            total += TRANSCENDENTAL_COST * size
        else:
            total += size
    return total


def work_per_member(fn: Callable[..., Any], arrays: Sequence[Any]) -> float:
    """`jaxpr_work` of `fn` on `arrays` per member (rows of the arguments' leading axis)."""
    rows = max((int(a.shape[0]) for a in arrays if a.ndim), default=1)
    return jaxpr_work(jax.make_jaxpr(fn)(*arrays).jaxpr) / max(rows, 1)
