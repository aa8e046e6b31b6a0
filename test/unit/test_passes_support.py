"""Functional programs written by hand in the frontend's style (untyped except constants),
shared by the pass tests."""

FIB = """\
builtin.module {
  functional.func @fib(%n: !functional.unknown) -> !functional.unknown {
    %c2 = functional.constant weak 2 : i64
    %cond = functional.prim "greater"(%n, %c2) : (!functional.unknown, i64) -> !functional.unknown
    %b = functional.prim "astype"(%cond) : (!functional.unknown) -> i1
    cf.cond_br %b, ^recurse, ^base
  ^recurse:
    %c1 = functional.constant weak 1 : i64
    %a1 = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
    %f1 = functional.call @fib(%a1) : (!functional.unknown) -> !functional.unknown
    %a2 = functional.prim "subtract"(%n, %c2) : (!functional.unknown, i64) -> !functional.unknown
    %f2 = functional.call @fib(%a2) : (!functional.unknown) -> !functional.unknown
    %s = functional.prim "add"(%f1, %f2) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %s : !functional.unknown
  ^base:
    %one = functional.constant weak 1 : i64
    functional.return %one : i64
  }
}
"""

EVEN = """\
builtin.module {
  functional.func @is_even(%n: !functional.unknown) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %z = functional.prim "equal"(%n, %c0) : (!functional.unknown, i64) -> !functional.unknown
    %b = functional.prim "astype"(%z) : (!functional.unknown) -> i1
    cf.cond_br %b, ^yes, ^no
  ^yes:
    %t = functional.constant weak true
    functional.return %t : i1
  ^no:
    %c1 = functional.constant weak 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
    %r = functional.call @is_odd(%m) : (!functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
  functional.func @is_odd(%n: !functional.unknown) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %z = functional.prim "equal"(%n, %c0) : (!functional.unknown, i64) -> !functional.unknown
    %b = functional.prim "astype"(%z) : (!functional.unknown) -> i1
    cf.cond_br %b, ^yes, ^no
  ^yes:
    %f = functional.constant weak false
    functional.return %f : i1
  ^no:
    %c1 = functional.constant weak 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
    %r = functional.call @is_even(%m) : (!functional.unknown) -> !functional.unknown
    %nr = functional.prim "logical_not"(%r) : (!functional.unknown) -> !functional.unknown
    %nnr = functional.prim "logical_not"(%nr) : (!functional.unknown) -> !functional.unknown
    functional.return %nnr : !functional.unknown
  }
}
"""

GCD = """\
builtin.module {
  functional.func @gcd(%a0: !functional.unknown, %b0: !functional.unknown) -> !functional.unknown {
    cf.br ^head(%a0, %b0 : !functional.unknown, !functional.unknown)
  ^head(%a: !functional.unknown, %b: !functional.unknown):
    %c0 = functional.constant weak 0 : i64
    %ne = functional.prim "not_equal"(%b, %c0) : (!functional.unknown, i64) -> !functional.unknown
    %cond = functional.prim "astype"(%ne) : (!functional.unknown) -> i1
    %r = functional.prim "remainder"(%a, %b) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    cf.cond_br %cond, ^head(%b, %r : !functional.unknown, !functional.unknown), ^done
  ^done:
    functional.return %a : !functional.unknown
  }
}
"""

SUM = """\
builtin.module {
  functional.func @tsum(%n: !functional.unknown, %acc: !functional.unknown) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %p = functional.prim "greater"(%n, %c0) : (!functional.unknown, i64) -> !functional.unknown
    %cond = functional.prim "astype"(%p) : (!functional.unknown) -> i1
    cf.cond_br %cond, ^rec, ^base
  ^rec:
    %c1 = functional.constant weak 1 : i64
    %n1 = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
    %acc1 = functional.prim "add"(%acc, %n) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    %r = functional.call @tsum(%n1, %acc1) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  ^base:
    functional.return %acc : !functional.unknown
  }
}
"""

EARLY = """\
builtin.module {
  functional.func @find(%n: !functional.unknown, %k: !functional.unknown) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    cf.br ^head(%c0 : i64)
  ^head(%i: !functional.unknown):
    %lt = functional.prim "less"(%i, %n) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    %c = functional.prim "astype"(%lt) : (!functional.unknown) -> i1
    cf.cond_br %c, ^body, ^after
  ^body:
    %sq = functional.prim "multiply"(%i, %i) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    %hit = functional.prim "greater_equal"(%sq, %k) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    %h = functional.prim "astype"(%hit) : (!functional.unknown) -> i1
    cf.cond_br %h, ^found, ^next
  ^found:
    functional.return %i : !functional.unknown
  ^next:
    %c1 = functional.constant weak 1 : i64
    %i1 = functional.prim "add"(%i, %c1) : (!functional.unknown, i64) -> !functional.unknown
    cf.br ^head(%i1 : !functional.unknown)
  ^after:
    %m1 = functional.constant weak -1 : i64
    functional.return %m1 : i64
  }
}
"""


# ---------------------------------------------------------------------------------------------
# Reference interpreters (unbatched, one member, plain NumPy scalars) for the stack and vm dialects
# ---------------------------------------------------------------------------------------------

import operator  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from xdsl.context import Context  # noqa: E402
from xdsl.dialects.builtin import ModuleOp  # noqa: E402
from xdsl.parser import Parser  # noqa: E402

from abir import prims  # noqa: E402
from abir.dialects import get_all_dialects, stack, vm  # noqa: E402
from abir.opaque import lookup_opaque  # noqa: E402
from abir.types import tensor_type_of  # noqa: E402


def parse(text: str) -> ModuleOp:
    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    module = Parser(ctx, text).parse_module()
    module.verify()
    return module


def constant(attr: Any) -> Any:
    value = attr.value.data
    return np.asarray(value, tensor_type_of(attr.get_type()).dtype)


def run_prim(fn: str | None, callee: Any, args: list[Any], result_types: list[Any]) -> list[Any]:
    if fn is None:
        out = lookup_opaque(callee.string_value())(*[np.asarray(a)[None] for a in args])
        outs = list(out) if isinstance(out, tuple | list) else [out]
        return [np.asarray(o)[0] for o in outs]
    dtype = tensor_type_of(result_types[0]).dtype
    return [np.asarray(prims.apply_numpy(fn, args, dtype))]


class Overflow(Exception):
    pass


def save_restore(
    kind: str, names: list[str], values: dict[str, Any], saved: dict[str, list[Any]], depth: dict[str, int]
) -> None:
    """push / pop / peek with caller-save semantics, tracking the deepest stack."""
    for n in names:
        if kind == "push":
            saved.setdefault(n, []).append(values.get(n))
            depth[n] = max(depth.get(n, 0), len(saved[n]))
        else:
            values[n] = saved[n].pop() if kind == "pop" else saved[n][-1]


STACK_KINDS = {
    stack.PushOp: "push",
    stack.PopOp: "pop",
    stack.PeekOp: "peek",
    vm.PushOp: "push",
    vm.PopOp: "pop",
    vm.PeekOp: "peek",
}


def run_stack(
    module: ModuleOp, args: list[Any], max_steps: int = 100_000
) -> tuple[list[Any], dict[str, int]]:
    """Run a stack program for one member; returns outputs and the maximum depth of each stack."""
    program = next(op for op in module.ops if isinstance(op, stack.ProgramOp))
    types = {op.sym_name.data: op.type for op in module.ops if isinstance(op, stack.VarOp)}
    values: dict[str, Any] = {}
    saved: dict[str, list[Any]] = {}
    depth: dict[str, int] = {"<pc>": 0}
    for ref, arg in zip(program.inputs.data, args, strict=True):
        values[ref.string_value()] = np.asarray(arg, tensor_type_of(types[ref.string_value()]).dtype)
    pcs: list[Any] = []
    block = program.body.blocks.first
    for _ in range(max_steps):
        for op in block.ops:
            names = lambda refs: [r.string_value() for r in refs]  # noqa: E731
            match op:
                case stack.ConstantOp():
                    values[op.var.string_value()] = constant(op.value)
                case stack.PrimOp():
                    outs = names(op.outputs.data)
                    res = run_prim(
                        op.fn.data if op.fn else None,
                        op.callee,
                        [values[n] for n in names(op.inputs.data)],
                        [types[n] for n in outs],
                    )
                    values.update(zip(outs, res, strict=True))
                case stack.WriteOp():
                    srcs = [values[n] for n in names(op.sources.data)]
                    values.update(zip(names(op.targets.data), srcs, strict=True))
                case stack.PushOp() | stack.PopOp() | stack.PeekOp():
                    save_restore(STACK_KINDS[type(op)], names(op.vars.data), values, saved, depth)
                case stack.GotoOp() | stack.BranchOp():
                    block = (
                        op.dest
                        if isinstance(op, stack.GotoOp)
                        else op.then_dest
                        if bool(values[op.cond.string_value()])
                        else op.else_dest
                    )
                case stack.PushGotoOp():
                    pcs.append(op.return_dest)
                    depth["<pc>"] = max(depth["<pc>"], len(pcs))
                    block = op.dest
                case stack.IndirectGotoOp():
                    block = pcs.pop()
                case stack.HaltOp():
                    return [values[r.string_value()] for r in program.outputs.data], depth
    raise Overflow("too many steps")


def jump_target(op: vm.JumpOp | vm.BranchOp, env: dict[Any, Any]) -> int:
    if isinstance(op, vm.JumpOp):
        return op.target.value.data
    return op.then_target.value.data if bool(env[op.cond]) else op.else_target.value.data


def run_vm(module: ModuleOp, args: list[Any], max_steps: int = 100_000) -> tuple[list[Any], int]:
    """Run a vm program for one member; returns outputs and the number of blocks executed."""
    program = next(op for op in module.ops if isinstance(op, vm.ProgramOp))
    decls = {op.sym_name.data: op for op in module.ops if isinstance(op, vm.VarOp)}
    values: dict[str, Any] = {}
    saved: dict[str, list[Any]] = {}
    for ref, arg in zip(program.inputs.data, args, strict=True):
        values[ref.string_value()] = np.asarray(arg, tensor_type_of(decls[ref.string_value()].type).dtype)
    blocks = program.blocks
    pcs: list[int] = []
    pc = 0
    for step in range(max_steps):
        env: dict[Any, Any] = {}
        for op in blocks[pc].body.block.ops:
            match op:
                case vm.ReadOp():
                    env[op.res] = values[op.var.string_value()]
                case vm.WriteOp():
                    values[op.var.string_value()] = env[op.value]
                case vm.ConstantOp():
                    env[op.res] = constant(op.value)
                case vm.PrimOp():
                    res = run_prim(
                        op.fn.data if op.fn else None,
                        op.callee,
                        [env[a] for a in op.arguments],
                        list(op.res.types),
                    )
                    env.update(zip(op.res, res, strict=True))
                case vm.PushOp() | vm.PopOp() | vm.PeekOp():
                    save_restore(
                        STACK_KINDS[type(op)], [r.string_value() for r in op.vars.data], values, saved, {}
                    )
                case vm.ExitIfOp() if env[op.cond]:
                    pc = op.target.value.data
                    break
                case vm.JumpOp() | vm.BranchOp():
                    pc = jump_target(op, env)
                case vm.CallOp():
                    pcs.append(op.return_target.value.data)
                    pc = op.target.value.data
                case vm.DescendOp():
                    pc = descend_one_by_one(op, values, saved, pcs, max_steps)
                case vm.ReturnOp():
                    pc = pcs.pop()
                case vm.HaltOp():
                    return [values[r.string_value()] for r in program.outputs.data], step + 1
    raise Overflow("too many steps")


COMPARE = {
    "equal": operator.eq,
    "not_equal": operator.ne,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
}


def descend_one_by_one(
    op: vm.DescendOp, values: dict[str, Any], saved: dict[str, list[Any]], pcs: list[int], max_steps: int
) -> int:
    """`vm.descend` as the iterations it stands for, one at a time (the reference for its
    closed form in `abir.vm.state_ops.descend`); returns the exit block."""
    counter = op.counter.string_value()
    test = COMPARE[op.predicate.data]
    for _ in range(max_steps):
        start = values[counter]
        finished = test(start + op.offset.value.data, op.bound.value.data)
        for name, updated, early in op.push_list():
            if early or not finished:
                value = start + op.step.value.data if updated else values[name]
                saved.setdefault(name, []).append(value)
        if finished:
            if op.update_before_exit.value.data:
                values[counter] = start + op.step.value.data
            return op.exit_target.value.data
        values[counter] = start + op.step.value.data
        pcs.append(op.return_target.value.data)
    raise Overflow("too many steps")
