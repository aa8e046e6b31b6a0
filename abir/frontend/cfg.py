"""A function's control-flow graph under construction.

Blocks are xDSL blocks that receive their operations as the frontend walks the Python source.
Terminators are kept as Python descriptions (`Jump`, `Branch`, `Return`) until `finalize`, so
that the arguments a join block needs can be added to its incoming edges after the edges exist.
`finalize` then drops block arguments that receive one value on every edge (trivial phis), drops
unreachable blocks, and emits the `cf.br` / `cf.cond_br` / `functional.return` operations.

Each terminator carries `abir.loc = "file:line"`: the block's place in the source, the last
statement lowered into it (or, for a block no statement starts in, such as a loop header or the
join after an `if`, the statement that made it). The passes keep it on the terminators that end
a block, down to the vm blocks, so that run-time errors can say where a member stands; type
inference uses it to locate conflicting joins.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects import cf
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue

from abir.dialects.functional import LOCATION_ATTR, ReturnOp, UnknownType


@dataclass(eq=False)
class Edge:
    """A control-flow edge from the end of `source`, passing `args` to `target`'s arguments."""

    source: Block
    target: Block | None = None
    args: list[SSAValue] = field(default_factory=list)


@dataclass(eq=False)
class Jump:
    edge: Edge


@dataclass(eq=False)
class Branch:
    condition: SSAValue
    then_edge: Edge
    else_edge: Edge


@dataclass(eq=False)
class Return:
    values: list[SSAValue]


Terminator = Jump | Branch | Return


class FunctionGraph:
    """The blocks of one `functional.func` body and their pending terminators."""

    def __init__(self, region: Region, location: str | None = None):
        self.region = region
        self.terminators: dict[Block, Terminator] = {}
        self.location = location
        """The `file:line` of the statement being lowered (the frontend keeps it current)."""
        self.locations: dict[Block, str] = {}
        """Each block's place in the source (see the module docstring)."""

    @property
    def entry(self) -> Block:
        block = self.region.blocks.first
        assert block is not None
        return block

    def new_block(self) -> Block:
        block = Block()
        self.region.add_block(block)
        self.locate(block)
        return block

    def locate(self, block: Block) -> None:
        """`block` is at the statement being lowered."""
        if self.location is not None:
            self.locations[block] = self.location

    def add_argument(self, block: Block, hint: str | None = None) -> BlockArgument:
        arg = block.insert_arg(UnknownType(), len(block.args))
        if hint is not None and hint.isidentifier():
            arg.name_hint = hint
        return arg

    def jump(self, source: Block) -> Edge:
        """End `source` with an unconditional branch whose target is set later."""
        edge = Edge(source)
        self._terminate(source, Jump(edge))
        return edge

    def branch(self, source: Block, condition: SSAValue) -> tuple[Edge, Edge]:
        """End `source` with a conditional branch; returns the (true, false) edges."""
        then_edge, else_edge = Edge(source), Edge(source)
        self._terminate(source, Branch(condition, then_edge, else_edge))
        return then_edge, else_edge

    def ret(self, source: Block, values: list[SSAValue]) -> None:
        self._terminate(source, Return(values))

    def _terminate(self, block: Block, terminator: Terminator) -> None:
        assert block not in self.terminators, "a block is terminated twice"
        self.terminators[block] = terminator

    def finalize(self) -> None:
        """Simplify the graph and emit the terminator operations."""
        self._drop_unreachable_blocks()
        while self._drop_trivial_arguments():
            pass
        for block, terminator in self.terminators.items():
            op = _terminator_op(terminator)
            if (location := self.locations.get(block)) is not None:
                op.attributes[LOCATION_ATTR] = StringAttr(location)
            block.add_op(op)

    def edges(self) -> list[Edge]:
        result: list[Edge] = []
        for terminator in self.terminators.values():
            if isinstance(terminator, Jump):
                result.append(terminator.edge)
            elif isinstance(terminator, Branch):
                result += [terminator.then_edge, terminator.else_edge]
        return result

    def _drop_unreachable_blocks(self) -> None:
        reachable: set[Block] = set()
        work = [self.entry]
        while work:
            block = work.pop()
            if block in reachable:
                continue
            reachable.add(block)
            work += [e.target for e in self.edges() if e.source is block and e.target is not None]
        for block in list(self.region.blocks):
            if block not in reachable:
                self.terminators.pop(block, None)
                for op in reversed(list(block.ops)):
                    op.detach()
                    op.erase(safe_erase=False)
                self.region.detach_block(block)
                for arg in block.args:
                    block.erase_arg(arg, safe_erase=False)

    def _drop_trivial_arguments(self) -> bool:
        """Replace one block argument that receives a single other value on every edge."""
        incoming: dict[Block, list[Edge]] = {}
        for edge in self.edges():
            assert edge.target is not None, "an edge was never connected"
            incoming.setdefault(edge.target, []).append(edge)
        for block, edges in incoming.items():
            for arg in block.args:
                sources = {id(e.args[arg.index]): e.args[arg.index] for e in edges}
                sources.pop(id(arg), None)
                if len(sources) != 1:
                    continue
                (value,) = sources.values()
                self._replace_argument(arg, value, edges)
                return True
        return False

    def _replace_argument(self, arg: BlockArgument, value: SSAValue, incoming: list[Edge]) -> None:
        if value.name_hint is None and arg.name_hint is not None:
            value.name_hint = arg.name_hint
        index = arg.index
        for edge in incoming:
            del edge.args[index]
        for edge in self.edges():
            edge.args = [value if a is arg else a for a in edge.args]
        for terminator in self.terminators.values():
            if isinstance(terminator, Branch) and terminator.condition is arg:
                terminator.condition = value
            if isinstance(terminator, Return):
                terminator.values = [value if a is arg else a for a in terminator.values]
        arg.replace_all_uses_with(value)
        arg.block.erase_arg(arg)


def _terminator_op(terminator: Terminator) -> Operation:
    if isinstance(terminator, Return):
        return ReturnOp(*terminator.values)
    if isinstance(terminator, Jump):
        edge = terminator.edge
        assert edge.target is not None
        return cf.BranchOp(edge.target, *edge.args)
    then_edge, else_edge = terminator.then_edge, terminator.else_edge
    assert then_edge.target is not None and else_edge.target is not None
    return cf.ConditionalBranchOp(
        terminator.condition, then_edge.target, then_edge.args, else_edge.target, else_edge.args
    )
