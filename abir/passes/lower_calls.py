"""`lower-calls`: typed functional IR -> the stack dialect (one program, named variables).

* SSA destruction: every SSA value becomes a variable named after its function and name hint
  (`@fib.n`, `@fib.f1`, made unique with a suffix); block arguments become parallel
  `stack.write`s at the end of the predecessor (a `cf.cond_br` edge carrying arguments is split
  into an edge block, so no copy lands on the other path).
* A call becomes `stack.push` of every value live across it whose function the callee may
  re-enter (caller-save; constants are re-materialized after the call instead of saved), a parallel write of the arguments into the callee's parameter variables
  and `stack.push_goto ^continuation, ^callee`. The continuation pops the saved values and copies
  the results out of the callee's result variables (`@fib.result0`, ...).
* `functional.return` writes the result variables and ends in `stack.indirect_goto`.
* A tail call (`%r = call @g(...)` directly followed by `return %r`) writes g's parameters and
  jumps with `stack.goto`: no program-counter push, so tail recursion runs in constant stack. The
  functions linked by tail calls share their result variables (named after the first of them).
  g's code then returns where the caller's own call does: where a return goes follows the
  activation a member runs, not the function whose code it is (`activations`, `vm.activations`).
* The program entry block does `stack.push_goto ^exit, ^<entry>` and `^exit` halts; inputs are the
  entry's parameter variables, outputs its result variables.

Every terminator carries a discardable `function` attribute naming the user function whose code
its block runs (absent on the program's own entry and exit blocks), and an `abir.loc`
(`file:line`, when the frontend recorded one): the call's own line for a block that ends in a
call (a member stands there until the call is made, and a call-only block runs nothing else),
else that of the functional block it comes from. The pushes of a call (`stack.push` of the saves,
`stack.push_goto`) carry the call's line as `abir.call_loc`, which the passes keep with the op
wherever it moves, so that a stack overflow names the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import cf
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from abir.dialects import functional, stack
from abir.errors import TypeInferenceError
from abir.passes.analysis import (
    CALL_LOCATION_ATTR,
    FUNCTION_ATTR,
    LOCATION_ATTR,
    SSALiveness,
    call_graph,
    fail_at,
    functions_of,
    may_reenter,
    reachable,
    ssa_liveness,
)
from abir.passes.infer_types import default_entry
from abir.types import is_value_type


class UnionFind:
    def __init__(self, items: Sequence[str]):
        self.parent = {i: i for i in items}

    def find(self, item: str) -> str:
        while self.parent[item] != item:
            item = self.parent[item]
        return item

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def tail_call_of(call: functional.CallOp) -> bool:
    """Whether a call's results are returned unchanged right after it."""
    ret = call.next_op
    return isinstance(ret, functional.ReturnOp) and tuple(ret.arguments) == tuple(call.res)


@dataclass
class Variables:
    """Variable declarations with readable unique names."""

    types: dict[str, Attribute]

    def fresh(self, hint: str, type: Attribute) -> str:
        name, k = hint, 1
        while name in self.types:
            name, k = f"{hint}_{k}", k + 1
        if not is_value_type(type):
            raise TypeInferenceError(f"variable @{name} has type {type}; run infer-types before lower-calls")
        self.types[name] = type
        return name


class CallLowering:
    """Builds the stack program for everything reachable from `entry`."""

    def __init__(self, module: ModuleOp, entry: str):
        self.module = module
        self.entry = entry
        all_funcs = functions_of(module)
        if entry not in all_funcs:
            raise PassFailedException(f"no function @{entry} in the module; name one of {', '.join(all_funcs)}")
        self.graph = call_graph(module)
        live_funcs = reachable(self.graph, entry)
        self.funcs = {n: f for n, f in all_funcs.items() if n in live_funcs}
        self.vars = Variables({})
        self.value_var: dict[SSAValue, str] = {}
        self.labels: dict[Block, Block] = {}
        self.order: list[Block] = []
        self.param_vars: dict[str, list[str]] = {}
        self.result_vars: dict[str, list[str]] = {}

    # -- declarations ---------------------------------------------------------------------
    def declare(self) -> None:
        for name, func in self.funcs.items():
            for block in func.body.blocks:
                self.labels[block] = Block()
                for i, arg in enumerate(block.args):
                    self.value_var[arg] = self.vars.fresh(f"{name}.{arg.name_hint or f'arg{i}'}", arg.type)
                for op in block.ops:
                    for i, res in enumerate(op.results):
                        self.value_var[res] = self.vars.fresh(f"{name}.{res.name_hint or f'v{i}'}", res.type)
            self.param_vars[name] = [self.value_var[a] for a in func.entry_block.args]
        groups = UnionFind(list(self.funcs))
        for func in self.funcs.values():
            for op in func.walk():
                if isinstance(op, functional.CallOp) and tail_call_of(op):
                    groups.union(func.sym_name.data, op.callee.string_value())
        for name in self.funcs:
            root = groups.find(name)
            if root not in self.result_vars:
                outputs = self.funcs[root].function_type.outputs.data
                self.result_vars[root] = [
                    self.vars.fresh(f"{root}.result{i}", t) for i, t in enumerate(outputs)
                ]
            self.result_vars[name] = self.result_vars[root]

    # -- code -------------------------------------------------------------------------------
    def build(self) -> ModuleOp:
        self.declare()
        start, exit_ = Block(), Block()
        start.add_op(stack.PushGotoOp(exit_, self.labels[self.funcs[self.entry].entry_block]))
        exit_.add_op(stack.HaltOp())
        self.order = [start, exit_]
        for name, func in self.funcs.items():
            FunctionLowering(self, name, func).run()
        program = stack.ProgramOp(
            self.entry, self.param_vars[self.entry], self.result_vars[self.entry], Region(self.order)
        )
        decls: list[Operation] = [op.clone() for op in self.module.ops if isinstance(op, functional.OpaqueOp)]
        decls += [stack.VarOp(n, t) for n, t in self.vars.types.items()]
        return ModuleOp([*decls, program])


class FunctionLowering:
    """Emits the stack blocks of one function."""

    def __init__(self, lowering: CallLowering, name: str, func: functional.FuncOp):
        self.l = lowering
        self.name = name
        self.func = func
        self.liveness: SSALiveness = ssa_liveness(func)
        self.current: Block = Block()
        self.location: Attribute | None = None
        """The `abir.loc` of the functional block being lowered."""

    def var(self, value: SSAValue) -> str:
        return self.l.value_var[value]

    def run(self) -> None:
        for block in self.func.body.blocks:
            self.start(self.l.labels[block])
            self.location = block.last_op.attributes.get(LOCATION_ATTR) if block.last_op is not None else None
            for op in block.ops:
                self.lower(op)

    def start(self, block: Block) -> None:
        self.current = block
        self.l.order.append(block)

    def emit(self, op: Operation) -> None:
        self.current.add_op(op)

    def terminate(self, op: Operation) -> None:
        self.emit(self.attributed(op))

    def attributed(self, terminator: Operation, call: functional.CallOp | None = None) -> Operation:
        """`terminator` with the `function` and `abir.loc` of the code it ends (the line of
        `call` when it ends in one)."""
        terminator.attributes[FUNCTION_ATTR] = StringAttr(self.name)
        location = call_location(call) if call is not None else None
        if location is not None or self.location is not None:
            terminator.attributes[LOCATION_ATTR] = location or self.location  # type: ignore[assignment]
        return terminator

    def write(self, targets: Sequence[str], sources: Sequence[str]) -> None:
        if targets:
            self.emit(stack.WriteOp(list(targets), list(sources)))

    def lower(self, op: Operation) -> None:
        match op:
            case functional.ConstantOp():
                self.emit(stack.ConstantOp(self.var(op.res), op.value))
            case functional.PrimOp():
                fn = op.callee if op.callee is not None else op.prim_name
                self.emit(
                    stack.PrimOp(fn, [self.var(v) for v in op.arguments], [self.var(v) for v in op.res], op.params)
                )
            case functional.CallOp():
                self.call(op)
            case functional.ReturnOp():
                if not self.is_tail_return(op):
                    self.write(self.l.result_vars[self.name], [self.var(v) for v in op.arguments])
                    self.terminate(stack.IndirectGotoOp())
            case cf.BranchOp():
                self.write(self.block_arg_vars(op.successor), [self.var(v) for v in op.arguments])
                self.terminate(stack.GotoOp(self.l.labels[op.successor]))
            case cf.ConditionalBranchOp():
                then_dest = self.edge(op.then_block, op.then_arguments)
                else_dest = self.edge(op.else_block, op.else_arguments)
                self.terminate(stack.BranchOp(self.var(op.cond), then_dest, else_dest))
            case _:
                fail_at(op, f"lower-calls cannot lower {op.name} in @{self.name}; a function holds functional and cf ops only")

    def is_tail_return(self, op: functional.ReturnOp) -> bool:
        prev = op.prev_op
        return isinstance(prev, functional.CallOp) and tail_call_of(prev)

    def block_arg_vars(self, block: Block) -> list[str]:
        return [self.var(a) for a in block.args]

    def edge(self, dest: Block, args: Sequence[SSAValue]) -> Block:
        """The block a conditional edge jumps to: the label itself, or an edge block with copies."""
        if not args:
            return self.l.labels[dest]
        edge = Block()
        edge.add_op(stack.WriteOp(self.block_arg_vars(dest), [self.var(v) for v in args]))
        edge.add_op(self.attributed(stack.GotoOp(self.l.labels[dest])))
        self.l.order.append(edge)
        return edge

    def call(self, op: functional.CallOp) -> None:
        callee = op.callee.string_value()
        callee_entry = self.l.labels[self.l.funcs[callee].entry_block]
        args = [self.var(v) for v in op.arguments]
        if tail_call_of(op):
            self.write(self.l.param_vars[callee], args)
            self.emit(self.attributed(stack.GotoOp(callee_entry), op))
            return
        saved: list[str] = []
        remat: list[functional.ConstantOp] = []
        if may_reenter(self.l.graph, callee, self.name):
            live = sorted(self.liveness.live_after(op) - set(op.res), key=lambda v: self.var(v))
            remat = [v.owner for v in live if isinstance(v.owner, functional.ConstantOp)]
            saved = [self.var(v) for v in live if not isinstance(v.owner, functional.ConstantOp)]
        if saved:
            self.emit(with_call_location(stack.PushOp(*saved), op))
        self.write(self.l.param_vars[callee], args)
        continuation = Block()
        self.emit(self.attributed(with_call_location(stack.PushGotoOp(continuation, callee_entry), op), op))
        self.start(continuation)
        if saved:
            self.emit(stack.PopOp(*saved))
        for constant in remat:
            self.lower(constant)
        self.write([self.var(v) for v in op.res], self.l.result_vars[callee])


def call_location(call: functional.CallOp) -> StringAttr | None:
    location = call.attributes.get(LOCATION_ATTR)
    return location if isinstance(location, StringAttr) else None


def with_call_location(push: Operation, call: functional.CallOp) -> Operation:
    """`push` (a save or the call's own push) marked with the line of the call it serves."""
    if (location := call_location(call)) is not None:
        push.attributes[CALL_LOCATION_ATTR] = location
    return push


def lower_calls(module: ModuleOp, entry: str) -> ModuleOp:
    """A new stack-dialect module for the typed functional `module`, entered at `entry`."""
    return CallLowering(module, entry).build()


def replace_module_body(target: ModuleOp, source: ModuleOp) -> None:
    """Move `source`'s top-level ops into `target`, dropping target's old ones."""
    for op in list(target.ops):
        op.detach()
        op.erase()
    for op in list(source.ops):
        op.detach()
        target.body.block.add_op(op)


@dataclass(frozen=True)
class LowerCallsPass(ModulePass):
    """Lower a typed functional module to one stack program entered at `entry` (default: the
    module's `abir.entry` attribute, which infer-types records, else chosen as infer-types does)."""

    name = "lower-calls"

    entry: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        replace_module_body(op, lower_calls(op, self.entry or default_entry(op)))
