"""`merge-blocks` and `schedule-blocks`: shape the stack program's block list for the machine.

`merge-blocks` appends a block to its only predecessor when that predecessor ends in
`stack.goto` to it and nothing else refers to it (no branch, call or return targets it): one
machine step instead of two, and more variables stay inside one kernel (temporaries).

`schedule-blocks` fixes the block order, which becomes the vm block numbering and so the
machine's priority (it runs the smallest block index any live member holds). Policy: the program
entry stays first; then the blocks inside loops of their function, before the blocks after the
loops (members that leave a loop early wait for the others instead of making the machine run the
loop's exit once per iteration in which somebody leaves); within each of these groups the cheap
bookkeeping blocks (only writes, push/pop/peek and jumps: no `stack.prim`, no `stack.constant`)
come before the blocks that compute; otherwise the existing order (function by function, in
source order) is kept. Running cheap blocks first lets members that are merely moving values or
returning catch up with the others, so the expensive blocks run once for a larger group of
members.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.passes import ModulePass

from abir.dialects import stack
from abir.passes.allocate_storage import the_program
from abir.passes.analysis import strongly_connected_components


def references(program: stack.ProgramOp) -> dict[Block, int]:
    """How many terminator successor slots name each block."""
    count: dict[Block, int] = {b: 0 for b in program.body.blocks}
    for block in program.body.blocks:
        if (term := block.last_op) is not None:
            for succ in term.successors:
                count[succ] += 1
    return count


def merge_blocks(module: ModuleOp) -> None:
    program = the_program(module)
    changed = True
    while changed:
        changed = False
        refs = references(program)
        entry = program.body.blocks.first
        for block in program.body.blocks:
            term = block.last_op
            if not isinstance(term, stack.GotoOp):
                continue
            succ = term.dest
            if succ is entry or succ is block or refs[succ] != 1:
                continue
            term.detach()
            term.erase()
            for op in list(succ.ops):
                op.detach()
                block.add_op(op)
            program.body.erase_block(succ)
            changed = True
            break


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


def schedule_blocks(module: ModuleOp) -> None:
    program = the_program(module)
    blocks = list(program.body.blocks)
    in_loop = blocks_in_loops(program)
    rest = sorted(
        blocks[1:], key=lambda b: (b not in in_loop, not is_bookkeeping(b), blocks.index(b))
    )
    order = [blocks[0], *rest]
    for block in blocks:
        program.body.detach_block(block)
    for block in order:
        program.body.add_block(block)


@dataclass(frozen=True)
class MergeBlocksPass(ModulePass):
    """Append each block to its only predecessor when that predecessor just jumps to it."""

    name = "merge-blocks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        merge_blocks(op)


@dataclass(frozen=True)
class ScheduleBlocksPass(ModulePass):
    """Order blocks: entry; loop blocks before the others; bookkeeping before computing blocks."""

    name = "schedule-blocks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        schedule_blocks(op)
