"""`simplify-functional`: canonicalization, constant folding, CSE and DCE for typed functional IR.

xDSL's own `cse`/`dce` only touch ops with the `Pure` trait, which `functional.prim` lacks (an
opaque callable need not be pure), so this pass treats builtin prims and constants as pure itself:

* `astype` to the operand's own type is dropped;
* a builtin prim whose operands are all scalar constants is folded by NumPy into a constant;
* within a block, a constant or builtin prim equal to an earlier one (same name, operands,
  value and types) reuses the earlier result (CSE);
* unused constants and builtin prims are erased (DCE). Opaque prims and calls are kept;
* xDSL's `canonicalize` runs too (its `cf` patterns forward pass-through blocks, merge identical
  successors, turns value-only diamonds into `arith.select`, which becomes `where`; its region
  DCE drops unreachable blocks and unused constants).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp
from xdsl.ir import Attribute, Block, Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.transforms.canonicalize import CanonicalizePass

from abir import prims
from abir.dialects import functional
from abir.passes.infer_types import scalar_of
from abir.types import is_value_type, tensor_type_of


def is_pure(op: Operation) -> bool:
    return isinstance(op, functional.ConstantOp) or isinstance(op, functional.PrimOp) and op.is_builtin


@dataclass
class DropIdentityAstype(RewritePattern):
    """`astype` to the type its operand already has is the operand itself."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: functional.PrimOp, rewriter: PatternRewriter) -> None:
        if op.prim_name == "astype" and op.is_builtin and op.arguments[0].type == op.res[0].type:
            rewriter.replace(op, [], new_results=[op.arguments[0]])


def constant_attr(value: Any, type: Attribute) -> Attribute | None:
    dtype = tensor_type_of(type).dtype
    if dtype.kind == "f":
        return FloatAttr(float(value), type)
    if dtype.kind in "iub":
        return IntegerAttr(int(value), type)
    return None


@dataclass
class FoldConstantPrim(RewritePattern):
    """A builtin prim of scalar constants is computed now (with NumPy's exact semantics)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: functional.PrimOp, rewriter: PatternRewriter) -> None:
        if not op.is_builtin or not is_value_type(op.res[0].type) or tensor_type_of(op.res[0].type).shape:
            return
        owners = [v.owner for v in op.arguments]
        if not all(isinstance(o, functional.ConstantOp) and o.weak is None for o in owners):
            return
        values = [scalar_of(o.value) for o in owners]  # type: ignore[union-attr]
        if any(v is None for v in values):
            return
        args = [np.array(v, tensor_type_of(a.type).dtype) for v, a in zip(values, op.arguments, strict=True)]
        result_dtype = tensor_type_of(op.res[0].type).dtype
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = np.asarray(prims.apply_numpy(op.prim_name, args, result_dtype))
        if out.dtype != result_dtype or (attr := constant_attr(out.item(), op.res[0].type)) is None:
            return
        rewriter.replace(op, functional.ConstantOp(attr))


@dataclass
class SelectToWhere(RewritePattern):
    """xDSL's cf canonicalization turns value-only diamonds into `arith.select`: use `where`."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.SelectOp, rewriter: PatternRewriter) -> None:
        rewriter.replace(op, functional.PrimOp("where", [op.cond, op.lhs, op.rhs], [op.result.type]))


@dataclass
class ArithConstantToFunctional(RewritePattern):
    """Constants the cf patterns materialize (`arith.constant true`) become functional ones."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: arith.ConstantOp, rewriter: PatternRewriter) -> None:
        if is_value_type(op.result.type):
            rewriter.replace(op, functional.ConstantOp(op.value))


def cse_key(op: Operation) -> tuple[Any, ...] | None:
    if isinstance(op, functional.ConstantOp):
        return ("constant", op.value, op.weak is not None)
    if isinstance(op, functional.PrimOp) and op.is_builtin:
        return ("prim", op.prim_name, tuple(op.arguments), tuple(op.res.types))
    return None


def cse_block(block: Block) -> None:
    seen: dict[tuple[Any, ...], Operation] = {}
    for op in list(block.ops):
        if (key := cse_key(op)) is None:
            continue
        if (earlier := seen.get(key)) is None:
            seen[key] = op
            continue
        for old, new in zip(op.results, earlier.results, strict=True):
            old.replace_all_uses_with(new)
        op.detach()
        op.erase()


def dce(module: ModuleOp) -> None:
    changed = True
    while changed:
        changed = False
        for op in list(module.walk()):
            if is_pure(op) and all(not r.uses for r in op.results):
                op.detach()
                op.erase()
                changed = True


def simplify_functional(module: ModuleOp) -> None:
    """Canonicalize, fold, CSE and DCE a functional module in place."""
    CanonicalizePass().apply(Context(), module)  # xDSL's cf patterns: pass-through blocks, ...
    patterns = [SelectToWhere(), ArithConstantToFunctional(), DropIdentityAstype(), FoldConstantPrim()]
    PatternRewriteWalker(GreedyRewritePatternApplier(patterns), apply_recursively=True).rewrite_module(module)
    for func in module.ops:
        if isinstance(func, functional.FuncOp):
            for block in func.body.blocks:
                cse_block(block)
    dce(module)


@dataclass(frozen=True)
class SimplifyFunctionalPass(ModulePass):
    """Drop identity astype, fold constant prims, CSE within blocks and DCE pure ops."""

    name = "simplify-functional"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        simplify_functional(op)
