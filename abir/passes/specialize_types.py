"""Type specialization for `infer-types`: one copy of a function per tuple of argument facts.

A Python function is polymorphic: `def scale(v): return v * 2` may be called once with an int
and once with a float. The functional IR types every value once, so `infer-types` gives each
function one *specialization* per distinct tuple of argument facts (type plus weak flag) its
call sites pass, and redirects each call to the specialization of its own argument facts:

    functional.func @scale(%v: i64) -> i64 ...          // first signature seen: the plain name
    functional.func @scale.t1(%v: f64) -> f64 ...       // the others: <name>.t1, <name>.t2, ...

Policy (what `Specializations` implements; `ModuleInference` drives it round by round):

* The key of a call is the tuple of its argument `Fact`s, weak flag included. A weak argument
  (a Python number computed from literals only, e.g. `scale(3)` or a counter started at 0)
  joins a specialization whose parameter has a strong type of the same kind (bool, integer,
  float, complex), as a literal would take that type under NEP 50: `acc_rec(n, 0)` and
  `acc_rec(n - 1, acc + x_i32)` share one `acc: i32` specialization (a weak parameter of an
  existing specialization is widened to the strong type). Across kinds it is its own kind:
  `scale(3)` is computed with Python-int semantics even when `scale(x_f64)` exists (as plain
  Python would). A parameter that stays weak behaves like a literal inside the specialization
  (converted where it meets a typed value).
* Keys are sticky per call op: a call's key is joined with the key it had in earlier rounds
  (a weak fact absorbed by a strong one of the same kind, weak scalars promoted). A call site
  that first sees `0` (weak) and later `f(y)` (f64) through a loop settles on the f64
  specialization instead of flip-flopping between two specializations while facts settle.
* Calls whose arguments are not all known yet keep their current callee and teach nothing.
* Recursive calls are keyed like any other: a recursion whose argument types change along the
  way (`f(x_i64)` calling `f(x / 2)`) gets a chain of specializations that closes once the
  types stop changing (`f(i64)` -> `f.t1(f64)` -> `f.t1`), as plain Python would compute it.
* At most `MAX_SPECIALIZATIONS` per function; beyond that (e.g. a recursion whose argument
  shape grows at every level) the error names the function, every signature seen, the call that
  asked for one more and whether it is part of a recursion.
* At the end, specializations no call reaches are dropped and the survivors renumbered in
  creation order (the first keeps the plain name), so names are deterministic and dense.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

from xdsl.dialects.builtin import ModuleOp, StringAttr, SymbolRefAttr
from xdsl.rewriter import InsertPoint, Rewriter

from abir.dialects import functional
from abir.errors import TypeInferenceError
from abir.passes.analysis import functions_of, reachable

MAX_SPECIALIZATIONS = 8
SUFFIX = ".t"

F = TypeVar("F", bound=Hashable)
Key = tuple[F, ...]


def base_names(symbol: str) -> list[str]:
    """`symbol` and the names it specializes, most specific first: `f.s1.t2` -> [`f.s1.t2`,
    `f.s1`, `f`] (`.tN`: type specializations, `.sN`: the frontend's structure ones)."""
    names = [symbol]
    while True:
        head, dot, tail = names[-1].rpartition(".")
        if not dot or not head or len(tail) < 2 or tail[0] not in "ts" or not tail[1:].isdigit():
            return names
        names.append(head)


class Specializations:
    """The specializations of every function of one module, keyed by argument facts.

    `join(a, b)` joins two facts of one argument position without a conflict, or returns None;
    `widen(a, b)` is the fact a specialization with parameter fact `a` takes to also serve
    argument fact `b`, or None when it cannot (only a weak fact meeting a strong one of its own
    kind widens); `show(key)` formats a key for messages."""

    def __init__(
        self,
        module: ModuleOp,
        join: Callable[[F, F], F | None],
        widen: Callable[[F, F], F | None],
        show: Callable[[Key], str],
        limit: int = MAX_SPECIALIZATIONS,
    ):
        self.module = module
        self.join = join
        self.widen = widen
        self.version = 0
        """Bumped whenever a signature is set or widened."""
        self.show = show
        self.limit = limit
        names = list(functions_of(module))
        self.root: dict[str, str] = {name: name for name in names}
        """specialization symbol -> the symbol of the function it copies."""
        self.members: dict[str, list[str]] = {name: [name] for name in names}
        """root -> its specializations in creation order (the root first)."""
        self.by_key: dict[str, dict[Key, str]] = {name: {} for name in names}
        self.signature: dict[str, Key] = {}
        """specialization -> its parameter facts (absent: not called with known facts yet)."""
        self.call_keys: dict[functional.CallOp, Key] = {}
        self.first_call: dict[str, str] = {}
        """specialization -> the function whose call asked for it (for messages)."""
        self._taken = set(names)

    def root_of(self, symbol: str) -> str:
        return self.root.get(symbol, symbol)

    def assign(self, symbol: str, key: Key) -> None:
        """Fix the signature of `symbol` (the entry function: its argument types)."""
        self.signature[symbol] = key
        self.by_key[self.root_of(symbol)][key] = symbol
        self.version += 1

    def params(self, symbol: str) -> Key | None:
        return self.signature.get(symbol)

    def redirect(
        self,
        calls: Sequence[tuple[str, functional.CallOp, Sequence[F | None]]],
        graph: Mapping[str, Sequence[str]],
    ) -> bool:
        """Point every call (caller, op, argument facts) at the specialization of its key,
        creating specializations as needed; whether anything changed (a call's callee, or the
        signature of a function that had none)."""
        version = self.version
        changed = False
        for caller, op, facts in calls:
            if any(f is None for f in facts):
                continue
            key = self._sticky_key(op, tuple(facts))  # type: ignore[arg-type]
            current = op.callee.string_value()
            target = self._target(self.root_of(current), key, caller, graph)
            if target != current:
                op.callee = SymbolRefAttr(target)
                changed = True
        return changed or self.version != version

    def _sticky_key(self, op: functional.CallOp, key: Key) -> Key:
        previous = self.call_keys.get(op)
        if previous is not None and len(previous) == len(key):
            joined = tuple(self.join(p, k) for p, k in zip(previous, key, strict=True))
            if all(j is not None for j in joined):
                key = joined  # type: ignore[assignment]
        self.call_keys[op] = key
        return key

    def _target(self, root: str, key: Key, caller: str, graph: Mapping[str, Sequence[str]]) -> str:
        table = self.by_key.setdefault(root, {})
        if key in table:
            return table[key]
        for member in self.members.get(root, []):
            signature = self.signature.get(member)
            if signature is None or len(signature) != len(key):
                continue
            widened = tuple(self.widen(p, k) for p, k in zip(signature, key, strict=True))
            if all(w is not None for w in widened):
                if widened != signature:
                    self.assign(member, widened)  # type: ignore[arg-type]
                table[key] = member
                return member
        if root not in self.signature and root in self.root:
            self.assign(root, key)
            self.first_call[root] = caller
            return root
        if len(self.members.get(root, [])) >= self.limit:
            raise TypeInferenceError(self._limit_message(root, key, caller, graph))
        symbol = self._clone(root)
        self.assign(symbol, key)
        self.first_call[symbol] = caller
        return symbol

    def _clone(self, root: str) -> str:
        funcs = functions_of(self.module)
        members = self.members.setdefault(root, [root])
        index = len(members)
        while f"{root}{SUFFIX}{index}" in self._taken:
            index += 1
        symbol = f"{root}{SUFFIX}{index}"
        clone = funcs[root].clone()
        clone.sym_name = StringAttr(symbol)
        last = max((funcs[m] for m in members if m in funcs), key=lambda f: _position(self.module, f))
        Rewriter.insert_op(clone, InsertPoint.after(last))
        members.append(symbol)
        self.root[symbol] = root
        self._taken.add(symbol)
        return symbol

    def _limit_message(self, root: str, key: Key, caller: str, graph: Mapping[str, Sequence[str]]) -> str:
        seen = "; ".join(
            f"@{symbol}{self.show(self.signature[symbol])}"
            for symbol in self.members[root]
            if symbol in self.signature
        )
        recursive = any(
            caller in reachable(graph, member) for member in self.members[root] if member in graph
        )
        message = (
            f"@{root} is called with more than {self.limit} different argument type signatures, the "
            f"most abir specializes one function for; signatures so far: {seen}; a call in @{caller} "
            f"now passes {self.show(key)}"
        )
        if recursive:
            message += (
                f". The call is part of a recursion through @{root} whose argument types keep changing "
                "(e.g. a shape that grows or a dtype that is promoted at every level): make the recursive "
                "call pass the same types as the function receives (convert with astype, or keep shapes "
                "fixed)"
            )
        else:
            message += ". Convert the arguments to fewer distinct types before the calls"
        return message

    def finalize(self, module: ModuleOp) -> dict[str, str]:
        """Drop nothing (the caller erased unreachable functions already); renumber the surviving
        specializations of each function densely in creation order, the first one taking the plain
        name. Returns the renaming (old -> new) it applied."""
        funcs = functions_of(module)
        rename: dict[str, str] = {}
        claimed: set[str] = set()
        for root, members in self.members.items():
            live = [m for m in members if m in funcs]
            if len(live) <= 1 and (not live or live[0] == root):
                claimed.update(live)
                continue
            index = 0
            for member in live:
                while True:
                    name = root if index == 0 else f"{root}{SUFFIX}{index}"
                    index += 1
                    clash = name in funcs and self.root_of(name) != root
                    if not clash and name not in claimed:
                        break
                claimed.add(name)
                if name != member:
                    rename[member] = name
        if not rename:
            return rename
        for old, new in rename.items():
            funcs[old].sym_name = StringAttr(new)
        for op in module.walk():
            if isinstance(op, functional.CallOp) and (new := rename.get(op.callee.string_value())):
                op.callee = SymbolRefAttr(new)
        return rename


def _position(module: ModuleOp, op: functional.FuncOp) -> int:
    for index, candidate in enumerate(module.ops):
        if candidate is op:
            return index
    return -1
