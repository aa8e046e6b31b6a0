"""A jaxpr cost model: a rough count of the element operations a traced function performs, how
much of it is matrix products, and how much of it XLA's CPU compiler spreads over threads.

The JAX backend decides by it which blocks run compacted (`abir.backends.jax.compaction`),
which helper results get buffers of their own (`abir.backends.jax.writes`) and whether a
standalone run's loop is compiled as one kernel (`abir.backends.jax.one_kernel`).
"""

from __future__ import annotations

import dataclasses
import math
import os
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
STRIDED_PRODUCT_MIN_BYTES = 16 * 1024
"""A product of matrices (not a matrix and a vector) reading an operand of at least this many
bytes across its rows (contracting a dimension other than its last) counts in
`Work.strided_products`: a loop over its
multiply-adds then walks a new cache line on every step through more than half of a core's
first-level data cache (32 KiB or more on x86 and Arm server cores), the rest being the other
operand's and the output's."""
THREADED_MIN_BYTES = 2 * 256 * 1024
"""An elementwise operation whose output takes at least this many bytes counts in
`Work.threaded`: compiled as a sequence of kernels, XLA's CPU compiler splits such a memory-bound
loop over its threads (its `ParallelTaskAssigner` gives each task at least 256 KiB of output, a
core's second-level cache), where one kernel runs it on one thread
(docs/performance.md#jax-and-tf-backends, "Wide elementwise work")."""
FREE_PRIMITIVES = frozenset(
    {"reshape", "squeeze", "broadcast_in_dim", "expand_dims", "convert_element_type", "copy", "slice"}
)


@dataclasses.dataclass(frozen=True)
class Work:
    """Element operations counted in a jaxpr: `products`, the multiply-adds of its matrix
    products (`dot_general`), of which `strided_products` read an operand of at least
    `STRIDED_PRODUCT_MIN_BYTES` across its rows; `elementwise`, every other operation's output
    elements (`TRANSCENDENTAL_COST` each for a transcendental function, reshapes and casts
    free), of which `threaded` is the work of operations whose output takes at least
    `THREADED_MIN_BYTES`."""

    products: int = 0
    elementwise: int = 0
    strided_products: int = 0
    threaded: int = 0

    @property
    def total(self) -> int:
        """All the element operations, a multiply-add counting one."""
        return self.products + self.elementwise

    def __add__(self, other: Work) -> Work:
        return Work(
            self.products + other.products,
            self.elementwise + other.elementwise,
            self.strided_products + other.strided_products,
            self.threaded + other.threaded,
        )

    def __mul__(self, times: int) -> Work:
        return Work(self.products * times, self.elementwise * times, self.strided_products * times, self.threaded * times)


def _strided_operand(operand: Any, contracting: Sequence[int]) -> bool:
    """Whether a product of matrices reads `operand` across its rows (contracts a dimension
    followed by others of more than one element) and it takes at least
    `STRIDED_PRODUCT_MIN_BYTES`."""
    shape = operand.aval.shape
    across_rows = int(np.prod(shape[max(contracting, default=len(shape)) + 1 :])) > 1
    return across_rows and int(np.prod(shape)) * np.dtype(operand.aval.dtype).itemsize >= STRIDED_PRODUCT_MIN_BYTES


def _eqn_work(eqn: Any) -> Work:
    """The work of one equation without nested jaxprs."""
    name = eqn.primitive.name
    if name in FREE_PRIMITIVES:
        return Work()
    size = sum(int(np.prod(v.aval.shape)) for v in eqn.outvars if hasattr(v.aval, "shape"))
    if name == "dot_general":
        (lhs_contract, rhs_contract), _ = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.invars[:2]
        products = size * int(np.prod([lhs.aval.shape[d] for d in lhs_contract]))
        # a product with a vector result is a matrix-vector loop, vectorized along the matrix's rows
        matrices = len(eqn.outvars[0].aval.shape) >= 2
        strided = matrices and (_strided_operand(lhs, lhs_contract) or _strided_operand(rhs, rhs_contract))
        return Work(products=products, strided_products=products if strided else 0)
    work = size * (TRANSCENDENTAL_COST if name in TRANSCENDENTAL_PRIMITIVES else 1)
    # an update in place writes a slice of its output, however large the whole
    in_place = name == "dynamic_update_slice" or name.startswith("scatter")
    threaded = not in_place and _output_bytes(eqn) >= THREADED_MIN_BYTES
    return Work(elementwise=work, threaded=work if threaded else 0)


def _output_bytes(eqn: Any) -> int:
    """The bytes of an equation's outputs."""
    return sum(
        int(np.prod(v.aval.shape)) * np.dtype(v.aval.dtype).itemsize for v in eqn.outvars if hasattr(v.aval, "shape")
    )


def cpu_threads() -> int:
    """The CPU cores this process may run on (as XLA's CPU runtime counts them for its threads)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def threaded_tasks(cores: int) -> int:
    """The threads XLA's CPU compiler splits a memory-bound elementwise loop over on `cores` cores
    (its `ParallelTaskAssigner`: at most the square root of the cores, rounded up)."""
    return min(cores, math.ceil(math.sqrt(cores)))


def kernels_spread(work: Work, cores: int | None = None) -> bool:
    """Whether a loop doing `work` per iteration takes less time as a sequence of kernels than
    as one kernel on `cores` cores (`cpu_threads` by default) because XLA spreads its wide
    elementwise operations (`Work.threaded`) over threads there: when they are at least half
    of its work and split over two or more threads. One kernel runs everything on one thread;
    kernels cost more CPU time in all (a call per kernel, loads and stores between them), which
    a split of half the work over two threads more than repays
    (docs/performance.md#jax-and-tf-backends, "Wide elementwise work")."""
    tasks = threaded_tasks(cpu_threads() if cores is None else cores)
    return tasks >= 2 and 2 * work.threaded >= work.total


def work_of(jaxpr: Any, known: dict[int, Work] | None = None) -> Work:
    """The `Work` of `jaxpr`, through nested jaxprs: the costlier branch of a conditional, every
    iteration of a scan, one iteration of a while loop. `known` holds the work of nested jaxprs
    already counted (a jaxpr traced once is often called from many places)."""
    from jax.extend.core import jaxprs_in_params

    known = {} if known is None else known
    if id(jaxpr) in known:
        return known[id(jaxpr)]
    total = Work()
    for eqn in jaxpr.eqns:
        inner = [work_of(getattr(sub, "jaxpr", sub), known) for sub in jaxprs_in_params(eqn.params)]
        if not inner:
            total += _eqn_work(eqn)
        elif eqn.primitive.name == "cond":
            total += max(inner, key=lambda work: work.total)
        elif eqn.primitive.name == "scan":
            total += inner[0] * int(eqn.params["length"])
        else:
            for work in inner:
                total += work
    known[id(jaxpr)] = total
    return total


def operation_count(jaxpr: Any, known: dict[int, int] | None = None) -> int:
    """The operations XLA compiles for `jaxpr`: its equations other than `FREE_PRIMITIVES`,
    through nested jaxprs at each place they are called (XLA inlines them), every branch of a
    conditional and a loop's body once. What a compilation of it as one kernel grows with
    (`abir.backends.jax.one_kernel.ONE_KERNEL_MAX_OPERATIONS`)."""
    from jax.extend.core import jaxprs_in_params

    known = {} if known is None else known
    if id(jaxpr) in known:
        return known[id(jaxpr)]
    count = 0
    for eqn in jaxpr.eqns:
        inner = [operation_count(getattr(sub, "jaxpr", sub), known) for sub in jaxprs_in_params(eqn.params)]
        count += sum(inner) if inner else int(eqn.primitive.name not in FREE_PRIMITIVES)
    known[id(jaxpr)] = count
    return count


def jaxpr_work(jaxpr: Any) -> int:
    """A rough count of the element operations `jaxpr` performs (`work_of`): each operation's
    output elements (a matrix product's multiply-adds; `TRANSCENDENTAL_COST` per element of a
    transcendental function; reshapes and casts free), through nested jaxprs (the costlier
    branch of a conditional, every iteration of a scan, one iteration of a while loop)."""
    return work_of(jaxpr).total


def work_per_member(fn: Callable[..., Any], arrays: Sequence[Any]) -> float:
    """`jaxpr_work` of `fn` on `arrays` per member (rows of the arguments' leading axis)."""
    rows = max((int(a.shape[0]) for a in arrays if a.ndim), default=1)
    return jaxpr_work(jax.make_jaxpr(fn)(*arrays).jaxpr) / max(rows, 1)
