"""The printed functional IR is the whole program: for every program of the test corpus that uses
no primitive (a function declared `ctx.primitive` stays an opaque prim), the functional IR the
frontend prints for a call runs in a fresh process with `abir-run` (nothing of this process's
registries is there) and gives what the Python function gives, member by member."""

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
ABIR_RUN = Path(sys.executable).with_name("abir-run")


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


def run_in_fresh_process(tmp_path: Path, text: str, entry: str, leaves) -> list[np.ndarray]:
    (tmp_path / "program.mlir").write_text(text)
    np.savez(tmp_path / "args.npz", *[np.asarray(leaf) for leaf in leaves])
    done = subprocess.run(
        [str(ABIR_RUN), str(tmp_path / "program.mlir"), "--entry", entry, "--args", str(tmp_path / "args.npz"),
         "--max-stack-depth", "40"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = []
    for index, line in enumerate(done.stdout.splitlines()):
        head, _, value = line.partition(": ")
        assert head == f"result {index}", line
        dtype, _, data = value.partition(" ")
        results.append(np.asarray(json.loads(data), dtype=dtype))
    return results


@pytest.mark.parametrize(("program", "args"), CASES, ids=[c[0].__name__ for c in CASES])
def test_printed_ir_runs_elsewhere_as_the_python_call(tmp_path, program, args):
    printed = printed_program(program, args)
    if printed is None:
        pytest.skip(f"{program.__name__} calls a primitive (an opaque prim)")
    text, entry, leaves, output_treedef = printed
    results = optree.tree_unflatten(output_treedef, run_in_fresh_process(tmp_path, text, entry, leaves))
    batch = max(np.shape(leaf)[0] for leaf in leaves if np.ndim(leaf) > 0)
    for i in range(batch):
        member = arrays._member if program in ARRAY_PROGRAMS else corpus.member  # NumPy scalars stay
        expected = program(*(member(a, i) for a in args))
        corpus._assert_same(corpus.member(results, i), expected, f"{program.__name__} member {i}")


def test_the_corpus_is_mostly_free_of_opaque_prims():
    """Array syntax no longer needs opaque prims: every array case prints a self-contained module."""
    assert all(printed_program(program, args) is not None for program, args in ARRAY_CASES)
