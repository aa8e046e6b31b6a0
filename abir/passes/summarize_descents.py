"""`summarize-descents`: a block that calls itself down to a base case runs all its calls at once.

A recursive function that first recurses on a smaller argument (`fib(n - 1)`, NUTS' tree built
by `build_tree(depth - 1)`) compiles to a vm block that calls itself: per call it pushes the
return block and the values the caller needs afterwards, moves a counter by a constant and
tests the base case. A member standing there runs the block once per level of the descent; a
sweeping machine repeats it until the deepest member arrives. Every iteration is a function of
the counter alone, so the whole descent has a closed form: this pass replaces such a block's ops
by one `vm.descend` that computes, per member, how many iterations it makes and writes all their
pushes at once (`abir.vm.state_ops.descend`).

A block is summarized when, besides its terminator `vm.call <itself>, return R`:

* it writes exactly one variable, the counter `c`, once, as `c + k` (k a non-zero integer
  constant, `vm.prim "add"`/`"subtract"` with a constant);
* it has exactly one side exit `vm.exit_if`, on a comparison (`equal` ... `greater_equal`, maybe
  negated by `logical_not`) of the counter (before or after its update, plus constants) with a
  constant;
* it reads no variable but the counter, and pushes each variable at most once: the counter or
  a variable it does not write (the same value at every level). Each pushed variable gets a
  stack pointer of its own (`abir.vm.kernels.stack_pointers`), also where a `vm.push` pushed
  several together;
* it uses only integer constants and those prims;
* the counter and the pushed variables are per-member scalars.

The whole descent is one block run, in the statistics and for `max_steps` (it cannot run away:
it ends at its base case or overflows a stack, naming the recursive call's line, which the
`vm.descend` keeps as `abir.call_loc`). The pass runs last in the vm pipeline: the passes before
it reason about the self-call, not the op.

What it gains: docs/performance.md#summarize-descents. The NumPy backend's programs (no superblocks) keep
the descent's test and its call in separate blocks, which this pass does not match.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, SymbolRefAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from abir.dialects import vm
from abir.passes.analysis import CALL_LOCATION_ATTR, the_vm_program
from abir.types import tensor_type_of

SWAPPED = {
    "equal": "equal",
    "not_equal": "not_equal",
    "less": "greater",
    "less_equal": "greater_equal",
    "greater": "less",
    "greater_equal": "less_equal",
}
"""`a op b` is `b SWAPPED[op] a`."""
NEGATED = {
    "equal": "not_equal",
    "not_equal": "equal",
    "less": "greater_equal",
    "less_equal": "greater",
    "greater": "less_equal",
    "greater_equal": "less",
}


@dataclass(frozen=True)
class _Const:
    value: int


@dataclass(frozen=True)
class _Counter:
    """The counter's value at the start of the iteration, plus `delta`."""

    delta: int


@dataclass(frozen=True)
class _Test:
    """`counter + delta <predicate> bound`."""

    predicate: str
    delta: int
    bound: int


_Value = _Const | _Counter | _Test


class _NotADescent(Exception):
    """The block does something the closed form does not cover."""


def _prim_value(op: vm.PrimOp, args: list[_Value]) -> _Value:
    name = op.fn.data if op.fn is not None else None
    match name, args:
        case "add", [_Counter(delta), _Const(v)] | [_Const(v), _Counter(delta)]:
            return _Counter(delta + v)
        case "subtract", [_Counter(delta), _Const(v)]:
            return _Counter(delta - v)
        case "logical_not", [_Test(predicate, delta, bound)]:
            return _Test(NEGATED[predicate], delta, bound)
        case predicate, [_Counter(delta), _Const(v)] if predicate in SWAPPED:
            return _Test(predicate, delta, v)
        case predicate, [_Const(v), _Counter(delta)] if predicate in SWAPPED:
            return _Test(SWAPPED[predicate], delta, v)
    raise _NotADescent


def _constant(op: vm.ConstantOp) -> _Const:
    value = op.value
    if not isinstance(value, IntegerAttr) or value.type.width.data == 1:  # type: ignore[attr-defined]
        raise _NotADescent
    return _Const(int(value.value.data))


def summarize(block: vm.BlockOp) -> vm.DescendOp | None:
    """The `vm.descend` equivalent to `block`, or None when it is not such a descent."""
    ops = list(block.body.block.ops)
    call = ops[-1] if ops else None
    if not isinstance(call, vm.CallOp) or vm.op_targets(call, (vm.TargetRole.CALLEE,)) != (block.number,):
        return None
    writes = [op for op in ops if isinstance(op, vm.WriteOp)]
    exits = [op for op in ops if isinstance(op, vm.ExitIfOp)]
    if len(writes) != 1 or len(exits) != 1:
        return None
    counter = writes[0].var.string_value()
    try:
        (return_target,) = vm.op_targets(call, (vm.TargetRole.RETURN,))
        descend = _summarize(ops[:-1], counter, return_target)
    except _NotADescent:
        return None
    if not _scalar_variables(call, [descend.counter, *descend.pushes.data]):
        return None  # `vm.descend` writes per-member scalars (found by the fuzzer: a vector pushed)
    # the line of the recursive call, which a stack overflow names (`abir.call_loc`)
    locations = [op.attributes[CALL_LOCATION_ATTR] for op in (call, *ops) if CALL_LOCATION_ATTR in op.attributes]
    if locations:
        descend.attributes[CALL_LOCATION_ATTR] = locations[0]
    return descend


def _scalar_variables(op: Operation, names: list[SymbolRefAttr]) -> bool:
    """Whether each variable is a per-member scalar (what `vm.descend` counts with and pushes)."""
    return all(not tensor_type_of(vm.lookup_var(op, name).type).shape for name in names)


def _summarize(ops: list[Operation], counter: str, return_target: int) -> vm.DescendOp:
    values: dict[SSAValue, _Value] = {}
    step: int | None = None
    update_first = False
    test: _Test | None = None
    exit_target = -1
    pushes: list[tuple[str, bool, bool]] = []
    for op in ops:
        match op:
            case vm.ConstantOp():
                values[op.res] = _constant(op)
            case vm.ReadOp() if op.var.string_value() == counter:
                values[op.res] = _Counter(step or 0)
            case vm.PrimOp() if op.fn is not None and len(op.res) == 1:
                values[op.res[0]] = _prim_value(op, [values[a] for a in op.arguments])
            case vm.WriteOp():
                update = values.get(op.value)
                if not isinstance(update, _Counter) or update.delta == 0:
                    raise _NotADescent
                step, update_first = update.delta, test is None
            case vm.ExitIfOp():
                cond = values.get(op.cond)
                if not isinstance(cond, _Test):
                    raise _NotADescent
                (exit_target,) = vm.op_targets(op)
                test = cond
            case vm.PushOp():
                for ref in op.vars.data:
                    name = ref.string_value()
                    pushes.append((name, name == counter and step is not None, test is None))
            case _:
                raise _NotADescent
    names = [name for name, _, _ in pushes]
    if step is None or test is None or len(set(names)) != len(names):
        raise _NotADescent
    return vm.DescendOp(
        counter, step, test.predicate, test.delta, test.bound, update_first, pushes, exit_target, return_target
    )


class SummarizeDescentsPass(ModulePass):
    """Replace every self-calling descent block's ops by one `vm.descend` (module docstring)."""

    name = "summarize-descents"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        program = the_vm_program(op, self.name)
        for block in program.blocks:
            descend = summarize(block)
            if descend is None:
                continue
            body = block.body.block
            for old in reversed(list(body.ops)):
                old.detach()
                old.erase(safe_erase=False)
            body.add_op(descend)
