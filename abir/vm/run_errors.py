"""The errors of a run, told to the user: which members, where in their Python code.

A run's per-member error flags (stack overflow and underflow, `max_steps` reached) become
`StackOverflowError`, `StackUnderflowError` and `StepLimitError` naming the members
(`MemberNames`: by batch index, or by call and vmap indices for a folded `jax.vmap`) and the
function and line each stands at (from the block plans).
"""


from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from abir.backends.base import (
    Backend,
    State,
)
from abir.errors import StackOverflowError, StackUnderflowError, StepLimitError
from abir.vm import state_ops
from abir.vm.kernels import BlockPlan


def describe_block(plans: Sequence[BlockPlan], block: int, pushing: bool = False) -> str:
    """Where members at `block` are: its function and line (`pushing`: the lines of the
    calls its pushes serve, for an overflow)."""
    plan = plans[block]
    if not plan.function:
        return f"the program (vm block {block})"
    where = f"function {python_name(plan.function)!r}"
    if pushing and plan.call_locations:
        where += f" at {' or '.join(plan.call_locations)}"
    elif plan.location is not None:
        where += f" at {plan.location}"
    callee = plans[plan.callee].function if plan.callee is not None else None
    if callee and callee != plan.function:
        where += f" calling {python_name(callee)!r}"
    return f"{where} (vm block {block} of IR function @{plan.function})"


def raise_run_errors(
    plans: Sequence[BlockPlan],
    backend: Backend,
    max_stack_depth: int,
    max_steps: int | None,
    names: MemberNames,
    flags: dict[str, np.ndarray],
) -> None:
    """The errors of a staged run, from host copies of its error flags."""
    raise_member_errors(plans, backend, flags, max_stack_depth, names)
    if max_steps is not None:
        raise_step_limit(plans, backend, flags, max_steps, names)


def raise_member_errors(
    plans: Sequence[BlockPlan], backend: Backend, state: State, max_stack_depth: int, names: MemberNames | None = None
) -> None:
    """Raise the error of a run whose `state` flags members that overflowed or underflowed a stack."""
    overflow = backend.to_numpy(state[state_ops.OVERFLOW])
    if overflow.any():
        names = names or MemberNames()
        members = np.flatnonzero(overflow)
        raise StackOverflowError(
            f"stack overflow in {describe_block(plans, int(overflow[members[0]]) - 1, pushing=True)}: "
            f"{names.describe(members)} recursed deeper than max_stack_depth={max_stack_depth}. Pass a larger "
            f"max_stack_depth= (e.g. max_stack_depth={2 * max_stack_depth}), or check that the "
            "recursion terminates",
            **names.attributes(members),
        )
    underflow = backend.to_numpy(state[state_ops.UNDERFLOW])
    if underflow.any():
        names = names or MemberNames()
        members = np.flatnonzero(underflow)
        raise StackUnderflowError(
            f"stack underflow in {describe_block(plans, int(underflow[members[0]]) - 1)}: "
            f"{names.describe(members)} restored a value that was never saved. This is a bug in abir's "
            "lowering (or in hand-written vm IR); please report it with the program",
            **names.attributes(members),
        )


def raise_step_limit(
    plans: Sequence[BlockPlan], backend: Backend, state: State, max_steps: int, names: MemberNames | None = None
) -> None:
    """Raise `StepLimitError` when `state` flags members stopped by `max_steps`."""
    stopped_at = backend.to_numpy(state[state_ops.STOPPED_AT])
    stopped = np.flatnonzero(stopped_at >= 0)
    if not len(stopped):
        return
    names = names or MemberNames()
    places = []
    for block in sorted({int(stopped_at[m]) for m in stopped}):
        members = stopped[stopped_at[stopped] == block]
        places.append(f"{names.describe(members)} in {describe_block(plans, block)}")
    shown = "; ".join(places[:4]) + (f"; and {len(places) - 4} more places" if len(places) > 4 else "")
    raise StepLimitError(
        f"max_steps={max_steps} reached: {len(stopped)} member{'s' if len(stopped) > 1 else ''} still "
        f"running ({shown}). Each member may run at most max_steps blocks of the program; pass a "
        "larger max_steps= if the program is just long, or check that its loops and recursion end "
        "for these members (run them with dry_run=True)",
        blocks=[int(stopped_at[m]) for m in stopped],
        locations=[plans[int(stopped_at[m])].location for m in stopped],
        **names.attributes(stopped),
    )


class MemberNames:
    """How a run names its members to the user: by their index in the batch, or, for a run of
    the calls of a `jax.vmap` folded into one batch (`mapped`: the sizes of the vmapped axes,
    outermost first; row `(v_1 * V_2 + v_2) * B + b` is member `b` of the call at `(v_1, v_2)`),
    by their index in their call's batch and the call's vmap indices."""

    def __init__(self, batch: int = 0, mapped: Sequence[int] = ()):
        self.mapped = tuple(int(size) for size in mapped)
        self.per_call = batch // max(1, int(np.prod(self.mapped)))

    def attributes(self, members: np.ndarray) -> dict[str, Any]:
        """The error's `members` (in their call's batch) and `vmap_indices`."""
        if not self.mapped:
            return {"members": members.tolist(), "vmap_indices": [() for _ in members]}
        calls, within = np.divmod(members, self.per_call)
        indices = np.unravel_index(calls, self.mapped)
        return {
            "members": within.tolist(),
            "vmap_indices": [tuple(int(axis[i]) for axis in indices) for i in range(len(members))],
        }

    def describe(self, members: np.ndarray, shown: int = 8) -> str:
        """`batch member 3`, `batch members 1, 4`; under vmap `batch member 1 (vmap index 2)`."""
        found = self.attributes(members)
        names = [str(m) for m in found["members"][:shown]]
        if self.mapped:
            names = [
                f"{name} (vmap {'index' if len(v) == 1 else 'indices'} {', '.join(map(str, v))})"
                for name, v in zip(names, found["vmap_indices"], strict=False)
            ]
        more = f" and {len(members) - shown} more" if len(members) > shown else ""
        return f"batch member{'s' if len(members) > 1 else ''} {', '.join(names)}{more}"


def python_name(symbol: str) -> str:
    """The Python function an IR function symbol comes from: specializations per argument
    structure (`fib.s1`) or per argument types (`scale.t2`) add a dotted suffix."""
    return symbol.split(".", 1)[0]
