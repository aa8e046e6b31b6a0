"""The vm-level passes in any order: every seeded random order and subset of them, each pass
followed by the verifier, leaves a program that computes what the program before them computes
(and so what the default order's program computes). The programs are the vm inputs of the lit
corpus (their variables drawn at random per member) and the vm programs of generated Python
programs, checked against plain Python per member. Passes carry no order constraints: each
reads and rewrites block targets through `vm.BlockTargets`, whatever ops earlier passes made."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import optree
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.irdl import IRDLOperation
from xdsl.passes import ModulePass

import abir.testing.differential as differential
from abir.calling import CompiledProgram
from abir.dialects import vm
from abir.passes.form_superblocks import FormSuperblocksPass
from abir.passes.merge_identical_blocks import MergeIdenticalBlocksPass
from abir.passes.order_sweeps import OrderSweepsPass
from abir.passes.pipeline import VM_STAGE, lower_to_stack, passes_of, pipeline_specs, run_passes
from abir.passes.summarize_descents import SummarizeDescentsPass
from abir.running import parse_module, run_module
from abir.testing.fuzz import generate
from abir.testing.generate import DEFAULT_FEATURES
from abir.types import tensor_type_of

VM_PASSES: tuple[type[ModulePass], ...] = (
    FormSuperblocksPass,
    MergeIdenticalBlocksPass,
    OrderSweepsPass,
    SummarizeDescentsPass,
)
FLOW_VM_STAGE = passes_of(pipeline_specs(VM_STAGE, block_order="flow"))
DEFAULT_ORDER = tuple(type(p) for p in FLOW_VM_STAGE if type(p) in VM_PASSES)
"""The order the pipeline runs them in (with the `flow` block order, which adds order-sweeps)."""
TO_VM = tuple(p for p in FLOW_VM_STAGE if type(p) not in VM_PASSES)
"""The pipeline's passes from the allocated stack program to the first vm program."""
GENERATED_SEED = 2027
GENERATED_PROGRAMS = 6
MAKE_TEST_PROGRAMS = 2
"""The generated programs `make test` reorders (a randomized sweep at its smallest, beside the lit
corpus of test_lit_vm_programs_in_any_pass_order); `full` the rest."""
ORDERS_PER_PROGRAM = 4
BATCH = 6
MAX_STEPS = 20_000
LIT = Path(__file__).resolve().parents[1] / "lit"
CORPUS = ("passes", "dialects")


def vm_inputs() -> Iterator[tuple[str, str]]:
    """(name, text) of each vm-level input of the lit corpus (each `// -----` part on its own)."""
    for directory in CORPUS:
        for path in sorted((LIT / directory).glob("*.mlir")):
            for number, part in enumerate(path.read_text().split("// -----")):
                if re.search(r"^\s*vm\.program", part, re.MULTILINE) and "functional.func" not in part:
                    yield f"{directory}/{path.name}#{number}", part


def random_orders(rng: random.Random) -> Iterator[tuple[type[ModulePass], ...]]:
    """Random subsets of the vm passes, each in a random order, some passes repeated."""
    for _ in range(ORDERS_PER_PROGRAM):
        chosen = [p for p in VM_PASSES if rng.random() < 0.7] + rng.sample(VM_PASSES, rng.randint(0, 2))
        rng.shuffle(chosen)
        yield tuple(chosen)


def apply_verified(module: ModuleOp, order: Sequence[type[ModulePass]]) -> ModuleOp:
    """A copy of `module` after the passes of `order`, verified after each."""
    result = module.clone()
    for pass_class in order:
        pass_class().apply(Context(), result)
        try:
            result.verify()
        except Exception as error:
            raise AssertionError(f"{pass_class.name} in {[p.name for p in order]} left an invalid module:\n{result}") from error
    return result


def member_inputs(module: ModuleOp, rng: np.random.Generator) -> list[np.ndarray]:
    """Random values of the program's input variables, one row per member."""
    program = next(op for op in module.ops if isinstance(op, vm.ProgramOp))
    values = []
    for name in program.inputs.data:
        tensor = tensor_type_of(vm.lookup_var(program, name).type)
        shape = (BATCH, *tensor.shape)
        dtype = np.dtype(tensor.dtype)
        if dtype == np.bool_:
            values.append(rng.random(shape) < 0.5)
        elif np.issubdtype(dtype, np.integer):
            values.append(rng.integers(0, 6, shape).astype(dtype))
        else:
            values.append(rng.normal(size=shape).astype(dtype))
    return values


def results(module: ModuleOp, inputs: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    out = run_module(module, *inputs, backend="numpy", max_steps=MAX_STEPS)
    return out if isinstance(out, tuple) else (out,)


def assert_same(expected: Sequence[np.ndarray], actual: Sequence[np.ndarray], what: str) -> None:
    assert len(expected) == len(actual), what
    for e, a in zip(expected, actual, strict=True):
        np.testing.assert_allclose(a, e, rtol=1e-9, atol=1e-12, err_msg=what)


def check_orders(name: str, module: ModuleOp, inputs: Sequence[np.ndarray], seed: int) -> None:
    expected = results(module, inputs)
    assert_same(expected, results(apply_verified(module, DEFAULT_ORDER), inputs), f"{name}: default order")
    for order in random_orders(random.Random(seed)):
        what = f"{name}: {' -> '.join(p.name for p in order)}"
        assert_same(expected, results(apply_verified(module, order), inputs), what)


def runnable(text: str, name: str) -> tuple[ModuleOp, list[np.ndarray]] | None:
    """The module and inputs of a lit input that runs as it is (not an error test, no opaque
    callables, finishing within `MAX_STEPS`)."""
    try:
        module = parse_module(text, name)
        inputs = member_inputs(module, np.random.default_rng(0))
        results(module, inputs)
    except Exception:
        return None
    return module, inputs


LIT_PROGRAMS = [(name, text) for name, text in vm_inputs()]


def test_the_corpus_has_vm_programs_to_reorder() -> None:
    usable = [name for name, text in LIT_PROGRAMS if runnable(text, name) is not None]
    assert len(usable) >= 5, usable


@pytest.mark.parametrize(("name", "text"), LIT_PROGRAMS, ids=[name for name, _ in LIT_PROGRAMS])
def test_lit_vm_programs_in_any_pass_order(name: str, text: str) -> None:
    found = runnable(text, name)
    if found is None:
        pytest.skip("an error test, or a program that does not run as it is")
    module, inputs = found
    check_orders(name, module, inputs, seed=len(text))


def generated_vm_program(index: int, directory: str) -> tuple[ModuleOp, list[np.ndarray]]:
    """Generated program `index` (no library calls), checked batched against plain Python per
    member through the default pipeline (on NumPy, which runs the orders below; the fuzz tests
    cover the other backends); its first vm program (before the vm-level passes) and its flat
    inputs."""
    generated = generate(GENERATED_SEED, index, DEFAULT_FEATURES, directory, library_share=0.0)
    program, namespace = generated.program, generated.namespace
    failures = differential.check(program, ("numpy",), namespace, generated.reference)
    assert not failures, [f"{f.backend}: {f.message}" for f in failures]
    cache: dict[object, object] = {}
    inputs = differential.batched_inputs(program, namespace)
    differential.batched_entry(program, namespace)(*inputs, backend="numpy", block_code_cache=cache)
    (compiled,) = [v for v in cache.values() if isinstance(v, CompiledProgram)]
    stack_module = lower_to_stack(compiled.typed, compiled.frontend.entry)
    leaves = [np.broadcast_to(leaf, (program.batch_size(), *np.shape(leaf)[1:])) for leaf in optree.tree_leaves(inputs)]
    return run_passes(stack_module, TO_VM), leaves


@pytest.mark.parametrize(
    "index", [i if i < MAKE_TEST_PROGRAMS else pytest.param(i, marks=pytest.mark.full) for i in range(GENERATED_PROGRAMS)]
)
def test_generated_programs_in_any_pass_order(index: int, tmp_path: Path) -> None:
    module, inputs = generated_vm_program(index, str(tmp_path))
    check_orders(f"generated program {index}", module, inputs, seed=index)


@pytest.mark.parametrize("op_class", vm.Vm.operations, ids=lambda c: c.name)
def test_block_targets_names_every_target_property(op_class: type[IRDLOperation]) -> None:
    """A vm op's block-number properties (named `*target`) are exactly its `BlockTargets`."""
    named = {name for name in op_class.get_irdl_definition().properties if name.endswith("target")}
    trait = op_class.get_trait(vm.BlockTargets)
    assert named == ({name for name, _ in trait.properties} if trait is not None else set())


def test_retarget_follows_a_mapping_and_renumbering_needs_every_block() -> None:
    descend = vm.DescendOp("k", -1, "equal", 0, 0, False, [("k", False, False)], exit_target=3, return_target=4)
    vm.retarget(descend, {3: 2})
    assert vm.op_targets(descend) == (2, 4)
    assert vm.op_targets(descend, (vm.TargetRole.RETURN,)) == (4,)
    with pytest.raises(KeyError):
        vm.retarget(descend, {2: 1}.__getitem__)
