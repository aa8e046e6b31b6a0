"""`simplify-functional`: canonicalization, constant folding, CSE and DCE for typed functional IR.

The ops say what may be merged or dropped: constants are `Pure` and `ConstantLike`, builtin and
array prims have no memory effects (`functional.PrimEffects`), opaque prims and calls have
unknown ones. So xDSL's own passes do the work:

* `astype` to the operand's own type is dropped;
* a builtin prim whose operands are all scalar constants is folded by NumPy into a constant;
* xDSL's `cse`, block by block (it skips regions of several blocks): a constant or prim without
  effects equal to an earlier one of the block (same name, properties, attributes, operands and
  types) reuses the earlier result;
* xDSL's `dce`: unused ops without effects are erased; opaque prims and calls are kept;
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
from xdsl.ir import Attribute, Block
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)
from xdsl.transforms.canonicalize import CanonicalizePass
from xdsl.transforms.common_subexpression_elimination import cse
from xdsl.transforms.dead_code_elimination import dce

from abir import prims
from abir.dialects import functional
from abir.passes.analysis import LOCATION_ATTR
from abir.passes.type_lattice import scalar_of
from abir.types import is_value_type, tensor_type_of


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


def simplify_functional(module: ModuleOp) -> None:
    """Canonicalize, fold, CSE and DCE a functional module in place."""
    locations = {
        block: term.attributes[LOCATION_ATTR]
        for block in _blocks(module)
        if (term := block.last_op) is not None and LOCATION_ATTR in term.attributes
    }  # fmt: skip
    CanonicalizePass().apply(Context(), module)  # xDSL's cf patterns: pass-through blocks, ...
    for block in _blocks(module):  # the cf patterns build new terminators without `abir.loc`
        if (term := block.last_op) is not None and block in locations:
            term.attributes.setdefault(LOCATION_ATTR, locations[block])
    patterns = [SelectToWhere(), ArithConstantToFunctional(), DropIdentityAstype(), FoldConstantPrim()]
    PatternRewriteWalker(GreedyRewritePatternApplier(patterns), apply_recursively=True).rewrite_module(module)
    for func in module.ops:
        if isinstance(func, functional.FuncOp):
            for block in func.body.blocks:  # xDSL's CSE leaves multi-block regions alone
                cse(block)
    dce(module)


def _blocks(module: ModuleOp) -> list[Block]:
    return [block for func in module.ops if isinstance(func, functional.FuncOp) for block in func.body.blocks]


@dataclass(frozen=True)
class SimplifyFunctionalPass(ModulePass):
    """Drop identity astype, fold constant prims, CSE and DCE ops without effects."""

    name = "simplify-functional"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        simplify_functional(op)
