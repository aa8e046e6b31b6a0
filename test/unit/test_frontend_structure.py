"""The frontend's structure: lowerers composed around one shared state, no private imports.

`FunctionLowering` owns a `LoweringState` and hands it to the statement, expression, array and
item-assignment lowerers (docs/architecture.md, "The frontend"); none inherits another. No
module of `abir` imports another module's private (`_`-prefixed) name.
"""

import ast
from pathlib import Path

import optree
import pytest

import abir
from abir.frontend import FunctionSource
from abir.frontend.arrays import ArrayLowering
from abir.frontend.expressions import ExpressionLowering
from abir.frontend.item_assignment import ItemAssignmentLowering
from abir.frontend.lowering import FunctionLowering, StatementLowering
from abir.frontend.state import LoweringState

PACKAGE = Path(abir.__file__).parent
LEAF = optree.tree_structure(0)


def private_imports(path: Path) -> list[str]:
    """`module.name` for each `_name` imported from a module of abir in the file at `path`."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None and node.module.startswith("abir")
        for alias in node.names
        if alias.name.startswith("_")
    ]


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_imports_a_private_name_of_another(path):
    assert private_imports(path) == []


def test_private_imports_are_found(tmp_path):
    source = tmp_path / "example.py"
    source.write_text("from abir.frontend.state import LoweringState, _hidden\nfrom os import _exit\n")
    assert private_imports(source) == ["abir.frontend.state._hidden"]


@pytest.mark.parametrize(
    "lowerer", [LoweringState, ArrayLowering, ExpressionLowering, ItemAssignmentLowering, StatementLowering,
                FunctionLowering],
)  # fmt: skip
def test_frontend_lowerers_inherit_nothing(lowerer):
    assert lowerer.__bases__ == (object,)


class Services:
    """Program services for a function that calls no other batched function or helper."""

    def batched_callee(self, obj):
        return None

    def call_target(self, name, arg_treedefs, node):
        raise AssertionError("no batched calls here")

    def opaque(self, key, hint, source, fn):
        raise AssertionError("no helpers here")


def clamp(x, n):
    y = x.copy()
    for i in range(n):
        y[i] += 1
    return y if n > 0 else x


def test_function_lowering_shares_one_state_between_its_lowerers():
    lowering = FunctionLowering(FunctionSource.of(clamp), Services(), "clamp", (LEAF, LEAF))
    state = lowering.state
    assert lowering.arrays.state is state
    assert lowering.expressions.state is state and lowering.expressions.arrays is lowering.arrays
    assert lowering.item_assignment.state is state
    assert lowering.item_assignment.expressions is lowering.expressions
    assert lowering.statements.state is state and lowering.statements.expressions is lowering.expressions
    assert lowering.statements.item_assignment is lowering.item_assignment
    lowered = lowering.lower()
    assert lowered.unknown is None and lowered.output == LEAF
    assert state.current is None  # every path returned
    assert lowered.func.sym_name.data == "clamp"
