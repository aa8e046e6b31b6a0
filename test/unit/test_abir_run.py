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


def test_functional_text_runs_on_every_backend(backend_name):
    np.testing.assert_array_equal(run_module(FIB, np.array([3, 7, 10]), backend=backend_name), [2, 13, 55])
    total, row = run_module(ROW_SUM, np.arange(12.0).reshape(2, 2, 3), np.array([1, 9]), backend=backend_name)
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


def test_only_the_opaque_prims_the_entry_reaches_need_callables():
    unreached = OPAQUE + """
functional.opaque @thrice "print('never run')"
functional.func @g(%x: !functional.unknown) -> !functional.unknown {
  %y = functional.prim @thrice(%x) : (!functional.unknown) -> !functional.unknown
  functional.return %y : !functional.unknown
}
"""
    result = run_module(unreached, np.array([1.0, 2.0]), entry="f", opaque={"twice": lambda x: 2 * x})
    np.testing.assert_array_equal(result, [2.0, 4.0])
    with pytest.raises(ModuleRunError, match=r"declares the opaque prim\(s\) @thrice,"):
        run_module(unreached, np.array([1.0, 2.0]), entry="g", opaque={"twice": lambda x: 2 * x})


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


RANDOM_WALK = """
functional.opaque @key_0 "abir.random.key(seed)"
functional.opaque @uniform_1 "abir.random.uniform(key, n, shape=(3,))"
functional.opaque @helper_2 "helper(x)"
functional.func @walk(%seed: !functional.unknown, %n: !functional.unknown) -> !functional.unknown {
  %key = functional.prim @key_0(%seed) : (!functional.unknown) -> !functional.unknown
  %x = functional.prim @uniform_1(%key, %n) : (!functional.unknown, !functional.unknown) -> !functional.unknown
  %s = functional.prim "sum"(%x) : (!functional.unknown) -> !functional.unknown
  functional.return %s : !functional.unknown
}
functional.func @other(%x: !functional.unknown) -> !functional.unknown {
  %y = functional.call @inner(%x) : (!functional.unknown) -> !functional.unknown
  functional.return %y : !functional.unknown
}
functional.func @inner(%x: !functional.unknown) -> !functional.unknown {
  %y = functional.prim "exp"(%x) : (!functional.unknown) -> !functional.unknown
  functional.return %y : !functional.unknown
}
functional.func @unused(%x: !functional.unknown) -> !functional.unknown {
  %y = functional.prim @helper_2(%x) : (!functional.unknown) -> !functional.unknown
  functional.return %y : !functional.unknown
}
"""

KEYWORDS = """
functional.opaque @affine_0 "affine(x, 2, scale=s, offset=o)"
functional.opaque @affine_1 "affine((x, 10), 3, offset=o, scale=(1.5, 2))"
functional.func @f(%x: !functional.unknown, %s: !functional.unknown, %o: !functional.unknown) -> !functional.unknown {
  %0 = functional.prim @affine_0(%x, %o, %s) : (!functional.unknown, !functional.unknown, !functional.unknown) -> !functional.unknown
  %1 = functional.prim @affine_1(%x, %o) : (!functional.unknown, !functional.unknown) -> !functional.unknown
  %2 = functional.prim "add"(%0, %1) : (!functional.unknown, !functional.unknown) -> !functional.unknown
  functional.return %2 : !functional.unknown
}
"""
"""Operands in the order the frontend passes them: positional arguments, then keywords by name."""

AFFINE = '''
import numpy as np


def affine(x, k, *, scale, offset):
    if isinstance(x, tuple):
        x = x[0] + x[1]
    return x * np.asarray(scale)[..., 0] + offset + k if np.ndim(scale) else x * scale + offset + k
'''


def run_tool(capsys, *argv: str) -> tuple[int, str, str]:
    """abir-run's exit status, standard output and standard error for `argv`."""
    status = abir_run.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_tool_error(status: int, err: str, *fragments: str) -> None:
    assert status == 1, err
    assert err.startswith("abir-run: error: ") and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err


def test_the_tool_asks_only_for_the_opaque_callables_the_entry_reaches(tmp_path, capsys):
    program = tmp_path / "walk.mlir"
    program.write_text(RANDOM_WALK)
    status, out, err = run_tool(capsys, str(program), "--entry", "other", "--arg", "[0.0]")
    assert (status, out) == (0, "result 0: float64 [1.0]\n"), err
    status, _, err = run_tool(capsys, str(program), "--entry", "walk", "--arg", "uint32:[1]", "--arg", "uint32:[0]")
    assert_tool_error(status, err, "declares the opaque prim(s) @key_0, @uniform_1,", "--opaque NAME=module:function")
    assert "@helper_2" not in err


def test_the_tool_calls_an_opaque_callable_with_the_recorded_keyword_arguments(tmp_path, capsys):
    import abir.random

    program = tmp_path / "walk.mlir"
    program.write_text(RANDOM_WALK)
    opaque = ["--opaque", "key_0=abir.random:key", "--opaque", "uniform_1=abir.random:uniform"]
    status, out, err = run_tool(capsys, str(program), "--entry", "walk", "--arg", "uint32:[1, 2]", "--arg", "uint32:[0, 5]", *opaque)
    assert status == 0, err
    seeds, counters = np.array([1, 2], dtype=np.uint32), np.array([0, 5], dtype=np.uint32)
    expected = abir.random.uniform(abir.random.key(seeds), counters, shape=(3,)).sum(axis=-1)
    assert out == abir_run.format_result(0, expected) + "\n"


def test_the_tool_places_operands_among_literal_positional_keyword_and_tuple_arguments(tmp_path, capsys, monkeypatch):
    (tmp_path / "affine_helpers.py").write_text(AFFINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    program = tmp_path / "keywords.mlir"
    program.write_text(KEYWORDS)
    opaque = ["--opaque", "affine_0=affine_helpers:affine", "--opaque", "affine_1=affine_helpers:affine"]
    status, out, err = run_tool(capsys, str(program), "--arg", "[1.0]", "--arg", "[10.0]", "--arg", "[100.0]", *opaque)
    assert status == 0, err
    first = 1.0 * 10.0 + 100.0 + 2  # affine(x, 2, scale=s, offset=o)
    second = (1.0 + 10) * 1.5 + 100.0 + 3  # affine((x, 10), 3, offset=o, scale=(1.5, 2))
    assert out == f"result 0: float64 [{first + second}]\n"


def test_keyword_arguments_the_tool_cannot_place_are_a_diagnostic(tmp_path, capsys):
    program = tmp_path / "walk.mlir"
    program.write_text(RANDOM_WALK.replace("shape=(3,)", "shape=(dim,)"))
    opaque = ["--opaque", "key_0=abir.random:key", "--opaque", "uniform_1=abir.random:uniform"]
    status, _, err = run_tool(capsys, str(program), "--entry", "walk", "--arg", "uint32:[1]", "--arg", "uint32:[0]", *opaque)
    assert_tool_error(
        status, err, "--opaque uniform_1: the text of @uniform_1, 'abir.random.uniform(key, n, shape=(dim,))'",
        "has 3 argument(s) that are not literals, but the prim passes 2 operand(s)", "shape=(3,), not shape=(n,)",
    )


@pytest.mark.parametrize(
    ("text", "args", "kwargs", "count"),
    [
        ("f(x, 2, shape=(3,), dtype='float32')", (abir_run.Operand(0), 2), {"dtype": "float32", "shape": (3,)}, 1),
        ("f(a, b=c, a=d)", (abir_run.Operand(0),), {"a": abir_run.Operand(1), "b": abir_run.Operand(2)}, 3),
        ("f((x, 2), [y, -1.5])", ((abir_run.Operand(0), 2), [abir_run.Operand(1), -1.5]), {}, 2),
    ],
)
def test_a_recorded_call_reads_literals_and_numbers_operands_as_the_frontend_passes_them(text, args, kwargs, count):
    call = abir_run.recorded_call(text)
    assert call == abir_run.RecordedCall(args, kwargs, count)


@pytest.mark.parametrize("text", ["print('never run')x", "not a call", "f(*xs)", "f(**kw)", "(" * 500 + ")" * 500, ""])
def test_a_text_that_is_no_plain_call_records_none(text):
    assert abir_run.recorded_call(text) is None


def test_an_opaque_module_that_fails_to_import_is_a_diagnostic(tmp_path, capsys, monkeypatch):
    (tmp_path / "broken_helpers.py").write_text("def twice(x:\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    program = tmp_path / "opaque.mlir"
    program.write_text(OPAQUE)
    status, _, err = run_tool(capsys, str(program), "--arg", "[1.0]", "--opaque", "twice=broken_helpers:twice")
    assert_tool_error(status, err, "--opaque 'twice=broken_helpers:twice': importing broken_helpers raised SyntaxError")
