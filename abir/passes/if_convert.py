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

A `cf.cond_br` whose arms are both such blocks ending in `functional.return` (`if c: return x`
then `return y`) becomes the arms' code, the returned values selected with `where`, and one
`functional.return` (`ConvertReturningArms`): a chain of `if ...: return` cases, such as an
expression evaluator's one case per operator, becomes one block.

The pass also merges a block into its only predecessor when that predecessor ends in `cf.br` to
it (block arguments replaced by the passed values), so converted diamonds become one block and
nested `if`s convert from the inside out. All are xDSL rewrite patterns (`MergeBranchChain` on
`cf.br`, `ConvertDiamond` and `ConvertReturningArms` on `cf.cond_br`) that a `PatternRewriteWalker` applies to a fixed
point; run `simplify-functional` afterwards to CSE the constants the arms brought along.

What stays a branch is then threaded (`thread_branches`): a block whose only op is `cf.cond_br`
(the join of a short-circuit `a or b` / `a and b` that could not be converted, branching on the
value either side passed) is skipped by the edges into it. A `cf.br` to it becomes a copy of
its `cf.cond_br`, its arguments replaced by the passed values; an arm of a `cf.cond_br` that
passes a value known on that arm (the branch's own condition, true on the then-arm and false on
the else-arm, or an `i1` constant) goes straight to the target that value picks. `if divergent
or turned(...)` in a loop thus branches from the test of `divergent` to the loop's exit and from
`turned` to the exit or the loop's next test, without a join block that both paths run: on the
machine, one block run less per iteration, and a loop test that only its loop leads to.

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
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.rewriter import InsertPoint, Rewriter
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


def function_region(block: Block) -> Region | None:
    """The body of the `functional.func` that `block` belongs to (None elsewhere)."""
    region = block.parent_region()
    return region if region is not None and isinstance(region.parent_op(), functional.FuncOp) else None


def arm_ok(arm: Block, head: Block, ends: type[cf.BranchOp] | type[functional.ReturnOp] = cf.BranchOp) -> bool:
    """A block that can be speculated into `head`: only reached from it, pure, small, ending in
    `ends` (a `cf.br`, or a return for `ConvertReturningArms`)."""
    if arm is head or predecessors(arm) != [head] or not isinstance(arm.last_op, ends):
        return False
    body = list(arm.ops)[:-1]
    if not all(is_speculatable(op) for op in body):
        return False
    return sum(isinstance(op, functional.PrimOp) for op in body) <= MAX_ARM_OPS


def inline_arm(
    arm: Block, args: Sequence[SSAValue], before: cf.ConditionalBranchOp, rewriter: PatternRewriter
) -> list[SSAValue]:
    """Move `arm`'s ops (its `cf.br` or return left out) before `before` and erase it; the
    values it passed to its successor or returned."""
    for block_arg, value in zip(arm.args, args, strict=True):
        rewriter.replace_all_uses_with(block_arg, value)
    term = arm.last_op
    assert isinstance(term, cf.BranchOp | functional.ReturnOp)
    passed = list(term.arguments)
    rewriter.erase_op(term)
    rewriter.inline_block(arm, InsertPoint.before(before))
    return passed


def find_join(term: cf.ConditionalBranchOp) -> tuple[Block, bool, bool] | None:
    """The block both paths of `term` rejoin at, and which arms are speculated into its block
    (a triangle has one); None when `term` heads no convertible diamond or triangle."""
    head = term.parent_block()
    assert head is not None
    then_b, else_b = term.then_block, term.else_block
    if then_b is else_b:
        return None
    then_arm, else_arm = arm_ok(then_b, head), arm_ok(else_b, head)
    join: Block | None = None
    if then_arm and else_arm and then_b.last_op.successor is else_b.last_op.successor:  # type: ignore[union-attr]
        join = then_b.last_op.successor  # type: ignore[union-attr]
    elif then_arm and then_b.last_op.successor is else_b:  # type: ignore[union-attr]
        join, else_arm = else_b, False
    elif else_arm and else_b.last_op.successor is then_b:  # type: ignore[union-attr]
        join, then_arm = then_b, False
    if join is None or join is head or join is then_b and then_arm or join is else_b and else_arm:
        return None
    return join, then_arm, else_arm


class ConvertDiamond(RewritePattern):
    """A `cf.cond_br` heading a small pure diamond or triangle becomes the arms' code, `where`
    selects of the values they pass and a `cf.br` to the join (module docstring)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.ConditionalBranchOp, rewriter: PatternRewriter) -> None:
        if function_region(op.parent_block()) is None or (found := find_join(op)) is None:  # type: ignore[arg-type]
            return
        join, then_arm, else_arm = found
        then_b, else_b = op.then_block, op.else_block
        then_vals = inline_arm(then_b, list(op.then_arguments), op, rewriter) if then_arm else list(op.then_arguments)
        else_vals = inline_arm(else_b, list(op.else_arguments), op, rewriter) if else_arm else list(op.else_arguments)
        jump = cf.BranchOp(join, *selected_values(op.cond, then_vals, else_vals, op, rewriter))
        jump.attributes.update(op.attributes)  # `abir.loc`
        rewriter.replace_op(op, jump)


def selected_values(
    cond: SSAValue, then_vals: Sequence[SSAValue], else_vals: Sequence[SSAValue], before: Operation, rewriter: PatternRewriter
) -> list[SSAValue]:
    """Per pair of values, `then` where `cond` holds else `else` (`where`, inserted before
    `before`; the value itself when both are the same)."""
    selected: list[SSAValue] = []
    for a, b in zip(then_vals, else_vals, strict=True):
        if a is b:
            selected.append(a)
            continue
        where = functional.PrimOp("where", [cond, a, b], [a.type])
        rewriter.insert_op(where, InsertPoint.before(before))
        selected.append(where.res[0])
    return selected


class ConvertReturningArms(RewritePattern):
    """A `cf.cond_br` whose two arms are small pure blocks that each return (`if c: return x`
    then `return y`) becomes both arms' code, `where` selects of the returned values and one
    return. On a machine that runs members block by block, each arm would be a block of its
    own, one more block run per call for the members taking it."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.ConditionalBranchOp, rewriter: PatternRewriter) -> None:
        head = op.parent_block()
        assert head is not None
        then_b, else_b = op.then_block, op.else_block
        if function_region(head) is None or then_b is else_b:
            return
        if not (arm_ok(then_b, head, functional.ReturnOp) and arm_ok(else_b, head, functional.ReturnOp)):
            return
        then_vals = inline_arm(then_b, list(op.then_arguments), op, rewriter)
        else_vals = inline_arm(else_b, list(op.else_arguments), op, rewriter)
        done = functional.ReturnOp(*selected_values(op.cond, then_vals, else_vals, op, rewriter))
        done.attributes.update(op.attributes)  # `abir.loc`
        rewriter.replace_op(op, done)


class MergeBranchChain(RewritePattern):
    """A `cf.br` to a block (not the entry) whose only predecessor it is becomes that block's
    ops, its arguments replaced by the values passed."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: cf.BranchOp, rewriter: PatternRewriter) -> None:
        block, succ = op.parent_block(), op.successor
        assert block is not None
        region = function_region(block)
        if region is None or succ is block or succ is region.blocks.first or predecessors(succ) != [block]:
            return
        passed = tuple(op.arguments)
        rewriter.erase_op(op)
        rewriter.inline_block(succ, InsertPoint.at_end(block), passed)


def branch_only(block: Block) -> cf.ConditionalBranchOp | None:
    """`block`'s `cf.cond_br` when that is its only op and `block` is not its function's entry."""
    term = block.first_op
    region = function_region(block)
    if not isinstance(term, cf.ConditionalBranchOp) or region is None or block is region.blocks.first:
        return None
    return term


def known_condition(edge_source: Operation, successor_index: int, value: SSAValue) -> bool | None:
    """What `value`, passed along successor `successor_index` of `edge_source`, is known to be
    there: a `cf.cond_br`'s own condition (true on its then-arm, false on its else-arm), an `i1`
    constant; else None."""
    if isinstance(edge_source, cf.ConditionalBranchOp) and value is edge_source.cond:
        return successor_index == 0
    owner = value.owner
    if isinstance(owner, functional.ConstantOp) and owner.res.type == IntegerType(1):
        constant = owner.value
        if isinstance(constant, IntegerAttr):
            return constant.value.data != 0
    return None


def jumped_past(join: cf.ConditionalBranchOp, passed: Sequence[SSAValue], take_then: bool) -> tuple[Block, list[SSAValue]]:
    """Where an edge into `join`'s block passing `passed` continues when `join` takes its
    then-arm (`take_then`) or else-arm: the target and its arguments in the edge's values."""
    block = join.parent_block()
    assert block is not None
    values = dict(zip(block.args, passed, strict=True))
    target, arguments = (join.then_block, join.then_arguments) if take_then else (join.else_block, join.else_arguments)
    return target, [values.get(argument, argument) for argument in arguments]


def thread_jump(op: cf.BranchOp) -> bool:
    """`cf.br` to a branch-only block (not its own) becomes a copy of that block's branch."""
    join = branch_only(op.successor)
    if join is None or op.successor is op.parent_block():
        return False
    passed = list(op.arguments)
    then_block, then_args = jumped_past(join, passed, True)
    else_block, else_args = jumped_past(join, passed, False)
    values = dict(zip(op.successor.args, passed, strict=True))
    branch = cf.ConditionalBranchOp(values.get(join.cond, join.cond), then_block, then_args, else_block, else_args)
    branch.attributes.update(join.attributes)  # `abir.loc`: the join's `if`
    Rewriter.replace_op(op, branch)
    return True


def thread_known_arm(op: cf.ConditionalBranchOp) -> bool:
    """An arm of `op` into a branch-only block whose condition that arm passes a known value of
    goes to the target that value picks (not back to the branch-only block itself)."""
    arms = [(op.then_block, list(op.then_arguments)), (op.else_block, list(op.else_arguments))]
    for index, (target, passed) in enumerate(arms):
        join = branch_only(target)
        if join is None or target is op.parent_block():
            continue
        values = dict(zip(target.args, passed, strict=True))
        known = known_condition(op, index, values.get(join.cond, join.cond))
        if known is None:
            continue
        new_target, new_args = jumped_past(join, passed, known)
        if new_target is target:
            continue
        arms[index] = (new_target, new_args)
        (then_block, then_args), (else_block, else_args) = arms
        branch = cf.ConditionalBranchOp(op.cond, then_block, then_args, else_block, else_args)
        branch.attributes.update(op.attributes)
        Rewriter.replace_op(op, branch)
        return True
    return False


def erase_unreachable_joins(region: Region) -> None:
    """Erase the branch-only blocks no edge leads to any more."""
    for block in list(region.blocks):
        if block is not region.blocks.first and not predecessors(block) and branch_only(block) is not None:
            term = block.last_op
            assert term is not None
            term.detach()
            term.erase()
            region.erase_block(block)


THREADING_BUDGET_PER_BLOCK = 4
"""At most this many edges threaded per block of a function: a cycle of branch-only blocks whose
values are known (a loop that runs no op, forever) would otherwise be threaded without end."""


def thread_branches(module: ModuleOp) -> bool:
    """Thread every edge into a branch-only block (module docstring) of every function of
    `module`, in place; whether anything changed."""
    changed = False
    for func in module.walk():
        if not isinstance(func, functional.FuncOp):
            continue
        region = func.body
        budget = THREADING_BUDGET_PER_BLOCK * len(region.blocks)
        progress = True
        while progress and budget > 0:
            progress = False
            for block in list(region.blocks):
                term = block.last_op
                if block.parent is None or budget <= 0:
                    continue
                threaded = (isinstance(term, cf.BranchOp) and thread_jump(term)) or (
                    isinstance(term, cf.ConditionalBranchOp) and thread_known_arm(term)
                )
                if threaded:
                    progress = changed = True
                    budget -= 1
            erase_unreachable_joins(region)
    return changed


def if_convert(module: ModuleOp) -> None:
    """If-convert (and merge straight-line chains in) every function of `module`, then thread
    the branches that stay (and convert what that makes convertible), in place."""
    patterns = GreedyRewritePatternApplier(
        [MergeBranchChain(), ConvertDiamond(), ConvertReturningArms()], dce_enabled=False
    )
    PatternRewriteWalker(patterns, apply_recursively=True).rewrite_module(module)
    if thread_branches(module):
        PatternRewriteWalker(patterns, apply_recursively=True).rewrite_module(module)


@dataclass(frozen=True)
class IfConvertPass(ModulePass):
    """Turn small pure if/else diamonds and triangles into `where` selects; merge block chains;
    thread edges past blocks that only branch."""

    name = "if-convert"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if_convert(op)
