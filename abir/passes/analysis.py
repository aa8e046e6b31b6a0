"""Plain-Python analyses shared by abir's passes.

* call graph of a functional module, its strongly connected components and reachability;
* generic fixed-point dataflow on control-flow graphs with loops: backward liveness;
* its instantiations for functional SSA functions and for the stack dialect's named variables;
* the helpers every pass shares, each defined once: the module attribute naming the entry
  (`ENTRY_ATTR`), the block attributes naming a function (`FUNCTION_ATTR`) and a source location
  (`LOCATION_ATTR`), the program of a stack or vm module (`the_program`, `the_vm_program`), a
  block's function (`function_of`, `vm_function_of`) and the variables a stack block reads
  before writing them.

The stack-dialect liveness is intraprocedural in spirit: a `stack.push_goto` block flows into both
the callee entry and the return block, `stack.indirect_goto` has no successors and `stack.halt`
reads the program outputs. That is sound for a function's own (non-result) variables, the only
ones the stack optimizations ask about.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NoReturn, TypeVar

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.utils.exceptions import PassFailedException

from abir.dialects import functional, mark_failing_op, stack, vm

FUNCTION_ATTR = "function"
"""The attribute naming the function a stack block's terminator (or a vm block) belongs to (set by
lower-calls, carried by stack-to-vm)."""
LOCATION_ATTR = functional.LOCATION_ATTR
"""`"file:line"` of the Python code an op comes from: on the array prims the frontend emits (until
infer-types), on functional and stack terminators (the code their block runs; set by the frontend,
kept by the passes) and on vm blocks (carried by stack-to-vm)."""
CALL_LOCATION_ATTR = functional.CALL_LOCATION_ATTR
"""`"file:line"` of the call a push saves state for (on `stack.push`/`push_goto`, `vm.push`/`call`)."""
ENTRY_ATTR = "abir.entry"
"""The module attribute naming the function a typed program starts in (set by infer-types)."""


def fail_at(op: Operation, message: str) -> NoReturn:
    """Fail a pass at `op`: the error carries the module with `op` marked, as a verifier's does,
    so that abir-opt and abir-run print the op and its function (`verify_error_text`), and
    remembers the op (`failing_op`), so that they point at its line when it was read from text."""
    error = PassFailedException(message)
    mark_failing_op(error, op)
    op.emit_error(message, error)


def the_program(module: ModuleOp) -> stack.ProgramOp:
    """The module's one `stack.program`."""
    programs = [op for op in module.ops if isinstance(op, stack.ProgramOp)]
    if len(programs) != 1:
        raise PassFailedException(
            f"expected one stack.program in the module, found {len(programs)}; the stack passes run on "
            "what lower-calls makes of a typed functional module"
        )
    return programs[0]


def the_vm_program(module: ModuleOp, pass_name: str) -> vm.ProgramOp:
    """The module's one `vm.program`; `pass_name` (the pass that needs it) fails without one."""
    programs = [op for op in module.ops if isinstance(op, vm.ProgramOp)]
    if len(programs) != 1:
        raise PassFailedException(f"{pass_name} needs a module with one vm.program, found {len(programs)}")
    return programs[0]


def vm_function_of(block: vm.BlockOp) -> str | None:
    """The function a vm block belongs to (its `function` attribute)."""
    attr = block.attributes.get(FUNCTION_ATTR)
    return attr.data if isinstance(attr, StringAttr) else None

N = TypeVar("N", bound=Hashable)
V = TypeVar("V", bound=Hashable)


# ---------------------------------------------------------------------------------------------
# Call graph
# ---------------------------------------------------------------------------------------------


def functions_of(module: ModuleOp) -> dict[str, functional.FuncOp]:
    """The module's functions by symbol name."""
    return {op.sym_name.data: op for op in module.ops if isinstance(op, functional.FuncOp)}


def call_graph(module: ModuleOp) -> dict[str, list[str]]:
    """function -> callees (each once, in order of first call)."""
    graph: dict[str, list[str]] = {}
    for name, func in functions_of(module).items():
        callees: list[str] = []
        for op in func.walk():
            if isinstance(op, functional.CallOp) and (callee := op.callee.string_value()) not in callees:
                callees.append(callee)
        graph[name] = callees
    return graph


def reachable(graph: Mapping[N, Sequence[N]], start: N) -> set[N]:
    """Nodes reachable from `start` (including `start`)."""
    seen = {start}
    todo = [start]
    while todo:
        for succ in graph.get(todo.pop(), ()):
            if succ not in seen:
                seen.add(succ)
                todo.append(succ)
    return seen


def strongly_connected_components(graph: Mapping[N, Sequence[N]]) -> list[list[N]]:
    """Tarjan's algorithm (iterative); components come out callees-first (reverse topological)."""
    index: dict[N, int] = {}
    low: dict[N, int] = {}
    on_stack: set[N] = set()
    stack_: list[N] = []
    components: list[list[N]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work: list[tuple[N, int]] = [(root, 0)]
        while work:
            node, child = work.pop()
            if child == 0:
                index[node] = low[node] = counter
                counter += 1
                stack_.append(node)
                on_stack.add(node)
            succs = list(graph.get(node, ()))
            if child < len(succs):
                work.append((node, child + 1))
                succ = succs[child]
                if succ not in index:
                    work.append((succ, 0))
                elif succ in on_stack:
                    low[node] = min(low[node], index[succ])
                continue
            if low[node] == index[node]:
                component: list[N] = []
                while True:
                    member = stack_.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return components


def may_reenter(graph: Mapping[str, Sequence[str]], callee: str, caller: str) -> bool:
    """Whether running `callee` may (transitively) run `caller` again."""
    return caller in reachable(graph, callee)


# ---------------------------------------------------------------------------------------------
# Generic dataflow
# ---------------------------------------------------------------------------------------------


def predecessors(nodes: Iterable[N], successors: Callable[[N], Iterable[N]]) -> dict[N, list[N]]:
    preds: dict[N, list[N]] = {n: [] for n in nodes}
    for node in list(preds):
        for succ in successors(node):
            preds.setdefault(succ, []).append(node)
    return preds


def backward_liveness(
    nodes: Sequence[N],
    successors: Callable[[N], Iterable[N]],
    uses: Mapping[N, set[V]],
    defs: Mapping[N, set[V]],
    exit_live: Mapping[N, set[V]] | None = None,
) -> tuple[dict[N, set[V]], dict[N, set[V]]]:
    """Live-in and live-out sets: a fixed point of live_in = uses | (live_out - defs).

    `uses` are the upward-exposed reads of each node; `exit_live` adds values live after a node
    independent of its successors (e.g. program outputs at a halt)."""
    live_in: dict[N, set[V]] = {n: set() for n in nodes}
    live_out: dict[N, set[V]] = {n: set() for n in nodes}
    changed = True
    while changed:
        changed = False
        for node in reversed(nodes):
            out = set((exit_live or {}).get(node, set()))
            for succ in successors(node):
                out |= live_in.get(succ, set())
            new_in = uses[node] | (out - defs[node])
            if out != live_out[node] or new_in != live_in[node]:
                live_out[node], live_in[node] = out, new_in
                changed = True
    return live_in, live_out


# ---------------------------------------------------------------------------------------------
# Functional SSA liveness
# ---------------------------------------------------------------------------------------------


def block_successors(block: Block) -> list[Block]:
    last = block.last_op
    return list(last.successors) if last is not None else []


@dataclass
class SSALiveness:
    """Liveness of SSA values in one functional function."""

    live_in: dict[Block, set[SSAValue]]
    live_out: dict[Block, set[SSAValue]]

    def live_after(self, op: Operation) -> set[SSAValue]:
        """Values live immediately after `op` (not counting its own results unless used later)."""
        block = op.parent_block()
        assert block is not None
        live = set(self.live_out[block])
        current = block.last_op
        while current is not None and current is not op:
            live -= set(current.results)
            live |= set(current.operands)
            current = current.prev_op
        return live


def ssa_liveness(func: functional.FuncOp) -> SSALiveness:
    """Fixed-point liveness over the function's CFG (successor operands are uses of the branch)."""
    blocks = list(func.body.blocks)
    uses: dict[Block, set[SSAValue]] = {}
    defs: dict[Block, set[SSAValue]] = {}
    for block in blocks:
        defined: set[SSAValue] = set(block.args)
        used: set[SSAValue] = set()
        for op in block.ops:
            used |= {v for v in op.operands if v not in defined}
            defined |= set(op.results)
        uses[block], defs[block] = used, defined
    live_in, live_out = backward_liveness(blocks, block_successors, uses, defs)
    return SSALiveness(live_in, live_out)


# ---------------------------------------------------------------------------------------------
# Stack-dialect variables
# ---------------------------------------------------------------------------------------------


def reads_writes(op: Operation) -> tuple[list[str], list[str]]:
    """Variables an op of the stack dialect reads and writes, in that order."""
    names = lambda refs: [r.string_value() for r in refs]  # noqa: E731
    match op:
        case stack.PrimOp():
            return names(op.inputs.data), names(op.outputs.data)
        case stack.WriteOp():
            return names(op.sources.data), names(op.targets.data)
        case stack.ConstantOp():
            return [], [op.var.string_value()]
        case stack.PushOp():
            return names(op.vars.data), []
        case stack.PopOp() | stack.PeekOp():
            return [], names(op.vars.data)
        case stack.BranchOp():
            return [op.cond.string_value()], []
        case _:
            return [], []


def stack_block_successors(block: Block) -> list[Block]:
    """CFG successors of a stack block: a call flows into its callee and into its return block."""
    return block_successors(block)


@dataclass
class VariableLiveness:
    """Liveness of named variables in a stack program."""

    live_in: dict[Block, set[str]]
    live_out: dict[Block, set[str]]

    def live_after(self, op: Operation) -> set[str]:
        block = op.parent_block()
        assert block is not None
        live = set(self.live_out[block])
        current = block.last_op
        while current is not None and current is not op:
            reads, writes = reads_writes(current)
            live -= set(writes)
            live |= set(reads)
            current = current.prev_op
        return live


def block_uses_defs(block: Block) -> tuple[set[str], set[str]]:
    """Upward-exposed reads and all writes of a stack block."""
    used: set[str] = set()
    written: set[str] = set()
    for op in block.ops:
        reads, writes = reads_writes(op)
        used |= {r for r in reads if r not in written}
        written |= set(writes)
    return used, written


def variable_liveness(program: stack.ProgramOp) -> VariableLiveness:
    blocks = list(program.body.blocks)
    uses: dict[Block, set[str]] = {}
    defs: dict[Block, set[str]] = {}
    for block in blocks:
        uses[block], defs[block] = block_uses_defs(block)
    outputs = {o.string_value() for o in program.outputs.data}
    exit_live = {b: outputs for b in blocks if isinstance(b.last_op, stack.HaltOp)}
    live_in, live_out = backward_liveness(blocks, stack_block_successors, uses, defs, exit_live)
    return VariableLiveness(live_in, live_out)


def reads_before_write(block: Block) -> set[str]:
    """Variables read in `block` before any write to them in that block."""
    return block_uses_defs(block)[0]


def function_of(block: Block) -> str | None:
    term = block.last_op
    attr = term.attributes.get(FUNCTION_ATTR) if term is not None else None
    return attr.data if isinstance(attr, StringAttr) else None


def activations(program: stack.ProgramOp) -> dict[Block, set[str | None]]:
    """Per block, the activations a member standing there may be running, each named by the
    function a call enters (its callee entry's `function_of`), `vm.PROGRAM_START` for the
    program's entry block. An activation goes on along jumps and branches and past a call in its return
    block (`onward`); it is not bound to its function's blocks: a tail call (`lower-calls`) is a jump into
    another function's code, which then returns where its caller's call does. The vm dialect's
    counterpart is `vm.activations`."""
    blocks = list(program.body.blocks)
    found: dict[Block, set[str | None]] = {block: set() for block in blocks}
    if blocks:
        found[blocks[0]].add(vm.PROGRAM_START)
    for block in blocks:
        if isinstance(term := block.last_op, stack.PushGotoOp):
            found[term.dest].add(function_of(term.dest))
    vm.spread_forward(found, blocks, onward)
    return found


def onward(block: Block) -> list[Block]:
    """Where an activation in `block` goes on: past a call to its return block, else the
    block's jump and branch targets."""
    term = block.last_op
    return [term.return_dest] if isinstance(term, stack.PushGotoOp) else block_successors(block)


def machine_successors(program: stack.ProgramOp) -> dict[Block, list[Block]]:
    """Every block's possible next blocks on the machine: jump and branch targets, a call's callee
    entry, and for a return the block every call it may return from (`activations`) returns to."""
    calls = [
        (function_of(term.dest), term.return_dest)
        for block in program.body.blocks
        if isinstance(term := block.last_op, stack.PushGotoOp)
    ]
    running = activations(program)
    successors: dict[Block, list[Block]] = {}
    for block in program.body.blocks:
        term = block.last_op
        if isinstance(term, stack.PushGotoOp):
            successors[block] = [term.dest]
        elif isinstance(term, stack.IndirectGotoOp):
            successors[block] = list(dict.fromkeys(back for key, back in calls if key in running[block]))
        else:
            successors[block] = list(term.successors) if term is not None else []
    return successors
