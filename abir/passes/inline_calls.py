"""`inline-calls`: calls to non-recursive functions are replaced by a copy of the callee's body.

Every `functional.call` costs the machine steps of a call (the caller's block up to the call, the
callee's entry, its return, the caller's continuation), and members must stand at the same block
to share a step; a helper called from several places (or inside a loop) splits the batch further.
Inlining removes the call: the callee's code runs inside the caller's blocks, where if-convert and
fuse-blocks can merge it with its surroundings.

A call `%r = functional.call @g(%a)` in `@f` is inlined when

* `@g` is not in `@f`'s strongly connected component of the call graph (recursion, direct or
  mutual, stays calls: it needs the machine's stacks), and `@g` is not recursive itself (copying
  one level of a recursion into its caller removes no call of the recursion, it only splits the
  members running that code between two copies of it), and
* the argument and result types of the call equal `@g`'s signature (always so after infer-types),
* and `@g` is small (at most `MAX_INLINE_OPS` operations, counted after `@g`'s own callees were
  inlined) or this call is `@g`'s only call site in the module (the copy then replaces the
  original, which is erased: no code growth).

The size limit bounds code growth: every copy is compiled again (block kernels, XLA), so a big
helper called from many places is kept as one shared function; loops and branches inside a callee
are no obstacle, only its size counts.

Inlining splits the caller's block before the call; the part after it becomes the continuation
block, whose arguments replace the call's results. The callee's blocks are cloned between the two
halves (in source order), the first half branches to the clone of the callee's entry block with the
call's arguments, and every `functional.return` in the clone becomes `cf.br` to the continuation:

    functional.func @f(%x: i64) -> i64 {            functional.func @f(%x: i64) -> i64 {
      %y = functional.call @g(%x) : ...               cf.br ^bb0(%x : i64)
      functional.return %y : i64                    ^bb0(%n: i64):
    }                                                 %c1 = functional.constant 1 : i64
    functional.func @g(%n: i64) -> i64 {              %m = functional.prim "add"(%n, %c1) : ...
      %c1 = functional.constant 1 : i64               cf.br ^bb1(%m : i64)
      %m = functional.prim "add"(%n, %c1) : ...     ^bb1(%y: i64):
      functional.return %m : i64                      functional.return %y : i64
    }                                               }

(if-convert then merges such straight chains of blocks back into one). Functions are processed
callees first (the call graph's components in reverse topological order), so a chain of helpers
inlines completely. Afterwards, functions no longer reachable from the module's entry (the
`abir.entry` attribute, or the pass's `entry` option) are erased.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import cf
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from abir.dialects import functional
from abir.passes.analysis import (
    ENTRY_ATTR,
    call_graph,
    functions_of,
    reachable,
    strongly_connected_components,
)
from abir.passes.simplify import simplify_functional

MAX_INLINE_OPS = 200
"""The largest callee (operations in its body, terminators and constants included) copied into
a caller when it has more than one call site. A NUTS leapfrog step with its target density is
about 30 operations; 200 allows helpers with a few loops and branches while bounding the growth
of a program whose helpers call each other in chains (each level may multiply the size)."""


def function_size(func: functional.FuncOp) -> int:
    return sum(1 for _ in func.body.walk())


def signature_matches(call: functional.CallOp, callee: functional.FuncOp) -> bool:
    ftype = callee.function_type
    return tuple(a.type for a in call.arguments) == tuple(ftype.inputs.data) and tuple(
        call.res.types
    ) == tuple(ftype.outputs.data)


def inline_call(call: functional.CallOp, callee: functional.FuncOp) -> None:
    """Replace `call` by a copy of `callee`'s body (see the module docstring)."""
    head = call.parent_block()
    assert head is not None
    continuation = head.split_before(call, arg_types=call.res.types)
    for result, arg in zip(call.res, continuation.args, strict=True):
        arg.name_hint = result.name_hint
        result.replace_all_uses_with(arg)
    arguments = list(call.arguments)
    Rewriter.erase_op(call)

    body = callee.body.clone()
    entry = body.blocks.first
    assert entry is not None
    for block in body.blocks:
        term = block.last_op
        if isinstance(term, functional.ReturnOp):
            values = list(term.arguments)
            jump = cf.BranchOp(continuation, *values)
            jump.attributes.update(term.attributes)  # the callee's `abir.loc`
            Rewriter.erase_op(term)
            block.add_op(jump)
    body.move_blocks_before(continuation)
    enter = cf.BranchOp(entry, *arguments)
    if (term := continuation.last_op) is not None:
        enter.attributes.update(term.attributes)  # the caller block's `abir.loc`
    head.add_op(enter)


def call_sites(module: ModuleOp) -> dict[str, int]:
    counts: dict[str, int] = {}
    for op in module.walk():
        if isinstance(op, functional.CallOp):
            name = op.callee.string_value()
            counts[name] = counts.get(name, 0) + 1
    return counts


def inline_calls(module: ModuleOp, entry: str | None = None, max_ops: int = MAX_INLINE_OPS) -> int:
    """Inline non-recursive calls in `module`, in place; erase functions unreachable from `entry`
    (default: the module's `abir.entry` attribute; nothing is erased without an entry). Returns
    the number of calls inlined."""
    if entry is None and isinstance(attr := module.attributes.get(ENTRY_ATTR), StringAttr):
        entry = attr.data
    graph = call_graph(module)
    components = strongly_connected_components(graph)
    component_of = {name: i for i, members in enumerate(components) for name in members}
    recursive = {
        name for members in components for name in members if len(members) > 1 or name in graph[name]
    }
    funcs = functions_of(module)
    sites = call_sites(module)
    inlined = 0
    for members in components:  # callees first
        for name in members:
            caller = funcs.get(name)
            if caller is None:
                continue
            for call in [op for op in caller.body.walk() if isinstance(op, functional.CallOp)]:
                callee_name = call.callee.string_value()
                callee = funcs.get(callee_name)
                if (
                    callee is None
                    or callee_name in recursive
                    or component_of.get(callee_name) == component_of[name]
                ):
                    continue
                if not signature_matches(call, callee):
                    continue
                if function_size(callee) > max_ops and sites.get(callee_name, 0) != 1:
                    continue
                inline_call(call, callee)
                inlined += 1
                sites[callee_name] -= 1
                for inner in callee.body.walk():  # the copy's calls are new call sites
                    if isinstance(inner, functional.CallOp):
                        inner_name = inner.callee.string_value()
                        sites[inner_name] = sites.get(inner_name, 0) + 1
    if entry is not None and entry in funcs:
        live = reachable(call_graph(module), entry)
        for name, func in funcs.items():
            if name not in live:
                Rewriter.erase_op(func, safe_erase=False)
    return inlined


@dataclass(frozen=True)
class InlineCallsPass(ModulePass):
    """Inline calls to non-recursive functions (callees first) and erase functions unreachable
    from the entry. Options: entry (default: the module's `abir.entry` attribute); max-ops, the
    largest callee copied into more than one call site (default `MAX_INLINE_OPS`); simplify=true
    runs simplify-functional afterwards when a call was inlined (the pipeline's choice: a module
    nothing was inlined into is as simplify-functional left it)."""

    name = "inline-calls"

    entry: str | None = None
    max_ops: int = MAX_INLINE_OPS
    simplify: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if inline_calls(op, self.entry, self.max_ops) and self.simplify:
            simplify_functional(op)
