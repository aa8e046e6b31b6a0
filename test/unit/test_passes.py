"""The pass pipeline: compile_functional / lower_to_stack / lower_to_vm on hand-written programs,
checked semantically with small reference interpreters, plus type-inference errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from test_passes_support import EARLY, EVEN, FIB, GCD, SUM, parse, run_stack, run_vm
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType, f32, f64, i1, i32, i64

from abir.dialects import functional, stack, vm
from abir.dialects.stack import StorageClass
from abir.errors import TypeInferenceError
from abir.opaque import register_opaque
from abir.passes import get_all_passes
from abir.passes.analysis import call_graph, strongly_connected_components
from abir.passes.coalesce_copies import coalesce_copies
from abir.passes.infer_types import default_entry
from abir.passes.lower_calls import lower_calls
from abir.passes.pipeline import compile_functional, lower_to_stack, lower_to_vm
from abir.types import TensorType as TT


def compiled(text: str, entry: str, types: list, **kw) -> tuple[ModuleOp, ModuleOp, ModuleOp]:
    typed = compile_functional(parse(text), entry, types, **kw)
    return typed, lower_to_stack(typed, entry), lower_to_vm(typed, entry)


def func(module: ModuleOp, name: str) -> functional.FuncOp:
    return next(op for op in module.ops if isinstance(op, functional.FuncOp) and op.sym_name.data == name)


def storage(module: ModuleOp) -> dict[str, StorageClass]:
    return {op.sym_name.data: op.storage.data for op in module.ops if isinstance(op, stack.VarOp | vm.VarOp)}


def stacks(module: ModuleOp) -> set[str]:
    return {n for n, s in storage(module).items() if s == StorageClass.STACK}


def fib_ref(n: int) -> int:
    return fib_ref(n - 1) + fib_ref(n - 2) if n > 2 else 1


# --- end to end semantics -------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 10])
def test_fib_semantics(n: int) -> None:
    _, st, v = compiled(FIB, "fib", [i64])
    assert run_stack(st, [n])[0][0] == fib_ref(n)
    assert run_vm(v, [n])[0][0] == fib_ref(n)


@pytest.mark.parametrize("n", [0, 1, 4, 7])
def test_is_even_semantics(n: int) -> None:
    _, st, v = compiled(EVEN, "is_even", [i64])
    assert bool(run_stack(st, [n])[0][0]) == (n % 2 == 0)
    assert bool(run_vm(v, [n])[0][0]) == (n % 2 == 0)


@pytest.mark.parametrize(("a", "b"), [(12, 18), (7, 3), (5, 0), (0, 5), (100, 75)])
def test_gcd_loop_semantics(a: int, b: int) -> None:
    _, st, v = compiled(GCD, "gcd", [i64, i64])
    assert run_stack(st, [a, b])[0][0] == math.gcd(a, b)
    assert run_vm(v, [a, b])[0][0] == math.gcd(a, b)


@pytest.mark.parametrize(("n", "k", "want"), [(10, 17, 5), (3, 100, -1), (5, 0, 0)])
def test_early_return_from_loop(n: int, k: int, want: int) -> None:
    _, st, v = compiled(EARLY, "find", [i64, i64])
    assert run_stack(st, [n, k])[0][0] == want
    assert run_vm(v, [n, k])[0][0] == want


def test_tail_sum_runs_in_constant_stack() -> None:
    _, st, v = compiled(SUM, "tsum", [i64, i64])
    out, depth = run_stack(st, [100, 0])
    assert out[0] == 5050
    assert depth == {"<pc>": 1}  # only the program entry's call
    assert run_vm(v, [100, 0])[0][0] == 5050


def test_mutual_recursion_tail_calls_use_no_pc_stack() -> None:
    _, st, _ = compiled(EVEN, "is_even", [i64])
    # is_even tail-calls is_odd; is_odd's call is not a tail call (it negates twice)
    _, depth = run_stack(st, [6])
    assert depth["<pc>"] == 1 + 3


# --- storage allocation yardsticks -----------------------------------------------------------


def test_fib_stacks_only_n_and_first_result() -> None:
    _, st, v = compiled(FIB, "fib", [i64])
    assert stacks(st) == {"fib.n", "fib.f1"}
    assert stacks(v) == {"fib.n", "fib.f1"}


def test_tail_sum_needs_no_stack() -> None:
    _, st, v = compiled(SUM, "tsum", [i64, i64])
    assert stacks(st) == set()
    assert not any(isinstance(op, stack.PushGotoOp) for op in st.walk()) or all(
        op.parent_block() is next(o for o in st.ops if isinstance(o, stack.ProgramOp)).body.blocks.first
        for op in st.walk()
        if isinstance(op, stack.PushGotoOp)
    )
    assert storage(v).keys() == {"tsum.n", "tsum.acc", "tsum.result0"}


def test_temporaries_and_dead_variables() -> None:
    _, st, _ = compiled(SUM, "tsum", [i64, i64])
    s = storage(st)
    assert s["tsum.n1"] == StorageClass.TEMPORARY
    assert s["tsum.r"] == StorageClass.DEAD  # the tail call's result is never read


def test_pop_push_fuses_into_peek() -> None:
    text = """
    builtin.module {
      functional.func @g(%n: i64) -> i64 {
        %c = functional.constant 0 : i64
        %p = functional.prim "greater"(%n, %c) : (i64, i64) -> i1
        cf.cond_br %p, ^rec, ^base
      ^rec:
        %one = functional.constant 1 : i64
        %m = functional.prim "subtract"(%n, %one) : (i64, i64) -> i64
        %a = functional.call @g(%m) : (i64) -> i64
        %b = functional.call @g(%m) : (i64) -> i64
        %s = functional.prim "add"(%a, %b) : (i64, i64) -> i64
        %t = functional.prim "add"(%s, %n) : (i64, i64) -> i64
        functional.return %t : i64
      ^base:
        functional.return %n : i64
      }
    }"""
    _, st, v = compiled(text, "g", [i64])
    assert any(isinstance(op, stack.PeekOp) for op in st.walk())
    assert any(isinstance(op, vm.PeekOp) for op in v.walk())

    def g(n: int) -> int:
        return 2 * g(n - 1) + n if n > 0 else n

    for n in range(5):
        assert run_stack(st, [n])[0][0] == g(n)
        assert run_vm(v, [n])[0][0] == g(n)


def test_saves_of_values_no_call_changes_are_dropped() -> None:
    # eps is live across the recursive call, but every call passes it on unchanged
    text = """
    builtin.module {
      functional.func @h(%n: i64, %eps: i64) -> i64 {
        %p = functional.prim "greater"(%n, %eps) : (i64, i64) -> i1
        cf.cond_br %p, ^rec, ^base
      ^rec:
        %one = functional.constant 1 : i64
        %m = functional.prim "subtract"(%n, %one) : (i64, i64) -> i64
        %a = functional.call @h(%m, %eps) : (i64, i64) -> i64
        %s = functional.prim "add"(%a, %eps) : (i64, i64) -> i64
        %t = functional.prim "add"(%s, %n) : (i64, i64) -> i64
        functional.return %t : i64
      ^base:
        functional.return %eps : i64
      }
    }"""
    _, st, v = compiled(text, "h", [i64, i64])
    assert stacks(st) == {"h.n"}
    assert stacks(v) == {"h.n"}

    def h(n: int, eps: int) -> int:
        return h(n - 1, eps) + eps + n if n > eps else eps

    for n, eps in [(0, 0), (3, 0), (7, 2), (5, 9)]:
        assert run_stack(st, [n, eps])[0][0] == h(n, eps)
        assert run_vm(v, [n, eps])[0][0] == h(n, eps)


# --- vm shape ------------------------------------------------------------------------------


def test_vm_blocks_carry_function_and_entry_is_zero() -> None:
    _, _, v = compiled(EVEN, "is_even", [i64])
    program = next(op for op in v.ops if isinstance(op, vm.ProgramOp))
    blocks = program.blocks
    assert "function" not in blocks[0].attributes
    names = {b.attributes["function"].data for b in blocks if "function" in b.attributes}
    assert names == {"is_even", "is_odd"}
    assert [r.string_value() for r in program.inputs.data] == ["is_even.n"]


def test_schedule_puts_bookkeeping_blocks_first() -> None:
    # fib has no loops (calls are not loop edges), so the bookkeeping-first order is all there is.
    _, _, v = compiled(FIB, "fib", [i64])
    assert_bookkeeping_first(next(op for op in v.ops if isinstance(op, vm.ProgramOp)).blocks)


def test_schedule_puts_loop_blocks_before_their_exits() -> None:
    for text, entry, n in [(GCD, "gcd", 2), (EARLY, "find", 2)]:
        _, _, v = compiled(text, entry, [i64] * n)
        blocks = next(op for op in v.ops if isinstance(op, vm.ProgramOp)).blocks
        cycle = loop_members(blocks)
        in_loop = [b.number in cycle for b in blocks[1:]]
        assert in_loop[0], "the first scheduled block belongs to the loop"
        assert in_loop == sorted(in_loop, reverse=True)


def targets(block: vm.BlockOp) -> list[int]:
    term = block.body.block.last_op
    if isinstance(term, vm.JumpOp):
        return [term.target.value.data]
    if isinstance(term, vm.BranchOp):
        return [term.then_target.value.data, term.else_target.value.data]
    if isinstance(term, vm.CallOp):
        return [term.return_target.value.data]
    return []


def loop_members(blocks: list[vm.BlockOp]) -> set[int]:
    """Blocks on a cycle of jumps/branches (calls continue at their return block)."""
    graph = {b.number: targets(b) for b in blocks}
    on_cycle = set()
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            node = todo.pop()
            if node == start:
                on_cycle.add(start)
                break
            if node not in seen:
                seen.add(node)
                todo.extend(graph[node])
    return on_cycle


def assert_bookkeeping_first(blocks: list[vm.BlockOp]) -> None:
    has_prim = [any(isinstance(o, vm.PrimOp | vm.ConstantOp | vm.DescendOp) for o in b.body.block.ops) for b in blocks[1:]]
    assert has_prim == sorted(has_prim)


# --- type inference ------------------------------------------------------------------------


def test_weak_literals_follow_nep50() -> None:
    typed = compile_functional(parse(FIB), "fib", [i32])
    f = func(typed, "fib")
    assert f.function_type == FunctionType.from_lists([i32], [i64])
    constants = [op for op in f.walk() if isinstance(op, functional.ConstantOp)]
    assert {str(c.res.type) for c in constants} == {"i32", "i64"}  # n - 1 is i32, `return 1` is i64
    assert all(c.weak is None for c in constants)


def test_weak_literal_duplicated_for_different_uses() -> None:
    text = """
    builtin.module {
      functional.func @h(%x: !functional.unknown, %y: !functional.unknown) -> (!functional.unknown, !functional.unknown) {
        %one = functional.constant weak 1 : i64
        %a = functional.prim "add"(%x, %one) : (!functional.unknown, i64) -> !functional.unknown
        %b = functional.prim "add"(%y, %one) : (!functional.unknown, i64) -> !functional.unknown
        functional.return %a, %b : !functional.unknown, !functional.unknown
      }
    }"""
    typed = compile_functional(parse(text), "h", [i32, f32])
    types = sorted(str(op.res.type) for op in typed.walk() if isinstance(op, functional.ConstantOp))
    assert types == ["f32", "i32"]
    assert func(typed, "h").function_type.outputs.data == (i32, f32)


def test_broadcasting_and_tensors() -> None:
    text = """
    builtin.module {
      functional.func @k(%v: !functional.unknown, %s: !functional.unknown) -> !functional.unknown {
        %r = functional.prim "multiply"(%v, %s) : (!functional.unknown, !functional.unknown) -> !functional.unknown
        functional.return %r : !functional.unknown
      }
    }"""
    typed = compile_functional(parse(text), "k", [TensorType(f32, [3]), TensorType(f64, [1])])
    assert func(typed, "k").function_type.outputs.data == (TensorType(f64, [3]),)
    # Per-member shapes broadcast right-aligned behind the batch axis: scalar * vector is a vector.
    typed = compile_functional(parse(text), "k", [TensorType(f32, [2, 3]), f64])
    assert func(typed, "k").function_type.outputs.data == (TensorType(f64, [2, 3]),)
    with pytest.raises(
        TypeInferenceError, match=r'@k: builtin prim "multiply".*tensor<3xf32>, tensor<2xf64>'
    ):
        compile_functional(parse(text), "k", [TensorType(f32, [3]), TensorType(f64, [2])])


def test_join_conflict_is_an_error_naming_both_types() -> None:
    text = """
    builtin.module {
      functional.func @j(%c: i1, %x: !functional.unknown, %y: !functional.unknown) -> !functional.unknown {
        cf.cond_br %c, ^a, ^b
      ^a:
        functional.return %x : !functional.unknown
      ^b:
        functional.return %y : !functional.unknown
      }
    }"""
    with pytest.raises(TypeInferenceError, match=r"@j.*i32.*f64|@j.*f64.*i32"):
        compile_functional(parse(text), "j", [i1, i32, f64])


def test_never_returning_function_is_an_error() -> None:
    text = """
    builtin.module {
      functional.func @loop(%n: !functional.unknown) -> !functional.unknown {
        %r = functional.call @loop(%n) : (!functional.unknown) -> !functional.unknown
        %s = functional.prim "add"(%r, %n) : (!functional.unknown, !functional.unknown) -> !functional.unknown
        functional.return %s : !functional.unknown
      }
    }"""
    with pytest.raises(TypeInferenceError, match="@loop"):
        compile_functional(parse(text), "loop", [i64])


UNTYPED_HELPER = """
builtin.module {
  functional.func @helper(%x: !functional.unknown) -> !functional.unknown {
    functional.return %x : !functional.unknown
  }
  functional.func @main(%x: !functional.unknown) -> !functional.unknown {
    %y = functional.call @helper(%x) : (!functional.unknown) -> !functional.unknown
    functional.return %y : !functional.unknown
  }
}"""


def test_default_entry_is_the_only_function_no_other_calls() -> None:
    """With no function typed yet (types from infer-types' arg-types), the entry is the only
    function no other one calls (a function calling itself counts); with two such functions, the
    error names both."""
    assert default_entry(parse(UNTYPED_HELPER)) == "main"
    two_roots = UNTYPED_HELPER.replace("@helper(%x) :", "@other(%x) :").replace("@main(%x: ", "@other(%x: ")
    with pytest.raises(TypeInferenceError, match=r"among @helper, @other \(the module has no `abir.entry`"):
        default_entry(parse(two_roots))


def test_user_type_inference_is_checked() -> None:
    ok = compile_functional(parse(FIB), "fib", [i64], user_type_inference={"fib": lambda ts: ts[0]})
    assert func(ok, "fib").function_type.outputs.data == (i64,)
    with pytest.raises(TypeInferenceError, match=r"@gcd says result #0 is f32, but its returns produce i64"):
        compile_functional(
            parse(GCD), "gcd", [i64, i64], user_type_inference={"gcd": lambda ts: TT(np.float32, ())}
        )
    # A consistent declaration also types the recursion: fib declared f32 computes in f32.
    typed = compile_functional(
        parse(FIB), "fib", [i64], user_type_inference={"fib": lambda ts: [TT(np.float32, ())]}
    )
    assert func(typed, "fib").function_type.outputs.data == (f32,)


OPAQUE = """
builtin.module {
  functional.opaque @%s "%s"
  functional.func @o(%%x: !functional.unknown) -> !functional.unknown {
    %%r = functional.prim @%s(%%x) : (!functional.unknown) -> !functional.unknown
    functional.return %%r : !functional.unknown
  }
}"""


@pytest.mark.parametrize("library", ["numpy", "jax"])
def test_opaque_prim_by_abstract_evaluation(library: str) -> None:
    if library == "jax":
        import jax.numpy as jnp

        register_opaque("pass_sum", lambda x: jnp.sum(x, axis=-1).astype(jnp.float32))
    else:
        register_opaque("pass_sum", lambda x: x.sum(axis=-1).astype(np.float32))
    typed = compile_functional(parse(OPAQUE % ("pass_sum", "x.sum(-1)", "pass_sum")), "o", [TensorType(f64, [4])])
    assert func(typed, "o").function_type.outputs.data == (f32,)


@pytest.mark.parametrize(
    ("fn", "message"),
    [(lambda x: (x, x), "tuple where one array was expected"), (lambda x: 3.0, "not an array")],
)
def test_opaque_prim_errors_name_callable_and_source(fn, message: str) -> None:
    register_opaque("pass_bad", fn)
    with pytest.raises(TypeInferenceError, match=f"@pass_bad.*bad source.*{message}"):
        compile_functional(parse(OPAQUE % ("pass_bad", "bad source", "pass_bad")), "o", [f64])


def test_only_reachable_functions_are_kept() -> None:
    text = FIB.replace(
        "builtin.module {", "builtin.module {\n functional.func @unused() {\n functional.return\n }", 1
    )
    typed = compile_functional(parse(text), "fib", [i64])
    assert [op.sym_name.data for op in typed.ops if isinstance(op, functional.FuncOp)] == ["fib"]


# --- analyses and registry -------------------------------------------------------------------


def test_call_graph_sccs() -> None:
    module = parse(EVEN)
    assert call_graph(module) == {"is_even": ["is_odd"], "is_odd": ["is_even"]}
    assert [sorted(c) for c in strongly_connected_components(call_graph(module))] == [["is_even", "is_odd"]]
    assert len(strongly_connected_components({"a": ["b"], "b": [], "c": ["c"]})) == 3


def test_all_passes_registered() -> None:
    assert set(get_all_passes()) >= {
        "infer-types",
        "simplify-functional",
        "lower-calls",
        "merge-blocks",
        "stack-optimize",
        "allocate-storage",
        "schedule-blocks",
        "stack-to-vm",
        "abir-lower",
    }
    for factory in get_all_passes().values():
        assert factory().name


def test_value_diamond_becomes_where_and_still_computes() -> None:
    text = """
    builtin.module {
      functional.func @pick(%x: !functional.unknown, %y: !functional.unknown) -> !functional.unknown {
        %lt = functional.prim "less"(%x, %y) : (!functional.unknown, !functional.unknown) -> i1
        cf.cond_br %lt, ^fwd, ^join(%y : !functional.unknown)
      ^fwd:
        cf.br ^join(%x : !functional.unknown)
      ^join(%v: !functional.unknown):
        functional.return %v : !functional.unknown
      }
    }"""
    typed, st, v = compiled(text, "pick", [i64, i64])
    assert [op.prim_name for op in typed.walk() if isinstance(op, functional.PrimOp)] == ["less", "where"]
    for a, b in [(1, 2), (5, 3)]:
        assert run_stack(st, [a, b])[0][0] == min(a, b)
        assert run_vm(v, [a, b])[0][0] == min(a, b)


# ----- coalesce-copies ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "entry", "arg_types", "cases"),
    [
        (FIB, "fib", [i64], [[0], [1], [7], [12]]),
        (GCD, "gcd", [i64, i64], [[12, 18], [7, 5], [100, 75]]),
    ],
)
def test_coalesce_copies_keeps_the_results(text: str, entry: str, arg_types: list, cases: list) -> None:
    """The stack program with its copies coalesced computes what the program without them does,
    with fewer variables and fewer copies."""
    typed = compile_functional(parse(text), entry, arg_types)
    plain = lower_calls(typed, entry)
    coalesced = plain.clone()
    merged = coalesce_copies(coalesced)
    coalesced.verify()
    assert merged > 0

    def copies(module: ModuleOp) -> int:
        return sum(len(op.targets.data) for op in module.walk() if isinstance(op, stack.WriteOp))

    assert copies(coalesced) < copies(plain)
    for args in cases:
        assert run_stack(coalesced, args)[0] == run_stack(plain, args)[0]


def test_coalesce_copies_leaves_a_program_whose_returns_it_cannot_follow() -> None:
    """A return without a function attribute (hand-written IR) could go anywhere: no liveness,
    no change."""
    module = parse("""
builtin.module {
  stack.var @x : i64 register
  stack.var @y : i64 register
  stack.program @p(@x) -> (@y) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.write @y = @x
    stack.indirect_goto
  }
}
""")
    before = str(module)
    assert coalesce_copies(module) == 0
    assert str(module) == before
