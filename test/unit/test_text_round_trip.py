"""The printed functional IR is the whole program: for every program of the test corpus that uses
no primitive (a function declared `ctx.primitive` stays an opaque prim), the functional IR the
frontend prints for a call runs in a fresh process with `abir-run` (nothing of this process's
registries is there) and gives what the Python function gives, member by member.

All programs run in one fresh process, each through `abir-run`'s `main` on its own text file and
`.npz` arguments as the command line passes them: one interpreter start instead of one per
program. Each run reads only its own file, so no program sees another's IR."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import optree
import pytest
import test_end_to_end as corpus
import test_indexing as arrays
from test_array_prims import arguments, every_array_operation

import abir
from abir.calling import flatten_arguments
from abir.dialects import functional

ARRAY_CASES = [
    (arrays.constant_indices, (arrays.VECTORS,)),
    (arrays.matrix_indices, (arrays.MATRICES,)),
    (arrays.loop_gather, (arrays.VECTORS,)),
    (arrays.batched_index, (arrays.VECTORS, np.array([0, 2, 1, 2]))),
    (arrays.batched_matrix_index, (arrays.MATRICES, np.array([0, 1, 1, 0]), np.array([2, 0, 1, 1]))),
    (arrays.reductions, (arrays.VECTORS.astype(np.float64),)),
    (arrays.axis_reductions, (arrays.MATRICES,)),
    (arrays.numpy_functions, (arrays.MATRICES,)),
    (arrays.vector_algebra, (arrays.VECTORS, arrays.VECTORS[::-1].copy())),
    (arrays.matrix_algebra, (arrays.MATRICES.astype(np.float64), np.array([[1.0, 0.5, 2.0]] * 4))),
    (arrays.conversions, (arrays.VECTORS,)),
    (arrays.astype_like, (arrays.VECTORS, np.array([1.5, 2.5, 0.0, 1.0], np.float32))),
    (arrays.shape_facts, (arrays.MATRICES,)),
    (arrays.reshaping, (arrays.MATRICES,)),
    (arrays.clipping, (arrays.VECTORS,)),
    (every_array_operation, arguments()),
]
ARRAY_PROGRAMS = {program for program, _ in ARRAY_CASES}
CASES = [*corpus.CASES, *ARRAY_CASES]


def printed_program(program, args):
    """The functional IR text of the call `program(*args)`, its entry symbol, its flat leaves and
    the structure of its results; None when the program has an opaque prim."""
    ctx = abir.Context()
    for function in {*corpus.PROGRAMS, program}:
        ctx.batch_uncurried(function)
    leaves, treedefs = flatten_arguments(program.__name__, args)
    frontend = ctx.build_program(program.__name__, treedefs)
    if any(isinstance(op, functional.OpaqueOp) for op in frontend.module.ops):
        return None
    return str(frontend.module), frontend.entry, leaves, frontend.output_treedef


RUN_EACH = """
import contextlib, io, json, sys, traceback
from abir.tools.abir_run import main

for argv, out in json.load(open(sys.argv[1])):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            status = main(argv)
        except BaseException:  # abir-run printed a traceback: that program's test fails with it
            status = "traceback"
            traceback.print_exc()
    json.dump({"status": status, "stdout": stdout.getvalue(), "stderr": stderr.getvalue()}, open(out, "w"))
"""
"""Runs `abir-run` on each (command line, output file) pair of a JSON list, in one process."""


def run_in_one_fresh_process(directory: Path, programs: dict[str, tuple[str, str, list]]) -> dict[str, dict]:
    """`abir-run`'s status and output for each printed program (its text, entry and flat leaves),
    all run in one new interpreter."""
    runs = []
    for name, (text, entry, leaves) in programs.items():
        (directory / f"{name}.mlir").write_text(text)
        np.savez(directory / f"{name}.npz", *[np.asarray(leaf) for leaf in leaves])
        argv = [str(directory / f"{name}.mlir"), "--entry", entry, "--args", str(directory / f"{name}.npz"),
                "--max-stack-depth", "40"]  # fmt: skip
        runs.append((argv, str(directory / f"{name}.json")))
    (directory / "runs.json").write_text(json.dumps(runs))
    done = subprocess.run([sys.executable, "-c", RUN_EACH, str(directory / "runs.json")],
                          capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return {name: json.loads((directory / f"{name}.json").read_text()) for name in programs}


def parse_results(output: dict) -> list[np.ndarray]:
    assert output["status"] == 0, output["stderr"]
    results = []
    for index, line in enumerate(output["stdout"].splitlines()):
        head, _, value = line.partition(": ")
        assert head == f"result {index}", line
        dtype, _, data = value.partition(" ")
        results.append(np.asarray(json.loads(data), dtype=dtype))
    return results


@pytest.fixture(scope="module")
def printed_programs() -> dict[str, tuple | None]:
    """Each case's printed program (None when it calls a primitive), by program name."""
    return {program.__name__: printed_program(program, args) for program, args in CASES}


@pytest.fixture(scope="module")
def fresh_process_outputs(tmp_path_factory, printed_programs) -> dict[str, dict]:
    programs = {name: (p[0], p[1], p[2]) for name, p in printed_programs.items() if p is not None}
    return run_in_one_fresh_process(tmp_path_factory.mktemp("round_trip"), programs)


@pytest.mark.parametrize(("program", "args"), CASES, ids=[c[0].__name__ for c in CASES])
def test_printed_ir_runs_elsewhere_as_the_python_call(printed_programs, fresh_process_outputs, program, args):
    printed = printed_programs[program.__name__]
    if printed is None:
        pytest.skip(f"{program.__name__} calls a primitive (an opaque prim)")
    _, _, leaves, output_treedef = printed
    results = optree.tree_unflatten(output_treedef, parse_results(fresh_process_outputs[program.__name__]))
    batch = max(np.shape(leaf)[0] for leaf in leaves if np.ndim(leaf) > 0)
    for i in range(batch):
        member = arrays._member if program in ARRAY_PROGRAMS else corpus.member  # NumPy scalars stay
        expected = program(*(member(a, i) for a in args))
        corpus._assert_same(corpus.member(results, i), expected, f"{program.__name__} member {i}")


def test_the_corpus_is_mostly_free_of_opaque_prims(printed_programs):
    """Array syntax no longer needs opaque prims: every array case prints a self-contained module."""
    assert all(printed_programs[program.__name__] is not None for program, _ in ARRAY_CASES)
