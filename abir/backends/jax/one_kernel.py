"""How a standalone JAX run's loop is compiled: as one XLA kernel where XLA's CPU compiler can,
its state or its batch is small and its matrix products are cheap enough there
(`OneKernelWherePossible`, `one_kernel_pays`), else as XLA's usual sequence of kernels; both
with the compiler options of `LOOP_COMPILER_OPTIONS`.

XLA's CPU runtime otherwise calls each of the loop's kernels on its own, a fixed cost per call
that makes most of a sweep's cost at small batch sizes, and compiles each of them on its own
(docs/performance.md#jax-and-tf-backends, "One kernel").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

from abir.backends.base import State
from abir.backends.jax.cost import Work, work_of

ONE_KERNEL_MAX_STATE_BYTES = 1 << 20
"""A standalone run whose state takes at most this many bytes, or whose batch has at most
`ONE_KERNEL_MAX_BATCH` members, compiles its loop as one kernel where XLA can
(`OneKernelWherePossible`)."""
ONE_KERNEL_MAX_BATCH = 2048
"""See `ONE_KERNEL_MAX_STATE_BYTES`. One kernel saves a fixed cost per kernel call and sweep but
writes the stacks column by column, work that grows with the batch: programs with stacks lose
from about this many members on (docs/performance.md#jax-and-tf-backends, "One kernel")."""
PRODUCT_COST_IN_ONE_KERNEL = 1
"""What a matrix product's multiply-add costs in one kernel, in element operations
(`abir.backends.jax.cost.Work`). One kernel emits a product as a loop of multiply-adds, one
output element after another (XLA's naive dot emitter: a library call cannot be made from
it), where the kernel sequence calls a blocked, vectorized library product (YNNPACK or Eigen)
whose multiply-adds cost a small fraction of that."""
STRIDED_PRODUCT_COST_IN_ONE_KERNEL = 5
"""The same for a product that reads a large operand across its rows
(`abir.backends.jax.cost.Work.strided_products`): each multiply-add then waits on a load that
misses the first-level cache (docs/performance.md#jax-and-tf-backends, "One kernel")."""
NOT_IN_ONE_KERNEL = frozenset({
    "sort", "custom_call", "ffi_call", "pure_callback", "io_callback", "debug_callback",
    "lu", "cholesky", "eigh", "eig", "qr", "svd", "schur", "hessenberg", "tridiagonal", "tridiagonal_solve",
    "householder_product", "geqrf", "geqp3", "triangular_solve", "lu_pivots_to_permutation", "fft",
})  # fmt: skip
"""Primitives XLA's CPU compiler cannot emit into one kernel (its `IrEmitter`), besides the
scatters (`one_kernel_possible`): sorts, calls out of the kernel, and the linear algebra and
FFTs that XLA lowers to library calls."""
LOOP_COMPILER_OPTIONS = {"xla_cpu_prefer_vector_width": 512}
"""XLA options for a standalone run's loop: 512-bit vectors where the CPU has them (XLA prefers
256 bits by default, which spares some Intel CPUs a lower clock under AVX-512; elsewhere LLVM
keeps the widths the CPU has; docs/performance.md#jax-and-tf-backends, "Vector width")."""
ONE_KERNEL_COMPILER_OPTIONS = {**LOOP_COMPILER_OPTIONS, "xla_cpu_experimental_ynn_fusion_type": ""}
"""Also without YNNPACK's fusions of dot products (custom fusions, which one kernel cannot call)."""


class JitWithOptions:
    """`jax.jit(fn, compiler_options=options)`, or plain `jax.jit(fn)` on a jax whose `jit` takes
    no options, or once the first call finds an option this jaxlib does not have (its compile
    error names it "No such compile option")."""

    def __init__(self, fn: Callable[..., Any], options: Mapping[str, Any]):
        self.fn = fn
        try:
            self.jitted = jax.jit(fn, compiler_options=dict(options))
        except TypeError:
            self.jitted = jax.jit(fn)

    def __call__(self, *args: Any) -> Any:
        try:
            return self.jitted(*args)
        except Exception as error:
            if "No such compile option" not in str(error):
                raise
            self.jitted = jax.jit(self.fn)
            return self.jitted(*args)


def state_bytes(state: State) -> int:
    """The bytes of a state's arrays."""
    return sum(math.prod(leaf.shape) * np.dtype(leaf.dtype).itemsize for leaf in jax.tree_util.tree_leaves(state))


def state_signature(state: State) -> tuple[Any, ...]:
    """The keys, shapes and dtypes of a state's arrays (its nested entries, such as counters,
    by their tree structure)."""
    if all(hasattr(value, "shape") for value in state.values()):
        return tuple((key, value.shape, value.dtype) for key, value in state.items())
    leaves, tree = jax.tree_util.tree_flatten(state)
    return (tree, *((leaf.shape, leaf.dtype) for leaf in leaves))


def one_kernel_pays(work: Work) -> bool:
    """Whether a loop doing `work` per iteration runs faster as one kernel, by its matrix
    products: their extra cost there (`PRODUCT_COST_IN_ONE_KERNEL`,
    `STRIDED_PRODUCT_COST_IN_ONE_KERNEL`) must stay within its other work, which is about what
    one kernel saves (a kernel call per fused operation and sweep, and the loads and stores
    between kernels). Loops without products always pay."""
    strided = work.strided_products
    product_cost = PRODUCT_COST_IN_ONE_KERNEL * (work.products - strided) + STRIDED_PRODUCT_COST_IN_ONE_KERNEL * strided
    return product_cost <= work.elementwise


def on_cpu(state: State) -> bool:
    """Whether a run on `state` runs on a CPU: its device arrays' device, else JAX's default
    backend (one kernel is a tag of XLA's CPU compiler; other compilers make their own
    kernels)."""
    devices = {device for leaf in jax.tree_util.tree_leaves(state) if isinstance(leaf, jax.Array) for device in leaf.devices()}
    platforms = {device.platform for device in devices} or {jax.default_backend()}
    return platforms == {"cpu"}


def one_kernel_possible(jaxpr: Any) -> bool:
    """Whether XLA's CPU compiler can emit `jaxpr` as one kernel: no scatter, sort, custom
    call or host callback in it or in any nested jaxpr."""
    from jax.extend.core import jaxprs_in_params

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name.startswith("scatter") or name in NOT_IN_ONE_KERNEL:
            return False
        if not all(one_kernel_possible(getattr(sub, "jaxpr", sub)) for sub in jaxprs_in_params(eqn.params)):
            return False
    return True


class OneKernelWherePossible:
    """A standalone run's machine loop `(state, iterations) -> state`, jitted, and compiled as
    one kernel where XLA's CPU compiler can do it.

    XLA's CPU runtime runs a compiled program as a sequence of kernels, a call each. A call
    tagged `xla_cpu_small_call` (the tag XLA's own `SmallWhileLoopHoistingPass` gives a while
    loop of under 1 KB) is emitted as one kernel instead, the loop and its conditionals
    inlined, by XLA's `IrEmitter`, which cannot emit scatters, sorts, custom calls or custom
    fusions. So `loop(scatter_free=True)` is traced first (stack writes, compaction and
    materialized helper results without scatters), and tagged when its jaxpr has none of these
    (`one_kernel_possible`; dot products then leave YNNPACK, `ONE_KERNEL_COMPILER_OPTIONS`), the
    run is on a CPU (`on_cpu`), its state takes at most `ONE_KERNEL_MAX_STATE_BYTES` or its
    batch at most `ONE_KERNEL_MAX_BATCH` members, and its matrix products cost little in one
    kernel (`one_kernel_pays` on the loop's `work_of`); `forced` skips the last three. Otherwise,
    or when the tagged compilation fails (XLA refuses it as unimplemented, or an older jax lacks
    the option or the tag), the run uses `loop(scatter_free=False)` as a sequence of kernels,
    which raises any error of the program itself. Decided once per state signature, before
    anything is compiled."""

    def __init__(
        self, loop: Callable[[bool], Callable[[State, Any], State]], forced: bool = False
    ):
        self.loop = loop
        self.forced = forced
        self.scatter_free_loop = jax.jit(loop(True))
        self.fused = JitWithOptions(self._tagged, ONE_KERNEL_COMPILER_OPTIONS)
        self._plain: Callable[[State, Any], State] | None = None
        self.chosen: dict[Any, Callable[[State, Any], State]] = {}

    @property
    def plain(self) -> Callable[[State, Any], State]:
        """The loop with scatters, as a sequence of kernels (traced when first needed)."""
        if self._plain is None:
            self._plain = JitWithOptions(self.loop(False), LOOP_COMPILER_OPTIONS)
        return self._plain

    def _tagged(self, state: State, iterations: Any) -> State:
        from jax.experimental.xla_metadata import set_xla_metadata

        # attached to the call op producing the results: not inlined, emitted as one kernel
        return set_xla_metadata(  # type: ignore[no-any-return]
            self.scatter_free_loop(state, iterations), xla_cpu_small_call="true", inlineable="false"
        )

    def __call__(self, state: State, iterations: Any) -> State:
        signature = state_signature(state)
        run = self.chosen.get(signature)
        if run is None:
            return self._first_call(signature, state, iterations)
        return run(state, iterations)

    def chosen_for(self, state: State) -> Callable[[State, Any], State]:
        """The compiled loop calls on states of `state`'s signature run, once one has run (else
        this object, which chooses it)."""
        return self.chosen.get(state_signature(state), self)

    def wanted(self, state: State, iterations: Any) -> bool:
        """Whether the loop on `state` is to be one kernel (see the class docstring)."""
        if not (self.forced or on_cpu(state)):
            return False
        small = state_bytes(state) <= ONE_KERNEL_MAX_STATE_BYTES or state["pc"].shape[0] <= ONE_KERNEL_MAX_BATCH
        if not (self.forced or small):
            return False
        jaxpr = self.scatter_free_loop.trace(state, iterations).jaxpr
        return one_kernel_possible(jaxpr) and (self.forced or one_kernel_pays(work_of(jaxpr)))

    def _first_call(self, signature: Any, state: State, iterations: Any) -> State:
        if self.wanted(state, iterations):
            try:
                result = self.fused(state, iterations)
            except Exception:  # XLA refuses the one kernel (or this jax cannot ask for it): kernels
                pass
            else:
                self.chosen[signature] = self.fused
                return result
        run = self.chosen[signature] = self.plain
        return run(state, iterations)
