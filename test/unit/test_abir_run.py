"""`abir.run_module` and the `abir-run` tool: a module read from text runs on a batch, functional
modules lowered for the arguments' types; opaque prims run only with a callable the caller
supplies; malformed or hostile input is a diagnostic, never a traceback."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.parser import Parser

import abir
from abir.dialects import make_context
from abir.opaque import register_opaque
from abir.passes.pipeline import compile_functional, lower_to_vm
from abir.running import ModuleRunError, parse_module, run_module
from abir.tools import abir_run
from abir.types import MAX_MEMBER_ELEMENTS, ir_type

FIB = """
functional.func @fib(%n: !functional.unknown) -> !functional.unknown {
  %c2 = functional.constant weak 2 : i64
  %big = functional.prim "greater"(%n, %c2) : (!functional.unknown, i64) -> i1
  cf.cond_br %big, ^rec, ^base
^rec:
  %c1 = functional.constant weak 1 : i64
  %a = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
  %fa = functional.call @fib(%a) : (!functional.unknown) -> !functional.unknown
  %b = functional.prim "subtract"(%n, %c2) : (!functional.unknown, i64) -> !functional.unknown
  %fb = functional.call @fib(%b) : (!functional.unknown) -> !functional.unknown
  %s = functional.prim "add"(%fa, %fb) : (!functional.unknown, !functional.unknown) -> !functional.unknown
  functional.return %s : !functional.unknown
^base:
  %one = functional.constant weak 1 : i64
  functional.return %one : i64
}
"""

ROW_SUM = """
functional.func @row_sum(%m: !functional.unknown, %i: !functional.unknown) -> (!functional.unknown, !functional.unknown) {
  %row = functional.prim "getitem" <{index = ["?"]}>(%m, %i) : (!functional.unknown, !functional.unknown) -> !functional.unknown
  %s = functional.prim "sum"(%row) : (!functional.unknown) -> !functional.unknown
  functional.return %s, %row : !functional.unknown, !functional.unknown
}
"""

OPAQUE = """
functional.opaque @twice "print('never run')"
functional.func @f(%x: !functional.unknown) -> !functional.unknown {
  %y = functional.prim @twice(%x) : (!functional.unknown) -> !functional.unknown
  functional.return %y : !functional.unknown
}
"""


@pytest.mark.parametrize("backend", ["numpy", "jax", "tf"])
def test_functional_text_runs_on_every_backend(backend):
    np.testing.assert_array_equal(run_module(FIB, np.array([3, 7, 10]), backend=backend), [2, 13, 55])
    total, row = run_module(ROW_SUM, np.arange(12.0).reshape(2, 2, 3), np.array([1, 9]), backend=backend)
    np.testing.assert_array_equal(total, [12.0, 30.0])  # 9 is clipped to the last row
    np.testing.assert_array_equal(row, [[3.0, 4.0, 5.0], [9.0, 10.0, 11.0]])


def test_vm_text_runs_as_it_is_and_the_stack_depth_is_the_callers():
    typed = compile_functional(parse_module(FIB), "fib", [ir_type(np.int64)])
    text = str(lower_to_vm(typed, "fib"))
    np.testing.assert_array_equal(run_module(text, np.array([20]), max_stack_depth=30), [6765])
    with pytest.raises(abir.StackOverflowError):
        run_module(text, np.array([20]), max_stack_depth=5)


def test_an_opaque_prim_needs_the_callers_callable():
    register_opaque("twice", lambda x: x * 100)  # registered elsewhere in the process: not used
    with pytest.raises(ModuleRunError, match=r"declares the opaque prim\(s\) @twice.*--opaque NAME=module:function"):
        run_module(OPAQUE, np.array([1.0, 2.0]))
    np.testing.assert_array_equal(run_module(OPAQUE, np.array([1.0, 2.0]), opaque={"twice": lambda x: 2 * x}), [2.0, 4.0])


def test_the_entry_is_chosen_or_named():
    two = FIB + ROW_SUM
    with pytest.raises(ModuleRunError, match=r"cannot choose the entry among @fib, @row_sum; name it"):
        run_module(two, np.array([3]))
    np.testing.assert_array_equal(run_module(two, np.array([3, 4]), entry="fib"), [2, 3])
    with pytest.raises(ModuleRunError, match="no function @nope in the module"):
        run_module(two, np.array([3]), entry="nope")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("functional.func @f(%x: i64) -> i64 {\n  %y = functional.bogus %x\n}", "<text>:2:"),
        ("functional.func @f(%x: tensor<3xnope>) -> i64 {}", "<text>:1:"),
        ("functional.func @f(%x: tensor<4096x4096x4096xf64>) -> tensor<4096x4096x4096xf64> {\n"
         "  functional.return %x : tensor<4096x4096x4096xf64>\n}",
         f"has 68719476736 elements, more than {MAX_MEMBER_ELEMENTS} per member"),
        ("functional.func @f(%x: f64) -> f64 {\n  %c = functional.constant dense<0.0> : tensor<100000x100000xf64>\n"
         "  functional.return %x : f64\n}", "tensor<100000x100000xf64> has 10000000000 elements"),
        ("builtin.module {" * 3000 + "}" * 3000, "nests too deeply"),
        ('functional.func @f(%x: f64) -> f64 {\n  %y = functional.prim "sum" <{axis = "a"}>(%x) : (f64) -> f64\n'
         "  functional.return %y : f64\n}", 'parameter "axis" must be an integer'),
        ("vm.var @x : i64 register", "neither a functional.func nor a vm.program"),
        ('functional.func @f(%x: f64) -> f64 {\n  %y = functional.prim "add"(%x) : (f64) -> f64\n'
         "  functional.return %y : f64\n}",
         '<text>:2:3\n  %y = functional.prim "add"(%x) : (f64) -> f64\n  ^^^^'),
    ],
)
def test_malformed_input_is_a_diagnostic(text, fragment):
    with pytest.raises(ModuleRunError) as info:
        run_module(text, np.array([1.0]))
    assert fragment in str(info.value)


def test_a_pass_error_on_text_points_at_the_op_the_copy_was_made_from():
    # run_module types a copy of the module for the arguments; the error is at the text's line.
    text = FIB.replace('"subtract"(%n, %c1)', '"bitwise_and"(%n, %c1)')
    with pytest.raises(ModuleRunError) as info:
        run_module(text, np.array([2.5]))
    line = text.splitlines().index(next(line for line in text.splitlines() if "bitwise_and" in line)) + 1
    assert f"<text>:{line}:3\n  %a = functional.prim \"bitwise_and\"" in str(info.value)
    assert str(info.value).endswith("in: @fib")
    module = parse_module(text)
    with pytest.raises(abir.TypeInferenceError, match="bitwise_and") as error:  # a module object: as before
        compile_functional(module, "fib", [ir_type(np.dtype(np.float64))])
    assert "<text>" not in str(error.value)


def test_modules_read_from_text_are_freed_after_their_runs():
    import gc

    from abir import running

    gc.collect()
    before = len(running._TEXT_SPANS)
    for _ in range(3):
        run_module(FIB, np.array([5]))
    gc.collect()
    assert len(running._TEXT_SPANS) == before


def test_a_module_object_with_huge_types_is_refused_before_allocating():
    text = "functional.func @f(%x: tensor<4096x4096x4096xf64>) -> tensor<4096x4096x4096xf64> {\n" \
        "  functional.return %x : tensor<4096x4096x4096xf64>\n}"
    module = Parser(make_context(), text).parse_module()
    with pytest.raises(ModuleRunError, match=f"too large: .* more than {MAX_MEMBER_ELEMENTS} per member"):
        run_module(module, np.zeros((1, 1)))


def test_arguments_must_be_batches_of_the_right_count():
    with pytest.raises(ModuleRunError, match="argument 0 of @fib is a scalar"):
        run_module(FIB, np.int64(3))
    with pytest.raises(ModuleRunError, match="@fib takes 1 argument"):
        run_module(FIB, np.array([3]), np.array([4]))


def test_the_tool_prints_results_and_diagnostics(tmp_path, capsys):
    program = tmp_path / "prog.mlir"
    program.write_text(ROW_SUM)
    np.savez(tmp_path / "in.npz", np.arange(6.0).reshape(1, 2, 3), np.array([0]))
    assert abir_run.main([str(program), "--args", str(tmp_path / "in.npz"), "--backend", "jax"]) == 0
    assert capsys.readouterr().out.splitlines() == ["result 0: float64 [3.0]", "result 1: float64 [[0.0, 1.0, 2.0]]"]
    assert abir_run.main([str(program), "--arg", "float32:[[[1, 2], [3, 4]]]", "--arg", "[1]"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "result 0: float32 [7.0]"
    assert abir_run.main([str(program), "--arg", "[[1, 2]", "--arg", "[0]"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("abir-run: error: --arg '[[1, 2]' is not JSON") and "Traceback" not in err


def test_the_tool_takes_opaque_callables_by_module_and_name(tmp_path, capsys):
    program = tmp_path / "opaque.mlir"
    program.write_text(OPAQUE)
    assert abir_run.main([str(program), "--arg", "[0.0, 1.0]", "--opaque", "twice=numpy:exp"]) == 0
    assert capsys.readouterr().out.strip() == f"result 0: float64 [1.0, {float(np.exp(1.0))!r}]"
    assert abir_run.main([str(program), "--arg", "[0.0]", "--opaque", "twice=numpy:no_such"]) == 1
    assert "has no attribute 'no_such'" in capsys.readouterr().err
    assert abir_run.main([str(tmp_path / "missing.mlir")]) == 1
    assert "cannot read" in capsys.readouterr().err
