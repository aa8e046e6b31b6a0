"""`allocate-storage`: choose the storage class of every `stack.var`.

* `stack`: pushed, popped or peeked somewhere (it keeps saved values across re-entrant calls);
* `dead`: never read (and not a program output): its writes can be dropped;
* `temporary`: every read is preceded by a write in the same block, and it is not a program
  input or output: it never crosses a block boundary and becomes an SSA value in the kernel;
* `register`: everything else (one `[B, ...]` array).

With call lowering's caller-save discipline, recursive fibonacci gets stacks only for `n` and the
first call's result; a self-tail-recursive loop gets none.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from abir.dialects import stack
from abir.dialects.stack import StorageAttr, StorageClass
from abir.passes.analysis import reads_before_write, reads_writes, the_program


def choose_storage(program: stack.ProgramOp) -> dict[str, StorageClass]:
    """The storage class of every variable the program mentions."""
    read: set[str] = set()
    exposed: set[str] = set()
    stacked: set[str] = set()
    for block in program.body.blocks:
        exposed |= reads_before_write(block)
        for op in block.ops:
            read |= set(reads_writes(op)[0])
            if isinstance(op, stack.PushOp | stack.PopOp | stack.PeekOp):
                stacked |= {v.string_value() for v in op.vars.data}
    inputs = {v.string_value() for v in program.inputs.data}
    outputs = {v.string_value() for v in program.outputs.data}
    storage: dict[str, StorageClass] = {}
    for name in {*read, *exposed, *stacked, *inputs, *outputs, *written_vars(program)}:
        if name in stacked:
            storage[name] = StorageClass.STACK
        elif name not in read and name not in outputs and name not in inputs:
            storage[name] = StorageClass.DEAD
        elif name in exposed or name in inputs or name in outputs:
            storage[name] = StorageClass.REGISTER
        else:
            storage[name] = StorageClass.TEMPORARY
    return storage


def written_vars(program: stack.ProgramOp) -> set[str]:
    return {w for op in program.walk() for w in reads_writes(op)[1]}


def allocate_storage(module: ModuleOp) -> None:
    """Set the storage class of every variable declaration (unused declarations are dead)."""
    storage = choose_storage(the_program(module))
    for op in module.ops:
        if isinstance(op, stack.VarOp):
            op.storage = StorageAttr(storage.get(op.sym_name.data, StorageClass.DEAD))


@dataclass(frozen=True)
class AllocateStoragePass(ModulePass):
    """Choose dead / temporary / register / stack storage for every stack variable."""

    name = "allocate-storage"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        allocate_storage(op)
