"""The program-counter machine: a `vm.program` compiled into one kernel per block.

`compile_machine` reads the vm module once and plans every block (`abir.vm.kernels`: each
block one generated Python function calling only backend methods, bound per backend).
`Machine.run` builds the initial state, lets the backend loop over steps, checks the
per-member error flags (`abir.vm.run_errors`) and returns the output variables' registers;
`SteadyRun` is that run for a call repeated with inputs of the same types. Runs with more
members than rows are `abir.vm.lanes`'.
"""


from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from abir.backends.base import (
    FLAGGED,
    RUN_CACHE_SIZE,
    STATUS_KEY,
    Backend,
    Kernel,
    RunStats,
    State,
    SteadyLauncher,
)
from abir.dialects import vm
from abir.lru import LRUCache
from abir.types import TensorType, tensor_type_of
from abir.vm import state_ops
from abir.vm.inputs import is_exact_input, prepare_inputs
from abir.vm.kernels import BlockPlan, Call, Descend, KernelCode, Return, make_kernel, plan_blocks
from abir.vm.run_errors import MemberNames, raise_member_errors, raise_run_errors, raise_step_limit

DEFAULT_MAX_STACK_DEPTH = 15
KERNEL_SETS = 8
"""Backend instances a machine keeps its kernels for (a new backend object per call would
otherwise add a set per call)."""
ZERO_STATES = 4
"""Zero states a machine keeps for reuse (one per backend kind and batch shape)."""
REUSED_ZERO_STATE_BYTES = 32 << 20
"""The largest zero state a machine keeps (NUTS B=4096: 19 MB): making a bigger one, a transfer
of a few GB/s on JAX, costs little next to its run."""


@dataclass(frozen=True)
class Variable:
    """A machine variable: name, per-member type and whether it has a stack."""

    name: str
    type: TensorType
    is_stack: bool


# ----- the machine ----------------------------------------------------------------------


def _find_program(module: ModuleOp) -> vm.ProgramOp:
    programs = [op for op in module.ops if isinstance(op, vm.ProgramOp)]
    if len(programs) != 1:
        raise ValueError(f"a vm module must hold exactly one vm.program, found {len(programs)}")
    return programs[0]


def _variables(module: ModuleOp) -> dict[str, Variable]:
    return {
        op.sym_name.data: Variable(op.sym_name.data, tensor_type_of(op.type), op.is_stack)
        for op in module.ops
        if isinstance(op, vm.VarOp)
    }


class Machine:
    """A compiled vm program: block plans, and kernels built lazily once per backend."""

    def __init__(
        self,
        name: str,
        variables: dict[str, Variable],
        inputs: Sequence[str],
        outputs: Sequence[str],
        plans: Sequence[BlockPlan],
        pointers: Mapping[str, str] | None = None,
    ):
        self.name = name
        self.variables = variables
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.output_keys = tuple(state_ops.register_key(name) for name in self.outputs)
        self.plans = tuple(plans)
        self.pointers = dict(pointers) if pointers is not None else {
            name: state_ops.pointer_key(name) for name, var in variables.items() if var.is_stack
        }
        """The stack pointer key of each stack variable (`stack_pointers`)."""
        self.has_calls = any(
            isinstance(instruction, Call | Return | Descend) for plan in plans for instruction in plan.instructions
        )
        """Whether the program keeps return blocks on its program-counter stack (`static_returns`)."""
        self.last_stats: RunStats | None = None
        self.run_cache = LRUCache(RUN_CACHE_SIZE)
        """The compiled runs of this program (`Backend.run_cache`), freed with it."""
        self._kernels: MutableMapping[tuple[int, bool], tuple[Backend, list[Kernel]]] = LRUCache(KERNEL_SETS)
        self._counting_plans: tuple[BlockPlan, ...] | None = None
        self._zero_states: MutableMapping[Any, State] = LRUCache(ZERO_STATES)
        self._launchers: MutableMapping[Any, tuple[Backend, Callable[[State], State] | None]] = LRUCache(KERNEL_SETS)

    @property
    def num_blocks(self) -> int:
        return len(self.plans)

    @functools.cached_property
    def stack_keys(self) -> frozenset[str]:
        """The state keys of the `[D, B, ...]` stacks (what `Backend.run` keeps apart)."""
        keys = {state_ops.stack_key(name) for name, var in self.variables.items() if var.is_stack}
        return frozenset({*keys, state_ops.PC_STACK} if self.has_calls else keys)

    def kernels(self, backend: Backend, count_steps: bool = False) -> list[Kernel]:
        """The block kernels for `backend` (built on first use, then reused); with
        `count_steps`, the kernels of a run with a step limit (`state_ops.count_step`)."""

        def made() -> list[Kernel]:
            plans = self._step_counting_plans() if count_steps else self.plans
            return [make_kernel(plan, backend, self.num_blocks) for plan in plans]

        return kept_for(backend, self._kernels, count_steps, made)

    def _step_counting_plans(self) -> tuple[BlockPlan, ...]:
        if self._counting_plans is None:
            self._counting_plans = tuple(
                dataclasses.replace(
                    plan,
                    code=KernelCode.generate(plan.index, plan.instructions, plan.uses_stacks, count_steps=True),
                    register_writes=(*plan.register_writes, *state_ops.STEP_LIMIT_KEYS),
                )
                for plan in self.plans
            )
        return self._counting_plans

    def initial_state(
        self, backend: Backend, leaves: Sequence[Any], batch: int, max_stack_depth: int, max_steps: int | None = None
    ) -> State:
        """Zero registers and stacks, the inputs in their registers, every pc at block 0 (and
        with `max_steps`, every member's `steps_left`)."""
        staged = any(backend.is_traced(leaf) for leaf in leaves)
        if backend.immutable_arrays and not staged:
            state = self._reused_zero_state(backend, batch, max_stack_depth)
        else:
            state = backend.zero_state(self.state_shapes(batch, max_stack_depth), staged=staged)
        for name, leaf in zip(self.inputs, leaves, strict=True):
            state[state_ops.register_key(name)] = leaf
        if max_steps is not None:
            state[state_ops.STEPS_LEFT] = backend.full((batch,), max_steps, np.int32)
            state[state_ops.STOPPED_AT] = backend.full((batch,), -1, np.int32)
        return state

    def state_shapes(self, batch: int, max_stack_depth: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """The shape and dtype of every state array but the input registers."""
        scalar = ((batch,), np.dtype(np.int32))
        shapes: dict[str, tuple[tuple[int, ...], np.dtype]] = {
            state_ops.PC: scalar,
            state_ops.OVERFLOW: scalar,
            state_ops.UNDERFLOW: scalar,
        }
        if self.has_calls:
            shapes[state_ops.PC_STACK] = ((max_stack_depth, batch), np.dtype(np.int32))
            shapes[state_ops.PC_SP] = scalar
        for var in self.variables.values():
            shape, dtype = tuple(var.type.shape), np.dtype(var.type.dtype)
            shapes[state_ops.register_key(var.name)] = ((batch, *shape), dtype)
            if var.is_stack:
                shapes[state_ops.stack_key(var.name)] = ((max_stack_depth, batch, *shape), dtype)
                shapes[self.pointers.get(var.name, state_ops.pointer_key(var.name))] = scalar
        for name in self.inputs:
            del shapes[state_ops.register_key(name)]
        return shapes

    def _reused_zero_state(self, backend: Backend, batch: int, max_stack_depth: int) -> State:
        """A copy of the zero state made before for this backend type, batch and depth, on a
        backend whose arrays never change (`Backend.immutable_arrays`), when it is small (at
        most `REUSED_ZERO_STATE_BYTES`). Making the zeros is a dispatch of its own, a noticeable
        part of a small call (docs/performance.md#the-machines-fixed-costs)."""
        key = (type(backend), batch, max_stack_depth)
        zeros = self._zero_states.get(key)
        if zeros is None:
            shapes = self.state_shapes(batch, max_stack_depth)
            size = sum(math.prod(shape) * dtype.itemsize for shape, dtype in shapes.values())
            if size > REUSED_ZERO_STATE_BYTES:
                return backend.zero_state(shapes)
            zeros = self._zero_states[key] = backend.zero_state(shapes)
        return dict(zeros)

    def run(
        self,
        args: Sequence[Any],
        backend: Backend,
        max_stack_depth: int = DEFAULT_MAX_STACK_DEPTH,
        cache_key: Any = None,
        max_steps: int | None = None,
        padded_batch: int | None = None,
    ) -> list[Any]:
        """Run the program on the flat input leaves; return the output registers. With
        `max_steps`, a member may run at most that many blocks: members that have not halted by
        then stop, and the run raises `StepLimitError` naming them and where they stand. With
        `padded_batch` (at least the batch size), the machine runs that many rows: the extra
        ones are members halted from the start, and the results are cut back to the batch."""
        if max_stack_depth < 1:
            raise ValueError(f"max_stack_depth must be at least 1, got {max_stack_depth}")
        check_max_steps(max_steps)
        with backend.scope(args):
            return self._run(args, backend, max_stack_depth, cache_key, max_steps, padded_batch)

    def steady_run(
        self, backend: Backend, leaves: Sequence[Any], max_stack_depth: int, cache_key: Any
    ) -> SteadyRun | None:
        """`run` (without `max_steps` or padding) for input leaves of the types, shapes and
        dtypes of `leaves`, the leaves of a run just made: those pass every check of
        `prepare_inputs` unchanged, so it is skipped (`SteadyRun`). None when such leaves are
        not run as they are (one is cast, broadcast, or traced)."""
        types = [self.variables[name].type for name in self.inputs]
        if len(leaves) != len(types) or staged_leaves(backend, leaves):
            return None
        exact = (is_exact_input(leaf, np.dtype(want.dtype), want.shape) for leaf, want in zip(leaves, types, strict=True))
        if not all(exact) or len({int(leaf.shape[0]) for leaf in leaves}) != 1:
            return None
        return SteadyRun(self, backend, int(leaves[0].shape[0]), max_stack_depth, cache_key)

    def _run(
        self,
        args: Sequence[Any],
        backend: Backend,
        max_stack_depth: int,
        cache_key: Any,
        max_steps: int | None,
        padded_batch: int | None,
    ) -> list[Any]:
        types = [self.variables[name].type for name in self.inputs]
        batch, leaves = prepare_inputs(self.inputs, types, args, backend, for_run=True)
        rows = batch if padded_batch is None else max(int(padded_batch), batch)
        if rows > batch:
            # a leaf of one row where the batch has more is every member's (`Backend.spread_row`)
            leaves = [backend.pad_rows(leaf, rows) if leaf.shape[0] == batch else leaf for leaf in leaves]
        state = self.initial_state(backend, leaves, rows, max_stack_depth, max_steps)
        if rows > batch:
            state[state_ops.PC] = backend.asarray(np.where(np.arange(rows) < batch, 0, self.num_blocks).astype(np.int32))
        backend.last_stats = None
        counting = max_steps is not None
        if counting and cache_key is not None:
            cache_key = (cache_key, "max_steps")
        error_flags = {state_ops.OVERFLOW: 0, state_ops.UNDERFLOW: 0}
        if counting:
            error_flags[state_ops.STOPPED_AT] = -1
        kernels = self.kernels(backend, counting)
        launcher = None if staged_leaves(backend, leaves) else self._launcher(backend, kernels, state, cache_key, error_flags)
        state = self._launched(backend, kernels, state, cache_key, error_flags, launcher)
        self.last_stats = backend.last_stats
        status = state.pop(STATUS_KEY, None)
        if backend.is_traced(state[state_ops.PC]):
            names = MemberNames(batch, backend.mapped_axes())
            check = functools.partial(raise_run_errors, self.plans, backend, max_stack_depth, max_steps, names)
            limit = "" if max_steps is None else f", or reached max_steps={max_steps}"
            summary = (
                f"abir: the staged run of '{self.name}' failed: a member recursed deeper than max_stack_depth="
                f"{max_stack_depth}, or restored a value never saved{limit} (per member: overflow/underflow = "
                "1 + the vm block, stopped_at = the vm block); run it outside the traced function for the full error"
            )
            backend.check_when_run(check, {key: state[key] for key in error_flags}, error_flags, summary)
        elif status is None or status & FLAGGED:
            raise_member_errors(self.plans, backend, state, max_stack_depth)
            if counting:
                raise_step_limit(self.plans, backend, state, max_steps)
        outputs = self._outputs(backend, state)
        return outputs if rows == batch else [output[:batch] for output in outputs]

    def _launched(
        self,
        backend: Backend,
        kernels: list[Kernel],
        state: State,
        cache_key: Any,
        error_flags: Mapping[str, int],
        launcher: Callable[[State], State] | None,
    ) -> State:
        """The state a run from `state` leaves: through `launcher` (`_launcher`) where there is
        one, else the backend's `run`."""
        if launcher is not None:
            return launcher(state)
        return backend.run(kernels, state, self.num_blocks, cache_key, self.run_cache, self.stack_keys, error_flags)

    def _outputs(self, backend: Backend, state: State) -> list[Any]:
        """The output registers of a finished run's `state`, as the backend's arrays (a register
        no block writes may come back as the backend left it: a JAX `Fill`)."""
        outputs = [state[key] for key in self.output_keys]
        return [output if backend.is_native(output) else backend.asarray(output) for output in outputs]

    def _launcher(
        self, backend: Backend, kernels: list[Kernel], state: State, cache_key: Any, error_flags: Mapping[str, int]
    ) -> Callable[[State], State] | None:
        """The backend's `Backend.launcher` for runs under `cache_key` (made on the first, then
        reused), or None (no `cache_key`, or the backend has none)."""
        if cache_key is None or not isinstance(backend, Backend):
            return None
        return kept_for(
            backend, self._launchers, cache_key,
            lambda: backend.launcher(kernels, state, self.num_blocks, cache_key, self.run_cache, self.stack_keys, error_flags),
        )


class SteadyRun:
    """`Machine.run` on input leaves known to be of the input types, `batch` members each (see
    `Machine.steady_run`): the initial state, the backend's run (its `Backend.launcher` where it
    has one) and the error checks, nothing else. Where the backend runs its launcher from the
    input leaves alone (`Backend.steady_launcher`), the machine builds no state at all."""

    def __init__(self, machine: Machine, backend: Backend, batch: int, max_stack_depth: int, cache_key: Any):
        self.machine = machine
        self.backend = backend
        self.batch = batch
        self.max_stack_depth = max_stack_depth
        self.cache_key = cache_key
        self.error_flags = {state_ops.OVERFLOW: 0, state_ops.UNDERFLOW: 0}
        self.inputs = tuple(state_ops.register_key(name) for name in machine.inputs)
        self.zeros: State | None = None
        """The initial state but the inputs, kept where `Machine._reused_zero_state` would
        reuse it."""
        shapes = machine.state_shapes(batch, max_stack_depth)
        size = sum(math.prod(shape) * dtype.itemsize for shape, dtype in shapes.values())
        self.keeps_zeros = backend.immutable_arrays and size <= REUSED_ZERO_STATE_BYTES
        self.launcher: Callable[[State], State] | None = None
        self.launch: SteadyLauncher | None = None
        """The backend's `steady_launcher`, once the first run found one."""

    def initial_state(self, leaves: Sequence[Any]) -> State:
        """`Machine.initial_state` for `leaves`."""
        if self.zeros is None:
            state = self.machine.initial_state(self.backend, leaves, self.batch, self.max_stack_depth)
            if self.keeps_zeros:
                self.zeros = {key: value for key, value in state.items() if key not in self.inputs}
            return state
        state = dict(self.zeros)
        state.update(zip(self.inputs, leaves, strict=True))
        return state

    def __call__(self, leaves: Sequence[Any]) -> list[Any]:
        machine, backend = self.machine, self.backend
        launch = self.launch
        if launch is not None:
            outputs = launch.finished_outputs(leaves)
            if outputs is not None:
                machine.last_stats = None
                return outputs
            state = launch.from_start(leaves)
        else:
            state = self._launched(leaves)
        machine.last_stats = backend.last_stats
        if state.pop(STATUS_KEY, FLAGGED) & FLAGGED:
            raise_member_errors(machine.plans, backend, state, self.max_stack_depth)
        return machine._outputs(backend, state)

    def _launched(self, leaves: Sequence[Any]) -> State:
        """The final state of a run the machine starts itself (`Machine._launched`); the first
        such run asks the backend for its `steady_launcher`, which runs the later ones."""
        machine, backend = self.machine, self.backend
        state = self.initial_state(leaves)
        kernels = machine.kernels(backend)
        if self.launcher is None:
            self.launcher = machine._launcher(backend, kernels, state, self.cache_key, self.error_flags)
            if self.launcher is not None:
                zeros = {key: value for key, value in state.items() if key not in self.inputs}
                self.launch = backend.steady_launcher(self.launcher, zeros, self.inputs, machine.output_keys)
        return machine._launched(backend, kernels, state, self.cache_key, self.error_flags, self.launcher)


def staged_leaves(backend: Backend, leaves: Sequence[Any]) -> bool:
    """Whether some of a run's input leaves belong to a computation being traced."""
    return any(backend.is_traced(leaf) for leaf in leaves)


T = TypeVar("T")


def kept_for(backend: Any, cache: MutableMapping[Any, Any], key: Any, make: Callable[[], T]) -> T:
    """What `make()` gives, kept in `cache` for `backend` and `key` and made again only for another
    backend: the entry holds the backend itself, so a freed backend's id, which Python may give a
    new one, never finds what was made for the old."""
    entry = cache.get((id(backend), key))
    if entry is None or entry[0] is not backend:
        entry = cache[(id(backend), key)] = (backend, make())
    return entry[1]  # type: ignore[no-any-return]


def check_max_steps(max_steps: Any) -> None:
    """`max_steps` is None or a positive int that fits an int32 counter."""
    if max_steps is None:
        return
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer):
        raise TypeError(f"max_steps must be None or a positive int, got {type(max_steps).__name__}")
    if not 1 <= max_steps <= np.iinfo(np.int32).max:
        raise ValueError(f"max_steps must be between 1 and {np.iinfo(np.int32).max} (or None), got {max_steps}")


def compile_machine(vm_module: ModuleOp, verify: bool = True) -> Machine:
    """Read a vm module once and plan every block (kernels are built per backend on demand);
    `verify=False` for a module the caller has just verified (`lower_to_vm` does)."""
    if verify:
        vm_module.verify()
    program = _find_program(vm_module)
    plans, pointers = plan_blocks(list(program.blocks))
    return Machine(
        program.sym_name.data,
        _variables(vm_module),
        [ref.string_value() for ref in program.inputs.data],
        [ref.string_value() for ref in program.outputs.data],
        plans,
        pointers,
    )
