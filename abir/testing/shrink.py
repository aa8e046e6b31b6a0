"""Shrinking a failing generated program to a minimal one that fails the same way.

Greedy reduction to a fixed point, each candidate kept only if it is still a valid program (its
plain Python run succeeds within the bounds, see `abir.testing.differential`) and its batched run
on the chosen backend still fails with the same signature (a mismatch, or the same exception
type). The reductions, largest first:

1. one batch member (the failing one where known) instead of the whole batch;
2. statements deleted (runs of them first), and `if`/`while`/`for` statements replaced by one of
   their bodies;
3. expressions replaced by a sub-expression of the same type, or by a small literal of their type
   (calls disappear this way, and with them the functions nobody calls any more);
4. parameters nobody reads dropped (from the function and from every call, or from the inputs);
5. `type_inference` declarations dropped, input values made small.

Unreachable functions and an unused namedtuple definition are pruned after every reduction.
"""

from __future__ import annotations

import ast
import copy
import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from abir.testing.differential import Failure, InvalidProgram, check, load, run_reference
from abir.testing.generate import (
    BOOL,
    FLOAT,
    INT,
    PAIR,
    FuzzProgram,
    ValueType,
    array_shape,
    literal,
    type_of,
    typed,
)

Path = tuple[tuple[str, int | None], ...]
"""Where a node sits in the module: (field, index) steps from the root."""
Edit = Callable[[FuzzProgram], None]
"""One reduction, applied in place to a copy of the current program (reductions are listed as
edits, cheaply, and a copy is made only for the one tried)."""
STATEMENT_LISTS = ("body", "orelse")


@dataclass
class ShrinkResult:
    program: FuzzProgram
    failure: Failure
    checks: int
    """Batched runs the shrinking made."""


class Shrinker:
    """Shrinks `program`, which fails as `failure` on `failure.backend`."""

    def __init__(self, program: FuzzProgram, failure: Failure, directory: str, max_checks: int = 1000,
                 time_budget: float = 120.0):  # fmt: skip
        self.program = program
        self.failure = failure
        self.directory = directory
        self.max_checks = max_checks
        self.deadline = time.monotonic() + time_budget
        self.checks = 0
        self.seen: set[str] = set()

    def exhausted(self) -> bool:
        return self.checks >= self.max_checks or time.monotonic() > self.deadline

    def still_fails(self, candidate: FuzzProgram) -> Failure | None:
        """The candidate's failure if it is a valid program failing the same way, else None."""
        key = candidate.source() + repr(candidate.inputs) + repr(sorted(candidate.declared_results))
        if self.exhausted() or key in self.seen:
            return None
        self.seen.add(key)
        try:
            reference = run_reference(candidate, self.directory)
            namespace = load(candidate, self.directory)
        except (InvalidProgram, SyntaxError, NameError, TypeError):
            return None
        self.checks += 1
        seconds = max(self.deadline - time.monotonic(), 1.0)  # a candidate may loop far longer than the original
        failures = check(candidate, (self.failure.backend,), namespace, reference, seconds)
        same = [f for f in failures if f.signature() == self.failure.signature()]
        return same[0] if same else None

    def attempt(self, candidate: FuzzProgram) -> bool:
        prune(candidate)
        failure = self.still_fails(candidate)
        if failure is None:
            return False
        self.program, self.failure = candidate, failure
        return True

    def shrink(self) -> ShrinkResult:
        self.reduce_members()
        passes: list[Callable[[FuzzProgram], Iterator[Edit]]] = [
            chunk_deletions, statement_deletions, statement_flattenings, parameter_removals, declaration_removals,
            expression_replacements, input_simplifications,
        ]  # fmt: skip
        progress = True
        while progress and not self.exhausted():
            progress = False
            for reductions in passes:
                progress |= self.run_pass(reductions)
        return ShrinkResult(self.program, self.failure, self.checks)

    def run_pass(self, reductions: Callable[[FuzzProgram], Iterator[Edit]]) -> bool:
        """Try the pass's edits in order; after a success, go on from the same position."""
        improved = False
        position = 0
        while not self.exhausted():
            edits = list(reductions(self.program))[position:]
            for offset, edit in enumerate(edits):
                candidate = self.program.copy()
                edit(candidate)
                if self.attempt(candidate):
                    improved = True
                    position += offset
                    break
            else:
                return improved
        return improved

    def reduce_members(self) -> None:
        batch = self.program.batch_size()
        if batch == 1:
            return
        order = list(range(batch))
        if self.failure.member is not None:
            order.remove(self.failure.member)
            order.insert(0, self.failure.member)
        for member in order:
            if self.attempt(with_members(self.program, [member])):
                return
        half = list(range(batch // 2))
        if not self.attempt(with_members(self.program, half)):
            self.attempt(with_members(self.program, list(range(batch // 2, batch))))


def shrink(program: FuzzProgram, failure: Failure, directory: str, max_checks: int = 1000,
           time_budget: float = 120.0) -> ShrinkResult:  # fmt: skip
    return Shrinker(program, failure, directory, max_checks, time_budget).shrink()


# ----- members and inputs ---------------------------------------------------------------------


def with_members(program: FuzzProgram, members: list[int]) -> FuzzProgram:
    result = program.copy()
    result.inputs = [_select(v, members) for v in program.inputs]
    return result


def _select(value: Any, members: list[int]) -> Any:
    if isinstance(value, tuple):
        return tuple(_select(v, members) for v in value)
    if value.shape[0] == 1:
        return value
    return value[members]


def input_simplifications(program: FuzzProgram) -> Iterator[Edit]:
    """Each input leaf (or each element of an array input) made 0, then 1, then halved."""
    for position, leaf in enumerate(_input_leaves(program.inputs)):
        for replacement in _smaller_arrays(leaf):
            yield functools.partial(_set_input_leaf, position, replacement)


def _set_input_leaf(position: int, replacement: np.ndarray, program: FuzzProgram) -> None:
    program.inputs = _replace_leaf(program.inputs, position, replacement)


def _smaller_arrays(array: np.ndarray) -> Iterator[np.ndarray]:
    flat = array.reshape(-1)
    for i, value in enumerate(flat.tolist()):
        for smaller in _smaller_numbers(value):
            candidate = flat.copy()
            candidate[i] = smaller
            yield candidate.reshape(array.shape)


def _smaller_numbers(value: Any) -> list[Any]:
    if isinstance(value, bool):
        return [False] if value else []
    candidates = [0, 1, int(value / 2)] if isinstance(value, int) else [0.0, 1.0, float(int(value))]
    return [c for c in dict.fromkeys(candidates) if abs(c) < abs(value) or (abs(c) == abs(value) and c > value)]


def _input_leaves(value: Any) -> list[np.ndarray]:
    if isinstance(value, tuple | list):
        return [leaf for part in value for leaf in _input_leaves(part)]
    return [value]


def _replace_leaf(value: Any, position: int, replacement: np.ndarray) -> Any:
    counter = iter(range(1 << 30))

    def rebuild(v: Any) -> Any:
        if isinstance(v, tuple | list):
            return type(v)(rebuild(part) for part in v)
        return replacement if next(counter) == position else v

    return rebuild(value)


# ----- statements -----------------------------------------------------------------------------


def statement_lists(program: FuzzProgram) -> Iterator[tuple[Path, list[ast.stmt]]]:
    """Every statement list inside the functions, outermost first."""
    for index, node in enumerate(program.module.body):
        if isinstance(node, ast.FunctionDef):
            yield from _statement_lists(node, (("body", index),))


def _statement_lists(node: ast.AST, path: Path) -> Iterator[tuple[Path, list[ast.stmt]]]:
    for name in STATEMENT_LISTS:
        body = getattr(node, name, None)
        if isinstance(body, list) and body:
            yield (*path, (name, None)), body
    for name in STATEMENT_LISTS:
        for i, statement in enumerate(getattr(node, name, None) or []):
            yield from _statement_lists(statement, (*path, (name, i)))


def resolve(root: ast.AST, path: Path) -> Any:
    node: Any = root
    for name, index in path:
        node = getattr(node, name)
        if index is not None:
            node = node[index]
    return node


def chunk_deletions(program: FuzzProgram) -> Iterator[Edit]:
    """Runs of statements deleted at once, halves first (each check compiles the whole program,
    so deleting one statement at a time from a long body is slow)."""
    for path, body in statement_lists(program):
        size = len(body) // 2
        while size >= 2:
            for start in range(0, len(body) - size + 1, size):
                yield functools.partial(_delete_statements, path, start, size)
            size //= 2


def _delete_statements(path: Path, start: int, size: int, program: FuzzProgram) -> None:
    statements = resolve(program.module, path)
    del statements[start:start + size]
    if not statements and path[-1][0] == "body":
        statements.append(ast.Pass())


def statement_deletions(program: FuzzProgram) -> Iterator[Edit]:
    for path, body in statement_lists(program):
        for i in range(len(body)):
            yield functools.partial(_replace_statement, path, i, None)


def statement_flattenings(program: FuzzProgram) -> Iterator[Edit]:
    """`if`, `while` and `for` statements replaced by their body or their else branch, and `if`
    statements without their else branch."""
    for path, body in statement_lists(program):
        for i, statement in enumerate(body):
            if not isinstance(statement, ast.If | ast.While | ast.For):
                continue
            yield functools.partial(_replace_statement, path, i, "body")
            if statement.orelse:
                yield functools.partial(_replace_statement, path, i, "orelse")
            if isinstance(statement, ast.If) and statement.orelse:
                yield functools.partial(_drop_else, path, i)


def _replace_statement(path: Path, i: int, branch: str | None, program: FuzzProgram) -> None:
    """Statement `i` of the list at `path` replaced by its `branch` (deleted for None)."""
    statements = resolve(program.module, path)
    statements[i:i + 1] = [] if branch is None else getattr(statements[i], branch)
    if not statements and path[-1][0] == "body":
        statements.append(ast.Pass())


def _drop_else(path: Path, i: int, program: FuzzProgram) -> None:
    resolve(program.module, path)[i].orelse = []


# ----- expressions ----------------------------------------------------------------------------


def typed_expressions(program: FuzzProgram) -> Iterator[tuple[Path, ast.expr]]:
    """Every expression carrying a type in the batched functions, outermost first (pre-order).
    Opaque helpers stay as generated: a literal body would lose the batch dimension."""
    for index, node in enumerate(program.module.body):
        if isinstance(node, ast.FunctionDef) and node.name in program.batched:
            yield from _typed_below(node, (("body", index),))


def _typed_below(node: ast.AST, path: Path, nearest: bool = False) -> Iterator[tuple[Path, ast.expr]]:
    """The typed expressions below `node` (at `path`), with their paths: all of them, or with
    `nearest` only those with no typed expression between them and `node`."""
    for name, value in ast.iter_fields(node):
        children = value if isinstance(value, list) else [value]
        for i, child in enumerate(children):
            if not isinstance(child, ast.AST):
                continue
            child_path = (*path, (name, i if isinstance(value, list) else None))
            typed = isinstance(child, ast.expr) and type_of(child) is not None
            if typed:
                yield child_path, child
            if not (typed and nearest):
                yield from _typed_below(child, child_path, nearest)


def expression_replacements(program: FuzzProgram) -> Iterator[Edit]:
    """Each typed expression replaced by a nearest typed sub-expression of its type, or by a
    small literal of its type (smaller than the literal it is)."""
    for path, node in typed_expressions(program):
        t = type_of(node)
        for child_path, child in _typed_below(node, path, nearest=True):
            if type_of(child) == t:
                yield functools.partial(_move_expression, child_path, path)
        number = _literal_number(node)
        for simple in _simple_values(t, program.vector_size):
            if number is None or abs(_literal_number(simple) or 0) < abs(number):
                yield functools.partial(_put_expression, simple, path)


def _move_expression(source: Path, target: Path, program: FuzzProgram) -> None:
    _put_expression(resolve(program.module, source), target, program)


def _put_expression(node: ast.expr, target: Path, program: FuzzProgram) -> None:
    parent, (name, index) = resolve(program.module, target[:-1]), target[-1]
    if index is None:
        setattr(parent, name, copy.deepcopy(node))
    else:
        getattr(parent, name)[index] = copy.deepcopy(node)


def _literal_number(node: ast.expr) -> float | None:
    """The value of a number literal (`3`, `-2.5`), None for anything else."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal_number(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    return None




def _simple_values(t: ValueType | None, vector_size: int) -> list[ast.expr]:
    if t == INT:
        return [literal(0, INT), literal(1, INT)]
    if t == FLOAT:
        return [literal(0.0, FLOAT), literal(1.0, FLOAT)]
    if t == BOOL:
        return [literal(False, BOOL), literal(True, BOOL)]
    shape = array_shape(t, vector_size)
    if shape is not None:
        size: ast.expr = ast.Constant(shape[0]) if len(shape) == 1 else ast.Tuple([ast.Constant(d) for d in shape], ast.Load())
        zeros = ast.Call(ast.Attribute(ast.Name("np", ast.Load()), "zeros", ast.Load()), [size], [])
        return [typed(zeros, t, 0)]  # type: ignore[arg-type]
    if t == PAIR:
        return [typed(ast.Call(ast.Name("P", ast.Load()), [literal(0, INT), literal(0.0, FLOAT)], []), PAIR, 0)]
    if isinstance(t, tuple):
        parts = [_simple_values(part, vector_size)[0] for part in t]
        return [typed(ast.Tuple(parts, ast.Load()), t, 0)]
    return []


# ----- parameters and declarations --------------------------------------------------------------


def parameter_removals(program: FuzzProgram) -> Iterator[Edit]:
    """A parameter its function never reads, dropped with the matching argument everywhere."""
    for node in program.module.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        for i, argument in enumerate(node.args.args):
            if argument.arg not in read:
                yield functools.partial(_drop_parameter, node.name, i)


def _drop_parameter(name: str, index: int, result: FuzzProgram) -> None:
    function = result.function(name)
    del function.args.args[index]
    for node in ast.walk(result.module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            del node.args[index]
    if name == result.entry:
        del result.inputs[index]
        del result.input_types[index]


def declaration_removals(program: FuzzProgram) -> Iterator[Edit]:
    for name in program.declared_results:
        yield functools.partial(_drop_declaration, name)


def _drop_declaration(name: str, program: FuzzProgram) -> None:
    del program.declared_results[name]


# ----- pruning --------------------------------------------------------------------------------


def prune(program: FuzzProgram) -> None:
    """Drop the functions the entry no longer reaches and the module-level constants nothing
    reads (`P` with its import)."""
    functions = {n.name: n for n in program.module.body if isinstance(n, ast.FunctionDef)}
    reached = {program.entry}
    work = [program.entry]
    while work:
        for node in ast.walk(functions[work.pop()]):
            if isinstance(node, ast.Name) and node.id in functions and node.id not in reached:
                reached.add(node.id)
                work.append(node.id)
    body = [n for n in program.module.body if not (isinstance(n, ast.FunctionDef) and n.name not in reached)]
    read = {n.id for f in body if isinstance(f, ast.FunctionDef) for n in ast.walk(f) if isinstance(n, ast.Name)}
    if PAIR in _all_types(program.input_types):
        read.add("P")
    body = [n for n in body if not (isinstance(n, ast.Assign) and n.targets[0].id not in read)]  # type: ignore[attr-defined]
    if "P" not in read:
        body = [n for n in body if ast.unparse(n) != "import collections"]
    program.module.body = body
    program.batched = [name for name in program.batched if name in reached]
    program.declared_results = {k: v for k, v in program.declared_results.items() if k in reached}


def _all_types(types: list[ValueType]) -> list[str]:
    flat: list[str] = []
    for t in types:
        flat += list(t) if isinstance(t, tuple) else [t]
    return flat
