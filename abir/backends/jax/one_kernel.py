"""How a standalone JAX run's loop is compiled: as one XLA kernel where XLA's CPU compiler can,
its state or its batch is small and its matrix products are cheap enough there
(`OneKernelWherePossible`, `one_kernel_pays`), else as XLA's usual sequence of kernels; both
with the compiler options of `LOOP_COMPILER_OPTIONS`.

XLA's CPU runtime otherwise calls each of the loop's kernels on its own, a fixed cost per call
that makes most of a sweep's cost at small batch sizes, and compiles each of them on its own
(docs/performance.md#jax-and-tf-backends, "One kernel").
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from abir.backends.base import RUNNING, STATUS_KEY, State
from abir.backends.jax import compaction
from abir.backends.jax.compaction import limits_on_device
from abir.backends.jax.cost import Work, kernels_spread, operation_count, work_of

ONE_KERNEL_MAX_STATE_BYTES = 1 << 20
"""A standalone run whose state takes at most this many bytes (less the arrays its kernels only
index, `abir.backends.traced.indexed_keys`), or whose batch has at most
`ONE_KERNEL_MAX_BATCH` members, compiles its loop as one kernel where XLA can
(`OneKernelWherePossible`)."""
ONE_KERNEL_MAX_BATCH = 2048
"""See `ONE_KERNEL_MAX_STATE_BYTES`. One kernel saves a fixed cost per kernel call and sweep but
writes the stacks column by column, work that grows with the batch: programs with stacks lose
from about this many members on (docs/performance.md#jax-and-tf-backends, "One kernel")."""
ONE_KERNEL_MAX_OPERATIONS = 4000
"""A loop of more operations than this (`abir.backends.jax.cost.operation_count` of its jaxpr)
compiles as a sequence of kernels: XLA emits one kernel as one LLVM function, whose optimization
(LLVM's loop passes forgetting and recomputing the scalar evolution of the loop nests within it)
grows faster than the function, where the kernels are LLVM modules of their own, compiled in
parallel, in time about linear in the operations. Small loops compile faster as one kernel;
past this bound a first call compiles several times longer than as kernels, or for minutes, or
runs out of memory (docs/performance.md#one-kernels-compile-time)."""
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
FEW_ACTIVE_SHARE = 1 / 2
"""A loop whose first launch began at least this share of its sweeps with few members active
(`abir.backends.jax.compaction.live_rows`) sweeps on those members' rows in later runs
(`ActiveRows`)."""
TRIAL_RUNS = 2
"""Runs of each loop an `ActiveRows` times before it chooses."""
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

    def compiled(self, *args: Any) -> Callable[..., Any]:
        """The function compiled ahead of its first call, for arguments shaped as `args`."""
        try:
            return self.jitted.lower(*args).compile()  # type: ignore[no-any-return]
        except Exception as error:
            if "No such compile option" not in str(error):
                raise
            self.jitted = jax.jit(self.fn)
            return self.jitted.lower(*args).compile()  # type: ignore[no-any-return]


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
    run is on a CPU (`on_cpu`), its state less `indexed_keys` (arrays the loop reads and writes
    only at indexed rows, as a run with lanes' rings) takes at most `ONE_KERNEL_MAX_STATE_BYTES` or its
    batch at most `ONE_KERNEL_MAX_BATCH` members, and its matrix products cost little in one
    kernel (`one_kernel_pays` on the loop's `work_of`); `forced` skips the last three. A loop
    whose work XLA spreads over threads as kernels (`abir.backends.jax.cost.kernels_spread`)
    runs as one kernel until its sequence of kernels is compiled (`KernelsLater`). Otherwise,
    or when the tagged compilation fails (XLA refuses it as unimplemented, or an older jax lacks
    the option or the tag), or the loop has more than `ONE_KERNEL_MAX_OPERATIONS` operations
    (unless `forced`), the run uses `loop(scatter_free=False)` as a sequence of kernels,
    which raises any error of the program itself. Decided once per state signature, before
    anything is compiled."""

    def __init__(
        self,
        loop: Callable[..., Callable[[State, Any], State]],
        forced: bool = False,
        stack_keys: Collection[str] = (),
        halt: int = 0,
        tail: int = 0,
        indexed_keys: Collection[str] = (),
    ):
        self.loop = loop
        self.indexed_keys = frozenset(indexed_keys)
        self.forced = forced
        self.scatter_free_loop = jax.jit(loop(True, rows="measure"))
        self.stack_keys = frozenset(stack_keys)
        self.halt = halt
        self.tail = tail
        self.fused = JitWithOptions(tagged(self.scatter_free_loop), ONE_KERNEL_COMPILER_OPTIONS)
        self._plain: Callable[[State, Any], State] | None = None
        self.chosen: dict[Any, Callable[[State, Any], State]] = {}
        self.rows: dict[Any, ActiveRows] = {}
        self.spread: dict[Any, bool] = {}  # signatures whose loop XLA spreads over threads as kernels

    @property
    def plain(self) -> Callable[[State, Any], State]:
        """The loop with scatters, as a sequence of kernels (traced when first needed)."""
        if self._plain is None:
            self._plain = JitWithOptions(self.loop(False, rows="measure"), LOOP_COMPILER_OPTIONS)
        return self._plain

    def small_loop(self, fused: bool, rows: int) -> JitWithOptions:
        """`(state, limits) -> (entries changed, counts)`: the loop over `rows` rows
        (`JaxLoop` with `rows="active"`, compiled as `fused` says) run on the active members of
        `state`, gathered there and back (`compaction.gather_active`, `compaction.put_back`),
        going down the levels of `row_levels(rows)` (once at most a level's rows are active,
        they move to that level's rows, within the same computation), and the levels'
        `compaction.FEW_ACTIVE_KEY` counts added up. A loop compiled as one kernel stays on
        `rows`: XLA's one-kernel emitter stops the process (a failed check in its IR emitter)
        on a computation calling the tagged loop at two levels."""
        loop = tagged(jax.jit(self.loop(True, rows="active"))) if fused else self.loop(False, rows="active")

        def on_rows(state: State, limits: Any) -> tuple[State, Any]:
            return self.on_levels(loop, state, limits[0], (rows,) if fused else row_levels(rows))

        return JitWithOptions(on_rows, ONE_KERNEL_COMPILER_OPTIONS if fused else LOOP_COMPILER_OPTIONS)

    def on_levels(
        self, loop: Callable[[State, Any], State], state: State, iterations: Any, levels: Sequence[int]
    ) -> tuple[State, Any]:
        """`small_loop`'s run from `state` over the rows of `levels[0]`, at most `iterations`
        loop iterations: the entries of `state` it changed, and the counts."""
        rows, deeper = levels[0], levels[1:]
        small, slots = compaction.gather_active(state, rows, self.tail, self.halt, self.stack_keys)
        out = dict(loop(small, jnp.stack([iterations, np.int32(deeper[0] if deeper else 0)])))
        counts = out.pop(compaction.FEW_ACTIVE_KEY)
        out = {key: value for key, value in out.items() if key in state}  # not the status, nor anchors
        if deeper:
            small = {key: out.get(key, value) for key, value in small.items()}

            def descend(small: State) -> tuple[State, Any]:
                back, inner = self.on_levels(loop, small, iterations - counts[2], deeper)
                return {**small, **back}, (counts + inner).at[3].set(inner[3])

            going_on = (counts[3] > 0) & (counts[2] < iterations)
            small, counts = jax.lax.cond(going_on, descend, lambda small: (small, counts), small)
            out = {key: small[key] for key in out}
        return compaction.put_back(state, out, slots, self.stack_keys), counts

    def active_rows(self, measuring: Callable[[State, Any], State], fused: bool) -> ActiveRows:
        """The `ActiveRows` of a signature whose loop is `measuring`, compiled as `fused` says."""
        return ActiveRows(measuring, functools.partial(self.small_loop, fused))

    def __call__(self, state: State, iterations: Any) -> State:
        return self.chosen_for(state)(state, iterations)

    def chosen_for(self, state: State) -> Callable[[State, Any], State]:
        """The compiled loop calls on states of `state`'s signature run, once one has run (else
        this object's first call, which chooses it)."""
        rows = self.rows.get(state_signature(state))
        return self._first_call if rows is None else rows

    def wanted(self, state: State, iterations: Any) -> bool:
        """Whether the loop on `state` is to be one kernel (see the class docstring)."""
        if not (self.forced or on_cpu(state)):
            return False
        swept = {key: value for key, value in state.items() if key not in self.indexed_keys}
        small = state_bytes(swept) <= ONE_KERNEL_MAX_STATE_BYTES or state["pc"].shape[0] <= ONE_KERNEL_MAX_BATCH
        if not (self.forced or small):
            return False
        jaxpr = self.scatter_free_loop.trace(state, iterations).jaxpr
        if not one_kernel_possible(jaxpr):
            return False
        if not (self.forced or operation_count(jaxpr) <= ONE_KERNEL_MAX_OPERATIONS):
            return False
        work = work_of(jaxpr)
        self.spread[state_signature(state)] = not self.forced and kernels_spread(work)
        return self.forced or one_kernel_pays(work)

    def on_batch_rows(self, state: State) -> bool:
        """Whether runs on states of `state`'s signature have settled on the batch's rows (their
        `ActiveRows` chose them, or counts nothing)."""
        rows = self.rows.get(state_signature(state))
        return rows is not None and rows.stage == "batch"

    def steady_program(
        self,
        state: State,
        fills: Mapping[str, Any],
        input_keys: Sequence[str],
        outputs: Callable[[State], Any],
        iterations: int,
    ) -> JitWithOptions:
        """The first launch of a run from `state` (its `fills` and the input leaves under
        `input_keys`) as a function of the input leaves alone, `*leaves -> outputs(final
        state)`: the fills are made inside the compiled program and the loop (compiled as the
        one chosen for `state`'s signature, over the batch's rows) runs at most `iterations`
        loop iterations, so that no other state array goes in or out
        (`abir.backends.jax.backend.SteadyLaunch`)."""
        fused = self.chosen.get(state_signature(state)) is self.fused
        loop = self.loop(fused)
        limit = np.int32(iterations)

        def first_launch(*leaves: Any) -> Any:
            start = {key: fill.made() for key, fill in fills.items()}
            start.update(zip(input_keys, leaves, strict=True))
            return outputs(loop(start, limit))

        if fused:
            return JitWithOptions(tagged(jax.jit(first_launch)), ONE_KERNEL_COMPILER_OPTIONS)
        return JitWithOptions(first_launch, LOOP_COMPILER_OPTIONS)

    def _first_call(self, state: State, iterations: Any) -> State:
        signature = state_signature(state)
        launch = int(iterations)
        if self.wanted(state, limits_on_device(launch, 0)):
            try:
                result = self.fused(state, limits_on_device(launch, 0))
            except Exception:  # XLA refuses the one kernel (or this jax cannot ask for it): kernels
                pass
            else:
                self.chosen[signature] = self.fused
                measuring: Callable[[State, Any], State] = self.fused
                if self.spread.get(signature):
                    measuring = self.chosen[signature] = KernelsLater(self.fused, self.plain, state)
                return self.rows.setdefault(signature, self.active_rows(measuring, True)).measured(state, result)
        run = self.chosen[signature] = self.plain
        return self.rows.setdefault(signature, self.active_rows(run, False))(state, iterations)


def row_levels(rows: int) -> tuple[int, ...]:
    """The rows of each level a run over `rows` rows goes down to (`OneKernelWherePossible.small_loop`):
    `rows`, then a `compaction.LIVE_ROWS_FRACTION`-th of the last while that is at least
    `compaction.LIVE_ROWS_MIN` rows."""
    levels = [rows]
    while levels[-1] // compaction.LIVE_ROWS_FRACTION >= compaction.LIVE_ROWS_MIN:
        levels.append(levels[-1] // compaction.LIVE_ROWS_FRACTION)
    return tuple(levels)


def loop_specs(state: State) -> tuple[dict[str, jax.ShapeDtypeStruct], jax.ShapeDtypeStruct]:
    """The abstract arguments `(state, limits)` of a loop compiled for `state`'s shapes."""
    return {key: jax.ShapeDtypeStruct(value.shape, value.dtype) for key, value in state.items()}, jax.ShapeDtypeStruct((2,), np.int32)


def compile_in_thread(
    compile_it: Callable[[], Any], ready: Callable[[Any], None], refused: Callable[[], None], name: str
) -> threading.Thread:
    """Starts `compile_it` (an XLA compilation) in a thread named `name`, under the caller's x64
    setting (thread-local in JAX), and calls `ready` with its result, or `refused` when XLA
    refuses it (runs meanwhile go on without it; the interpreter joins the thread at exit)."""
    x64 = bool(jax.config.jax_enable_x64)

    def run() -> None:
        try:
            with jax.enable_x64(x64):
                compiled = compile_it()
        except Exception:
            refused()
        else:
            ready(compiled)

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


class KernelsLater:
    """A loop `(state, limits)` (of `JaxLoop.rows="measure"`) run as one kernel (`fused`) until
    the same loop as a sequence of kernels (`plain`), compiled for `state`'s shapes in a thread
    of its own, is ready, then as kernels: for a loop whose work XLA spreads over threads as
    kernels (`abir.backends.jax.cost.kernels_spread`), which one kernel runs on one thread. So
    the first call compiles and runs one kernel, as fast to compile as ever, and the calls
    after the kernels' compilation run them; a compilation that fails leaves one kernel."""

    def __init__(self, fused: Callable[[State, Any], State], plain: JitWithOptions, state: State):
        self.fused = fused
        self.kernels: Callable[[State, Any], State] | None = None

        def ready(kernels: Callable[[State, Any], State]) -> None:
            self.kernels = kernels

        # a compilation XLA refuses leaves the runs on one kernel
        self.compiling = compile_in_thread(lambda: plain.compiled(*loop_specs(state)), ready, lambda: None, "abir-kernels")

    def __call__(self, state: State, limits: Any) -> State:
        kernels = self.kernels
        if kernels is None:
            return self.fused(state, limits)
        # the host's inputs go to the device first: a compiled program takes device arrays
        return kernels({key: jax.device_put(value) if isinstance(value, np.ndarray) else value for key, value in state.items()}, limits)


def tagged(loop: Callable[..., Any]) -> Callable[..., Any]:
    """`loop` (jitted) tagged to be emitted as one kernel (`OneKernelWherePossible`)."""

    def one_kernel(*args: Any) -> Any:
        from jax.experimental.xla_metadata import set_xla_metadata

        # attached to the call op producing the results: not inlined, emitted as one kernel
        return set_xla_metadata(loop(*args), xla_cpu_small_call="true", inlineable="false")

    return one_kernel


class ActiveRows:
    """A state signature's compiled loop (a loop of `JaxLoop.rows="measure"`), and whether its
    runs move their active members to fewer rows once few are active: chosen by its runs.

    A run on the batch's rows counts its sweeps that began with one to `live_rows` members
    active (`compaction.FEW_ACTIVE_KEY`). When at least `FEW_ACTIVE_SHARE` of the first run's
    sweeps did, a loop over `live_rows` rows (`JaxLoop.rows="active"`, `small_loop`) is
    compiled in a thread of its own while runs go on over the batch's rows; the runs after it alternate
    between the batch's rows and the small rows (`on_active_rows`: it sweeps on the batch's
    rows until that few members are active, sweeps on their rows, gathered there and back,
    down the levels of `row_levels`, until every live member is in the program's tail, and
    runs the tail on the batch's rows), `TRIAL_RUNS` each, timed (`timed`), and the loop that
    took less time per sweep runs from then on. So the first
    call compiles and runs what it did without this choice; a compilation that fails, or a
    loop over fewer rows that does not pay, leaves the runs on the batch's rows."""

    def __init__(self, measuring: Callable[[State, Any], State], small_loop: Callable[[int], JitWithOptions]):
        self.measuring = measuring
        self.small_loop = small_loop
        self.stage = "count"
        """"count" (the first run), "compiling" (runs on the batch's rows while the small-row
        loop compiles), "trial-batch", "trial-rows" (the runs timed), then "batch" or "rows"
        (the choice)."""
        self.counts = np.zeros(2, np.int64)  # the first run's sweeps with few members active, all its sweeps
        self.trial = [0.0, 0]  # seconds and sweeps of the run being timed
        self.per_sweep: dict[str, list[float]] = {"batch": [], "rows": []}  # seconds of each timed run
        self.small: Callable[[State, Any], State] | None = None
        self.compiling: threading.Thread | None = None
        self.resumed: Any = None
        """The program counters of the state the last launch returned from the small rows (its
        iterations ran out there): a launch given that state goes on there at once."""

    def __call__(self, state: State, iterations: Any) -> State:
        if self.compiling is not None and not self.compiling.is_alive():
            self.compiling = None
            self.stage = "batch" if self.small is None else "trial-batch"
        launch = int(iterations)
        start = time.process_time()
        if self.stage in ("rows", "trial-rows"):
            out, sweeps = self.on_active_rows(state, launch)
            if self.stage == "trial-rows":
                self.timed("rows", start, sweeps, out)
            return out
        out = dict(self.measuring(state, limits_on_device(launch, 0)))
        counts = out.pop(compaction.FEW_ACTIVE_KEY, None)
        if counts is None:  # a loop that counts nothing stays on the batch's rows
            self.stage = "batch"
        if counts is None or self.stage in ("batch", "compiling"):
            return out
        if self.stage == "count":
            self.count(state, out, np.asarray(counts))
        else:
            self.timed("batch", start, int(np.asarray(counts)[1]), out)
        return out

    def measured(self, state: State, out: State) -> State:
        """`out`, the first launch's result on `state`, counted (see `count`), without its counts."""
        out = dict(out)
        counts = out.pop(compaction.FEW_ACTIVE_KEY, None)
        if counts is None:  # a loop that counts nothing stays on the batch's rows
            self.stage = "batch"
        else:
            self.count(state, out, np.asarray(counts))
        return out

    def count(self, state: State, out: State, counts: np.ndarray) -> None:
        """Adds a launch's `counts` to the first run's; at its end, compiles the loop over fewer
        rows in the background when enough of its sweeps began with few members active."""
        self.counts += counts[:2]
        if running(out):
            return
        few, sweeps = (int(n) for n in self.counts)
        rows = compaction.live_rows(int(state["pc"].shape[0]))
        if rows is not None and sweeps and few >= FEW_ACTIVE_SHARE * sweeps:
            self.compile_in_background(state, rows)
        else:
            self.stage = "batch"

    def timed(self, loop: str, start: float, sweeps: int, out: State) -> None:
        """Adds a launch of `loop` ("batch" or "rows") begun at `start` (`time.process_time()`)
        to the run being timed; the trial alternates the loops for `TRIAL_RUNS` runs each, then
        keeps the one whose fastest run took less time per sweep. Timed in the process's CPU
        time (its own threads and XLA's), which other processes on a busy machine do not
        inflate as they do the wall time (docs/performance.md#active-rows)."""
        is_running = running(out)  # waits for the launch's end
        self.trial[0] += time.process_time() - start
        self.trial[1] += sweeps
        if is_running:
            return
        self.per_sweep[loop].append(self.trial[0] / max(self.trial[1], 1))
        self.trial = [0.0, 0]
        if len(self.per_sweep["rows"]) < TRIAL_RUNS:
            self.stage = "trial-rows" if loop == "batch" else "trial-batch"
            return
        faster = min(self.per_sweep["rows"]) < min(self.per_sweep["batch"])
        self.stage = "rows" if faster else "batch"
        if not faster:
            self.small = None

    def compile_in_background(self, state: State, rows: int) -> None:
        """Compiles the loop over `rows` rows (`small_loop`) for `state`'s shapes in a thread
        (runs meanwhile stay on the batch's rows; the interpreter joins it at exit)."""

        def ready(small: Callable[[State, Any], State]) -> None:
            self.small = small

        def refused() -> None:  # the runs stay on the batch's rows
            self.small = None

        self.stage = "compiling"
        self.compiling = compile_in_thread(lambda: self.small_loop(rows).compiled(*loop_specs(state)), ready, refused, "abir-active-rows")

    def on_active_rows(self, state: State, launch: int) -> tuple[State, int]:
        """One launch of at most `launch` iterations that moves the active members to fewer rows
        once that few are (see the class docstring), and the sweeps it ran. A launch whose
        iterations run out on the fewer rows returns from there, running, without a run on the
        batch's rows; the next launch, given the state it returned (`resumed`), gathers the
        same members again at once."""
        assert self.small is not None
        rows = compaction.live_rows(int(state["pc"].shape[0]))
        # the host's inputs go to the device once (in one transfer), not with each computation
        # of the launch; returned, they stay there for the run's next launches
        host = [key for key, value in state.items() if isinstance(value, np.ndarray)]
        state = {**state, **dict(zip(host, jax.device_put([state[key] for key in host]), strict=True))}
        resumed, self.resumed = state["pc"] is self.resumed, None
        if resumed:  # every active member fits the small rows: they came from there
            whole, sweeps, used = state, 0, 0
        else:
            out = dict(self.measuring(state, limits_on_device(launch, rows)))
            _, sweeps, used, active = (int(n) for n in np.asarray(out.pop(compaction.FEW_ACTIVE_KEY)))
            if not 0 < active <= rows or used >= launch:  # halted, or the launch's iterations ran out
                return {**{key: state[key] for key in host}, **out}, sweeps
            whole = {key: out.get(key, value) for key, value in state.items()}
        back, counts = self.small(whole, limits_on_device(launch - used, 0))
        whole = {**whole, **back}
        _, small_sweeps, small_used, _ = (int(n) for n in np.asarray(counts))
        if small_used >= launch - used:  # the iterations ran out on the small rows: the next launch goes on there
            self.resumed = whole["pc"]
            return {**whole, STATUS_KEY: RUNNING}, sweeps + small_sweeps
        out = dict(self.measuring(whole, limits_on_device(max(launch - used - small_used, 1), 0)))
        tail_sweeps = int(np.asarray(out.pop(compaction.FEW_ACTIVE_KEY))[1])
        return {**whole, **out}, sweeps + small_sweeps + tail_sweeps


def running(out: State) -> bool:
    """Whether a launch's result `out` has members still running (its `STATUS_KEY`)."""
    return bool(int(np.asarray(out[STATUS_KEY])) & RUNNING)
