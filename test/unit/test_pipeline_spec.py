"""The pipeline's one textual spec (`abir.passes.pipeline`), the documents' pass listings checked
against it, and structured results declared by a user's `type_inference`."""

from __future__ import annotations

import collections
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from xdsl.dialects.builtin import ModuleOp, i64
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline

import abir
from abir.dialects import make_context
from abir.passes import PASSES
from abir.passes.pipeline import (
    DEFAULT_PIPELINE,
    FUNCTIONAL_STAGE,
    AbirLowerPass,
    TypeInferenceWithCallables,
    compile_functional,
    lower_to_vm,
    passes_of,
    pipeline_specs,
)
from abir.tools.abir_opt import AbirOptMain, help_text

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
INLINE_PASS = re.compile(r"`([a-z]+(?:-[a-z]+)+\{[^`]*\})`")
COMMAND = re.compile(r"abir-opt\s.*?-p\s+(?:'([^']*)'|\"([^\"]*)\"|(\S+))")

FIB = """
functional.func @fib(%n: i64) -> i64 {
  %one = functional.constant 1 : i64
  %gt = functional.prim "greater"(%n, %one) : (i64, i64) -> i1
  cf.cond_br %gt, ^rec, ^base
^rec:
  %a = functional.prim "subtract"(%n, %one) : (i64, i64) -> i64
  %two = functional.constant 2 : i64
  %b = functional.prim "subtract"(%n, %two) : (i64, i64) -> i64
  %fa = functional.call @fib(%a) : (i64) -> i64
  %fb = functional.call @fib(%b) : (i64) -> i64
  %s = functional.prim "add"(%fa, %fb) : (i64, i64) -> i64
  functional.return %s : i64
^base:
  functional.return %one : i64
}
"""


def names(specs: list[ArgSpec]) -> list[str]:
    return [spec.name for spec in specs]


def texts(specs: list[ArgSpec]) -> list[str]:
    return [str(spec) for spec in specs]


def parse(text: str) -> ModuleOp:
    return Parser(make_context(), text).parse_module()


# ----- the spec -----------------------------------------------------------------------------------


def test_the_default_pipeline_is_its_three_stages_of_registered_passes() -> None:
    specs = list(parse_pipeline(DEFAULT_PIPELINE))
    assert set(names(specs)) | {"order-sweeps", "abir-lower"} == set(PASSES)
    assert names(specs)[-1] == "summarize-descents"
    built = passes_of(specs)
    assert [p.name for p in built] == names(specs)
    assert built[2].simplify and built[8].drop_saves and not built[9].dead_saves  # the options reach the passes


def test_pipeline_specs_fill_in_the_callers_options() -> None:
    specs = pipeline_specs(entry="f", arg_types=["i64", "tensor<3xf64>"], block_order="flow", superblocks=False)
    by_name = {spec.name: spec for spec in specs}
    assert by_name["infer-types"].parameters == {"entry": ("f",), "arg-types": ("i64", "tensor<3xf64>")}
    assert by_name["lower-calls"].parameters == {"entry": ("f",)}
    assert by_name["schedule-blocks"].parameters == {"order": ("flow",)}
    assert "form-superblocks" not in by_name
    assert names(specs).index("order-sweeps") == names(specs).index("merge-identical-blocks") + 1
    assert "order-sweeps" not in names(pipeline_specs())
    with pytest.raises(ValueError, match="block order must be one of priority, flow"):
        pipeline_specs(block_order="sideways")


def test_a_pass_given_in_place_of_a_spec_with_options_is_refused() -> None:
    specs = pipeline_specs(FUNCTIONAL_STAGE, entry="fib")
    with pytest.raises(ValueError, match="has options, but a TypeInferenceWithCallables replaces it"):
        passes_of(specs, infer_types=TypeInferenceWithCallables("fib", (i64,)))
    assert passes_of(pipeline_specs(FUNCTIONAL_STAGE), infer_types=TypeInferenceWithCallables("fib", (i64,)))[0].entry


@pytest.mark.parametrize(("block_order", "superblocks"), [("priority", True), ("flow", True), ("priority", False)])
def test_abir_lower_and_the_python_api_give_the_same_module(block_order: str, superblocks: bool) -> None:
    expected = lower_to_vm(compile_functional(parse(FIB), "fib", [i64]), "fib", block_order, superblocks)
    module = parse(FIB)
    AbirLowerPass(entry="fib", block_order=block_order, superblocks=superblocks).apply(make_context(), module)
    module.attributes.clear()
    assert str(module) == str(expected)


def test_the_textual_default_pipeline_gives_what_abir_lower_gives() -> None:
    expected = parse(FIB)
    AbirLowerPass(entry="fib").apply(make_context(), expected)
    module = parse(FIB)
    for pass_ in passes_of(pipeline_specs(DEFAULT_PIPELINE, entry="fib")):
        pass_.apply(make_context(), module)
    module.attributes.clear()
    expected.attributes.clear()
    assert str(module) == str(expected)


def test_abir_opt_help_shows_the_default_pipeline_as_p_takes_it() -> None:
    shown = help_text("", PASSES).split("The default pipeline, which abir-lower runs:\n")[1].split("\n\n")[0]
    assert "".join(line.strip() for line in shown.splitlines()) == DEFAULT_PIPELINE


# ----- the documents' listings --------------------------------------------------------------------


def listed_pipelines() -> list[tuple[str, int, str]]:
    """Every `abir-opt ... -p SPEC` of the documents: (file, line, spec); placeholders left out."""
    found = []
    for document in DOCUMENTS:
        for number, line in enumerate(document.read_text().splitlines(), 1):
            for match in COMMAND.finditer(line):
                spec = next(group for group in match.groups() if group is not None)
                if "<" not in spec.replace("tensor<", ""):
                    found.append((document.name, number, spec))
    return found


def inline_pass_options() -> list[tuple[str, int, str]]:
    """Every backticked `pass{options}` of the documents: (file, line, text)."""
    found = []
    for document in DOCUMENTS:
        for number, line in enumerate(document.read_text().splitlines(), 1):
            found += [(document.name, number, text) for text in INLINE_PASS.findall(line)]
    return found


def option_names(pass_class: type[ModulePass]) -> set[str]:
    return {field.name.replace("_", "-") for field in dataclasses.fields(pass_class) if field.init}


def test_the_documents_list_pipelines() -> None:
    assert len(listed_pipelines()) >= 3  # the fib commands of docs/architecture.md at least


def test_the_documents_write_passes_with_options() -> None:
    assert {"abir-lower{block-order=flow}", "inline-calls{simplify=true}"} <= {t for _, _, t in inline_pass_options()}


def test_the_tools_docs_pass_list_is_the_registry() -> None:
    lines = (ROOT / "docs" / "tools.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "--list-abir-passes` lists" in line)
    listed = []
    for line in lines[start + 1 :]:
        if match := re.match(r"  - `([a-z-]+)`: ", line):
            listed.append(match.group(1))
        elif listed and not line.startswith("    "):
            break
    assert listed == list(PASSES)


@pytest.mark.parametrize(("document", "line", "spec"), listed_pipelines() + inline_pass_options())
def test_every_listed_pass_exists_with_its_options(document: str, line: int, spec: str) -> None:
    available = AbirOptMain.__new__(AbirOptMain)
    available.available_passes = {}
    AbirOptMain.register_all_passes(available)
    for step in parse_pipeline(spec):
        assert step.name in available.available_passes, f"{document}:{line}: no pass {step.name}"
        pass_class = available.available_passes[step.name]()
        unknown = {given.replace("_", "-") for given in step.parameters} - option_names(pass_class)
        assert not unknown, f"{document}:{line}: {step.name} has no option(s) {sorted(unknown)}"
        pass_class.from_pass_spec(step)


def architecture_lines() -> list[str]:
    return (ROOT / "docs" / "architecture.md").read_text().splitlines()


def test_the_listing_of_the_default_pipeline_equals_the_spec() -> None:
    lines = architecture_lines()
    said = next(i for i, line in enumerate(lines) if "The default pipeline" in line)
    fence = next(i for i in range(said, len(lines)) if lines[i].startswith("```"))
    listed = lines[fence + 1]
    assert texts(list(parse_pipeline(listed))) == texts(pipeline_specs())


def test_the_fib_commands_are_the_stages_with_their_options() -> None:
    fib_specs = [spec for document, _, spec in listed_pipelines() if document == "architecture.md"][:3]
    listed = [step for spec in fib_specs for step in parse_pipeline(spec)]
    assert texts(listed) == texts(pipeline_specs(entry="fib", arg_types=["i64"], block_order="flow"))[:4] + texts(
        pipeline_specs(block_order="flow")
    )[4:]


def test_the_overview_diagram_names_every_pass_the_pipeline_runs() -> None:
    lines = architecture_lines()
    start, end = [i for i, line in enumerate(lines) if line.startswith("```")][:2]
    diagram = [line for line in lines[start:end] if line.strip().startswith("|  ")]
    listed = {word for line in diagram for word in re.findall(r"\b[a-z]+(?:-[a-z]+)+\b", line)}
    assert listed == set(names(pipeline_specs(block_order="flow")))


# ----- a structured result declared by a user's type_inference ------------------------------------

Point = collections.namedtuple("Point", ["x", "y"])


def make_point(a):
    return Point(a, a * 2)


def point_of(p):
    return make_point(p.x + p.y)


def through_point_of(a):
    return point_of(Point(a, a))


def batched_through_point_of() -> abir.BatchedFunction:
    ctx = abir.Context()
    ctx.primitive(make_point)
    ctx.batch_uncurried(point_of, type_inference=lambda types: types[0])
    return ctx.batch_uncurried(through_point_of)


def test_a_primitives_namedtuple_returned_through_a_declared_function(backend_name: str) -> None:
    a = np.arange(5.0)
    got = batched_through_point_of()(a, backend=backend_name)
    expected = [through_point_of(x) for x in a]
    assert type(got) is Point
    for field in Point._fields:
        np.testing.assert_array_equal(np.asarray(getattr(got, field)), [getattr(e, field) for e in expected])


def one_more(a):
    return a + 1


def through_one_more(a):
    return one_more(a)


def test_a_declared_result_count_that_never_agrees_is_an_error() -> None:
    ctx = abir.Context()
    ctx.batch_uncurried(one_more, type_inference=lambda types: (types[0], types[0]))
    caller = ctx.batch_uncurried(through_one_more)
    with pytest.raises(abir.AbirError, match=r"gives 2 result type\(s\), but the function returns 1 array"):
        caller(np.arange(3.0))
