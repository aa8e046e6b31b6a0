"""A run's initial state: backends whose arrays never change start every run of the same shapes
from one zero state (`Machine._reused_zero_state`); the others, and runs staged into a caller's trace,
get fresh zeros. Either way each call's results are the per-member Python ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import backend_params

import abir
from abir.backend_registry import spec_named
from abir.backends.base import Backend

BACKENDS = backend_params()


def countdown(n):
    steps = 0
    while n > 0:
        n = n - 1
        steps = steps + 1
    return steps


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def make_backend(name: str) -> Backend:
    return spec_named(name).new_backend()


def counting_zero_states(monkeypatch: pytest.MonkeyPatch, backend: Backend) -> list[Any]:
    made: list[Any] = []
    original = type(backend).zero_state

    def zero_state(self: Backend, shapes: Any, staged: bool = False) -> Any:
        made.append(shapes)
        return original(self, shapes, staged)

    monkeypatch.setattr(type(backend), "zero_state", zero_state)
    return made


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("function", [countdown, fib])
def test_consecutive_calls_start_from_zeros(monkeypatch: pytest.MonkeyPatch, name: str, function: Any) -> None:
    backend = make_backend(name)
    made = counting_zero_states(monkeypatch, backend)
    batched = abir.Context().batch_uncurried(function)
    for inputs in (np.array([3, 0, 7, 5]), np.array([1, 9, 2, 4]), np.array([6, 6, 0, 8])):
        got = np.asarray(batched(inputs, backend=backend, max_stack_depth=12))
        assert got.tolist() == [function(int(n)) for n in inputs]
    # the same shapes each time: NumPy runs write their state in place, so only the backends
    # whose arrays never change may start from the same zeros
    assert len(made) == (3 if name == "numpy" else 1)


def test_a_new_batch_size_gets_its_own_zero_state(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = make_backend("jax")
    made = counting_zero_states(monkeypatch, backend)
    batched = abir.Context().batch_uncurried(countdown)
    for inputs in (np.array([3, 1]), np.array([2, 2, 2]), np.array([5, 4])):
        assert np.asarray(batched(inputs, backend=backend)).tolist() == [countdown(int(n)) for n in inputs]
    assert [shapes["pc"][0] for shapes in made] == [(2,), (3,)]


def test_a_staged_run_makes_its_zeros_in_the_callers_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    jax = pytest.importorskip("jax")
    backend = make_backend("jax")
    made = counting_zero_states(monkeypatch, backend)
    batched = abir.Context().batch_uncurried(countdown)
    staged = jax.jit(lambda n: batched(n, backend=backend))
    for inputs in (np.array([3, 1, 4]), np.array([0, 2, 7])):
        assert np.asarray(staged(inputs)).tolist() == [countdown(int(n)) for n in inputs]
    assert len(made) == 1  # traced once; the zeros are part of the caller's computation
    for inputs in (np.array([3, 1, 4]), np.array([0, 2, 7])):
        assert np.asarray(batched(inputs, backend=backend)).tolist() == [countdown(int(n)) for n in inputs]
    assert len(made) == 2  # the trace's zeros were not kept: the first run of its own makes some
