"""The functional, stack and vm dialects built from Python.

Each dialect's IR is built with the op constructors (Block / Region / ImplicitBuilder), verified,
printed and parsed back to the same text; and the verifiers reject bad IR with messages that say
what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from io import StringIO

import pytest
from xdsl.builder import ImplicitBuilder
from xdsl.dialects import cf
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IndexType,
    IntegerAttr,
    ModuleOp,
    SymbolRefAttr,
    TensorType,
    f32,
    f64,
    i1,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException

from abir.dialects import functional as fn
from abir.dialects import make_context, vm
from abir.dialects import stack as st
from abir.dialects.stack import StorageClass

t3 = TensorType(f64, [3])


def render(op: Operation, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(op)
    return out.getvalue()


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text, "test").parse_module()


def assert_round_trip(module: ModuleOp) -> str:
    """Verify `module`; its custom and generic texts parse back to the same printed text."""
    module.verify()
    text = render(module)
    again = parse(text)
    again.verify()
    assert render(again) == text
    assert render(parse(render(module, generic=True))) == text
    return text


def verify_error(module: ModuleOp) -> str:
    """The message of the verifier error `module` raises."""
    with pytest.raises(VerifyException) as info:
        module.verify()
    return str(info.value).splitlines()[0]


# --------------------------------------------------------------------------------------------
# functional
# --------------------------------------------------------------------------------------------


def build_fib() -> ModuleOp:
    """fib(n) = n if n < 2 else fib(n - 1) + fib(n - 2), built op by op."""
    entry, recurse, base = Block(arg_types=[i64]), Block(), Block()
    n = entry.args[0]
    with ImplicitBuilder(entry):
        c2 = fn.ConstantOp(IntegerAttr(2, i64))
        cond = fn.PrimOp("less", [n, c2], [i1])
        cf.ConditionalBranchOp(cond, base, [], recurse, [])
    with ImplicitBuilder(recurse):
        c1 = fn.ConstantOp(IntegerAttr(1, i64), weak=True)
        a1 = fn.PrimOp("subtract", [n, c1], [i64])
        f1 = fn.CallOp("fib", [a1], [i64])
        a2 = fn.PrimOp("subtract", [n, c2], [i64])
        f2 = fn.CallOp("fib", [a2], [i64])
        fn.ReturnOp(fn.PrimOp("add", [f1, f2], [i64]))
    with ImplicitBuilder(base):
        fn.ReturnOp(n)
    func = fn.FuncOp("fib", ([i64], [i64]), Region([entry, recurse, base]))
    return ModuleOp([func])


def test_functional_fib_round_trip() -> None:
    text = assert_round_trip(build_fib())
    assert "functional.func @fib(%0 : i64) -> i64" in text or "functional.func @fib(%0: i64) -> i64" in text
    assert 'functional.prim "less"' in text
    assert "functional.call @fib(" in text
    assert "functional.constant weak 1 : i64" in text


def test_functional_opaque_prims_constants_and_unknown_types() -> None:
    u = fn.UnknownType()
    entry = Block(arg_types=[t3, u])
    t, x = entry.args
    with ImplicitBuilder(entry):
        pair = fn.PrimOp(SymbolRefAttr("split"), [t], [t3, t3])
        dense = fn.ConstantOp(DenseIntOrFPElementsAttr.from_list(t3, [1.0, 2.0, 3.0]))
        total = fn.PrimOp("add", [pair.res[0], dense], [t3])
        flag = fn.ConstantOp(IntegerAttr(1, i1))
        fn.PrimOp("where", [flag, total, pair.res[1]], [t3])
        half = fn.ConstantOp(FloatAttr(0.5, f32), weak=True)
        fn.PrimOp("multiply", [x, half], [u])
        fn.ReturnOp(total, x)
    module = ModuleOp(
        [
            fn.OpaqueOp("split", "def split(t):\n    return t, -t"),
            fn.FuncOp("f", ([t3, u], [t3, u]), Region(entry)),
        ]
    )
    text = assert_round_trip(module)
    assert 'functional.opaque @split "def split(t):\\0A    return t, -t"' in text
    assert "functional.prim @split(" in text
    assert "dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf64>" in text
    assert "functional.constant true" in text
    assert "!functional.unknown" in text
    prims = [op for op in module.walk() if isinstance(op, fn.PrimOp)]
    assert [(p.is_builtin, p.prim_name) for p in prims] == [
        (False, "split"),
        (True, "add"),
        (True, "where"),
        (True, "multiply"),
    ]


def test_functional_unknown_types_are_compatible() -> None:
    u = fn.UnknownType()
    assert fn.types_compatible(u, i64) and fn.types_compatible(i64, u) and fn.types_compatible(i64, i64)
    assert not fn.types_compatible(i64, i32)


def module_with_func(
    build: Callable[[Block], None],
    arg_types: list[Attribute],
    result_types: list[Attribute],
    *extra: Operation,
) -> ModuleOp:
    entry = Block(arg_types=arg_types)
    with ImplicitBuilder(entry):
        build(entry)
    return ModuleOp([*extra, fn.FuncOp("f", (arg_types, result_types), Region(entry))])


def callee(name: str, args: list[Attribute], results: list[Attribute]) -> fn.FuncOp:
    body = Block(arg_types=args)
    with ImplicitBuilder(body):
        fn.ReturnOp(*body.args[: len(results)])
    return fn.FuncOp(name, (args, results), Region(body))


@pytest.mark.parametrize(
    ("build", "args", "results", "extra", "message"),
    [
        pytest.param(
            lambda b: fn.ReturnOp(*fn.CallOp("g", [b.args[0]], [i64]).res),
            [i64], [i64], [],
            "call to @g, but no function @g is defined in this module",
            id="call-missing-function",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(*fn.CallOp("g", [b.args[0], b.args[0]], [i64]).res),
            [i64], [i64], [callee("g", [i64], [i64])],
            "call to @g passes 2 argument(s), but @g takes 1",
            id="call-argument-count",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(*fn.CallOp("g", [b.args[0]], [i64]).res),
            [i32], [i64], [callee("g", [i64], [i64])],
            "arguments of call to @g: value 0 has type i32, but i64 is expected",
            id="call-argument-type",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(fn.CallOp("g", [b.args[0]], [f64]).res[0]),
            [i64], [f64], [callee("g", [i64], [i64])],
            "results of call to @g: value 0 has type f64, but i64 is expected",
            id="call-result-type",
        ),
        pytest.param(
            lambda b: (fn.CallOp("g", [b.args[0]], []), fn.ReturnOp()),
            [i64], [], [callee("g", [i64], [i64])],
            "call to @g expects 0 result(s), but @g returns 1",
            id="call-result-count",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(*fn.CallOp("h", [], []).res),
            [], [], [fn.OpaqueOp("h", "lambda: None")],
            "call to @h, which is a functional.opaque, not a functional.func",
            id="call-non-function",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(b.args[0]),
            [i32], [i64], [],
            "return from @f does not match its result types: value 0 has type i32, but i64 is expected",
            id="return-type",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(),
            [i64], [i64], [],
            "return from @f does not match its result types: expected 1 value(s), got 0",
            id="return-count",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(fn.PrimOp("frobnicate", [b.args[0]], [i64])),
            [i64], [i64], [],
            'unknown builtin prim "frobnicate"; use an Array-API name such as "add" or "less"',
            id="prim-unknown-builtin",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(fn.PrimOp("add", [b.args[0]], [i64])),
            [i64], [i64], [],
            'builtin prim "add" takes 2 operand(s), got 1',
            id="prim-arity",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(fn.PrimOp("negative", [b.args[0]], [i64, i64]).res[0]),
            [i64], [i64], [],
            'builtin prim "negative" has exactly one result, got 2',
            id="prim-results",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(fn.PrimOp(SymbolRefAttr("helper"), [b.args[0]], [i64])),
            [i64], [i64], [],
            "prim @helper has no `functional.opaque @helper` declaration in this module",
            id="prim-opaque-undeclared",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(fn.PrimOp(SymbolRefAttr("g"), [b.args[0]], [i64])),
            [i64], [i64], [callee("g", [i64], [i64])],
            "prim @g names a functional.func; an opaque prim must name a `functional.opaque` declaration",
            id="prim-names-function",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(
                fn.ConstantOp.build(properties={"value": IntegerAttr(1, i64)}, result_types=[i32])
            ),
            [], [i32], [],
            "attribute i32 expected from variable 'T', but got i64",
            id="constant-type",
        ),
        pytest.param(
            lambda b: fn.ReturnOp(fn.ConstantOp(IntegerAttr(1, IndexType()))),
            [], [IndexType()], [],
            "constant of type index is not a per-member value",
            id="constant-not-per-member",
        ),
    ],
)  # fmt: skip
def test_functional_verifier_rejects(
    build: Callable[[Block], object],
    args: list[Attribute],
    results: list[Attribute],
    extra: list[Operation],
    message: str,
) -> None:
    assert message in verify_error(module_with_func(build, args, results, *extra))


def test_functional_prim_needs_exactly_one_name() -> None:
    entry = Block(arg_types=[i64])
    with ImplicitBuilder(entry):
        prim = fn.PrimOp("negative", [entry.args[0]], [i64])
        prim.callee = SymbolRefAttr("helper")
        fn.ReturnOp(prim)
    module = ModuleOp([fn.OpaqueOp("helper", "abs"), fn.FuncOp("f", ([i64], [i64]), Region(entry))])
    assert "a prim names exactly one of a builtin operation or an opaque callable" in verify_error(module)


def test_functional_entry_block_arguments_must_match_parameters() -> None:
    entry = Block(arg_types=[i32])
    with ImplicitBuilder(entry):
        fn.ReturnOp()
    module = ModuleOp([fn.FuncOp("f", ([i64], []), Region(entry))])
    assert (
        "function @f: entry block arguments ['i32'] differ from the parameter types ['i64']"
        in verify_error(module)
    )


def test_functional_entry_block_cannot_be_a_branch_target() -> None:
    entry, loop = Block(), Block()
    with ImplicitBuilder(entry):
        cf.BranchOp(loop)
    with ImplicitBuilder(loop):
        cf.BranchOp(entry)
    module = ModuleOp([fn.FuncOp("f", ([], []), Region([entry, loop]))])
    assert "function @f: the entry block is the target of a branch" in verify_error(module)


def test_functional_branch_into_another_function_is_rejected() -> None:
    """Block labels are scoped per function in text, so this is only expressible from Python."""
    f_entry, g_entry, g_other = Block(), Block(), Block()
    with ImplicitBuilder(g_entry):
        fn.ReturnOp()
    with ImplicitBuilder(g_other):
        fn.ReturnOp()
    with ImplicitBuilder(f_entry):
        cf.BranchOp(g_other)
    module = ModuleOp(
        [fn.FuncOp("f", ([], []), Region(f_entry)), fn.FuncOp("g", ([], []), Region([g_entry, g_other]))]
    )
    assert "branching to a block of a different region" in verify_error(module)


def test_functional_return_outside_a_function_is_rejected() -> None:
    assert "expects parent op 'functional.func'" in verify_error(ModuleOp([fn.ReturnOp()]))


# --------------------------------------------------------------------------------------------
# stack
# --------------------------------------------------------------------------------------------


def stack_vars() -> list[Operation]:
    return [
        st.VarOp("n", i64, StorageClass.STACK),
        st.VarOp("a", i64, StorageClass.REGISTER),
        st.VarOp("b", i64, StorageClass.TEMPORARY),
        st.VarOp("d", i64, StorageClass.DEAD),
        st.VarOp("cond", i1),
        st.VarOp("x", f64),
        st.VarOp("t", t3, StorageClass.REGISTER),
        st.VarOp("res", i64),
    ]


def stack_module(*ops: Operation, extra: tuple[Operation, ...] = ()) -> ModuleOp:
    """A program whose entry block runs `ops`, then halts."""
    entry = Block()
    with ImplicitBuilder(entry):
        for op in ops:
            entry.add_op(op)
        st.HaltOp()
    return ModuleOp([*extra, *stack_vars(), st.ProgramOp("main", ["n"], ["res"], Region(entry))])


def test_stack_program_round_trip() -> None:
    entry, body, loop, ret, exit_ = Block(), Block(), Block(), Block(), Block()
    with ImplicitBuilder(entry):
        st.ConstantOp("a", IntegerAttr(2, i64))
        weak = st.ConstantOp("b", IntegerAttr(1, i64))
        weak.weak = fn.UnitAttr()
        st.ConstantOp("cond", IntegerAttr(1, i1))
        st.ConstantOp("t", DenseIntOrFPElementsAttr.from_list(t3, [0.0, 1.0, 2.0]))
        st.PrimOp("add", ["n", "a"], ["res"])
        st.PrimOp(SymbolRefAttr("pair"), ["n"], ["a", "b"])
        st.WriteOp(["a", "b"], ["b", "a"])
        st.PushOp("n")
        st.PushOp("n", "n")
        st.PopOp("n")
        st.PeekOp("n")
        st.PushGotoOp(exit_, body)
    with ImplicitBuilder(body):
        st.BranchOp("cond", ret, loop)
    with ImplicitBuilder(loop):
        st.GotoOp(body)
    with ImplicitBuilder(ret):
        st.IndirectGotoOp()
    with ImplicitBuilder(exit_):
        st.HaltOp()
    program = st.ProgramOp("main", ["n", "x"], ["res"], Region([entry, body, loop, ret, exit_]))
    module = ModuleOp([fn.OpaqueOp("pair", "lambda n: (n, n)"), *stack_vars(), program])
    text = assert_round_trip(module)
    for line in (
        "stack.var @n : i64 stack",
        "stack.var @b : i64 temporary",
        "stack.var @d : i64 dead",
        "stack.var @cond : i1\n",
        "stack.program @main(@n, @x) -> (@res) {",
        "stack.constant @b = weak 1 : i64",
        "stack.constant @cond = true",
        'stack.prim "add"(@n, @a) -> (@res)',
        "stack.prim @pair(@n) -> (@a, @b)",
        "stack.write @a, @b = @b, @a",
        "stack.push @n, @n",
        "stack.pop @n",
        "stack.peek @n",
        "stack.push_goto ^",
        "stack.branch @cond, ^",
        "stack.goto ^",
        "stack.indirect_goto",
        "stack.halt",
    ):
        assert line in text


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        pytest.param(
            [st.WriteOp(["res"], ["nowhere"])],
            "variable @nowhere is used but never declared",
            id="undeclared-variable",
        ),
        pytest.param([st.WriteOp(["res"], ["x"])], "cannot write @res (i64) from @x (f64)", id="write-type"),
        pytest.param(
            [st.WriteOp(["res", "a"], ["n"])],
            "stack.write needs as many sources as targets (and at least one); got 2 target(s) and 1 source(s)",
            id="write-count",
        ),
        pytest.param(
            [st.WriteOp([], [])],
            "stack.write needs as many sources as targets (and at least one); got 0 target(s)",
            id="write-empty",
        ),
        pytest.param(
            [st.WriteOp(["a", "a"], ["n", "res"])],
            "stack.write writes @a twice; each target may appear only once",
            id="write-twice",
        ),
        pytest.param(
            [st.WriteOp(["res"], ["d"])],
            "variable @d is read but its storage class is dead",
            id="dead-read",
        ),
        pytest.param(
            [st.PrimOp("add", ["d", "n"], ["res"])],
            "variable @d is read but its storage class is dead",
            id="prim-dead-read",
        ),
        pytest.param(
            [st.PrimOp("add", ["n", "n"], ["nowhere"])],
            "variable @nowhere is used but never declared",
            id="prim-undeclared-output",
        ),
        pytest.param(
            [st.PrimOp("add", ["n"], ["res"])],
            'builtin prim "add" takes 2 operand(s), got 1',
            id="prim-arity",
        ),
        pytest.param(
            [st.PrimOp(SymbolRefAttr("helper"), ["n"], ["res"])],
            "prim @helper has no `functional.opaque @helper` declaration in this module",
            id="prim-opaque-undeclared",
        ),
        pytest.param(
            [st.PushOp("a")],
            "variable @a is pushed but its storage class is register; only `stack` variables keep saved values",
            id="push-register",
        ),
        pytest.param(
            [st.PopOp("b")],
            "variable @b is popped but its storage class is temporary",
            id="pop-temporary",
        ),
        pytest.param([st.PeekOp("d")], "variable @d is peeked but its storage class is dead", id="peek-dead"),
        pytest.param([st.PushOp()], "stack.push needs at least one variable", id="push-nothing"),
        pytest.param(
            [st.ConstantOp("res", FloatAttr(1.0, f64))],
            "constant of type f64 written to @res of type i64",
            id="constant-type",
        ),
    ],
)
def test_stack_verifier_rejects(ops: list[Operation], message: str) -> None:
    assert message in verify_error(stack_module(*ops))


def test_stack_variable_storage_is_optional_before_allocation() -> None:
    """Push/pop/peek of a variable without a storage class yet is allowed."""
    stack_module(st.PushOp("res"), st.PopOp("res"), st.PeekOp("res")).verify()


def test_stack_branch_condition_must_be_i1() -> None:
    entry, exit_ = Block(), Block()
    with ImplicitBuilder(entry):
        st.BranchOp("n", exit_, exit_)
    with ImplicitBuilder(exit_):
        st.HaltOp()
    module = ModuleOp([*stack_vars(), st.ProgramOp("main", [], [], Region([entry, exit_]))])
    assert "branch condition @n has type i64; a per-member i1 is needed" in verify_error(module)


def test_stack_program_structure_is_checked() -> None:
    args = Block(arg_types=[i64])
    with ImplicitBuilder(args):
        st.HaltOp()
    module = ModuleOp([*stack_vars(), st.ProgramOp("main", [], [], Region(args))])
    assert "stack blocks take no arguments" in verify_error(module)

    entry = Block()
    with ImplicitBuilder(entry):
        st.GotoOp(entry)
    module = ModuleOp([*stack_vars(), st.ProgramOp("main", [], [], Region(entry))])
    assert "program @main: the entry block is the target of a jump" in verify_error(module)

    module = stack_module()
    next(op for op in module.walk() if isinstance(op, st.ProgramOp)).outputs = st.refs(["missing"])
    assert "variable @missing is used but never declared" in verify_error(module)


def test_stack_var_needs_a_per_member_type() -> None:
    module = ModuleOp([st.VarOp("u", fn.UnknownType())])
    assert (
        "variable @u has type !functional.unknown; variables need a concrete per-member type"
        in verify_error(module)
    )


def test_stack_ops_live_in_a_program() -> None:
    module = ModuleOp([*stack_vars(), st.HaltOp()])
    assert "expects parent op 'stack.program'" in verify_error(module)


def test_stack_storage_attribute_parse_error() -> None:
    with pytest.raises(ParseError, match=re.escape("Expected `dead`, `temporary`, `register`, or `stack`.")):
        parse('"stack.var"() <{sym_name = "x", type = i64, storage = #stack<storage heap>}> : () -> ()')


# --------------------------------------------------------------------------------------------
# vm
# --------------------------------------------------------------------------------------------


def vm_vars() -> list[Operation]:
    return [
        vm.VarOp("n", i64, StorageClass.STACK),
        vm.VarOp("acc", i64, StorageClass.REGISTER),
        vm.VarOp("t", t3, StorageClass.REGISTER),
    ]


def vm_module(*blocks: vm.BlockOp, extra: tuple[Operation, ...] = ()) -> ModuleOp:
    return ModuleOp([*extra, *vm_vars(), vm.ProgramOp("main", ["n"], ["acc"], blocks)])


def kernel(index: int, build: Callable[[], object]) -> vm.BlockOp:
    body = Block()
    with ImplicitBuilder(body):
        build()
    return vm.BlockOp(index, body)


def fib_entry_block() -> None:
    n = vm.ReadOp("n", i64)
    c2 = vm.ConstantOp(IntegerAttr(2, i64))
    cond = vm.PrimOp("less", [n, c2], [i1])
    vm.BranchOp(cond, 1, 2)


def test_vm_program_round_trip() -> None:
    def recurse() -> None:
        n = vm.ReadOp("n", i64)
        one = vm.ConstantOp(IntegerAttr(1, i64))
        vm.PushOp("n")
        vm.WriteOp("n", vm.PrimOp("subtract", [n, one], [i64]))
        vm.CallOp(0, 3)

    def base() -> None:
        lo, hi = vm.PrimOp(SymbolRefAttr("split"), [vm.ReadOp("n", i64)], [i64, i64]).res
        vm.WriteOp("acc", lo)
        vm.WriteOp("t", vm.ConstantOp(DenseIntOrFPElementsAttr.from_list(t3, [1.0, 2.0, 3.0])))
        vm.ReturnOp()

    def after_call() -> None:
        vm.PopOp("n")
        vm.PeekOp("n", "n")
        vm.JumpOp(4)

    blocks = [
        kernel(0, fib_entry_block),
        kernel(1, recurse),
        kernel(2, base),
        kernel(3, after_call),
        kernel(4, vm.HaltOp),
    ]
    blocks[1].attributes["function"] = fn.StringAttr("fib")
    module = vm_module(*blocks, extra=(fn.OpaqueOp("split", "lambda n: (n, n)"),))
    text = assert_round_trip(module)
    for line in (
        "vm.var @n : i64 stack",
        "vm.var @acc : i64 register",
        "vm.program @main(@n) -> (@acc) {",
        "vm.block 0 {",
        'vm.block 1 attributes {function = "fib"} {',
        "= vm.read @n : i64",
        "= vm.constant 2 : i64",
        '= vm.prim "less"(',
        "= vm.prim @split(",
        "vm.branch %",
        ", 1, 2",
        "vm.push @n",
        "vm.write @n, %",
        "vm.call 0, return 3",
        "vm.return",
        "vm.peek @n, @n",
        "vm.jump 4",
        "vm.halt",
    ):
        assert line in text
    program = next(op for op in module.walk() if isinstance(op, vm.ProgramOp))
    assert [block.number for block in program.blocks] == [0, 1, 2, 3, 4]
    assert [var.is_stack for var in module.walk() if isinstance(var, vm.VarOp)] == [True, False, False]


def halt_block(index: int) -> vm.BlockOp:
    return kernel(index, vm.HaltOp)


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        pytest.param(
            [halt_block(0), halt_block(2)],
            "vm.block 2 is the block at position 1; blocks must be numbered 0, 1, 2, ... in order",
            id="misnumbered",
        ),
        pytest.param(
            [kernel(0, lambda: vm.JumpOp(5)), halt_block(1)],
            "jump to block 5, but the program has blocks 0..1",
            id="jump-out-of-range",
        ),
        pytest.param(
            [kernel(0, lambda: vm.CallOp(0, 7))],
            "jump to block 7, but the program has blocks 0..0",
            id="call-return-out-of-range",
        ),
        pytest.param(
            [kernel(0, lambda: vm.BranchOp(vm.ConstantOp(IntegerAttr(1, i1)), -1, 0))],
            "jump to block -1, but the program has blocks 0..0",
            id="branch-negative",
        ),
        pytest.param(
            [kernel(0, lambda: vm.ReadOp("n", i64))],
            "vm.block 0 ends in vm.read; a kernel must end in a program-counter terminator",
            id="no-terminator",
        ),
        pytest.param([vm.BlockOp(0)], "vm.block 0 is empty; a kernel must end in a program-counter terminator",
                     id="empty-kernel"),
        pytest.param(
            [kernel(0, lambda: (vm.ReadOp("n", f64), vm.HaltOp()))],
            "read of @n (i64) as f64",
            id="read-type",
        ),
        pytest.param(
            [kernel(0, lambda: (vm.ReadOp("nowhere", i64), vm.HaltOp()))],
            "variable @nowhere is used but never declared",
            id="undeclared",
        ),
        pytest.param(
            [kernel(0, lambda: (vm.WriteOp("acc", vm.ConstantOp(FloatAttr(1.0, f64))), vm.HaltOp()))],
            "cannot write a f64 into @acc (i64)",
            id="write-type",
        ),
        pytest.param(
            [kernel(0, lambda: (vm.PushOp("acc"), vm.HaltOp()))],
            "variable @acc is pushed but its storage class is register",
            id="push-register",
        ),
        pytest.param(
            [kernel(0, lambda: (vm.PopOp(), vm.HaltOp()))], "vm.pop needs at least one variable", id="pop-nothing"
        ),
        pytest.param(
            [kernel(0, lambda: (vm.PrimOp(SymbolRefAttr("helper"), [], [i64]), vm.HaltOp()))],
            "prim @helper has no `functional.opaque @helper` declaration in this module",
            id="prim-opaque-undeclared",
        ),
        pytest.param(
            [kernel(0, lambda: (vm.PrimOp("where", [vm.ConstantOp(IntegerAttr(1, i1))], [i64]), vm.HaltOp()))],
            'builtin prim "where" takes 3 operand(s), got 1',
            id="prim-arity",
        ),
        pytest.param([], "program @main has no blocks", id="no-blocks"),
    ],
)  # fmt: skip
def test_vm_verifier_rejects(blocks: list[vm.BlockOp], message: str) -> None:
    assert message in verify_error(vm_module(*blocks))


def test_vm_var_storage_must_exist_at_run_time() -> None:
    module = ModuleOp([vm.VarOp("x", i64, StorageClass.TEMPORARY)])
    assert (
        "variable @x has storage class temporary; the machine only holds register and stack"
        in verify_error(module)
    )
    module = ModuleOp([vm.VarOp("u", fn.UnknownType(), StorageClass.REGISTER)])
    assert "variable @u has type !functional.unknown, not a per-member type" in verify_error(module)


def test_vm_program_holds_only_blocks() -> None:
    module = vm_module(halt_block(0))
    program = next(op for op in module.walk() if isinstance(op, vm.ProgramOp))
    program.body.block.add_op(fn.ConstantOp(IntegerAttr(1, i64)))
    assert (
        "program @main contains a functional.constant; a vm.program holds only vm.block ops"
        in verify_error(module)
    )


def test_vm_block_takes_no_arguments() -> None:
    body = Block(arg_types=[i64])
    with ImplicitBuilder(body):
        vm.HaltOp()
    assert "vm.block kernels take no arguments" in verify_error(vm_module(vm.BlockOp(0, body)))


def test_vm_branch_condition_must_be_i1() -> None:
    module = vm_module(kernel(0, lambda: vm.BranchOp(vm.ReadOp("n", i64), 0, 0)))
    with pytest.raises(
        VerifyException, match="operand 'cond' at position 0 does not verify:\nExpected attribute i1"
    ):
        module.verify()


def test_vm_constants_cannot_be_weak() -> None:
    with pytest.raises(ParseError, match="expected a constant value: an integer or float with its type"):
        parse(
            "vm.program @p() -> () {\n  vm.block 0 {\n    %c = vm.constant weak 1 : i64\n    vm.halt\n  }\n}"
        )


def test_symbol_lookup_follows_added_erased_and_renamed_symbols() -> None:
    from xdsl.dialects.builtin import ModuleOp, StringAttr
    from xdsl.traits import SymbolTable

    from abir.dialects.symbols import lookup_symbol

    text = "vm.var @a : i64 register\nvm.var @b : f64 register\nvm.var @a : f64 register"
    module = Parser(make_context(), text).parse_module()
    assert isinstance(module, ModuleOp)
    first_a, b, second_a = module.ops

    def agrees(name: str) -> Operation | None:
        found = lookup_symbol(module, name)
        assert found is SymbolTable.lookup_symbol(module, name)
        return found

    assert agrees("a") is first_a and agrees("b") is b and agrees("c") is None
    first_a.detach()
    assert agrees("a") is second_a
    b.properties["sym_name"] = StringAttr("c")
    assert agrees("b") is None and agrees("c") is b
    added = Parser(make_context(), "vm.var @d : i64 register").parse_module().ops.first
    assert added is not None
    added.detach()
    module.body.block.insert_op_before(added, b)
    assert agrees("d") is added


def test_a_module_whose_symbols_were_looked_up_is_freed() -> None:
    import gc
    import weakref

    from abir.dialects.symbols import lookup_symbol

    module = Parser(make_context(), "vm.var @a : i64 register").parse_module()
    assert lookup_symbol(module, "a") is module.ops.first
    freed = weakref.ref(module)
    del module
    gc.collect()
    assert freed() is None
