"""`coalesce-copies`: one variable for both sides of a copy when they never disagree.

Call lowering and the frontend's joins leave many copies between variables: the callee's results
copied into the caller's variables after each call (`@f.v = @f.result0`), loop-carried values
moved into the next iteration's names. On the machine every copy is a masked write of a whole
`[B, ...]` register per block run. Two variables of one type can share a name when they do not
interfere: no point of the program defines one of them while the other holds a different value
that is still needed (Chaitin's rule, with the copy itself exempt). The copy then writes a
variable to itself, and vanishes.

Liveness runs over the machine's control flow (`analysis.machine_successors`): jumps, a call to
its callee's entry, and a return to the return block of every call of its function, so a value
needed after a call is live throughout the callee (context-insensitive, hence conservative: more
interference, never less). A pop or peek defines its variables, a push reads them; the variables
one op defines together (a parallel write, a pop) interfere with each other, and so do the
program's inputs. Copies are coalesced greedily in program order; a program input or output keeps
its name. NUTS (examples/nuts.py): 46,043 of 83,151 register writes per run were such copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, SymbolRefAttr
from xdsl.ir import Attribute, Block, Operation
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from abir.dialects import stack
from abir.passes.analysis import (
    backward_liveness,
    block_uses_defs,
    machine_successors,
    reads_writes,
    the_program,
)
from abir.passes.stack_optimize import optimize_stack


class _Classes:
    """Union-find over variable names, with the interference of each class."""

    def __init__(self, interference: dict[str, set[str]]):
        self.parent: dict[str, str] = {}
        self.interference = interference

    def find(self, name: str) -> str:
        root = name
        while self.parent.get(root, root) != root:
            root = self.parent[root]
        self.parent[name] = root
        return root

    def merge(self, keep: str, other: str) -> None:
        self.parent[other] = keep
        self.interference[keep] = self.interference.get(keep, set()) | self.interference.pop(other, set())
        for neighbour in self.interference[keep]:
            peers = self.interference.setdefault(neighbour, set())
            peers.discard(other)
            peers.add(keep)


def _interference(program: stack.ProgramOp, successors: dict[Block, list[Block]]) -> dict[str, set[str]]:
    blocks = list(program.body.blocks)
    uses, defs = {}, {}
    for block in blocks:
        uses[block], defs[block] = block_uses_defs(block)
    outputs = {o.string_value() for o in program.outputs.data}
    exit_live = {b: outputs for b in blocks if isinstance(b.last_op, stack.HaltOp)}
    live_in, live_out = backward_liveness(blocks, successors.__getitem__, uses, defs, exit_live)
    # one way first (a pair meets at many points of the program), both ways at the end
    edges: dict[str, set[str]] = {}

    def interfere(a: str, others: set[str]) -> None:
        others = others - {a}
        if others:
            edges.setdefault(a, set()).update(others)

    for block in blocks:
        live = set(live_out[block]) | exit_live.get(block, set())
        for op in reversed(list(block.ops)):
            reads, writes = reads_writes(op)
            copied = dict(zip(writes, reads, strict=True)) if isinstance(op, stack.WriteOp) else {}
            for written in writes:
                interfere(written, live - {copied.get(written)})
            together = writes if not isinstance(op, stack.PushOp) else reads
            for a, b in combinations(together, 2):
                interfere(a, {b})
            live -= set(writes)
            live |= set(reads)
    inputs = [i.string_value() for i in program.inputs.data]
    for a, b in combinations(inputs, 2):
        interfere(a, {b})
    for name in inputs:
        interfere(name, set(live_in[blocks[0]]))
    for a, others in list(edges.items()):
        for b in others:
            edges.setdefault(b, set()).add(a)
    return edges


def _rename(op: Operation, names: dict[str, str]) -> None:
    """Rename the variables `op` refers to (`names` maps old to new; others stay)."""

    def renamed(refs: ArrayAttr[SymbolRefAttr]) -> ArrayAttr[SymbolRefAttr]:
        return stack.refs([names.get(r.string_value(), r.string_value()) for r in refs.data])

    match op:
        case stack.WriteOp():
            op.targets, op.sources = renamed(op.targets), renamed(op.sources)
        case stack.PrimOp():
            op.inputs, op.outputs = renamed(op.inputs), renamed(op.outputs)
        case stack.ConstantOp():
            op.var = SymbolRefAttr(names.get(op.var.string_value(), op.var.string_value()))
        case stack.PushOp() | stack.PopOp() | stack.PeekOp():
            op.vars = renamed(op.vars)
        case stack.BranchOp():
            op.cond = SymbolRefAttr(names.get(op.cond.string_value(), op.cond.string_value()))


def _drop_self_copies(write: stack.WriteOp) -> None:
    pairs = [
        (t.string_value(), s.string_value())
        for t, s in zip(write.targets.data, write.sources.data, strict=True)
        if t.string_value() != s.string_value()
    ]
    if pairs:
        write.targets, write.sources = stack.refs([t for t, _ in pairs]), stack.refs([s for _, s in pairs])
    else:
        Rewriter.erase_op(write)


def coalesce_copies(module: ModuleOp) -> int:
    """Coalesce the module's copies in place; returns the number of variables merged away."""
    program = the_program(module)
    successors = machine_successors(program)
    returns = [b for b in program.body.blocks if isinstance(b.last_op, stack.IndirectGotoOp)]
    if any(not successors[b] for b in returns):  # a return we cannot follow: liveness unknown
        return 0
    types: dict[str, Attribute] = {op.sym_name.data: op.type for op in module.ops if isinstance(op, stack.VarOp)}
    interface = {r.string_value() for r in (*program.inputs.data, *program.outputs.data)}
    classes = _Classes(_interference(program, successors))
    for op in program.walk():
        if not isinstance(op, stack.WriteOp):
            continue
        for target, source in zip(op.targets.data, op.sources.data, strict=True):
            a, b = classes.find(target.string_value()), classes.find(source.string_value())
            if a == b or types.get(a) != types.get(b) or b in classes.interference.get(a, set()):
                continue
            if a in interface and b in interface:
                continue
            keep, other = (b, a) if b in interface else (a, b)
            classes.merge(keep, other)
    names = {name: classes.find(name) for name in list(classes.parent)}
    names = {old: new for old, new in names.items() if old != new}
    if not names:
        return 0
    for op in list(program.walk()):
        _rename(op, names)
        if isinstance(op, stack.WriteOp):
            _drop_self_copies(op)
    for op in list(module.ops):
        if isinstance(op, stack.VarOp) and op.sym_name.data in names:
            Rewriter.erase_op(op)
    return len(names)


def coalesce_copies_to_fixed_point(module: ModuleOp) -> int:
    """`coalesce_copies` and stack-optimize's invariant-save rule in turn until no copy coalesces;
    returns the variables merged away. Coalesced copies show saves no call changes, and dropping
    those saves ends the interference their restores made: a parameter passed unchanged down a
    recursion then merges with the caller's variable (docs/performance.md#coalesce-copies).
    Each round merges a variable away, so this ends."""
    total = 0
    while merged := coalesce_copies(module):
        total += merged
        optimize_stack(module, dead_saves=False)
    return total


@dataclass(frozen=True)
class CoalesceCopiesPass(ModulePass):
    """Give both sides of a copy one variable where they never hold different needed values
    (interference over the machine's control flow, calls and returns included). Option:
    drop-saves=true coalesces to a fixed point (`coalesce_copies_to_fixed_point`)."""

    name = "coalesce-copies"

    drop_saves: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.drop_saves:
            coalesce_copies_to_fixed_point(op)
        else:
            coalesce_copies(op)
