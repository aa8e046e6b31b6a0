"""`stack-optimize`: cheaper stack traffic in the stack dialect.

1. Dead saves: a `stack.pop @x` at a call's return block whose restored value is dead afterwards
   is dropped together with the matching `stack.push @x` before every call returning there.
2. Invariant saves: a save of `@x` around a call is dropped (the push before every call
   returning to a block, and the pop there) when no function the call may run (the callee and
   every function it calls, transitively) writes `@x` other than by restoring its own saves, and
   the caller does not write `@x` between the push and the call: the callee leaves `@x` as it
   found it. A call passing `@x` on as the same parameter (a parallel write's `@x = @x`) does
   not write it: a recursive evaluation passing its tree arrays down saves none of them. NUTS's `build_tree` passes its step size, initial energy and key unchanged to its
   recursive calls; their saves were three of the five pushes of every descent.
3. Pop-push fusion: `stack.pop @x` followed in the same block by `stack.push @x`, with no write
   of `@x` between, becomes one `stack.peek @x` (restore the saved value and keep it saved).

1 and 2 look at the whole program (liveness, the call graph) and stay a loop; 3 is a local
rewrite, the `FusePopPush` pattern.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter

from abir.dialects import stack
from abir.passes.analysis import reads_writes, the_program, variable_liveness


def var_names(op: stack.PushOp | stack.PopOp | stack.PeekOp) -> list[str]:
    return [v.string_value() for v in op.vars.data]


def drop_vars(
    op: stack.PushOp | stack.PopOp | stack.PeekOp, names: Iterable[str], rewriter: PatternRewriter | None = None
) -> None:
    """Remove variables from a push/pop/peek; erase the op when none remain. Within a pattern,
    through its `rewriter`."""
    drop = set(names)
    keep = [n for n in var_names(op) if n not in drop]
    if keep:
        op.vars = stack.refs(keep)
        if rewriter is not None:
            rewriter.notify_op_modified(op)
    elif rewriter is not None:
        rewriter.erase_op(op)
    else:
        Rewriter.erase_op(op)


def callers_returning_to(program: stack.ProgramOp, block: Block) -> list[Block] | None:
    """The blocks whose call returns to `block`, or None if `block` is also entered otherwise."""
    callers: list[Block] = []
    for other in program.body.blocks:
        term = other.last_op
        if isinstance(term, stack.PushGotoOp) and term.return_dest is block:
            callers.append(other)
        if term is not None and any(
            s is block
            for s in term.successors
            if not (isinstance(term, stack.PushGotoOp) and s is term.return_dest)
        ):
            return None
    return callers


def last_push_of(block: Block, name: str) -> stack.PushOp | None:
    """The push of `name` that the call ending `block` saves (no pop/peek of it afterwards)."""
    op = block.last_op
    while op is not None:
        if isinstance(op, stack.PopOp | stack.PeekOp) and name in var_names(op):
            return None
        if isinstance(op, stack.PushOp) and name in var_names(op):
            return op
        op = op.prev_op
    return None


def remove_dead_saves(program: stack.ProgramOp) -> bool:
    liveness = variable_liveness(program)
    for block in program.body.blocks:
        for op in block.ops:
            if not isinstance(op, stack.PopOp):
                continue
            dead = [n for n in var_names(op) if n not in liveness.live_after(op)]
            callers = callers_returning_to(program, block) if dead else None
            if not dead or not callers:
                continue
            pushes = {name: [last_push_of(c, name) for c in callers] for name in dead}
            if drop_saves(op, pushes, lambda push, name: push is not None):
                return True
    return False


def drop_saves(
    pop: stack.PopOp,
    pushes: dict[str, list[stack.PushOp | None]],
    droppable: Callable[[stack.PushOp | None, str], bool],
) -> bool:
    """Drop from `pop` and from their pushes the variables whose every push is `droppable`;
    whether any were."""
    names = [name for name, found in pushes.items() if all(droppable(push, name) for push in found)]
    for name in names:
        for push in pushes[name]:
            drop_vars(push, [name])  # type: ignore[arg-type]
    if names:
        drop_vars(pop, names)
    return bool(names)


def body_and_calls(entry: Block) -> tuple[list[Block], set[Block]]:
    """The blocks a call entering at `entry` runs in its own frame, and the entries it calls."""
    body, calls, todo = [entry], set(), [entry]
    while todo:
        term = todo.pop().last_op
        successors = list(term.successors) if term is not None else []
        if isinstance(term, stack.PushGotoOp):
            calls.add(term.dest)
            successors = [term.return_dest]
        for successor in successors:
            if successor not in body:
                body.append(successor)
                todo.append(successor)
    return body, calls


def changed_by(op: Operation) -> list[str]:
    """The variables `op` may change: those it writes, less the components of a parallel
    `stack.write` that copy a variable to itself (a call passing a parameter on unchanged)."""
    reads, writes = reads_writes(op)
    if isinstance(op, stack.WriteOp):
        return [target for target, source in zip(writes, reads, strict=True) if target != source]
    return writes


def written_by_call(entry: Block) -> set[str]:
    """The variables a call entering at `entry` may write, in its frame or in the calls it
    makes, other than by restoring saves (pop, peek)."""
    written: set[str] = set()
    seen, todo = {entry}, [entry]
    while todo:
        body, calls = body_and_calls(todo.pop())
        for block in body:
            for op in block.ops:
                if not isinstance(op, stack.PopOp | stack.PeekOp):
                    written.update(changed_by(op))
        todo.extend(calls - seen)
        seen |= calls
    return written


def written_after(push: stack.PushOp, name: str) -> bool:
    """Whether an op after `push` in its block changes `name` (`changed_by`)."""
    op = push.next_op
    while op is not None:
        if name in changed_by(op):
            return True
        op = op.next_op
    return False


def remove_invariant_saves(program: stack.ProgramOp) -> bool:
    """Drop one return block's saves that no call returning there can change (docstring, 2)."""
    written_by: dict[Block, set[str]] = {}
    for block in program.body.blocks:
        for op in block.ops:
            if not isinstance(op, stack.PopOp):
                continue
            callers = callers_returning_to(program, block)
            if not callers:
                continue
            written: set[str] = set()
            for caller in callers:
                entry = caller.last_op.dest  # type: ignore[union-attr]
                if entry not in written_by:
                    written_by[entry] = written_by_call(entry)
                written |= written_by[entry]
            pushes = {n: [last_push_of(c, n) for c in callers] for n in var_names(op) if n not in written}
            if drop_saves(op, pushes, lambda push, name: push is not None and not written_after(push, name)):
                return True
    return False


class FusePopPush(RewritePattern):
    """`stack.pop @x` followed in its block by `stack.push @x`, no write of `@x` between: a
    `stack.peek @x` before the pop, `@x` dropped from both (one variable per rewrite)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: stack.PopOp, rewriter: PatternRewriter) -> None:
        for name in var_names(op):
            push = matching_push(op, name)
            if push is None:
                continue
            rewriter.insert_op(stack.PeekOp(name), InsertPoint.before(op))
            drop_vars(push, [name], rewriter)
            drop_vars(op, [name], rewriter)
            return


def matching_push(pop: Operation, name: str) -> stack.PushOp | None:
    op = pop.next_op
    while op is not None:
        if isinstance(op, stack.PushOp) and name in var_names(op):
            return op
        if (
            name in reads_writes(op)[1]
            or isinstance(op, stack.PopOp | stack.PeekOp)
            and name in var_names(op)
        ):
            return None
        op = op.next_op
    return None


def optimize_stack(module: ModuleOp, dead_saves: bool = True) -> None:
    """Apply the rewrites of the module docstring to a fixed point. `dead_saves=False` leaves
    out dead saves (1): their liveness does not see a function's results as live at its return,
    which holds only while results have variables of their own (before `coalesce-copies` may
    make a saved parameter the result: `return p.a` after a call)."""
    program = the_program(module)
    while (dead_saves and remove_dead_saves(program)) or remove_invariant_saves(program):
        pass
    PatternRewriteWalker(FusePopPush(), apply_recursively=True).rewrite_region(program.body)


@dataclass(frozen=True)
class StackOptimizePass(ModulePass):
    """Drop saves whose restored value is dead or that no call can change; fuse pop-then-push
    into peek. Option: dead-saves=false leaves the dead-save rule out (as the pipeline's second
    run, after coalesce-copies)."""

    name = "stack-optimize"

    dead_saves: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        optimize_stack(op, self.dead_saves)
