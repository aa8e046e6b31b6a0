"""Backend fixtures for the unit tests, read from `abir.backend_registry`: a registered backend
is tested wherever these fixtures are used, without editing a test."""

from __future__ import annotations

import pytest

from abir.backend_registry import backend_specs


def backend_params() -> list[str]:
    """One test id per registered backend: its shortest name ("tf" for "tensorflow")."""
    return [min(spec.names, key=len) for spec in backend_specs()]


@pytest.fixture(scope="module", params=backend_params())
def backend_name(request: pytest.FixtureRequest) -> str:
    """Each registered backend's name."""
    return request.param
