"""The TensorFlow backend: the machine loop is one `tf.function`, XLA-compiled unless the program
holds a construct XLA cannot compile.

`run` stages the machine loop as one `tf.while_loop` inside a `tf.function(jit_compile=...)`,
traced once per `cache_key` (program, signature, batch size) and reused across calls. By default
(`jit_compile=None`) the loop is compiled with XLA, and traced again as a plain `tf.function` if
its trace meets a NumPy call or primitive that runs on the host (`XlaUnlessNotCompilable`). The loop
is `abir.backends.traced.TracedLoop` (sweeps, or one switch per step: `execution=`) on TF's
primitives (`abir.backends.tf.loop`). The sweep is the default with and without XLA: it was
the faster under XLA on every measured program, and without XLA on all but the smallest
(docs/performance.md#jax-and-tf-backends, "TensorFlow: sweep against switch"). With
`collect_stats=True` the sweep counts, inside the loop, the blocks run, the members active in
each and each member's own block count (`last_stats`). The loop runs in launches of about
`launch_seconds` (`Backend.run_in_launches`), so Ctrl-C stops a runaway run between launches.

Called on the symbolic tensors of a `tf.function`, a run is staged into that graph; its errors
are checked where the graph allows (`abir.backends.tf.staging`). `tf.GradientTape` differentiates
a run watched by a tape, or staged into a graph, sweep by sweep (`abir.backends.tf.reverse`).

Builtin prims follow NumPy semantics (`abir.backends.tf.prim_ops`). Opaque helpers get
`NumpyTensor`s (NumPy operators and promotion on tensors; `abir.backends.tf.tensor`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from typing import Any

import numpy as np
import optree
import tensorflow as tf
from tensorflow.python.eager import record

from abir import prims
from abir.backends.base import (
    LAUNCH_SECONDS,
    MAX_LAUNCH_ITERATIONS,
    ONE_HOT_STACK_MAX,
    Backend,
    Kernel,
    Scheduler,
    Span,
    State,
    span_row,
)
from abir.backends.tf.loop import TfLoop, without_arithmetic_optimizer
from abir.backends.tf.prim_ops import (
    as_tensor,
    compute_dtype,
    np_dtype_of,
    numpy_result_dtype,
    same_shapes,
    tf_dtype,
    tf_function_for,
)
from abir.backends.tf.reverse import ReverseLoop, differentiable_run
from abir.backends.tf.staging import (
    PendingCheck,
    check_in_graph,
    compiled_by_xla,
    failures_collected,
    keep_failure,
    poisoned,
)
from abir.backends.tf.tensor import NATIVE_TENSOR_MODULES, NumpyTensor, numpy_opaque
from abir.backends.traced import STATS_KEY, run_stats, zero_counters
from abir.numpy_calls import NotCompilableError


class TensorFlowBackend(Backend):
    """TF tensors; `run` is one `tf.function` (XLA-compiled where the program allows, by default)
    around a `tf.while_loop` (block sweeps, or one `tf.switch_case` per step)."""

    name = "tensorflow"
    superblocks = True
    immutable_arrays = True

    def __init__(
        self,
        jit_compile: bool | None = None,
        code_cache: MutableMapping[Any, Any] | None = None,
        scheduler: Scheduler | None = None,
        *,
        execution: str | None = None,
        collect_stats: bool = False,
        launch_seconds: float | None = LAUNCH_SECONDS,
    ):
        """`jit_compile=True` compiles the whole run with XLA (a located `NotCompilableError` for
        a construct XLA cannot compile); `False` never does; None (default) compiles it with XLA
        unless the program holds such a construct, then runs it as a plain `tf.function`
        (`XlaUnlessNotCompilable`). `code_cache` maps a run's `cache_key`
        to its `tf.function`; pass a dict to keep traced code there yourself (default: each
        compiled program keeps its runs, bounded and freed with it; `Backend.run_cache`).
        `execution` is `"sweep"` (default) or `"switch"` (see the module docstring).
        `scheduler(backend, pc)` picks the next block of the `"switch"` execution (passing one
        selects it); it must be traceable (TF ops).
        `collect_stats`: count blocks and active members inside the loop (`last_stats`).
        `launch_seconds`: run the compiled loop in launches of about this long, so that Ctrl-C
        stops a run within about that time (`Backend.run_in_launches`); None: one launch."""
        self.configure_execution(execution, scheduler, "sweep", collect_stats)
        self.configure_launches(launch_seconds)
        self.collect_stats = bool(collect_stats)
        self.jit_compile = None if jit_compile is None else bool(jit_compile)
        self.code_cache = code_cache
        self.trace_count = 0  # how many times a run loop was traced

    def is_traced(self, value: Any) -> bool:
        """A symbolic tensor of a graph being built (inside a `tf.function`)."""
        return bool(tf.is_symbolic_tensor(value))

    def check_when_run(
        self,
        check: Callable[[dict[str, np.ndarray]], None],
        values: Mapping[str, Any],
        normal: Mapping[str, int] | None = None,
        summary: str = "",
    ) -> None:
        """Symbolic values (a run staged into a graph): in the body of an `abir.tf_function`
        they become extra outputs of that function, which raises abir's own error after it
        returns (`CheckedFunction`, with or without XLA). Elsewhere, without XLA, a
        `tf.debugging.Assert` in the caller's graph fails with `summary` and the values
        (`tf.errors.InvalidArgumentError`) when some value is not its `normal` one. Under
        `tf.function(jit_compile=True)` nothing can raise (XLA compiles assertions away): the
        failing members' results are poisoned (`stage_run`), and the first such trace of a
        batched function and limits warns (`UnreportedErrorsWarning`)."""
        if not any(self.is_traced(value) for value in values.values()):
            super().check_when_run(check, values, normal, summary)
            return
        failed = check_in_graph(PendingCheck(check, dict(values), dict(normal or {}), summary))
        if failed is not None:
            keep_failure(failed)

    def stage_run(self, run: Callable[[list[Any]], list[Any]], leaves: Sequence[Any]) -> list[Any]:
        """`run(leaves)` staged into the caller's graph; under XLA outside an `abir.tf_function`
        (where errors cannot raise) the results of the members whose run failed are poisoned:
        NaN for floats, the dtype's minimum (maximum if unsigned) for integers."""
        with failures_collected() as failures:
            outputs = run(list(leaves))
        if not failures:
            return outputs
        failed = functools.reduce(tf.logical_or, failures)
        return [poisoned(output, failed[: self.batch_size(output)]) for output in outputs]

    # ----- arrays -------------------------------------------------------------------------
    def asarray(self, value: Any, dtype: Any = None) -> Any:
        if dtype is not None:
            return as_tensor(value, dtype)
        return value if tf.is_tensor(value) else tf.convert_to_tensor(np.asarray(value))

    def to_numpy(self, value: Any) -> np.ndarray:
        return value.numpy() if hasattr(value, "numpy") else np.asarray(value)

    def is_native(self, value: Any) -> bool:
        """Tensors, and the `NumpyTensor` views of them handed to opaque helpers."""
        return tf.is_tensor(value) or isinstance(value, NumpyTensor)

    def zeros(self, shape: Sequence[int], dtype: Any) -> Any:
        return tf.zeros(tuple(shape), dtype=tf_dtype(dtype))

    def full(self, shape: Sequence[int], value: Any, dtype: Any) -> Any:
        return tf.fill(tuple(shape), as_tensor(value, dtype))

    def arange(self, n: int, dtype: Any = np.int32) -> Any:
        return tf.range(n, dtype=tf_dtype(dtype))

    def pad_rows(self, array: Any, rows: int) -> Any:
        array = self.asarray(array)
        return tf.pad(array, [(0, rows - int(array.shape[0]))] + [(0, 0)] * (len(array.shape) - 1))

    def batch_size(self, val: Any, name: str | None = None) -> int:
        shape = tuple(val.shape) if hasattr(val, "shape") else ()
        return int(shape[0]) if shape else 1

    # ----- primitives ---------------------------------------------------------------------
    def builtin_prim(self, name: str, args: Sequence[Any], result_dtype: Any) -> Any:
        """NumPy semantics: operands cast to NumPy's computing dtype, result to `result_dtype`.
        An integer power with a negative exponent truncates toward zero, as on the NumPy backend
        (tf.pow would raise, also for the junk rows of inactive members)."""
        if not prims.is_builtin(name):
            raise ValueError(f"{name!r} is not a builtin primitive (see abir.prims)")
        if result_dtype is None:
            result_dtype = numpy_result_dtype(name, args)
        out_dtype = tf_dtype(result_dtype)
        if name == "astype":
            return as_tensor(args[0], out_dtype)
        if name == "where":
            cond, x, y = args
            return tf.where(as_tensor(cond, tf.bool), as_tensor(x, out_dtype), as_tensor(y, out_dtype))
        operand_dtypes = [np_dtype_of(a) for a in args]
        numpy_dtype = (
            np.result_type(*operand_dtypes)
            if name in prims.COMMON_DTYPE_PRIMS or any(getattr(d, "kind", None) == "c" for d in operand_dtypes)
            else result_dtype
        )
        compute = compute_dtype(name, tf_dtype(numpy_dtype))
        operands = [as_tensor(a, compute) for a in args]
        if name == "add" and not compiled_by_xla():
            operands = same_shapes(operands)
        if name == "pow" and compute.is_integer:
            # a negative exponent truncates toward zero, as on NumPy (tf.pow raises, also for junk rows)
            base, exponent = operands
            negative = exponent < 0
            powered = tf.pow(base, tf.where(negative, tf.zeros_like(exponent), exponent))
            one = tf.ones_like(powered)
            odd_sign = tf.where(tf.equal(tf.math.floormod(exponent, 2), 0), one, -one)
            truncated = tf.where(tf.equal(base, 1), one, tf.where(tf.equal(base, -1), odd_sign, tf.zeros_like(powered)))
            return as_tensor(tf.where(negative, truncated, powered), out_dtype)
        return as_tensor(tf_function_for(name, compute)(*operands), out_dtype)

    def call_opaque(self, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
        """`fn` on `NumpyTensor`s: tensors with NumPy's operators, methods (`astype`, `sum`,
        ...) and promotion, so a helper written for NumPy arrays (`x >> 16`, `.astype`,
        `np.log(x)`, `.sum(axis=-1)`) runs on the batch as TF ops, also under XLA; TF functions
        take them as tensors. Results are unwrapped to tensors. abir's own array callables
        (`abir.array_ops`, which pick TF ops by the array type) get the tensors.

        Inside a graph, a helper calling NumPy code that needs concrete values (raising NumPy's
        conversion error on a symbolic tensor) runs through `tf.numpy_function` instead, its
        output types found by a run on NumPy zeros; XLA cannot compile that path: under XLA it
        is a `NotCompilableError` naming the helper's call site (the default backend then runs
        the program without XLA: `XlaUnlessNotCompilable`)."""
        tensors = [self.asarray(a.tensor if isinstance(a, NumpyTensor) else a) for a in args]
        native = getattr(fn, "__module__", None) in NATIVE_TENSOR_MODULES
        graph = None if tf.executing_eagerly() else tf.compat.v1.get_default_graph()
        ops_before = 0 if graph is None else len(graph.get_operations())
        try:
            out = fn(*(tensors if native else [NumpyTensor(t, self) for t in tensors]))
        except (NotImplementedError, TypeError) as error:
            if tf.executing_eagerly() or "numpy" not in str(error).lower():
                raise
            if compiled_by_xla():
                raise NotCompilableError(_helper_not_compilable(fn, error)) from error
            return numpy_opaque(fn, tensors)
        out = optree.tree_map(self._unwrap, out)
        if graph is not None and compiled_by_xla() and _work_per_member(graph.get_operations()[ops_before:], tensors) >= MATERIALIZE_MIN_ELEMENTS_PER_MEMBER:
            out = optree.tree_map(behind_conditional, out)
        return out

    def _unwrap(self, value: Any) -> tf.Tensor:
        return value.tensor if isinstance(value, NumpyTensor) else self.asarray(value)

    # ----- masked state updates -------------------------------------------------------------
    def where(self, mask: Any, new: Any, old: Any, name: str | None = None) -> Any:
        """`mask` [B] broadcast over the trailing dims; the result keeps `old`'s dtype."""
        old = self.asarray(old)
        mask = tf.reshape(as_tensor(mask, tf.bool), [-1] + [1] * (old.shape.rank - 1))
        return tf.where(mask, as_tensor(new, old.dtype), old)

    def stack_write(self, stack: Any, index: Any, value: Any, mask: Any) -> Any:
        """`tensor_scatter_nd_update` at (index[b], b): masked-out or out-of-range members
        rewrite the value they already hold at the clipped row, so nothing else changes."""
        depth = stack.shape[0]
        index = as_tensor(index, tf.int32)
        ok = as_tensor(mask, tf.bool) & (index >= 0) & (index < depth)
        if one_hot_writable(stack):
            return self._one_hot_write(stack, tf.where(ok, index, depth), value)
        coords = self._coords(stack, index)
        old = tf.gather_nd(stack, coords)
        new = tf.broadcast_to(as_tensor(value, stack.dtype), tf.shape(old))
        return tf.tensor_scatter_nd_update(stack, coords, self.where(ok, new, old))

    def stack_scatter(self, stack: Any, rows: Any, value: Any) -> Any:
        """Members whose row is out of range rewrite the value they hold at the clipped row."""
        if isinstance(rows, Span):
            return self.stack_span_write(stack, rows, value)
        depth = stack.shape[0]
        rows = tf.broadcast_to(as_tensor(rows, tf.int32), tf.shape(stack)[1:2])
        if one_hot_writable(stack):
            return self._one_hot_write(stack, rows, value)
        coords = self._coords(stack, rows)
        old = tf.gather_nd(stack, coords)
        new = tf.broadcast_to(as_tensor(value, stack.dtype), tf.shape(old))
        return tf.tensor_scatter_nd_update(stack, coords, self.where(rows < depth, new, old))

    def stack_span_write(self, stack: Any, span: Span, value: Any) -> Any:
        """`Backend.stack_span_write` as one `tf.while_loop` (staged or eager alike), of at most
        the stack's depth iterations (the rows a span can write): a bound XLA needs to compile the
        loop's gradient (`abir.backends.tf.reverse`)."""
        count = as_tensor(span.count, tf.int32)
        start = as_tensor(span.start, tf.int32)
        depth = stack.shape[0]

        def write_row(j: Any, stack: Any) -> tuple[Any, Any]:
            return j + 1, self.stack_scatter(stack, tf.where(j < count, start + j, depth), span_row(self, span, value, j, stack.dtype))

        longest = tf.reduce_max(count)
        start_row = tf.constant(0, tf.int32)
        return tf.while_loop(lambda j, _: j < longest, write_row, (start_row, stack), maximum_iterations=depth)[1]

    @staticmethod
    def _one_hot_write(stack: tf.Tensor, rows: tf.Tensor, value: Any) -> tf.Tensor:
        """`stack[rows[b], b] = value[b]` as one select over the whole [D, B, ...] stack on a
        one-hot row mask; a row outside [0, D) writes nothing."""
        hit = tf.equal(tf.range(stack.shape[0], dtype=tf.int32)[:, None], rows[None, :])
        hit = tf.reshape(hit, tf.concat([tf.shape(hit), tf.ones([stack.shape.rank - 2], tf.int32)], 0))
        new = tf.broadcast_to(as_tensor(value, stack.dtype), tf.shape(stack)[1:])
        return tf.where(hit, new[None], stack)

    def stack_read(self, stack: Any, index: Any) -> Any:
        return tf.gather_nd(stack, self._coords(stack, as_tensor(index, tf.int32)))

    @staticmethod
    def _coords(stack: tf.Tensor, index: tf.Tensor) -> tf.Tensor:
        """[B, 2] coordinates (clip(index[b], 0, D-1), b) into a [D, B, ...] stack."""
        rows = tf.clip_by_value(index, 0, stack.shape[0] - 1)
        return tf.stack([rows, tf.range(tf.shape(stack)[1], dtype=tf.int32)], axis=1)

    def reduce_min(self, t: Any, name: str | None = None) -> Any:
        return tf.reduce_min(t)

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
        """One `tf.function` around a `tf.while_loop` (block sweeps, or one `tf.switch_case` per
        step), traced once per cache key and state signature. Without a `cache_key` the function
        is still reused for the same `kernels` list (the machine builds it once per program and
        backend). A run whose float inputs a `tf.GradientTape` watches, or one staged into a graph,
        is a `tf.custom_gradient` function of them (`abir.backends.tf.reverse`); a taped run
        collects no statistics."""
        state = {key: self.asarray(value) for key, value in state.items()}
        floats = [tf.convert_to_tensor(value) for value in state.values() if value.dtype.is_floating]
        taped = record.should_record_backprop(floats)  # a variable's read is recorded when the tape watches it
        staged = self.is_traced(state["pc"])
        if self.collect_stats and not staged and not taped:
            state[STATS_KEY] = zero_counters(self.zeros, len(kernels), int(state["pc"].shape[0]))
        xla = self._xla_choice(staged)

        def compile_loop(ks: tuple[Kernel, ...], halt: int) -> Callable[[State, Any], State]:
            def compiled(with_xla: bool) -> Callable[[State, Any], State]:
                loop = self._loop(ks, halt, stack_keys, with_xla)
                return SteadyFunction(tf.function(loop, jit_compile=with_xla, autograph=False, reduce_retracing=False))

            return XlaUnlessNotCompilable(compiled) if xla is None else compiled(xla)

        config = (xla, self.execution, self.collect_stats)
        cache = self.run_cache(code_cache)
        if taped:  # the tape's gradient goes back through the run sweep by sweep
            state = differentiable_run(self._reverse_loop(cache, kernels, halt_index, cache_key, stack_keys, xla), None, state)
        elif staged:  # into the caller's graph: one launch, no host round trip; TF may differentiate it later
            run = self.compiled_run(cache, kernels, halt_index, cache_key, compile_loop, config)
            reverse_loop = self._reverse_loop(cache, kernels, halt_index, cache_key, stack_keys, xla)
            state = differentiable_run(reverse_loop, lambda s: dict(run(s, tf.constant(MAX_LAUNCH_ITERATIONS, tf.int32))), state)
        else:
            run = self.compiled_run(cache, kernels, halt_index, cache_key, compile_loop, config)
            # Grappler rewrites plain graphs only; XLA compiles the function's graph itself
            guard = without_arithmetic_optimizer() if xla is False else contextlib.nullcontext()
            with guard:
                state = dict(self.run_in_launches(lambda s, n: run(s, tf.constant(n, tf.int32)), state, halt_index))
        counters = state.pop(STATS_KEY, None)
        self.last_stats = None if counters is None else run_stats(counters)
        return state

    def _reverse_loop(
        self, cache: Any, kernels: Sequence[Kernel], halt_index: int, cache_key: Any, stack_keys: Collection[str], xla: bool | None
    ) -> ReverseLoop:
        """The run's loop as `tf.GradientTape` differentiates it (`abir.backends.tf.reverse`),
        its passes compiled as `jit_compile` says, or (None) with XLA unless the program holds a
        construct XLA cannot compile."""

        def compile_pass(function: Callable[..., Any]) -> Callable[..., Any]:
            def compiled(with_xla: bool) -> Callable[..., Any]:
                compiled_function = tf.function(function, jit_compile=with_xla, autograph=False, reduce_retracing=False)
                return compiled_function if with_xla else WithoutArithmeticOptimizer(compiled_function)

            return XlaUnlessNotCompilable(compiled) if xla is None else compiled(xla)

        def compile_reverse(ks: tuple[Kernel, ...], halt: int) -> ReverseLoop:
            return ReverseLoop(self, ks, halt, stack_keys, xla is not False, MAX_LAUNCH_ITERATIONS, compile_pass)

        return self.compiled_run(cache, kernels, halt_index, cache_key, compile_reverse, (xla, "reverse"))  # type: ignore[return-value]

    def _xla_choice(self, staged: bool) -> bool | None:
        """Whether the run's loop is compiled with XLA: as `jit_compile` says when set; by default
        as the caller's graph is for a run staged into one, else None: the program decides
        (`XlaUnlessNotCompilable`)."""
        if self.jit_compile is not None:
            return self.jit_compile
        return compiled_by_xla() if staged else None

    def _loop(
        self, kernels: tuple[Kernel, ...], halt_index: int, stack_keys: Collection[str], xla: bool
    ) -> Callable[[State, Any], State]:
        """The machine loop over `kernels` (`abir.backends.traced`) as a traceable function of
        the state and the most loop iterations to run (`Backend.run_in_launches`)."""
        return TfLoop(self, kernels, halt_index, stack_keys, xla).function(self.execution)

    # ----- the reference's interface (`BackendProtocol`) ---------------------------------------
    def any(self, t: Any, name: str | None = None) -> Any:
        return tf.reduce_any(as_tensor(t, tf.bool))

    def cond(self, pred: Any, true_fn: Callable[[], Any], false_fn: Callable[[], Any], name: str | None = None) -> Any:
        """`tf.cond`: in a graph both branches are traced and one runs."""
        return tf.cond(as_tensor(pred, tf.bool), true_fn, false_fn)

    def prepare_for_cond(self, state: Any) -> Any:
        """In a graph, every leaf becomes a tensor (a conditional carries tensors only)."""
        if tf.executing_eagerly():
            return state
        return tf.nest.map_structure(tf.convert_to_tensor, state)

    def switch_case(
        self, branch_selector: Any, branch_callables: Sequence[Callable[..., Any]], *operands: Any, name: str | None = None
    ) -> Any:
        """`tf.switch_case` (an index out of range runs the last branch)."""
        branches = [functools.partial(branch, *operands) for branch in branch_callables]
        return tf.switch_case(as_tensor(branch_selector, tf.int32), branches)

    def while_loop(
        self, cond: Callable[..., Any], body: Callable[..., Any], loop_vars: Sequence[Any], name: str | None = None
    ) -> Any:
        """`tf.while_loop` (a Python loop when executing eagerly)."""
        return list(tf.while_loop(cond, lambda *vs: list(body(*vs)), list(loop_vars)))


MATERIALIZE_MIN_ELEMENTS_PER_MEMBER = 1000
"""Under XLA, the results of a helper whose operations produce at least this many elements per
member (`_work_per_member`) come out of a conditional (`behind_conditional`): XLA's CPU fusion
otherwise recomputes an elementwise producer inside each of its consumers
(docs/performance.md#jax-and-tf-backends, "TensorFlow: materialized helper results")."""


def _work_per_member(operations: Sequence[Any], args: Sequence[tf.Tensor]) -> float:
    """The elements `operations` output (of static shape), per member of the batch `args` hold."""
    batch = next((int(a.shape[0]) for a in args if a.shape.rank and a.shape[0] is not None), 1)
    sizes = (output.shape.num_elements() for op in operations for output in op.outputs)
    return sum(size for size in sizes if size is not None) / max(batch, 1)


def behind_conditional(value: tf.Tensor) -> tf.Tensor:
    """`value` as the result of a conditional, which XLA's fusion does not see through, so its
    consumers read it from a buffer instead of each recomputing it. The predicate always holds
    (`x == x or x != x`) without XLA proving it for floats; the other branch, never taken,
    returns zeros."""
    if value.shape.rank in (None, 0) or value.shape.num_elements() == 0:
        return value
    first = tf.reshape(value, [-1])[0]
    return tf.cond(tf.equal(first, first) | tf.not_equal(first, first), lambda: tf.identity(value), lambda: tf.zeros_like(value))


def one_hot_writable(stack: tf.Tensor) -> bool:
    """Whether a write to `stack` is a one-hot select (`ONE_HOT_STACK_MAX`): a stack of known
    size in a graph XLA compiles."""
    size = stack.shape.num_elements()
    return size is not None and size <= ONE_HOT_STACK_MAX and stack.shape.rank >= 2 and compiled_by_xla()


class XlaUnlessNotCompilable:
    """The machine loop as a `tf.function` compiled with XLA, unless its trace meets a construct
    XLA cannot compile (`NotCompilableError`: a NumPy call or an opaque helper that runs on the
    host through `tf.numpy_function`); from then on it is a plain `tf.function`, run under
    `without_arithmetic_optimizer`. The choice comes from what the program contains. A run
    is a function of its state, so the call that met the construct runs again without XLA."""

    def __init__(self, compiled: Callable[[bool], Callable[..., Any]]):
        self.compiled = compiled
        self.xla = True
        self.function = compiled(True)

    def __call__(self, *args: Any) -> Any:
        if not self.xla:
            with without_arithmetic_optimizer():
                return self.function(*args)
        try:
            return self.function(*args)
        except NotCompilableError:
            self.xla, self.function = False, self.compiled(False)
            return self(*args)


class SteadyFunction:
    """A `tf.function` of `(state, iterations)`; called from the host, each state signature's
    later calls made straight on its concrete function's flat tensors: `tf.function`'s own call
    matches every leaf of the state against its traces first, a host cost that grows with the
    state's leaves (docs/performance.md#jax-and-tf-backends, "TensorFlow: steady calls"). The
    first call of a signature goes through the `tf.function` (tracing, compiling and raising as
    it does); a TensorFlow whose concrete functions lack the flat call keeps calling it."""

    def __init__(self, function: Any):
        self.function = function
        self.concrete: dict[tuple[Any, ...], Any] = {}

    def __call__(self, state: State, iterations: Any) -> State:
        if not tf.executing_eagerly():  # staged into a graph being built: the caller's trace
            return self.function(state, iterations)
        leaves = tf.nest.flatten((state, iterations))
        signature = (tuple(state), *((leaf.dtype, tuple(leaf.shape)) for leaf in leaves))
        concrete = self.concrete.get(signature)
        if concrete is None:
            result = self.function(state, iterations)
            found = self.function.get_concrete_function(state, iterations)
            if hasattr(found, "_call_flat") and len(found.inputs) == len(leaves) + len(found.captured_inputs):
                self.concrete[signature] = found
            return result
        return concrete._call_flat(leaves, concrete.captured_inputs)  # the structured outputs


class WithoutArithmeticOptimizer:
    """A plain `tf.function` called under `without_arithmetic_optimizer` (from the host; in a
    graph being built the caller's options apply)."""

    def __init__(self, function: Callable[..., Any]):
        self.function = function

    def __call__(self, *args: Any) -> Any:
        with without_arithmetic_optimizer():
            return self.function(*args)


def _helper_not_compilable(fn: Callable[..., Any], error: Exception) -> str:
    """Where the primitive `fn` (an `abir.opaque.Helper`, or a bare callable) is called, why XLA
    cannot compile it, and the ways out."""
    site = getattr(fn, "site", None)
    where = site.describe() if site is not None else ""
    user_callable = getattr(fn, "helper", fn)
    name = getattr(user_callable, "__qualname__", repr(user_callable))
    return (
        f"{where}the primitive {name} runs NumPy code that needs concrete values ({str(error).splitlines()[0]}), "
        "so on TensorFlow it runs on the host through tf.numpy_function, which XLA cannot compile: run it with "
        "TensorFlowBackend() (which then runs without XLA) or TensorFlowBackend(jit_compile=False), write it "
        "with NumPy operators and functions on its arguments, or use the JAX backend"
    )
