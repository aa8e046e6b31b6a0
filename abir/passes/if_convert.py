"""`if-convert`: small branches of typed functional IR become straight-line code with `where`.

A `cf.cond_br %c, ^t, ^f` whose arms are small straight-line blocks that rejoin at one block
`^j` is replaced by the arms' code followed by `cf.br ^j(...)`, each argument of `^j` selected
with `functional.prim "where"(%c, from_then, from_else)` (no `where` when both paths pass the
same value). An arm qualifies when

* it is a block whose only predecessor is the branch (then/else distinct), ending in `cf.br ^j`,
  holding only speculatable ops (xDSL's `is_speculatable`: constants, builtin elementwise and
  array prims; no calls, no opaque prims: those may be costly or impure), at most
  `MAX_ARM_OPS` prims (constants are free), or
* it is `^j` itself (a triangle: `if` without `else`, the edge's arguments are the values).

Both arms then run for every member (speculation). That is safe for builtin and array prims
(`functional.PrimSpeculatable`): the machine already evaluates every prim on junk in inactive
rows, per-member indices are clipped, and backends suppress floating-point
warnings and give NumPy's result for integer division by zero. The size limit bounds the wasted
work: the machine pays a fixed overhead per step (tens of microseconds), far more than a few
elementwise prims, so trading a step (a then/else arm plus the join) for up to `MAX_ARM_OPS`
speculated prims per arm is a clear win.

The pass also merges a block into its only predecessor when that predecessor ends in `cf.br` to
it (block arguments replaced by the passed values), so converted diamonds become one block and
nested `if`s convert from the inside out. It iterates to a fixed point; run
`simplify-functional` afterwards to CSE the constants the arms brought along.

Before:                                          After:
    cf.cond_br %c, ^t, ^f                            %a = functional.prim "add"(%x, %one)
  ^t:                                                %b = functional.prim "subtract"(%x, %one)
    %a = functional.prim "add"(%x, %one)             %v = functional.prim "where"(%c, %a, %b)
    cf.br ^j(%a : i64)                               cf.br ^j(%v : i64)
  ^f:
    %b = functional.prim "subtract"(%x, %one)
    cf.br ^j(%b : i64)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import cf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import is_speculatable

from abir.dialects import functional

MAX_ARM_OPS = 16
"""The most prims (constants not counted) one speculated arm may hold."""


def predecessors(block: Block) -> list[Block]:
    """The blocks whose terminator names `block`, once per successor slot."""
    preds: list[Block] = []
    for use in block.uses:
        owner = use.operation
        if owner.parent_block() is not None:
            preds.append(owner.parent_block())  # type: ignore[arg-type]
    return preds


def arm_ok(arm: Block, head: Block) -> bool:
    """A block that can be speculated into `head`: only reached from it, pure, small, `cf.br`."""
    if arm is head or predecessors(arm) != [head] or not isinstance(arm.last_op, cf.BranchOp):
        return False
    body = list(arm.ops)[:-1]
    if not all(is_speculatable(op) for op in body):
        return False
    return sum(isinstance(op, functional.PrimOp) for op in body) <= MAX_ARM_OPS


def inline_arm(
    arm: Block, args: Sequence[SSAValue], head: Block, before: cf.ConditionalBranchOp
) -> list[SSAValue]:
    """Move `arm`'s ops before `before` in `head`; the values it passes to its successor."""
    for block_arg, value in zip(arm.args, args, strict=True):
        block_arg.replace_all_uses_with(value)
    term = arm.last_op
    assert isinstance(term, cf.BranchOp)
    passed = list(term.arguments)
    for op in list(arm.ops)[:-1]:
        op.detach()
        head.insert_op_before(op, before)
    return passed


def convert_one(head: Block) -> bool:
    term = head.last_op
    if not isinstance(term, cf.ConditionalBranchOp):
        return False
    then_b, else_b = term.then_block, term.else_block
    if then_b is else_b:
        return False
    then_arm, else_arm = arm_ok(then_b, head), arm_ok(else_b, head)
    join: Block | None = None
    if then_arm and else_arm and then_b.last_op.successor is else_b.last_op.successor:  # type: ignore[union-attr]
        join = then_b.last_op.successor  # type: ignore[union-attr]
    elif then_arm and then_b.last_op.successor is else_b:  # type: ignore[union-attr]
        join, else_arm = else_b, False
    elif else_arm and else_b.last_op.successor is then_b:  # type: ignore[union-attr]
        join, then_arm = then_b, False
    if join is None or join is head or join is then_b and then_arm or join is else_b and else_arm:
        return False
    cond = term.cond
    then_vals = (
        inline_arm(then_b, list(term.then_arguments), head, term) if then_arm else list(term.then_arguments)
    )
    else_vals = (
        inline_arm(else_b, list(term.else_arguments), head, term) if else_arm else list(term.else_arguments)
    )
    selected: list[SSAValue] = []
    for a, b, join_arg in zip(then_vals, else_vals, join.args, strict=True):
        if a is b:
            selected.append(a)
            continue
        where = functional.PrimOp("where", [cond, a, b], [join_arg.type])
        head.insert_op_before(where, term)
        selected.append(where.res[0])
    jump = cf.BranchOp(join, *selected)
    jump.attributes.update(term.attributes)  # `abir.loc`
    term.detach()
    term.erase()
    head.add_op(jump)
    region = head.parent_region()
    assert region is not None
    for arm, converted in ((then_b, then_arm), (else_b, else_arm)):
        if converted:
            region.erase_block(arm)
    return True


def merge_one(block: Block) -> bool:
    """Append the successor of `block`'s `cf.br` when `block` is its only predecessor."""
    term = block.last_op
    if not isinstance(term, cf.BranchOp):
        return False
    succ = term.successor
    region = block.parent_region()
    assert region is not None
    if succ is block or succ is region.blocks.first or predecessors(succ) != [block]:
        return False
    for block_arg, value in zip(succ.args, list(term.arguments), strict=True):
        block_arg.replace_all_uses_with(value)
    term.detach()
    term.erase()
    for op in list(succ.ops):
        op.detach()
        block.add_op(op)
    region.erase_block(succ)
    return True


def if_convert_function(func: functional.FuncOp) -> None:
    changed = True
    while changed:
        changed = False
        for block in list(func.body.blocks):
            if block.parent is None:
                continue
            if merge_one(block) or convert_one(block):
                changed = True
                break


def if_convert(module: ModuleOp) -> None:
    """If-convert (and merge straight-line chains in) every function of `module`, in place."""
    for op in module.ops:
        if isinstance(op, functional.FuncOp):
            if_convert_function(op)


@dataclass(frozen=True)
class IfConvertPass(ModulePass):
    """Turn small pure if/else diamonds and triangles into `where` selects; merge block chains."""

    name = "if-convert"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if_convert(op)
