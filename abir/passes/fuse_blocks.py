"""`fuse-blocks`: tail-duplicate small blocks into their predecessors (fewer machine steps).

Every machine step costs a fixed overhead, so a member that runs a block and then another one it
was bound to run anyway should run them as one kernel. `merge-blocks` does that when the second
block has no other predecessor; this pass duplicates a SMALL block into a predecessor and keeps
the original for the other predecessors:

* `stack.goto ^s`: `^s`'s ops (terminator included) are appended in place of the jump. With a
  loop whose header only computes the condition and branches, this is loop rotation: the body
  ends in `goto ^header`, absorbs the header and branches straight back to itself (the header
  still runs once on entry, or is absorbed by the entry's jump too).
* `stack.push_goto ^r, ^e` (a call of a known block) absorbs the callee's entry `^e` when `^e`
  ends in
  - `stack.goto ^g`: the result ends in `stack.push_goto ^r, ^g`;
  - `stack.indirect_goto` (the callee returns at once): the result ends in `stack.goto ^r`;
  - `stack.branch @c, ^a, ^b`: the result branches on `@c` to, per arm `^x`, a copy of `^x`
    ending in `stack.goto ^r` when `^x` is a small block that returns (a leaf: one step, where it
    took the entry block plus the leaf before), or else a trampoline `stack.push_goto ^r, ^x`
    (the same step count as before on that path). Done only when at least one arm is a leaf.
    (The vm has no "push a return block without jumping", so this is how the entry test of a
    recursive function moves into its call sites.)

Limits: a duplicated block has at most `MAX_DUP_OPS` ops besides its terminator, no opaque prim
(possibly costly, and duplicates would split the members running it over several steps), and
does not end in a call (`stack.push_goto`: duplicating calls would multiply the call's
continuation states); a block never absorbs itself nor the same original block twice (so
cycles of jumps terminate), and a block stops absorbing at `MAX_FUSED_OPS` ops. The program
entry block is left alone (it stays the program's own call of the entry function). Blocks no
longer reachable from the program entry are erased.

Duplication puts a branch after the code that decides it: a loop exit that sets `ok = False`
absorbs the test `if not ok` after the loop. After each round of absorption, a branch whose
boolean condition holds the same value on every path into its block (a forward dataflow of the
booleans that `stack.constant`, `stack.write` and boolean prims compute, `KnownBooleans`) becomes
a jump to the arm taken (jump threading), the arm is merged into the block when nothing else
enters it any more, and absorption goes on from there. Facts flow along
jumps and branches only: the program entry, a callee's entry and a call's return block start
with nothing known, and a value popped or computed otherwise is unknown.

A block that absorbs a callee's entry keeps the call's attributes (`function`, `abir.loc`: a
member standing there is making that call, so an error names the call's line); a jump's
absorbed block brings its own (the loop header, for a rotated loop).

Run it after `stack-optimize` (whose save analysis wants the plain call structure) and before
`allocate-storage` (more variables become temporaries of one kernel); `lower_to_vm` runs it on
the allocated stack program and then allocates storage again.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from abir import prims
from abir.dialects import stack
from abir.passes.analysis import CALL_LOCATION_ATTR, predecessors, reads_writes, the_program
from abir.passes.schedule_blocks import absorb_jump_target, references

MAX_DUP_OPS = 8
"""The most ops (terminator excluded) a block may have to be duplicated into a predecessor."""

MAX_FUSED_OPS = 64
"""A block stops absorbing successors once it would exceed this many ops."""


BOOLEAN_PRIMS = {
    "logical_not": lambda a: not a,
    "bitwise_invert": lambda a: not a,
    "logical_and": lambda a, b: a and b,
    "bitwise_and": lambda a, b: a and b,
    "logical_or": lambda a, b: a or b,
    "bitwise_or": lambda a, b: a or b,
    "logical_xor": lambda a, b: a != b,
    "bitwise_xor": lambda a, b: a != b,
    "not_equal": lambda a, b: a != b,
    "equal": lambda a, b: a == b,
}
"""The prims whose result `KnownBooleans` computes when every input is a known boolean."""

Facts = dict[str, bool]
"""Boolean variables -> the value each holds (variables absent: unknown)."""


def boolean_constant(op: stack.ConstantOp) -> bool | None:
    value = op.value
    if isinstance(value, IntegerAttr) and value.type == IntegerType(1):
        return bool(value.value.data)
    return None


def facts_after(op: Operation, facts: Facts) -> Facts:
    """The known booleans after `op`, from those before it."""
    reads, writes = reads_writes(op)
    known = [facts.get(name) for name in reads]
    after = {name: value for name, value in facts.items() if name not in writes}
    match op:
        case stack.ConstantOp():
            value = boolean_constant(op)
            if value is not None:
                after[writes[0]] = value
        case stack.WriteOp():
            after.update(
                {target: value for target, value in zip(writes, known, strict=True) if value is not None}
            )
        case stack.PrimOp() if op.prim_name in BOOLEAN_PRIMS and len(writes) == 1 and None not in known:
            after[writes[0]] = BOOLEAN_PRIMS[op.prim_name](*known)
        case _:
            pass
    return after


def facts_at_end(block: Block, facts: Facts) -> Facts:
    """The known booleans before `block`'s terminator, from those at its start."""
    for op in body_ops(block):
        facts = facts_after(op, facts)
    return facts


class KnownBooleans:
    """The booleans known at each block's start: the meet (values agreeing on every path) over
    the jumps and branches into it, nothing at the program entry, a callee's entry or a call's
    return block (a return comes from code this analysis does not follow)."""

    def __init__(self, program: stack.ProgramOp):
        blocks = list(program.body.blocks)
        jump_preds = predecessors(blocks, jump_successors)
        unknown_start = {blocks[0]} | {
            target for block in blocks if isinstance(term := block.last_op, stack.PushGotoOp)
            for target in (term.dest, term.return_dest)
        }  # fmt: skip
        self.at_start: dict[Block, Facts | None] = {b: ({} if b in unknown_start else None) for b in blocks}
        changed = True
        while changed:
            changed = False
            for block in blocks:
                if block in unknown_start:
                    continue
                incoming = [self.at_end(pred) for pred in jump_preds[block]]
                met = meet([facts for facts in incoming if facts is not None])
                if met != self.at_start[block]:
                    self.at_start[block] = met
                    changed = True

    def at_end(self, block: Block) -> Facts | None:
        """The known booleans before `block`'s terminator (None: no path reaches it yet)."""
        start = self.at_start.get(block, {})
        return None if start is None else facts_at_end(block, start)


def jump_successors(block: Block) -> list[Block]:
    term = block.last_op
    return list(term.successors) if isinstance(term, stack.GotoOp | stack.BranchOp) else []


def meet(incoming: list[Facts]) -> Facts | None:
    if not incoming:
        return None
    first, *rest = incoming
    return {name: value for name, value in first.items() if all(facts.get(name) == value for facts in rest)}


def body_ops(block: Block) -> list[Operation]:
    return list(block.ops)[:-1]


def small(block: Block) -> bool:
    body = body_ops(block)
    return len(body) <= MAX_DUP_OPS and not any(
        isinstance(op, stack.PrimOp) and not prims.is_builtin(op.prim_name) for op in body
    )


def copy_attrs(source: Operation, target: Operation) -> Operation:
    target.attributes.update(source.attributes)
    return target


def copy_call_attrs(call: Operation, target: Operation) -> Operation:
    """`target` (the end of a call site that absorbed the callee's entry) with the call's
    attributes; the call's own location only on a terminator that still pushes."""
    copy_attrs(call, target)
    if not isinstance(target, stack.PushGotoOp):
        target.attributes.pop(CALL_LOCATION_ATTR, None)
    return target


class Fuser:
    def __init__(self, program: stack.ProgramOp):
        self.program = program
        self.entry = program.body.blocks.first
        self.absorbed: dict[Block, set[Block]] = {}
        self.copies: dict[tuple[Block, Block], Block] = {}

    def can_absorb(self, into: Block, block: Block) -> bool:
        return (
            block is not into
            and block is not self.entry
            and block not in self.absorbed.get(into, set())
            and small(block)
            and len(into.ops) + len(block.ops) <= MAX_FUSED_OPS + 1
        )

    def append(self, into: Block, source: Block, terminator: Operation) -> None:
        """Replace `into`'s terminator by `source`'s body followed by `terminator`."""
        old = into.last_op
        assert old is not None
        old.detach()
        old.erase()
        for op in body_ops(source):
            into.add_op(op.clone())
        into.add_op(terminator)
        self.absorbed.setdefault(into, set()).update({source, *self.absorbed.get(source, set())})

    def add_block(self, block: Block, after: Block) -> Block:
        self.program.body.insert_block_after(block, after)
        return block

    def returning_arm(self, arm: Block, ret: Block, near: Block) -> Block | None:
        """A copy of the small returning block `arm` that jumps to `ret` instead (cached)."""
        key = (arm, ret)
        if key in self.copies and self.copies[key].parent is not None:
            return self.copies[key]
        term = arm.last_op
        if arm is self.entry or not isinstance(term, stack.IndirectGotoOp) or not small(arm):
            return None
        copy = Block()
        for op in body_ops(arm):
            copy.add_op(op.clone())
        copy.add_op(copy_attrs(term, stack.GotoOp(ret)))
        self.copies[key] = self.add_block(copy, near)
        return copy

    def trampoline(self, arm: Block, ret: Block, call: Operation, near: Block, callee: Block) -> Block:
        """A block calling `arm` with return block `ret` (cached). It counts as having absorbed
        what `near` has and `callee` (whose entry test `near` absorbs), and `arm` too when `arm`
        holds a copy of that entry test (`near` itself, in `return n > 0 and f(n - 1)`): the
        trampoline would otherwise absorb it, make the next trampoline, and so on, unrolling
        the recursion until the budget runs out (244 stack blocks from 7)."""
        key = (ret, arm)  # distinct from returning_arm keys: (arm, ret) vs (ret, arm) orders
        if key in self.copies and self.copies[key].parent is not None:
            return self.copies[key]
        block = Block()
        block.add_op(copy_attrs(call, stack.PushGotoOp(ret, arm)))
        self.absorbed[block] = {callee, *self.absorbed.get(near, set())}
        if arm is near or callee in self.absorbed.get(arm, set()):
            self.absorbed[block].add(arm)
        self.copies[key] = self.add_block(block, near)
        return block

    def fuse(self, block: Block) -> bool:
        if block is self.entry:  # the program's own entry call stays (block 0 runs no user code)
            return False
        term = block.last_op
        if isinstance(term, stack.GotoOp):
            succ = term.dest
            if not self.can_absorb(block, succ) or isinstance(succ.last_op, stack.PushGotoOp):
                return False
            succ_term = succ.last_op
            assert succ_term is not None
            self.append(block, succ, succ_term.clone())
            return True
        if isinstance(term, stack.PushGotoOp):
            callee, ret = term.dest, term.return_dest
            if not self.can_absorb(block, callee):
                return False
            callee_term = callee.last_op
            match callee_term:
                case stack.GotoOp():
                    new: Operation = copy_call_attrs(term, stack.PushGotoOp(ret, callee_term.dest))
                case stack.IndirectGotoOp():
                    new = copy_call_attrs(term, stack.GotoOp(ret))
                case stack.BranchOp():
                    arms = [callee_term.then_dest, callee_term.else_dest]
                    leaves = [self.returning_arm(arm, ret, block) for arm in arms]
                    if all(leaf is None for leaf in leaves):
                        return False
                    then_b, else_b = (
                        leaf if leaf is not None else self.trampoline(arm, ret, term, block, callee)
                        for arm, leaf in zip(arms, leaves, strict=True)
                    )
                    new = copy_call_attrs(term, stack.BranchOp(callee_term.cond, then_b, else_b))
                case _:
                    return False
            self.append(block, callee, new)
            return True
        return False

    def drop_unreachable(self) -> None:
        """Erase the blocks no path from the program entry reaches (return blocks count)."""
        assert self.entry is not None
        seen = {self.entry}
        todo = [self.entry]
        while todo:
            term = todo.pop().last_op
            for succ in term.successors if term is not None else ():
                if succ not in seen:
                    seen.add(succ)
                    todo.append(succ)
        for block in list(self.program.body.blocks):
            if block not in seen:
                for op in reversed(list(block.ops)):
                    op.detach()
                    op.erase(safe_erase=False)
        for block in list(self.program.body.blocks):
            if block not in seen:
                self.program.body.erase_block(block, safe_erase=False)

    def thread_known_branches(self) -> bool:
        """Replace each branch whose condition is known on every path into its block by a jump
        to the arm taken, and merge that arm into the block when nothing else enters it any
        more; whether any branch was replaced."""
        known = KnownBooleans(self.program)
        threaded: list[Block] = []
        for block in list(self.program.body.blocks):
            term = block.last_op
            facts = known.at_end(block)
            if not isinstance(term, stack.BranchOp) or facts is None:
                continue
            value = facts.get(term.cond.string_value())
            if value is None:
                continue
            taken = term.then_dest if value else term.else_dest
            Rewriter.replace_op(term, copy_attrs(term, stack.GotoOp(taken)))
            threaded.append(block)
        self.drop_unreachable()
        for block in threaded:
            self.merge_only_entry(block)
        return bool(threaded)

    def merge_only_entry(self, block: Block) -> None:
        """Append the target of `block`'s jump to it when no other block refers to the target."""
        if block.parent is None:
            return
        target = absorb_jump_target(self.program, block, references(self.program))
        if target is not None:
            self.absorbed.setdefault(block, set()).update({target, *self.absorbed.get(target, set())})

    def run(self) -> None:
        budget = 20 * len(self.program.body.blocks) + 100
        changed = True
        while changed and budget > 0:
            changed = False
            for block in list(self.program.body.blocks):
                if block.parent is not None and budget > 0 and self.fuse(block):
                    changed = True
                    budget -= 1
            self.drop_unreachable()
            if self.thread_known_branches():
                changed = True


def fuse_blocks(module: ModuleOp) -> None:
    """Tail-duplicate small blocks into jumping and calling predecessors, in place."""
    Fuser(the_program(module)).run()


@dataclass(frozen=True)
class FuseBlocksPass(ModulePass):
    """Duplicate small successor blocks into predecessors ending in goto or a known call."""

    name = "fuse-blocks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fuse_blocks(op)
