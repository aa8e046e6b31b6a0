"""Backend-specific tests of `JaxBackend` (the shared protocol tests are in test_backend_conformance.py)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")


from abir.backends.jax_backend import JaxBackend  # noqa: E402


@pytest.fixture(scope="module")
def backend() -> JaxBackend:
    return JaxBackend()


def test_run_on_dummies_evaluates_abstractly(backend: JaxBackend) -> None:
    from abir.types import TensorType

    out = backend.run_on_dummies(
        lambda x, y: x * y.sum(), [TensorType(np.float32, (4,)), TensorType(np.int64, (4, 3))]
    )
    assert backend.type_of(out) == (np.dtype(np.float32), (4,))
