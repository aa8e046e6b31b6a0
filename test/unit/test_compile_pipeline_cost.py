"""What a compilation does once: which modules a batched call verifies (and every pass's output
under `verifying_each_pass`), a typed module shared by the backends a program runs on, each prim
evaluated once per operand types by infer-types, pass objects made once per spec."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from xdsl.context import Context as XdslContext
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import VerifyException

import abir
import abir.calling
from abir.dialects import functional, make_context
from abir.passes import prim_evaluation
from abir.passes.pipeline import (
    DEFAULT_PIPELINE,
    passes_of,
    pipeline_specs,
    run_passes,
    verifying_each_pass,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import suite_programs  # noqa: E402
from test_passes_support import FIB  # noqa: E402


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@dataclass(frozen=True)
class DropTerminators(ModulePass):
    """Breaks a functional module: erases the return of every function."""

    name = "drop-terminators"

    def apply(self, ctx: XdslContext, op: ModuleOp) -> None:
        for returned in [o for o in op.walk() if isinstance(o, functional.ReturnOp)]:
            returned.detach()
            returned.erase(safe_erase=False)


@dataclass(frozen=True)
class Nothing(ModulePass):
    name = "nothing"

    def apply(self, ctx: XdslContext, op: ModuleOp) -> None:
        pass


def test_each_pass_verified_names_the_pass_that_broke_the_module():
    with verifying_each_pass(), pytest.raises(VerifyException) as caught:
        run_passes(parse(FIB), [Nothing(), DropTerminators(), Nothing()], verify=False)
    assert any("after pass drop-terminators" in note for note in caught.value.__notes__)


def test_a_stage_the_caller_goes_on_transforming_is_not_verified_by_default():
    run_passes(parse(FIB), [DropTerminators()], verify=False)  # no error: the caller verifies later
    with pytest.raises(VerifyException):
        run_passes(parse(FIB), [DropTerminators()])


def count_verifications(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts `ModuleOp.verify` calls by the kind of module verified (its first op's dialect)."""
    counts: Counter[str] = Counter()
    verify = ModuleOp.verify

    def counted(module: ModuleOp) -> None:
        first = next(iter(module.ops), None)
        counts[first.name.split(".")[0] if first is not None else "empty"] += 1
        verify(module)

    monkeypatch.setattr(ModuleOp, "verify", counted)
    return counts


def test_a_call_verifies_its_input_and_the_vm_module(monkeypatch):
    counts = count_verifications(monkeypatch)
    batched = abir.Context().batch_uncurried(collatz)
    np.testing.assert_array_equal(batched(np.array([1, 6, 27])), [collatz(n) for n in (1, 6, 27)])
    assert counts == {"functional": 1, "vm": 1}


def test_the_typed_module_is_verified_where_it_is_handed_out(monkeypatch):
    ctx = abir.Context()
    ctx.batch_uncurried(collatz)
    counts = count_verifications(monkeypatch)
    ctx.program_compiled("collatz", [abir.TensorType(np.int64, ())])
    ctx.program_compiled("collatz", [abir.TensorType(np.int64, ())])
    assert counts == {"functional": 2, "vm": 1}  # the frontend's, then the typed module once


def test_each_pass_verified_within_verifying_each_pass(monkeypatch):
    counts = count_verifications(monkeypatch)
    with verifying_each_pass():
        abir.Context().batch_uncurried(collatz)(np.array([1, 6, 27]))
    passes = len(pipeline_specs(DEFAULT_PIPELINE, superblocks=False))
    assert sum(counts.values()) == 1 + passes  # the input, then every pass's output


@pytest.mark.parametrize("name", sorted(suite_programs.SUITE))
def test_every_pass_keeps_the_suite_programs_valid(name):
    program = suite_programs.SUITE[name]
    inputs = program.make_inputs(4, True)
    with verifying_each_pass():
        got = suite_programs.abir_function(program)(*inputs, max_stack_depth=program.max_stack_depth)
    suite_programs.assert_equal(suite_programs.as_tuple(got), suite_programs.python_run(program, inputs), name)


def test_backends_share_the_typed_module(monkeypatch):
    typed_runs = []
    type_and_optimize = abir.calling.type_and_optimize
    monkeypatch.setattr(
        abir.calling, "type_and_optimize", lambda *a, **k: typed_runs.append(a[1]) or type_and_optimize(*a, **k)
    )
    ctx = abir.Context()
    batched = ctx.batch_uncurried(collatz)
    xs = np.array([1, 6, 27])
    expected = [collatz(n) for n in xs]
    np.testing.assert_array_equal(batched(xs, backend=abir.NumpyBackend(execution="switch")), expected)
    np.testing.assert_array_equal(batched(xs, backend=abir.NumpyBackend(execution="sweep")), expected)
    assert len(typed_runs) == 1  # two backend kinds (block orders), one typed module
    first, second = ctx.compile_cache.values()
    assert first.typed is second.typed and first.lowered is not second.lowered
    batched(xs.astype(np.int32), backend=abir.NumpyBackend(execution="sweep"))
    assert len(typed_runs) == 2  # another signature: its own typed module


def test_infer_types_evaluates_each_prim_once_per_operand_facts(monkeypatch):
    evaluated: Counter[tuple[int, tuple[object, ...]]] = Counter()
    builtin = prim_evaluation.PrimEvaluator.builtin

    def counted(self, op, facts, constants):  # noqa: ANN001, ANN202
        evaluated[(id(op), tuple(facts))] += 1
        return builtin(self, op, facts, constants)

    monkeypatch.setattr(prim_evaluation.PrimEvaluator, "builtin", counted)
    batched = abir.Context().batch_uncurried(collatz)
    np.testing.assert_array_equal(batched(np.array([1, 6, 27])), [collatz(n) for n in (1, 6, 27)])
    assert evaluated and max(evaluated.values()) == 1


def test_a_pass_spec_makes_one_pass_object():
    first = passes_of(pipeline_specs(DEFAULT_PIPELINE))
    again = passes_of(pipeline_specs(DEFAULT_PIPELINE))
    assert all(a is b for a, b in zip(first, again, strict=True))
    flow = passes_of(pipeline_specs(DEFAULT_PIPELINE, block_order="flow"))
    assert [p.name for p in flow] != [p.name for p in first]  # options make other passes
