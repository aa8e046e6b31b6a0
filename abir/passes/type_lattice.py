"""The lattice of `infer-types`: facts (a per-member type and a `weak` flag) and their joins.

A fact is a builtin IR type plus `weak`, the mark of values computed from Python literals only
(NEP 50: they take the type of what they meet). Joins at block arguments and returns keep the
strong side when a weak value fits it, give a bool meeting a number that number, and report any
other disagreement (`Conflicts` keeps the messages of the last round only; where the IR records
the Python lines the values come from, the message names them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
from xdsl.ir import Attribute

from abir.types import TensorType, ir_type, tensor_type_of


@dataclass(frozen=True)
class Fact:
    """What inference knows about a value: its per-member type, and whether it is a weak literal."""

    type: Attribute
    weak: bool = False

    @property
    def tensor(self) -> TensorType:
        return tensor_type_of(self.type)

    def strong(self) -> Fact:
        return Fact(self.type) if self.weak else self


def fmt(t: Attribute | Fact | None) -> str:
    if t is None:
        return "<unknown>"
    if isinstance(t, Fact):
        return ("weak " if t.weak else "") + str(t.type)
    return str(t)


def describe_fact(fact: Fact) -> str:
    """A fact in NumPy's words: `an int64`, `a float64 array of shape (3,)`."""
    tensor = fact.tensor
    dtype = np.dtype(tensor.dtype).name
    if tensor.shape:
        return f"a {dtype} array of shape {tuple(tensor.shape)}"
    return f"{'an' if dtype[0] in 'aeiou' else 'a'} {dtype}"


def scalar_of(attr: Attribute) -> bool | int | float | None:
    """The Python value of a scalar constant attribute (None for dense tensors)."""
    if isinstance(attr, IntegerAttr):
        value = attr.value.data
        return bool(value) if attr.type == ir_type(np.bool_) else value
    if isinstance(attr, FloatAttr):
        return attr.value.data
    return None


def weak_probe(fact: Fact) -> bool | int | float:
    """A Python scalar of the same kind as a weak fact (for NEP 50 promotion queries)."""
    kind = fact.tensor.dtype.kind
    return True if kind == "b" else 1 if kind in "iu" else 1.0


def absorbs(strong: Fact, weak: Fact) -> bool:
    """Whether a weak literal can take the strong type without changing kind or shape."""
    if strong.tensor.shape != weak.tensor.shape and weak.tensor.shape != ():
        return False
    try:
        return np.result_type(strong.tensor.dtype, weak_probe(weak)) == strong.tensor.dtype
    except (TypeError, OverflowError):
        return False


def join_facts(a: Fact, b: Fact) -> Fact | None:
    """The join of two facts meeting at one value, or None when they conflict: equal types, a weak
    literal absorbed by a typed value of its kind, or two weak scalars promoted (NEP 50)."""
    if a.type == b.type:
        return Fact(a.type, a.weak and b.weak)
    if a.weak and not b.weak and absorbs(b, a):
        return b
    if b.weak and not a.weak and absorbs(a, b):
        return a
    if a.weak and b.weak and a.tensor.shape == b.tensor.shape == ():
        return Fact(ir_type(np.result_type(a.tensor.dtype, b.tensor.dtype)), True)
    return None


def join_values(a: Fact, b: Fact) -> Fact | None:
    """The join of two facts meeting where control flow merges (a block argument, a function's
    result): `join_facts`, and also a bool with a number of the same shape, which gives the
    number. Python's `flag and f(x)`, `x if c else False` or `return n > 0` on one path and
    `return n` on another give a bool to some members and a number to others; stacked, NumPy
    makes them all numbers (bool is a kind of int: `True` is 1, `~True` is -2). The bool is
    converted where it flows into the join (`cast_at_joins`)."""
    if a.tensor.shape != b.tensor.shape:
        return None  # some members would hold arrays of another shape (a weak number too)
    joined = join_facts(a, b)
    if joined is not None or a.weak or b.weak:
        return joined
    kinds = {a.tensor.dtype.kind, b.tensor.dtype.kind}
    if len(kinds) == 2 and "b" in kinds and kinds <= set("biuf"):
        return a if a.tensor.dtype.kind != "b" else b
    return None


KIND_GROUPS = {"b": "b", "i": "i", "u": "i", "f": "f", "c": "c"}


def widen_param(param: Fact, arg: Fact) -> Fact | None:
    """The parameter fact a specialization takes to also serve an argument: equal types (strong
    if either is), or a weak fact meeting a strong one of the same kind that absorbs it (a literal
    `0` passed where an i32 is expected); None otherwise (a new specialization is needed)."""
    if param.type == arg.type:
        return Fact(param.type, param.weak and arg.weak)
    if param.weak == arg.weak:
        return None
    strong, weak = (arg, param) if param.weak else (param, arg)
    same_kind = KIND_GROUPS.get(strong.tensor.dtype.kind) == KIND_GROUPS.get(weak.tensor.dtype.kind)
    return strong if same_kind and absorbs(strong, weak) else None


def fmt_signature(facts: Sequence[Fact]) -> str:
    return "(" + ", ".join(fmt(f) for f in facts) + ")"


@dataclass(frozen=True)
class Conflict:
    """Two facts that disagree where they meet, in IR function `function`; a `located` message
    already names the Python file and line."""

    function: str
    message: str
    located: bool = False


Explain = Callable[[Fact, Any, Fact, Any], str | None]
"""Given the facts that meet and where each comes from (the `origins` given to `join_all`), a
located message for their conflict, or None to fall back to the plain one."""


class Conflicts:
    """Collects join conflicts; only those of the final (stable) round are reported."""

    def __init__(self) -> None:
        self.found: list[Conflict] = []

    def join_all(
        self,
        facts: Sequence[Fact | None],
        where: str,
        function: str = "?",
        origins: Sequence[Any] | None = None,
        explain: Explain | None = None,
    ) -> Fact | None:
        """The join of `facts` (None: not known yet); a conflict is recorded, and the first fact
        kept. `where` names the join in IR terms; `explain` words it in Python's, given where
        the facts come from (`origins`, one per fact)."""
        result: Fact | None = None
        origin: Any = None
        for index, fact in enumerate(facts):
            location = origins[index] if origins is not None else None
            if fact is None:
                continue
            if result is None:
                result, origin = fact, location
                continue
            joined = join_values(result, fact)
            if joined is not None:
                result = joined
                continue
            explained = explain(result, origin, fact, location) if explain is not None else None
            plain = f"{where}: values of types {fmt(result.type)} and {fmt(fact.type)} meet; they must agree"
            self.found.append(Conflict(function, explained or plain, located=explained is not None))
        return result
