"""Every program of bench/suite_programs.py, batched by abir at a small batch, equals the plain
Python run per member on the NumPy, JAX and TF backends; so does the suite's NUTS on the Bayesian
logistic regression (`abir.samplers.nuts`, gradient as its user would give it on each backend).
NUTS on the Gaussian targets is covered by test/unit/test_nuts.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import suite_programs  # noqa: E402

import abir  # noqa: E402

BACKENDS = {
    "numpy": abir.NumpyBackend,
    "jax": abir.JaxBackend,
    "tf": lambda: abir.TensorFlowBackend(jit_compile=True),
}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("name", sorted(suite_programs.SUITE))
@pytest.mark.about_backend("jax", "tf")  # every program family on every backend (conftest.py, rule 3)
@pytest.mark.make_test_keeps(
    {"backend": "numpy"},
    {"backend": "jax"},
    *({"name": name} for name in ("ackermann", "edit-distance", "fib-lt", "gamma-mt", "ode-rk23")),
)
def test_suite_program_equals_per_member_python(name: str, backend: str) -> None:
    program = suite_programs.SUITE[name]
    inputs = program.make_inputs(4, True)
    want = suite_programs.python_run(program, inputs)
    got = suite_programs.abir_function(program)(
        *inputs, backend=BACKENDS[backend](), max_stack_depth=program.max_stack_depth
    )
    suite_programs.assert_equal(suite_programs.as_tuple(got), want, f"{name} on {backend}")


def test_ackermann_recursion_is_deep_at_full_size() -> None:
    """The full-size inputs reach a stack depth in the hundreds (2n + 4 for A(2, n)), within the
    program's `max_stack_depth`."""
    program = suite_programs.SUITE["ackermann"]
    m, n = program.make_inputs(64, False)
    assert (m == 2).all()
    assert 2 * n.max() + 4 >= 200
    assert 2 * n.max() + 4 <= program.max_stack_depth


def test_logreg_gradient_matches_finite_differences() -> None:
    q = np.random.default_rng(0).normal(size=(2, suite_programs.LOGREG_FEATURES))
    logp, grad = suite_programs.logreg_value_and_grad(q)
    step = 1e-6
    for k in (0, 7, 24):
        shift = np.zeros_like(q)
        shift[:, k] = step
        up, _ = suite_programs.logreg_value_and_grad(q + shift)
        down, _ = suite_programs.logreg_value_and_grad(q - shift)
        np.testing.assert_allclose((up - down) / (2 * step), grad[:, k], rtol=1e-5)


@pytest.mark.parametrize(
    "backend", ["numpy", pytest.param("jax", marks=pytest.mark.full), pytest.param("tf", marks=pytest.mark.full)]
)
def test_logreg_nuts_equals_per_chain_python(backend: str) -> None:
    """JAX and TF under `full` (each one long compilation): `make test` checks
    `abir.samplers.nuts` against per-chain Python on every backend, with JAX's autodiff on JAX,
    in test_samplers.py."""
    q0 = suite_programs.logreg_initial_positions(3)
    reference = "jax" if backend == "jax" else "numpy"  # the same gradient source as the batched run
    want = suite_programs.logreg_nuts(reference, q0, steps=3, step_size=0.1, max_depth=5, dry_run=True)
    got = suite_programs.logreg_nuts(BACKENDS[backend](), q0, steps=3, step_size=0.1, max_depth=5)
    np.testing.assert_allclose(got.draws, want.draws, rtol=1e-9, atol=1e-12)
    for field, g, w in zip(want.stats._fields, got.stats, want.stats, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=field)
    assert len(set(want.stats.leapfrogs.ravel().tolist())) > 1, "chains should take trajectories of different lengths"


def test_printed_tables_list_each_row_once_with_the_ratio_per_backend() -> None:
    import suite

    def row(program: str, backend: str) -> suite.Row:
        return suite.Row(program, backend, 8, suite.Timing(1.0, 0.5), "python", suite.Timing(2.0, 1.0))

    rows = [row("fib-lt", "jax"), row("fib-lt", "numpy"), row("deep-sum", "jax")]
    lines = suite.markdown_tables(rows)
    assert sum(line.startswith("| fib-lt |") for line in lines) == 2
    assert sum(line.startswith("| deep-sum |") for line in lines) == 1
    headers = [line for line in lines if line.startswith("| program |")]
    assert len(headers) == 2
    assert "ratio on jax" in headers[0] and "ratio on numpy" in headers[1]
    assert "| 2x |" in lines[lines.index(headers[0]) + 2]


def test_each_backend_is_set_against_its_own_frameworks_alternatives() -> None:
    import suite

    alternatives = {"python": suite.Timing(0.0, 3.0), "jax-vmap": suite.Timing(0.0, 1.0),
                    "tfp-nuts-xla": suite.Timing(0.0, 2.0)}  # fmt: skip
    assert suite.best_of(alternatives, "jax")[0] == "jax-vmap"
    assert suite.best_of(alternatives, "tf-xla")[0] == "tfp-nuts-xla"
    assert suite.best_of(alternatives, "numpy")[0] == "python"
