"""The JAX backend: the whole machine is one `jax.jit`-compiled XLA program.

`run` stages the machine loop as one `lax.while_loop`, so a run makes no host round trip per
step. The loop is `abir.backends.traced.TracedLoop` (sweeps, or one switch per step:
`execution=`) on JAX's primitives (`abir.backends.jax.loop`). The compiled loop runs in
launches of about `launch_seconds` (`Backend.run_in_launches`), so Ctrl-C stops a runaway run
between two launches. The compiled program is cached per `cache_key` (program, signature,
batch size) with the program (`Backend.run_cache`), or in a dict the caller supplies, and
reused across calls. With `collect_stats=True` the loop also counts, inside the compiled
program, the blocks run, the members active in each and each member's own block count
(`last_stats`); without it the loop carries no counters.

A standalone run (called outside any JAX trace) happens under `jax.enable_x64(True)`, so int64
and float64 behave as in NumPy; the setting is scoped to abir's own run (`JaxBackend.scope`),
never changed for the rest of the process. Its loop is compiled as one XLA kernel where
possible (`abir.backends.jax.one_kernel`); the run's initial state but the inputs (program
counters, flags, registers, stacks: `abir.backends.jax.loop.Fill`) is made on the device, once
per compiled loop (`Launch`), so only the inputs go from the host to the device; a machine's later runs of the
same shapes reuse the choices of its first (`JaxBackend.launcher`). Called on tracers, a run is staged into the caller's
computation (`abir.backends.jax.staging`); on arguments sharded along the batch axis, it runs
one machine per shard (`abir.backends.jax.sharding`). How the backend stages its work while a
loop is traced comes from the trace's mode (`abir.backends.jax.mode`), never from attributes
set on the backend.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import core as jax_core

from abir import prims
from abir.backends.base import (
    LAUNCH_SECONDS,
    MAX_LAUNCH_ITERATIONS,
    RUNNING,
    STATUS_KEY,
    Backend,
    Kernel,
    RunStats,
    Scheduler,
    Span,
    State,
    map_tensor_types,
    tail_start_of,
)
from abir.backends.jax import reverse, sharding, staging, writes
from abir.backends.jax.loop import Fill, fills_of, iterations_on_device, machine_loop, with_status
from abir.backends.jax.mode import trace_mode
from abir.backends.jax.one_kernel import (
    LOOP_COMPILER_OPTIONS,
    JitWithOptions,
    OneKernelWherePossible,
    compile_in_thread,
)
from abir.backends.traced import STATS_KEY, indexed_keys, read_only_keys, run_stats, zero_counters
from abir.types import TensorType

Tracer = jax.core.Tracer  # read once: each read of the module attribute costs a steady call time
UNCHANGED = contextlib.nullcontext()
"""The scope of a run under the settings it needs already (`JaxBackend.scope`)."""
ANCHORS_KEY = "__anchors__"
"""A standalone sweep's output holding one element of each read-only register (as float32, in
one array), which the launch returns no copy of (`abir.backends.traced.read_only_keys`);
dropped after the launch."""


def dtype_of(value: Any) -> Any:
    """The NumPy dtype of an array, or the Python scalar itself (weak in NumPy 2 promotion)."""
    return value.dtype if hasattr(value, "dtype") else value


def _integer(dtype: Any) -> bool:
    return np.issubdtype(np.dtype(dtype), np.integer)


def _safe_int_division(name: str, x: Any, y: Any, nonzero: bool = False) -> Any:
    """Integer floor_divide/remainder by zero give 0, as in NumPy (XLA would give junk);
    `nonzero`: `y` is a literal known not to be 0 (XLA folds a division by a literal power of two
    into shifts and masks)."""
    if nonzero:
        return getattr(jnp, name)(x, y)
    zero = y == 0
    result = getattr(jnp, name)(x, jnp.where(zero, jnp.ones_like(y), y))
    return jnp.where(zero, jnp.zeros_like(result), result)


def tracing() -> bool:
    """Whether a JAX trace is being built (the caller's, or abir's own loop's); False on a jax
    without the query."""
    clean = getattr(jax_core, "trace_state_clean", None)
    return clean is not None and not clean()


def is_literal(value: Any) -> bool:
    """Whether `value` is a one-element host array kept for a trace (`JaxBackend.asarray`)."""
    return isinstance(value, np.ndarray | np.generic) and value.size == 1


def operand(value: Any, dtype: Any = None) -> Any:
    """`value` as a JAX operand of `dtype`: a one-element host array in a trace as a literal
    (`literal_row`), anything else by `jnp.asarray`."""
    if is_literal(value) and tracing():
        return literal_row(np.asarray(value, dtype))
    return jnp.asarray(value, dtype=dtype)


def elementwise_operands(values: Sequence[Any], dtype: Any) -> list[Any]:
    """`values` as the JAX operands of `dtype` of one elementwise operation: in a trace, a
    one-element host array is a scalar literal where another operand has at least its rank (the
    operation broadcasts it as it would the row, and XLA sees a constant in place: a row
    broadcast on its own is hoisted out of a loop and read from the loop's carry), else as
    `operand` makes it."""
    rank = max((np.ndim(value) for value in values if not is_literal(value)), default=-1)
    if rank < 0 or not tracing():
        return [operand(value, dtype) for value in values]
    return [
        np.asarray(value, dtype).reshape(())[()] if is_literal(value) and np.ndim(value) <= rank else operand(value, dtype)
        for value in values
    ]


def literal_row(host: np.ndarray) -> Any:
    """The one-element `host` as a broadcast of a literal scalar in the trace being built. An
    array would be a constant the trace captures, which a `lax.while_loop` or `lax.cond` carries
    as an operand: XLA then cannot fold it (a remainder by 2 stays an integer division per
    element and iteration, not a bit test)."""
    return lax.full(host.shape, host.reshape(())[()])


def launch_signature(arrays: State) -> tuple[Any, ...]:
    """The keys and shapes of a launch's state arrays, which `Launch` keeps its chosen loop by
    (the run's counters, a dict, take their shapes from the batch)."""
    return (tuple(arrays), tuple(getattr(value, "shape", None) for value in arrays.values()))


def read_status(state: State) -> int:
    """A launch's `state` without the loop's anchors, its `STATUS_KEY` read by the host (the one
    number a launch reads), and returned."""
    state.pop(ANCHORS_KEY, None)
    state[STATUS_KEY] = status = int(np.asarray(state[STATUS_KEY]))
    return status


_MADE_FILLS: weakref.WeakKeyDictionary[Any, dict[tuple[Fill, Any], Any]] = weakref.WeakKeyDictionary()


def fills_made_for(loop: Callable[[State, Any], State]) -> dict[tuple[Fill, Any], Any]:
    """The `Fill`s put on the device for the launches of compiled `loop`, by the fill and the
    default device they were put on (`jax.default_device`, as each device's thread of
    `abir.lane_devices` sets it), kept as long as the loop: JAX arrays are immutable and a
    launch does not donate its inputs, so every launch may read the same zeros."""
    made = _MADE_FILLS.get(loop)
    if made is None:
        made = _MADE_FILLS[loop] = {}
    return made


class Launch:
    """One launch (`Backend.run_in_launches`) of a run of its own: the state's arrays go to its
    compiled `loop`, the entries it changed come back, and the host reads its `STATUS_KEY`. The
    loop `OneKernelWherePossible` chose for the arrays' keys and shapes is called directly once
    chosen.

    The state's `Fill`s go in as arrays put on the device once and kept with the compiled
    `loop` (`fills_made_for`), for every launch of every run of it: a run longer than one
    launch continues with the state the last launch left, so every launch gives the loop the
    same keys and shapes and the loop is compiled once, not again for the continuation; and
    a run made of many runs (chunks of a run with lanes, `abir.vm.lanes`) or called again
    puts no zeros on the device again."""

    def __init__(self, loop: Callable[[State, Any], State]):
        self.loop = loop
        self.chosen: dict[Any, Callable[[State, Any], State]] = {}
        self.made = fills_made_for(loop)

    def array(self, value: Any) -> Any:
        """`value`, or the array a `Fill` stands for (immutable, so shared by every launch)."""
        if not isinstance(value, Fill):
            return value
        key = (value, jax.config.jax_default_device)
        made = self.made.get(key)
        if made is None:
            made = self.made[key] = value.on_device()
        return made

    def chosen_loop(self, arrays: State) -> Callable[[State, Any], State] | None:
        """The compiled loop for states of `arrays`' keys and shapes, or None while
        `OneKernelWherePossible` has not chosen it (it does at its first call)."""
        if not isinstance(self.loop, OneKernelWherePossible):
            return self.loop
        return self.chosen.get(launch_signature(arrays))

    def __call__(self, state: State, iterations: int) -> State:
        arrays = {key: self.array(value) for key, value in state.items() if key != STATUS_KEY}
        loop = self.chosen_loop(arrays)
        out = dict((loop or self.loop)(arrays, iterations_on_device(iterations)))
        if loop is None:
            self.chosen[launch_signature(arrays)] = self.loop.chosen_for(arrays)
        state = {**state, **out}
        read_status(state)
        return state


class StandaloneRun:
    """`JaxBackend.run` (a run of its own) for initial states like the one it was made for
    (`JaxBackend.launcher`), its choices made once: `launch`, whose compiled loop makes the
    state's `Fill`s, run in launches. A state with traced values goes to `run` itself."""

    def __init__(self, backend: JaxBackend, launch: Launch, halt_index: int, run: Callable[[State], State]):
        self.backend = backend
        self.launch = launch
        self.halt_index = halt_index
        self.run = run

    def __call__(self, state: State) -> State:
        if any(isinstance(value, Tracer) for value in state.values()):
            return self.run(state)
        state = self.backend.run_in_launches(self.launch, state, self.halt_index)
        self.backend.last_stats = None
        return state


def written_value(index: int, values: Sequence[Any], leaves: Sequence[Any]) -> Any:
    """A steady program's output `index` (`SteadyLaunch.output_picks`)."""
    return values[index]


def input_leaf(index: int, values: Sequence[Any], leaves: Sequence[Any]) -> Any:
    """Input leaf `index` of a run, on the device (`SteadyLaunch.output_picks`)."""
    return jnp.asarray(leaves[index])


def zeros_of(zeros: Any, values: Sequence[Any], leaves: Sequence[Any]) -> Any:
    """A register no block writes: its `zeros` (`SteadyLaunch.output_picks`)."""
    return zeros


class SteadyLaunch:
    """A `StandaloneRun` as a function of the run's input leaves (`JaxBackend.steady_launcher`):
    the initial state is the `zeros` made once on the device with the leaves put in, its first
    launch calls the compiled loop its `Launch` chose for that state's signature directly, and
    the host reads one number, the status; a run not done after that launch continues in
    launches (`Backend.continue_launches`): the final state, as `StandaloneRun` returns it.

    Once a run has finished within its first launch on a loop settled on the batch's rows
    (`OneKernelWherePossible.on_batch_rows`), the first launch is also compiled, in a thread of
    its own, as a program of the input leaves alone (`OneKernelWherePossible.steady_program`:
    the zeros made inside it, only the output registers and the status coming back), and the
    runs after it call that (`finished_outputs`): of a run it leaves finished and unflagged,
    the output registers come back as a list, nothing else; any other runs again from its
    initial state as above (`from_start`, which raises its errors, or continues it in launches),
    and a run that outlasted its first launch keeps the runs on that path. A `SteadyLauncher`
    (`abir.backends.base`)."""

    def __init__(self, run: StandaloneRun, zeros: State, input_keys: Sequence[str], output_keys: Sequence[str]):
        self.run = run
        self.fills = {key: value for key, value in zeros.items() if key != STATUS_KEY}
        self.zeros = {key: run.launch.array(value) for key, value in self.fills.items()}
        self.input_keys = tuple(input_keys)
        self.output_keys = tuple(output_keys)
        self.iterations = run.backend.first_launch_iterations()
        self.on_device = iterations_on_device(self.iterations)
        self.loop: Callable[[State, Any], State] | None = None
        self.program: Callable[..., tuple[Any, ...]] | None = None
        """The first launch as a program of the input leaves, once compiled: the values of the
        `written` output registers, then the status vector (`program_outputs`)."""
        self.written: tuple[str, ...] = ()
        self.picks: tuple[Callable[[Sequence[Any], Sequence[Any]], Any], ...] | None = None
        """How `finished_outputs` reads the output registers (`output_picks`)."""
        self.compiling: threading.Thread | None = None
        self.programmable = all(isinstance(value, Fill) for value in self.fills.values()) and isinstance(
            run.launch.loop, OneKernelWherePossible
        )
        """Whether such a program may be made (cleared once a run outlasts its first launch)."""

    def finished_outputs(self, leaves: Sequence[Any]) -> list[Any] | None:
        """The output registers (in `output_keys` order) of a run from `leaves` made by the
        program, where there is one and the run finished unflagged; else None, and the caller
        runs it from its start (`from_start`)."""
        program = self.program
        if program is None:
            return None
        *values, status = program(*leaves)
        status = np.asarray(status).item(0)
        if not status:
            self.run.backend.last_stats = None
            if self.picks is None:  # every output register is written, in order
                return values
            return [pick(values, leaves) for pick in self.picks]
        if status & RUNNING:  # runs this long gain nothing from the program
            self.program, self.programmable = None, False
        return None

    def from_start(self, leaves: Sequence[Any]) -> State:
        """The final state of a run from `leaves` through the launch's compiled loop, its first
        launch called directly, continued in launches (see the class docstring)."""
        state = dict(self.zeros)
        state.update(zip(self.input_keys, leaves, strict=True))
        loop = self.loop
        if loop is None:
            loop = self.loop = self.run.launch.chosen_loop(state)
            if loop is None:  # the launch chooses its loop at its first call
                return self.run(state)
        start = time.perf_counter()
        state.update(loop(state, self.on_device))
        run = self.run
        if read_status(state) & RUNNING:
            self.programmable = False
            state = run.backend.continue_launches(run.launch, state, run.halt_index, self.iterations, start)
        elif self.program is None and self.compiling is None and self.programmable:
            self.compile_program(leaves)
        run.backend.last_stats = None
        return state

    def output_picks(self) -> tuple[Callable[[Sequence[Any], Sequence[Any]], Any], ...] | None:
        """How `finished_outputs` finds each output register of a finished run from the
        program's `values` and the run's input leaves: a `written` register's value, an input
        leaf (on the device), or its zeros; None when the outputs are the values as they come."""
        if self.written == self.output_keys:
            return None
        written = iter(range(len(self.written)))
        picks: list[Callable[[Sequence[Any], Sequence[Any]], Any]] = []
        for key in self.output_keys:
            if key in self.written:
                picks.append(functools.partial(written_value, next(written)))
            elif key in self.input_keys:
                picks.append(functools.partial(input_leaf, self.input_keys.index(key)))
            else:
                picks.append(functools.partial(zeros_of, self.zeros[key]))
        return tuple(picks)

    def program_outputs(self, out: State) -> tuple[Any, ...]:
        """What the program returns of its loop's result `out` (called while it traces): the
        output registers some block may write (`written`), then an int32 vector, the
        `STATUS_KEY` and the loop's anchors (as int32 bits: XLA's one-kernel emitter stops the
        process on an input its loop no longer reads, and each output buffer costs the call a
        fixed time)."""
        status = out[STATUS_KEY].reshape(1)
        anchors = out.get(ANCHORS_KEY)
        if anchors is not None:
            status = jnp.concatenate([status, lax.bitcast_convert_type(anchors, jnp.int32)])
        self.written = tuple(key for key in self.output_keys if key in out)
        return (*(out[key] for key in self.written), status)

    def compile_program(self, leaves: Sequence[Any]) -> None:
        """Compiles the first launch as a program of the input leaves (see the class docstring) in
        a thread (runs meanwhile go on as before; the interpreter joins it at exit), where the
        launch's loop runs on the batch's rows."""
        loop = self.run.launch.loop
        state = {**self.zeros, **dict(zip(self.input_keys, leaves, strict=True))}
        if not (isinstance(loop, OneKernelWherePossible) and loop.on_batch_rows(state)):
            return
        program = loop.steady_program(state, self.fills, self.input_keys, self.program_outputs, self.iterations)
        specs = tuple(jax.ShapeDtypeStruct(leaf.shape, leaf.dtype) for leaf in leaves)

        def ready(_: Any) -> None:  # the jitted function itself, its compilation cached: JAX's fastest call
            self.picks = self.output_picks()
            self.program = program.jitted

        def refused() -> None:  # the runs stay on the launch's loop
            self.programmable = False

        self.compiling = compile_in_thread(lambda: program.compiled(*specs), ready, refused, "abir-steady-launch")


class JaxBackend(Backend):
    """jax.numpy arrays; `run` is one jitted `lax.while_loop` (block sweeps, or one `lax.switch`
    per step)."""

    name = "jax"
    superblocks = True
    immutable_arrays = True

    def __init__(
        self,
        code_cache: MutableMapping[Any, Any] | None = None,
        scheduler: Scheduler | None = None,
        *,
        execution: str | None = None,
        collect_stats: bool = False,
        launch_seconds: float | None = LAUNCH_SECONDS,
        one_kernel: bool | None = None,
    ):
        """`code_cache` maps a run's `cache_key` to its jitted function; pass a dict to keep
        compiled code there yourself (default: each compiled program keeps its runs, bounded and
        freed with it, so a new backend object per call does not recompile either).
        `execution` is `"sweep"` (default) or `"switch"` (see the module docstring).
        `scheduler(backend, pc)` picks the next block of the `"switch"` execution (passing one
        selects it); it must be traceable (jnp, not NumPy).
        `collect_stats`: count blocks and active members inside the loop (`last_stats`).
        `launch_seconds`: run the compiled loop in launches of about this long, so that Ctrl-C
        stops a run within about that time (`Backend.run_in_launches`); None: one launch.
        `one_kernel`: compile a standalone run's loop as one XLA kernel where XLA can
        (`OneKernelWherePossible`): None (default) where the program gains by it (on a CPU,
        by its state's size and batch and by the cost of its matrix products there), True
        wherever XLA can, False never."""
        if not (one_kernel is None or isinstance(one_kernel, bool)):
            raise TypeError(f"one_kernel must be None, True or False, not {one_kernel!r}")
        self.configure_execution(execution, scheduler, "sweep", collect_stats)
        self.configure_launches(launch_seconds)
        self.collect_stats = bool(collect_stats)
        self.one_kernel = one_kernel
        self.code_cache = code_cache
        self.trace_count = 0  # how many times a run loop was traced (i.e. compiled)
        self.shard_stats: list[RunStats] | None = None  # per shard, after a sharded run with collect_stats

    def scope(self, leaves: Sequence[Any] = ()) -> contextlib.AbstractContextManager[Any]:
        """64-bit types for abir's own run (NumPy's int64 and float64), whatever the process's
        `jax_enable_x64`; the setting is restored when the run ends. A run on tracers (staged
        into the caller's trace) follows the caller's setting instead: without 64-bit types the
        program's int64 and float64 values are int32 and float32, as everywhere in that trace."""
        if leaves and any(isinstance(leaf, Tracer) for leaf in leaves):
            return staging.callers_dtypes()
        return UNCHANGED if jax.config.jax_enable_x64 else jax.enable_x64(True)

    def is_traced(self, value: Any) -> bool:
        return isinstance(value, Tracer)

    def mapped_axes(self) -> tuple[int, ...]:
        """The sizes of the `jax.vmap` axes folded into the batch of the run being staged,
        outermost first (nested vmaps apply their rules innermost first)."""
        return tuple(reversed(trace_mode().folds))

    def stage_run(self, run: Callable[[list[Any]], list[Any]], leaves: Sequence[Any]) -> list[Any]:
        """`run` staged into the caller's computation, `jax.vmap` folding its mapped axes into
        the batch (`abir.backends.jax.staging.stage_run`)."""
        return staging.stage_run(run, leaves)

    def batch_sharding(self, leaves: Sequence[Any]) -> jax.sharding.NamedSharding | None:
        """The `NamedSharding` of the first argument split over more than one device along its
        batch axis (the others follow it), or None."""
        return sharding.batch_sharding(leaves)

    def run_sharded(
        self,
        run: Callable[[list[Any]], list[Any]],
        leaves: Sequence[Any],
        cache: MutableMapping[Any, Any],
        cache_key: Any,
    ) -> list[Any]:
        """One machine per shard (`abir.backends.jax.sharding.run_sharded`). With
        `collect_stats`, each shard's machine counts its own run (`shard_stats`, one `RunStats`
        per shard in mesh order; `last_stats` is None)."""
        self.last_stats = None
        outputs, self.shard_stats = sharding.run_sharded(run, leaves, cache, cache_key, self.collect_stats)
        return outputs

    def check_when_run(
        self,
        check: Callable[[dict[str, np.ndarray]], None],
        values: Mapping[str, Any],
        normal: Mapping[str, int] | None = None,
        summary: str = "",
    ) -> None:
        """Traced values: `check` runs as a callback of the staged computation, only when some
        value differs from its `normal` one (`abir.backends.jax.staging.check_in_trace`), or,
        in a shard's body, once the sharded call returns (`abir.backends.jax.sharding`)."""
        if not any(self.is_traced(value) for value in values.values()):
            super().check_when_run(check, values, normal, summary)
            return
        shard = trace_mode().shard
        if shard is not None:  # a shard's flags leave its shard_map body (`run_sharded`)
            sharding.keep_shard_check(shard, check, values, normal or {})
            return
        staging.check_in_trace(check, values, normal or {})

    # ----- arrays -------------------------------------------------------------------------
    def asarray(self, value: Any, dtype: Any = None) -> Any:
        """In a trace, a one-element NumPy array (a kernel's constant) stays on the host, where
        the backend's operations read it as a literal (`operand`)."""
        if isinstance(value, np.ndarray | np.generic):  # cast on the host: no XLA program to compile
            host = value if dtype is None else np.asarray(value, np.dtype(dtype))
            if host.size == 1 and tracing():
                return host
            return jnp.asarray(host)
        return jnp.asarray(value, dtype=None if dtype is None else np.dtype(dtype))

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def is_native(self, value: Any) -> bool:
        return isinstance(value, jax.Array)

    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        """Made on the host and transferred (eager `jnp.zeros` compiles a program per shape)."""
        return jnp.asarray(np.zeros(tuple(shape), dtype=np.dtype(dtype)))

    def full(self, shape: Sequence[int], value: Any, dtype: Any) -> Any:
        return jnp.asarray(np.full(tuple(shape), value, dtype=np.dtype(dtype)))

    def arange(self, n: int, dtype: Any = np.int32) -> Any:
        return jnp.arange(n, dtype=np.dtype(dtype))

    def pad_rows(self, array: Any, rows: int) -> Any:
        array = jnp.asarray(array)
        return jnp.pad(array, [(0, rows - array.shape[0])] + [(0, 0)] * (array.ndim - 1))

    def run_input(self, array: np.ndarray) -> Any:
        """Kept on the host: the jitted run moves NumPy arguments to the device within its own
        call, where a `jnp.asarray` first would be a dispatch of its own."""
        return array

    def zero_state(self, shapes: Mapping[str, tuple[tuple[int, ...], Any]], staged: bool = False) -> State:
        """Broadcasts of the caller's computation when `staged`; else `Fill`s, made once per
        launcher (`Launch`)."""
        if staged:
            return {key: jnp.zeros(tuple(shape), np.dtype(dtype)) for key, (shape, dtype) in shapes.items()}
        return {key: Fill(tuple(shape), np.dtype(dtype)) for key, (shape, dtype) in shapes.items()}

    # ----- primitives ---------------------------------------------------------------------
    def builtin_prim(self, name: str, args: Sequence[Any], result_dtype: Any) -> Any:
        """NumPy semantics: operands are cast to the dtype NumPy computes in (the result dtype,
        or the common dtype for comparisons and logical ops), then the result to `result_dtype`.
        Integer division by zero and integer powers with a negative exponent give what the NumPy
        backend gives (0; a power truncated toward zero), never junk."""
        if not prims.is_builtin(name):
            raise ValueError(f"{name!r} is not a builtin primitive (see abir.prims)")
        result_dtype = None if result_dtype is None else np.dtype(result_dtype)
        if name == "astype":
            return operand(args[0]).astype(result_dtype)
        if name == "where":
            cond, x, y = args
            dt = result_dtype if result_dtype is not None else np.result_type(dtype_of(x), dtype_of(y))
            x, y = elementwise_operands((x, y), dt)
            return jnp.where(operand(cond, bool), x, y)
        operands = self._cast_operands(name, args, result_dtype)
        if name in ("floor_divide", "remainder") and _integer(operands[0].dtype):
            divisor = args[1]
            result = _safe_int_division(name, *operands, nonzero=is_literal(divisor) and bool(np.all(divisor != 0)))
        elif name == "pow" and _integer(operands[0].dtype):
            # a negative exponent truncates toward zero, as on NumPy (jnp.power gives junk)
            base, exponent = operands
            negative = exponent < 0
            powered = jnp.power(base, jnp.where(negative, jnp.zeros_like(exponent), exponent))
            one = jnp.ones_like(powered)
            odd_sign = jnp.where(exponent % 2 == 0, one, -one)
            truncated = jnp.where(base == 1, one, jnp.where(base == -1, odd_sign, jnp.zeros_like(powered)))
            result = jnp.where(negative, truncated, powered)
        else:
            result = getattr(jnp, name)(*operands)
        return result if result_dtype is None else result.astype(result_dtype)

    @staticmethod
    def _cast_operands(name: str, args: Sequence[Any], result_dtype: np.dtype | None) -> list[Any]:
        """The operands as jnp arrays of the dtype NumPy's ufunc loop would use."""
        complex_operand = any(getattr(dtype_of(a), "kind", None) == "c" for a in args)
        if name in prims.COMMON_DTYPE_PRIMS or result_dtype is None or complex_operand:
            dt = np.result_type(*(dtype_of(a) for a in args))
        else:
            dt = result_dtype
        return elementwise_operands(args, dt)

    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """`fn` on the arrays; the results of a costly helper go to buffers of their own
        (`abir.backends.jax.writes.in_own_buffers`)."""
        arrays = [jnp.asarray(a) for a in args]
        traced = jax.jit(fn)  # traced once: its work count and its call share the trace
        return writes.in_own_buffers(traced(*arrays), traced, arrays, trace_mode().scatter_free)

    # ----- masked state updates -------------------------------------------------------------
    def where(self, mask: Any, new: Any, old: Any, name: str | None = None) -> Any:
        """`mask` [B] broadcast over the trailing dims; the result keeps `old`'s dtype and shape."""
        old = jnp.asarray(old)
        mask = jnp.asarray(mask, dtype=bool).reshape((-1,) + (1,) * (old.ndim - 1))
        return jnp.where(mask, elementwise_operands((new, old), old.dtype)[0], old)

    def spread_row(self, row: Any, batch_size: int, type: TensorType) -> Any:
        """In reverse mode a float row stays one row: the differentiated loop reads it as every
        member's and sums its cotangent over them (`abir.backends.jax.reverse.machine_loop`)."""
        if trace_mode().reverse and reverse.carries_cotangent(row):
            return row
        return super().spread_row(row, batch_size, type)

    def stack_write(self, stack: Any, index: Any, value: Any, mask: Any) -> Any:
        """Scatter `value[b]` to `stack[index[b], b]` where `mask[b]` and the index is in range;
        every other write is redirected out of range and dropped (O(B) work, not O(D*B))."""
        depth, batch = stack.shape[0], stack.shape[1]
        index = jnp.asarray(index, dtype=jnp.int32)
        ok = jnp.asarray(mask, dtype=bool) & (index >= 0) & (index < depth)
        rows = jnp.where(ok, index, depth)
        value = jnp.broadcast_to(operand(value, stack.dtype), stack.shape[1:])
        return stack.at[rows, jnp.arange(batch)].set(value, mode="drop")

    def stack_scatter(self, stack: Any, rows: Any, value: Any) -> Any:
        """Scatter by index; rows of D (or anything out of range) are dropped. Inside the run
        loop the stack is a loop-carried buffer, so XLA updates it in place (O(B) per push);
        small stacks and loops traced to be one kernel are written without a scatter
        (`abir.backends.jax.writes.stack_scatter`). A `Span` request is a loop over windows of
        rows (`abir.backends.jax.writes.span_by_windows`)."""
        if isinstance(rows, Span):
            return writes.span_by_windows(stack, rows, value, self)
        return writes.stack_scatter(stack, rows, value, trace_mode().scatter_free)

    def stack_read(self, stack: Any, index: Any) -> Any:
        depth, batch = stack.shape[0], stack.shape[1]
        rows = jnp.clip(jnp.asarray(index, dtype=jnp.int32), 0, depth - 1)
        return stack[rows, jnp.arange(batch)]

    def reduce_min(self, t: Any, name: str | None = None) -> Any:
        return jnp.min(t)

    # ----- running --------------------------------------------------------------------------
    def run(
        self,
        kernels: Sequence[Kernel],
        state: State,
        halt_index: int,
        cache_key: Any,
        code_cache: MutableMapping[Any, Any] | None = None,
        stack_keys: Collection[str] = (),
        error_flags: Mapping[str, int] | None = None,
    ) -> State:
        """One jitted `lax.while_loop`, compiled once per `cache_key` and state signature.

        Without a `cache_key` the compiled code is still reused for the same `kernels` list
        (the machine builds it once per program and backend), kept alive by the cache. A run of
        its own also returns its `STATUS_KEY`, computed in the loop's program: one number read
        per launch instead of the program counters and every error flag."""
        differentiated = trace_mode().reverse
        # the program counters are concrete when only the inputs are traced (e.g. by reverse
        # mode, or the unmapped primal part of jax.jacfwd's vmapped jvp)
        staged = differentiated or any(self.is_traced(value) for value in state.values())
        # a run of its own makes the state's fills once on the device (`Launch`); a staged one
        # makes them in the caller's trace
        fills = {} if staged else fills_of(state)
        # NumPy inputs of a run of its own go to the device with the call (`run_input`); in the
        # caller's trace they become arrays of the caller's dtypes
        kept = jax.Array if staged else (jax.Array, np.ndarray)
        state = {
            key: value if isinstance(value, kept) else value.made() if isinstance(value, Fill) else jnp.asarray(value)
            for key, value in state.items()
            if key not in fills
        }
        shard = trace_mode().shard if staged else None
        if self.collect_stats and (not staged or shard is not None):
            batch = (fills.get("pc") or state["pc"]).shape[0]
            state[STATS_KEY] = zero_counters(jnp.zeros, len(kernels), batch)
        flags = {} if staged else dict(error_flags or {})

        if staged:

            def compile_staged(ks: tuple[Kernel, ...], halt: int) -> Callable[[State, Any], State]:
                if differentiated:  # a loop reverse mode goes through; the most sweeps is a Python int
                    return jax.jit(reverse.machine_loop(self, ks, halt, stack_keys), static_argnums=1)
                # inlined into the caller's computation, compiled with the caller's options
                return jax.jit(machine_loop(self, ks, halt, stack_keys))

            config = (self.execution, self.collect_stats, self.one_kernel, staged, differentiated, (), ())
            run = self.compiled_run(self.run_cache(code_cache), kernels, halt_index, cache_key, compile_staged, config)
            # into the caller's computation: one launch, no host round trip
            state = dict(run(state, np.int32(MAX_LAUNCH_ITERATIONS)))
        else:  # the fills no launch changed stay fills (made on the host if read there)
            launch = Launch(self.standalone_loop(kernels, halt_index, cache_key, code_cache, stack_keys, flags))
            state = dict(self.run_in_launches(launch, {**fills, **state}, halt_index))
        counters = state.pop(STATS_KEY, None)
        if shard is not None:  # counted on the shard's device, returned by its shard_map body
            shard.counters, counters = counters, None
        self.last_stats = None if counters is None else run_stats(counters)
        return state

    def standalone_loop(
        self,
        kernels: Sequence[Kernel],
        halt_index: int,
        cache_key: Any,
        code_cache: MutableMapping[Any, Any] | None,
        stack_keys: Collection[str],
        flags: Mapping[str, int],
    ) -> Callable[[State, Any], State]:
        """The compiled loop of a run of its own, `(state, iterations) -> changed state`: its
        `STATUS_KEY` computed from `flags`, and (sweeping) only the entries some block may change
        returned, with `ANCHORS_KEY`."""

        def compile_loop(ks: tuple[Kernel, ...], halt: int) -> Callable[[State, Any], State]:
            def loop(scatter_free: bool, rows: str | None = None) -> Callable[[State, Any], State]:
                run = with_status(machine_loop(self, ks, halt, stack_keys, scatter_free, rows), halt, flags)
                if self.execution != "sweep":  # a switch carries every register through its loop
                    return run

                def changing(state: State, iterations: Any) -> State:  # `launch` keeps the rest
                    fixed = sorted(read_only_keys(ks, state, stack_keys))
                    out = {key: value for key, value in run(state, iterations).items() if key not in fixed}
                    # one element of each input stays an output: XLA's one-kernel emitter stops
                    # the process on an input the optimized loop no longer reads (one passed
                    # through, or not read at all);
                    # all in one array, as each output buffer costs the call a fixed time
                    anchors = [jnp.real(state[key].reshape(-1)[:1]).astype(np.float32) for key in fixed if key in state]
                    if anchors:
                        out[ANCHORS_KEY] = jnp.concatenate(anchors)
                    return out

                return changing

            if self.one_kernel is False:
                return JitWithOptions(loop(False), LOOP_COMPILER_OPTIONS)
            return OneKernelWherePossible(loop, self.one_kernel is True, stack_keys, halt, tail_start_of(ks), indexed_keys(ks))

        config = (self.execution, self.collect_stats, self.one_kernel, False, False, tuple(flags.items()))
        return self.compiled_run(self.run_cache(code_cache), kernels, halt_index, cache_key, compile_loop, config)

    def launcher(
        self,
        kernels: Sequence[Kernel],
        state: State,
        halt_index: int,
        cache_key: Any,
        code_cache: MutableMapping[Any, Any] | None = None,
        stack_keys: Collection[str] = (),
        error_flags: Mapping[str, int] | None = None,
    ) -> Callable[[State], State] | None:
        """`run` for initial states like `state` (the same keys, array shapes and dtypes, and
        fills), its choices made once (`StandaloneRun`); None where `run` chooses per call (a
        staged or differentiated run, or one that collects statistics)."""
        if self.collect_stats or trace_mode().reverse or any(self.is_traced(value) for value in state.values()):
            return None
        flags = dict(error_flags or {})
        loop = self.standalone_loop(kernels, halt_index, cache_key, code_cache, stack_keys, flags)
        return StandaloneRun(self, Launch(loop), halt_index, functools.partial(
            self.run, kernels, halt_index=halt_index, cache_key=cache_key, code_cache=code_cache, stack_keys=stack_keys,
            error_flags=error_flags,
        ))  # fmt: skip

    def steady_launcher(
        self,
        launcher: Callable[[State], State],
        zeros: State,
        input_keys: Sequence[str],
        output_keys: Sequence[str] = (),
    ) -> SteadyLaunch | None:
        """A `SteadyLaunch` of a `StandaloneRun` (a launcher made by `launcher`); None for any
        other launcher."""
        if not isinstance(launcher, StandaloneRun):
            return None
        return SteadyLaunch(launcher, zeros, input_keys, output_keys)

    # ----- the reference's interface (`BackendProtocol`) ---------------------------------------
    def any(self, t: Any, name: str | None = None) -> Any:
        return jnp.any(t)

    def cond(self, pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any], name: str | None = None) -> Any:
        """`lax.cond`: both branches traced, one run."""
        return lax.cond(pred, true_fn, false_fn)

    def run_on_dummies(self, primitive_callable: Callable[..., Any], input_types: Sequence[Any]) -> Any:
        """Abstract evaluation with `jax.eval_shape`: returns `jax.ShapeDtypeStruct` leaves."""

        def spec(t: TensorType) -> jax.ShapeDtypeStruct:
            return jax.ShapeDtypeStruct(tuple(t.shape), np.dtype(t.dtype))

        return jax.eval_shape(primitive_callable, *(map_tensor_types(spec, t) for t in input_types))

    def switch_case(
        self, branch_selector: Any, branch_callables: Sequence[Callable[..., Any]], *operands: Any, name: str | None = None
    ) -> Any:
        """`lax.switch` (an index out of range is clamped into it)."""
        return lax.switch(branch_selector, list(branch_callables), *operands)

    def while_loop(
        self, cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any], name: str | None = None
    ) -> Any:
        """`lax.while_loop` over the tuple of `loop_vars`."""
        final = lax.while_loop(lambda vs: cond(*vs), lambda vs: tuple(body(*vs)), tuple(loop_vars))
        return list(final)
