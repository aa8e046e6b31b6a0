"""`order-sweeps`: number the vm blocks so that few of the transitions members make go backwards.

A sweeping execution (the JAX and TensorFlow backends) runs the blocks in index order once per
sweep; a member moves on within the sweep at a forward transition and waits for the next sweep
at a backward one. So the number of sweeps a member needs is the number of backward transitions
it makes, and the block order should put the frequent transitions forwards.

`schedule-blocks{order=flow}` orders the stack program's blocks by counting each possible
transition once. This pass refines that order on the final vm program (after
`form-superblocks`, whose merged blocks and self-loops it sees), weighting each transition by
how often a member is expected to make it:

* the expected visits of each block come from a Markov model of one member's run: from the
  entry, each side exit (`vm.exit_if`) is taken with probability `EXIT_PROBABILITY`, a branch
  takes each arm with probability 1/2, a call enters its callee, and a return goes to the return
  block of each call of its function in proportion to how often that call's block is visited
  (the proportions are found by iterating to a fixed point); the visits solve the linear system
  of that chain;
* the order is then improved by moving single blocks (insertion moves, first improvement) while
  the weighted count of backward transitions falls; self-loops do not count (a sweep repeats a
  block that jumps to itself);
* the entry stays block 0, and the program's tail (the last blocks, from which members only
  move forward to the halt) stays at the end in its order, so the machine still holds members
  there until every live member arrives.

What it gains: docs/performance.md#order-sweeps. Orders that gain less than `MIN_GAIN` by the
model are not applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from abir.dialects import vm
from abir.passes.analysis import the_vm_program, vm_function_of
from abir.passes.form_superblocks import renumber

EXIT_PROBABILITY = 0.5
"""The model's probability that a member leaves a block by a side exit (a branch arm that
`form-superblocks` did not absorb)."""
FIXED_POINT_ROUNDS = 8
MIN_GAIN = 0.1
"""The new order is kept only when it cuts the expected backward transitions by this fraction:
a small gain by the model can be a loss in the run (docs/performance.md#order-sweeps)."""
MAX_BLOCKS = 200
"""Larger programs keep the order of `schedule-blocks` (each local-search move is evaluated on
the whole order)."""


@dataclass(frozen=True)
class Chain:
    """The Markov model of one member's run over `size` blocks (the halt is block `size`):
    `fixed[a, b]`, the probability of each transition that does not depend on the visits (side
    exits, jumps, branches, calls, the halt), and per block ending in `vm.return` the share of
    its runs that reach the return (`stay`) and its return sites (calling block, return
    block), split by the visits of the calling blocks (`transition_matrix`)."""

    size: int
    fixed: np.ndarray
    returns: tuple[tuple[int, float, tuple[tuple[int, int], ...]], ...]


def chain_of(blocks: Mapping[int, vm.BlockOp]) -> Chain:
    """The `Chain` of the blocks: each side exit (`vm.exit_if`) taken with probability
    `EXIT_PROBABILITY`, each target of the terminator with an equal share of the rest."""
    n = len(blocks)
    sites = vm.block_return_sites([blocks[number] for number in range(n)], vm_function_of)
    fixed = np.zeros((n, n + 1))
    returns = []
    for number, block in blocks.items():
        stay = 1.0
        *body, term = block.body.block.ops
        for op in body:
            for target in vm.op_targets(op):  # side exits
                fixed[number, target] += stay * EXIT_PROBABILITY
                stay *= 1 - EXIT_PROBABILITY
        if nexts := vm.op_targets(term, (vm.TargetRole.NEXT, vm.TargetRole.CALLEE)):
            for target in nexts:
                fixed[number, target] += stay / len(nexts)
        elif isinstance(term, vm.ReturnOp):
            returns.append((number, stay, tuple(sites[number])))
        else:  # vm.halt
            fixed[number, n] += stay
    return Chain(n, fixed, tuple(returns))


def transition_matrix(chain: Chain, visits: np.ndarray) -> np.ndarray:
    """P[a, b]: the probability that a member at block a goes to block b next (the halt, block
    `chain.size`, absorbs), returns split by the given visits of the calling blocks."""
    matrix = chain.fixed.copy()
    for number, stay, sites in chain.returns:
        total = sum(visits[caller] for caller, _ in sites)
        for caller, back in sites:
            matrix[number, back] += stay * (visits[caller] / total if total > 0 else 1 / len(sites))
    return matrix


def expected_transitions(blocks: Mapping[int, vm.BlockOp]) -> np.ndarray | None:
    """W[a, b]: expected transitions from block a to block b in one member's run (None when the
    model has no finite solution, e.g. a loop it never leaves)."""
    chain = chain_of(blocks)
    n = chain.size
    visits = np.ones(n)
    start = np.zeros(n)
    start[0] = 1.0
    for _ in range(FIXED_POINT_ROUNDS):
        matrix = transition_matrix(chain, visits)
        try:
            solved = np.linalg.solve(np.eye(n) - matrix[:, :n].T, start)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(solved)) or np.any(solved < -1e-9):
            return None
        if np.array_equal(solved, visits):  # a fixed point: the rounds left would repeat this one
            break
        visits = solved
    return visits[:, None] * matrix[:, :n]


def backward_weight(order: list[int], weights: np.ndarray) -> float:
    """The expected backward transitions of `order` (self-loops excluded)."""
    position = np.empty(len(order), dtype=int)
    position[order] = np.arange(len(order))
    backward = position[:, None] > position[None, :]  # excludes the diagonal
    return float(weights[backward].sum())


def improve_order(order: list[int], weights: np.ndarray, pinned_front: int, pinned_back: int) -> list[int]:
    """Insertion moves of the blocks between the pinned ends while the weighted backward count
    falls (first improvement)."""
    best, cost = list(order), backward_weight(order, weights)
    movable = range(pinned_front, len(order) - pinned_back)
    improved = True
    while improved:
        improved = False
        for i in movable:
            for j in movable:
                if i == j:
                    continue
                candidate = best[:i] + best[i + 1 :]
                candidate.insert(j, best[i])
                candidate_cost = backward_weight(candidate, weights)
                if candidate_cost < cost - 1e-9:
                    best, cost, improved = candidate, candidate_cost, True
    return best


def tail_length(blocks: Mapping[int, vm.BlockOp], weights: np.ndarray) -> int:
    """How many of the last blocks lead only forward (to later blocks or the halt)."""
    n = len(blocks)
    start = n
    while start > 0 and all(b > start - 1 for b in np.nonzero(weights[start - 1])[0]):
        start -= 1
    return n - start


def order_sweeps(module: ModuleOp) -> None:
    program = the_vm_program(module, OrderSweepsPass.name)
    blocks = {block.number: block for block in program.blocks}
    if len(blocks) > MAX_BLOCKS or len(blocks) < 3:
        return
    weights = expected_transitions(blocks)
    if weights is None:
        return
    current = list(range(len(blocks)))
    order = improve_order(current, weights, 1, tail_length(blocks, weights))
    if backward_weight(order, weights) > (1 - MIN_GAIN) * backward_weight(current, weights):
        return
    renumber(program, {old: new for new, old in enumerate(order)})
    for block in sorted(program.blocks, key=lambda b: b.number):
        block.detach()
        program.body.block.add_op(block)


@dataclass(frozen=True)
class OrderSweepsPass(ModulePass):
    """Renumber the vm blocks so that the transitions members are expected to make most often
    go forwards (one sweep runs the blocks in index order)."""

    name = "order-sweeps"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        order_sweeps(op)
