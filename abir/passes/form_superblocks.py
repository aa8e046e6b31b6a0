"""`form-superblocks`: a vm block absorbs the branch arm only it leads to, behind a side exit.

On the machine a block run costs about the same whatever it does: one conditional, one mask,
the writes of its registers and its program counter. A member that runs a block A ending in
`vm.branch %c, T, E` and then the arm E, which nothing but A leads to, should run both as one
kernel. The result is a superblock (one entry, several exits; Hwu et al., "The superblock",
1993): A's ops, `vm.exit_if %c, T` (the members for which `%c` holds leave for T; the ops after it
are masked to the others), then E's ops and E's terminator. E disappears, and A keeps absorbing
while it ends in such a branch.

An arm can be absorbed when it is not A itself and is entered only by A's branch: no other
jump, branch arm or side exit leads there (not even an earlier side exit of A), it is not a
call's callee or return block, nor the program entry, and, in a block inside two loops or more,
when it does not lead back to A (`closes_nested_loop`: A would jump to itself, and a sweep
repeats such a block until every member has left the inner loop). When both arms can, A
continues into the one members take more often, judged without a profile: the arm inside a
deeper loop (the other leaves that loop, which happens once per loop), else the arm that does not return (a recursive function's calls outnumber its base
cases); when neither rule tells them apart, A absorbs neither unless one arm is a trampoline
(a block that is only a call or a jump), which adds nothing to run for the members that leave.
Either choice runs the same program, but the absorbed ops run (masked) for every member that
enters A, also those that leave by the side exit, so absorbing the wrong arm can cost more
than the block run it saves (docs/performance.md#form-superblocks).

A trampoline that several branches lead to is first copied, one copy per branch arm
(`thread_trampolines`), so that each can be absorbed. On recursive Fibonacci this removes the
two bare `vm.call` blocks, half of its block runs; the descent to the base case becomes one
block that calls itself, which a sweep repeats.

On NUTS (examples/nuts.py, 64 chains x 20 transitions) this turns the transition's doubling
loop (four blocks) into one block and pairs up the blocks of `build_tree` around its calls.
Blocks keep their relative order and are renumbered; run it after `stack-to-vm`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from abir.dialects import vm
from abir.passes.analysis import strongly_connected_components, the_vm_program


def _ops(block: vm.BlockOp) -> list[Operation]:
    return list(block.body.block.ops)


def _flow_targets(block: vm.BlockOp) -> list[int]:
    """Where members go from `block` within its function: side exits, jumps and branches, a
    descent's exit, and the return block of a call or descent (the callee comes back there)."""
    return vm.block_successors(block, (vm.TargetRole.NEXT, vm.TargetRole.RETURN))


def _entered_otherwise(blocks: Iterable[vm.BlockOp]) -> set[int]:
    """Blocks members reach other than by a jump, branch or side exit: the program entry,
    callees and return blocks."""
    entered = {0}
    for block in blocks:
        entered.update(vm.block_successors(block, (vm.TargetRole.CALLEE, vm.TargetRole.RETURN)))
    return entered


def loop_depths(successors: Mapping[int, list[int]]) -> dict[int, int]:
    """How many loops contain each block: a cycle of the graph is a loop; inside it, the edges
    into its headers (the blocks entered from outside it, else its first block) are set aside,
    and what still cycles is a loop nested in it."""
    depth = dict.fromkeys(successors, 0)

    def visit(nodes: set[int], edges: Mapping[int, list[int]]) -> None:
        graph = {n: [s for s in edges[n] if s in nodes] for n in sorted(nodes)}
        for component in strongly_connected_components(graph):
            cycle = set(component)
            if len(cycle) == 1 and component[0] not in graph[component[0]]:
                continue
            for node in cycle:
                depth[node] += 1
            headers = {s for n in nodes - cycle for s in graph[n] if s in cycle} or {min(cycle)}
            visit(cycle, {n: [s for s in edges[n] if s not in headers] for n in cycle})

    visit(set(successors), successors)
    return depth


@dataclass
class _Program:
    """The blocks by number, and what the choice of an arm needs to know about them."""

    blocks: dict[int, vm.BlockOp]

    def __post_init__(self) -> None:
        successors = {n: _flow_targets(b) for n, b in self.blocks.items()}
        self.next_blocks = {n: vm.block_successors(b, (vm.TargetRole.NEXT,)) for n, b in self.blocks.items()}
        self.depth = loop_depths(successors)
        self.entered_otherwise = _entered_otherwise(self.blocks.values())
        self.reference_counts = Counter(target for targets in successors.values() for target in targets)

    def references(self, number: int) -> int:
        """How many jumps, branch arms and side exits lead to block `number`."""
        return self.reference_counts[number]

    def absorbable(self, head: int, arm: int) -> bool:
        """Whether `arm` is entered only by the branch that ends `head` and would not close a
        nested loop onto `head` (`closes_nested_loop`)."""
        return (
            arm != head
            and arm not in self.entered_otherwise
            and self.references(arm) == 1
            and not closes_nested_loop(head, self.next_blocks[arm], self.depth[head])
        )

    def preference(self, arm: int) -> tuple[int, bool]:
        """Larger for the arm members take more often: deeper in loops, then not returning."""
        ends_returning = isinstance(self.blocks[arm].body.block.last_op, vm.ReturnOp | vm.HaltOp)
        return self.depth[arm], not ends_returning


def closes_nested_loop(head: int, arm_next: Iterable[int], head_depth: int) -> bool:
    """Whether absorbing an arm whose jumps, branches and side exits lead to `arm_next` would
    make `head`, a block inside two loops or more (`head_depth`, `loop_depths`), jump to itself.

    A sweep repeats a block that jumps to itself until no member stands there. For a loop inside
    another, the members that leave it early then wait for the longest trip before the outer
    loop's next round, in lockstep as under `vmap`; left two blocks (one round per sweep), the
    loop lets them run the outer loop's blocks meanwhile. An outermost loop keeps its one
    repeating block: its members have no enclosing round to wait for. A call of `head` is not
    a jump (the descent it starts is `summarize-descents`' to fold)."""
    return head_depth >= 2 and head in arm_next


def is_trampoline(block: vm.BlockOp) -> bool:
    """Whether `block` is only its terminator, a call or a jump (nothing would run masked for
    the members that leave a superblock before it)."""
    return isinstance(block.body.block.first_op, vm.CallOp | vm.JumpOp)


def thread_trampolines(program: vm.ProgramOp) -> None:
    """Give each branch arm that leads to a shared trampoline (`is_trampoline`, entered only by
    jumps, branches and side exits) a copy of its own, placed right after the original, so that
    `form-superblocks` can absorb it: recursive Fibonacci's two `vm.call` blocks, each shared by
    the ends of both recursive calls, would otherwise be block runs of their own."""
    blocks = {block.number: block for block in program.blocks}
    originals = sorted(blocks)
    entered_otherwise = _entered_otherwise(blocks.values())
    references = Counter(target for block in blocks.values() for target in _flow_targets(block))
    copies: dict[int, list[int]] = {}
    for number in originals:
        branch = blocks[number].body.block.last_op
        if not isinstance(branch, vm.BranchOp):
            continue
        arms = branch.get_trait(vm.BlockTargets)
        assert arms is not None
        for position, target in enumerate(arms.targets(branch)):
            if target in entered_otherwise or references[target] < 2 or not is_trampoline(blocks[target]):
                continue
            copy = blocks[target].clone()
            copy.properties["index"] = IntegerAttr(len(blocks), 64)
            program.body.block.insert_op_after(copy, blocks[target])
            blocks[copy.number] = copy
            copies.setdefault(target, []).append(copy.number)
            references[target] -= 1
            arms.set_target(branch, position, copy.number)
    order = [n for original in originals for n in (original, *copies.get(original, ()))]
    renumber(program, {old: new for new, old in enumerate(order)})


def _absorb(head: vm.BlockOp, branch: vm.BranchOp, arm: vm.BlockOp, continue_then: bool) -> None:
    """`head` ends with a side exit to the other arm, then `arm`'s ops."""
    cond = branch.cond
    then_arm, else_arm = vm.op_targets(branch)
    if continue_then:
        negate = vm.PrimOp("logical_not", [cond], [IntegerType(1)])
        head.body.block.insert_op_before(negate, branch)
        cond, other = negate.res[0], else_arm
    else:
        other = then_arm
    head.body.block.insert_op_before(vm.ExitIfOp(cond, other), branch)
    branch.detach()
    branch.erase()
    for op in _ops(arm):
        op.detach()
        head.body.block.add_op(op)


def renumber(program: vm.ProgramOp, numbers: Mapping[int, int]) -> None:
    """Block n becomes block numbers[n], and so does every target naming it."""
    for block in program.blocks:
        block.properties["index"] = IntegerAttr(numbers[block.number], 64)
    vm.retarget_blocks(program.blocks, numbers.__getitem__)


def form_superblocks(module: ModuleOp) -> None:
    """Merge every absorbable branch arm into its block (see the module docstring)."""
    program = the_vm_program(module, FormSuperblocksPass.name)
    thread_trampolines(program)
    blocks = {block.number: block for block in program.blocks}
    analysis = _Program(blocks)
    for number in sorted(blocks):
        if number not in blocks:  # absorbed by an earlier block
            continue
        head = blocks[number]
        while isinstance(branch := head.body.block.last_op, vm.BranchOp):
            arms = list(vm.op_targets(branch))
            candidates = [arm for arm in arms if analysis.absorbable(number, arm)]
            if len(candidates) == 2 and analysis.preference(arms[0]) == analysis.preference(arms[1]):
                # no arm is clearly the common one: only a trampoline is absorbed (it adds
                # nothing to run for the members that leave by the other arm)
                candidates = [arm for arm in candidates if is_trampoline(blocks[arm])][:1]
            if not candidates:
                break
            arm = max(candidates, key=analysis.preference)
            _absorb(head, branch, blocks[arm], continue_then=arm == arms[0])
            blocks[arm].detach()
            blocks[arm].erase()
            del blocks[arm]
            analysis = _Program(blocks)
    renumber(program, {old: new for new, old in enumerate(sorted(blocks))})


@dataclass(frozen=True)
class FormSuperblocksPass(ModulePass):
    """Merge branch arms entered from one block only into that block, behind side exits
    (`vm.exit_if`): fewer, larger kernels."""

    name = "form-superblocks"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        form_superblocks(op)
