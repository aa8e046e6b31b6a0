"""`merge-blocks` and `schedule-blocks`: shape the stack program's block list for the machine.

`merge-blocks` appends a block to its only predecessor when that predecessor ends in
`stack.goto` to it and nothing else refers to it (no branch, call or return targets it): one
machine step instead of two, and more variables stay inside one kernel (temporaries).

`schedule-blocks` fixes the block order, which becomes the vm block numbering. Two policies,
one per way of running the machine (`order=`):

`flow` (for executions that sweep the blocks in index order each iteration, running every block
that has members, e.g. the JAX backend's default): a member moves through every jump to a later
block within one sweep and waits for the next sweep at each jump back, so the order should make
as few of the program's transitions as possible go backwards. The transitions are the jumps and
branches, each call (to the callee's entry) and each return (to the return block of every call
of the function). Finding the order with the fewest backward edges is NP-hard (minimum feedback
arc set); the greedy heuristic of Eades, Lin and Smyth (1993) is used: repeatedly take sinks to
the back and sources to the front, otherwise the block with the largest out- minus in-degree to
the front. The order depends on the control-flow graph only, not on the order of the source
(ties aside): NUTS with its leaf written first or last gets the same sweeps.

`priority` (for executions that run one block per step, the smallest index any live member
holds): the program entry stays first; then the blocks inside loops of their function, before the blocks after the
loops (members that leave a loop early wait for the others instead of making the machine run the
loop's exit once per iteration in which somebody leaves); within each of these groups the cheap
bookkeeping blocks (only writes, push/pop/peek and jumps: no `stack.prim`, no `stack.constant`)
come before the blocks that compute; otherwise the existing order (function by function, in
source order) is kept. Running cheap blocks first lets members that are merely moving values or
returning catch up with the others, so the expensive blocks run once for a larger group of
members.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from abir.dialects import stack
from abir.passes.analysis import machine_successors, strongly_connected_components, the_program


def references(program: stack.ProgramOp) -> dict[Block, int]:
    """How many terminator successor slots name each block."""
    count: dict[Block, int] = {b: 0 for b in program.body.blocks}
    for block in program.body.blocks:
        if (term := block.last_op) is not None:
            for succ in term.successors:
                count[succ] += 1
    return count


def absorb_jump_target(program: stack.ProgramOp, block: Block, refs: Mapping[Block, int]) -> Block | None:
    """Append to `block` the block its `stack.goto` jumps to, when nothing else refers to that
    block (by `refs`, `references`) and it is neither the entry nor `block`; the absorbed block
    (now erased), or None."""
    term = block.last_op
    if not isinstance(term, stack.GotoOp):
        return None
    succ = term.dest
    if succ is program.body.blocks.first or succ is block or refs[succ] != 1:
        return None
    term.detach()
    term.erase()
    for op in list(succ.ops):
        op.detach()
        block.add_op(op)
    program.body.erase_block(succ)
    return succ


def merge_blocks(module: ModuleOp) -> None:
    program = the_program(module)
    changed = True
    while changed:
        refs = references(program)
        changed = any(absorb_jump_target(program, block, refs) is not None for block in program.body.blocks)


def is_bookkeeping(block: Block) -> bool:
    return not any(isinstance(op, stack.PrimOp | stack.ConstantOp) for op in block.ops)


def flow_successors(block: Block) -> list[Block]:
    """Successors within one function: a call continues at its return block, a return leaves."""
    term = block.last_op
    if isinstance(term, stack.PushGotoOp):
        return [term.return_dest]
    return list(term.successors) if term is not None else []


def blocks_in_loops(program: stack.ProgramOp) -> set[Block]:
    """Blocks on a cycle of their own function's control flow (calls do not count as edges)."""
    graph = {b: flow_successors(b) for b in program.body.blocks}
    looping: set[Block] = set()
    for component in strongly_connected_components(graph):
        if len(component) > 1 or component[0] in graph[component[0]]:
            looping.update(component)
    return looping


ORDERS = ("priority", "flow")


def few_backward_edges(nodes: list[Block], successors: dict[Block, list[Block]]) -> list[Block]:
    """An order of `nodes` with few edges from a later to an earlier node (Eades-Lin-Smyth;
    self-loops ignored; ties go to the earlier node of `nodes`)."""
    out = {n: {s for s in successors[n] if s is not n} for n in nodes}
    into: dict[Block, set[Block]] = {n: set() for n in nodes}
    for n in nodes:
        for s in out[n]:
            into[s].add(n)
    front: list[Block] = []
    back: list[Block] = []
    remaining = dict.fromkeys(nodes)

    def take(node: Block) -> None:
        del remaining[node]
        for s in out[node]:
            into[s].discard(node)
        for p in into[node]:
            out[p].discard(node)

    while remaining:
        if sink := next((n for n in remaining if not out[n]), None):
            back.append(sink)
            take(sink)
        elif source := next((n for n in remaining if not into[n]), None):
            front.append(source)
            take(source)
        else:
            best = max(remaining, key=lambda n: len(out[n]) - len(into[n]))
            front.append(best)
            take(best)
    return front + back[::-1]


def flow_order(program: stack.ProgramOp) -> list[Block]:
    """The `flow` policy: the entry first, then few backward transitions (module docstring)."""
    blocks = list(program.body.blocks)
    order = few_backward_edges(blocks, machine_successors(program))
    order.remove(blocks[0])
    return [blocks[0], *order]


def priority_order(program: stack.ProgramOp) -> list[Block]:
    """The `priority` policy (module docstring)."""
    blocks = list(program.body.blocks)
    in_loop = blocks_in_loops(program)
    rest = sorted(blocks[1:], key=lambda b: (b not in in_loop, not is_bookkeeping(b), blocks.index(b)))
    return [blocks[0], *rest]


def schedule_blocks(module: ModuleOp, order: str = "priority") -> None:
    if order not in ORDERS:
        raise PassFailedException(f"schedule-blocks order must be one of {', '.join(ORDERS)}, got {order!r}")
    program = the_program(module)
    blocks = list(program.body.blocks)
    new_order = flow_order(program) if order == "flow" else priority_order(program)
    for block in blocks:
        program.body.detach_block(block)
    for block in new_order:
        program.body.add_block(block)


@dataclass(frozen=True)
class MergeBlocksPass(ModulePass):
    """Append each block to its only predecessor when that predecessor just jumps to it."""

    name = "merge-blocks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        merge_blocks(op)


@dataclass(frozen=True)
class ScheduleBlocksPass(ModulePass):
    """Order blocks for the machine. order=priority (default): entry; loop blocks before the
    others; bookkeeping before computing blocks. order=flow: few backward transitions, for
    executions that sweep the blocks in order."""

    name = "schedule-blocks"

    order: str = "priority"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        schedule_blocks(op, self.order)
