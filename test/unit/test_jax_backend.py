"""Backend-specific tests of `JaxBackend` (the shared protocol tests are in test_backend_conformance.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from abir.backends.jax import JaxBackend, writes  # noqa: E402
from abir.backends.jax.cost import work_per_member  # noqa: E402
from abir.backends.jax.reductions import batch_any, batch_min, batch_sum  # noqa: E402


@pytest.fixture(scope="module")
def backend() -> JaxBackend:
    return JaxBackend()


def test_run_on_dummies_evaluates_abstractly(backend: JaxBackend) -> None:
    from abir.types import TensorType

    out = backend.run_on_dummies(
        lambda x, y: x * y.sum(), [TensorType(np.float32, (4,)), TensorType(np.int64, (4, 3))]
    )
    assert backend.type_of(out) == (np.dtype(np.float32), (4,))


@pytest.mark.parametrize("size", [1, 31, 32, 33, 64, 100, 192, 193, 300])
def test_batch_reductions_equal_numpy(size: int) -> None:
    values = np.random.default_rng(size).integers(-50, 50, size=size)
    for probe in (values, np.full(size, 7)):
        x = jnp.asarray(probe)
        assert bool(batch_any(x == 7)) == bool(np.any(probe == 7))
        assert int(batch_min(x)) == int(np.min(probe))
        assert int(batch_sum(x)) == int(np.sum(probe))


def test_a_batch_of_64_reduces_in_one_kernel() -> None:
    text = jax.jit(lambda pc: batch_any(pc == 3)).lower(jnp.zeros(64, jnp.int32)).compile().as_text()
    entry = text[text.index("ENTRY") :]
    assert entry.count("fusion(") == 1 and "reduce-window" not in entry


def test_materialized_copies_values_exactly() -> None:
    """The copy that keeps XLA from recomputing a costly helper in each consumer changes no
    bit: NaN, infinities and the sign of zero included."""
    with JaxBackend().scope():  # float64, as in a run
        values = jnp.asarray(np.array([[np.nan, -0.0], [np.inf, -np.inf], [1e-310, -2.5]]))
        assert values.dtype == np.float64
        got = np.asarray(jax.jit(writes.materialized)(values))
        np.testing.assert_array_equal(got.view(np.int64), np.asarray(values).view(np.int64))
        assert writes.materialized(jnp.float64(3.0)) == 3.0  # a scalar stays as it is


def test_costly_helper_results_get_their_own_buffer() -> None:
    """A helper above `MATERIALIZE_MIN_ROW_WORK` per member has its results scattered into a
    buffer of their own; a cheap one is called as it is."""
    backend = JaxBackend()

    def costly(x):
        for _ in range(writes.MATERIALIZE_MIN_ROW_WORK):
            x = x * 1.0001 + 1.0
        return x, x > 0

    def cheap(x):
        return x + 1.0

    with backend.scope():
        x = jnp.ones((4, 3))
        assert work_per_member(costly, [x]) >= writes.MATERIALIZE_MIN_ROW_WORK
        costly_jaxpr = str(jax.make_jaxpr(lambda x: backend.call_opaque(costly, [x]))(x))
        cheap_jaxpr = str(jax.make_jaxpr(lambda x: backend.call_opaque(cheap, [x]))(x))
        assert costly_jaxpr.count(" scatter[") == 2 and "scatter" not in cheap_jaxpr
        got, positive = backend.call_opaque(costly, [x])
        want, _ = costly(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert positive.dtype == jnp.bool_
