"""`merge-blocks` and `schedule-blocks`: shape the stack program's block list for the machine.

`merge-blocks` appends a block to its only predecessor when that predecessor ends in
`stack.goto` to it and nothing else refers to it (no branch, call or return targets it): one
machine step instead of two, and more variables stay inside one kernel (temporaries).

`schedule-blocks` fixes the block order, which becomes the vm block numbering and so the
machine's priority (it runs the smallest block index any live member holds). Policy: the program
entry stays first; then the cheap bookkeeping blocks (only writes, push/pop/peek and jumps: no
`stack.prim`, no `stack.constant`); then the blocks that compute. Within each group the existing order
(function by function, in source order) is kept. Running cheap blocks first lets members that
are merely moving values or returning catch up with the others, so the expensive blocks run once
for a larger group of members.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block
from xdsl.passes import ModulePass

from abir.dialects import stack
from abir.passes.allocate_storage import the_program


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


def schedule_blocks(module: ModuleOp) -> None:
    program = the_program(module)
    blocks = list(program.body.blocks)
    order = [
        blocks[0],
        *(b for b in blocks[1:] if is_bookkeeping(b)),
        *(b for b in blocks[1:] if not is_bookkeeping(b)),
    ]
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
    """Order blocks: entry, then bookkeeping blocks, then blocks computing prims."""

    name = "schedule-blocks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        schedule_blocks(op)
