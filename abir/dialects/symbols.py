"""Symbol lookup through an index per symbol table.

xDSL's `SymbolTable.lookup_symbol` scans the table's ops on every call, so verifying a module
whose ops name variables and functions (every `stack.read`, `vm.write`, `functional.call`...)
took time quadratic in its size (measured in docs/performance.md#symbol-lookup).
`lookup_symbol` answers from a name -> op index of the table,
checked on every hit (the op must still be in the table under that name) and rebuilt by one scan
when a check fails or a name is missing, so passes may add, erase and rename symbols freely.
The index holds its table and ops weakly (an op refers to its table through its parent), so a
module is freed with its last user.
"""

from __future__ import annotations

import weakref

from xdsl.dialects.builtin import StringAttr, SymbolRefAttr
from xdsl.ir import Operation
from xdsl.traits import SymbolOpInterface, SymbolTable

_INDEXES: weakref.WeakKeyDictionary[Operation, weakref.WeakValueDictionary[str, Operation]] = (
    weakref.WeakKeyDictionary()
)


def lookup_symbol(op: Operation, name: str | StringAttr | SymbolRefAttr) -> Operation | None:
    """What `SymbolTable.lookup_symbol(op, name)` finds (the first op of `op`'s nearest symbol
    table that defines `name`), from the table's index."""
    ref = SymbolRefAttr(name) if isinstance(name, str | StringAttr) else name
    if ref.nested_references.data:
        return SymbolTable.lookup_symbol(op, ref)
    table = _nearest_table(op)
    key = ref.root_reference.data
    found = _INDEXES.get(table, {}).get(key)
    if found is None or not _defines(table, found, key):
        _INDEXES[table] = index = _index(table)
        found = index.get(key)
    return found


def _nearest_table(op: Operation) -> Operation:
    anchor: Operation | None = op
    while anchor is not None and not anchor.has_trait(SymbolTable):
        anchor = anchor.parent_op()
    if anchor is None:
        raise ValueError(f"Operation {op.name} has no SymbolTable ancestor")
    return anchor


def _symbol_name(op: Operation) -> str | None:
    interface = op.get_trait(SymbolOpInterface)
    attr = interface.get_sym_attr_name(op) if interface is not None else None
    return attr.data if attr is not None else None


def _defines(table: Operation, op: Operation, key: str) -> bool:
    return op.parent_op() is table and _symbol_name(op) == key


def _index(table: Operation) -> weakref.WeakValueDictionary[str, Operation]:
    index: weakref.WeakValueDictionary[str, Operation] = weakref.WeakValueDictionary()
    for op in table.regions[0].block.ops:
        if (name := _symbol_name(op)) is not None and name not in index:
            index[name] = op
    return index
