"""The backend registry: a backend registered through `register_backend` alone (a NumPy-backed
toy here) is accepted by batched functions, `abir-run`, the differential runner and random
draws, and appears in the tests' backend fixture; arrays are recognised through the registry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from conftest import backend_params

import abir
from abir import array_ops
from abir import random as abir_random
from abir.backend_registry import (
    BackendSpec,
    backend_names,
    backend_specs,
    register_backend,
    spec_named,
    spec_of_arrays,
    unregister_backend,
)
from abir.backends.numpy_backend import NumpyBackend
from abir.testing.differential import Variant, default_backends, make_backend, variants
from abir.testing.fuzz import run_campaign
from abir.tools import abir_run


class ToyBackend(NumpyBackend):
    """The NumPy backend under another name, counting how often a call enters its scope."""

    runs = 0

    def scope(self, *args: Any, **kwargs: Any) -> Any:
        type(self).runs += 1
        return super().scope(*args, **kwargs)


class ToyArray:
    """An array type of the toy backend that NumPy does not know as its own."""

    def __init__(self, values: Any):
        self.values = np.asarray(values)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.values if dtype is None else self.values.astype(dtype)


ASKED: list[str] = []


def toy_array_ops() -> array_ops.ArrayOps:
    ASKED.append("array_ops")
    return array_ops.numpy_ops()


def toy_random_ops(values: Any) -> Any:
    ASKED.append("random_ops")
    return abir_random.numpy_random_ops(values)


TOY = BackendSpec(
    "toy", f"{__name__}:ToyBackend", array_ops=f"{__name__}:toy_array_ops", random_ops=f"{__name__}:toy_random_ops",
    aliases=("toy-numpy",), array_modules=(__name__,),
)


@pytest.fixture
def toy() -> Iterator[BackendSpec]:
    register_backend(TOY)
    ToyBackend.runs = 0
    ASKED.clear()
    yield TOY
    unregister_backend(TOY.name)


def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def noisy_walk(key, n):
    total = 0.0
    for i in range(n):
        total += abir.random.normal(key, i)
    return total


def test_the_builtin_backends_are_registered_under_their_names():
    assert [spec.name for spec in backend_specs()][:3] == ["numpy", "jax", "tensorflow"]
    assert spec_named("tf") is spec_named("TensorFlow") is spec_named("tensorflow")
    assert spec_named("numpy").backend_class() is abir.NumpyBackend
    assert spec_named("torch") is None


def test_a_name_cannot_be_taken_twice(toy):
    with pytest.raises(ValueError, match="'tf' of 'toy2' already names backend 'tensorflow'"):
        register_backend(BackendSpec("toy2", f"{__name__}:ToyBackend", aliases=("tf",)))
    assert spec_named("toy2") is None


def test_batched_functions_accept_the_toy_by_name(toy):
    batched = abir.Context().batch_uncurried(collatz_steps)
    n = np.array([1, 6, 7, 27])
    got = batched(n, backend="toy-numpy")
    np.testing.assert_array_equal(got, [collatz_steps(int(m)) for m in n])
    assert ToyBackend.runs > 0
    assert "toy" in backend_names()
    with pytest.raises(TypeError, match="'toy', 'toy-numpy'"):
        batched(n, backend="nope")


def test_random_draws_accept_the_toy(toy):
    batched = abir.Context().batch_uncurried(noisy_walk)
    keys = np.stack([abir.random.key(s) for s in range(4)])
    n = np.array([0, 3, 1, 5])
    got = batched(keys, n, backend="toy")
    for b in range(4):
        np.testing.assert_allclose(got[b], noisy_walk(keys[b], int(n[b])), rtol=1e-12)
    assert ToyBackend.runs > 0


def test_array_prims_and_random_draws_ask_the_registry_about_unknown_arrays(toy):
    key = abir.random.key(3)
    assert spec_of_arrays([ToyArray(key)]) is TOY
    np.testing.assert_array_equal(abir.random.bits(ToyArray(key), 2), abir.random.bits(key, 2))
    assert array_ops.ops_for(ToyArray([1.0])) is array_ops.numpy_ops()
    assert ASKED == ["random_ops", "array_ops"]


def test_abir_run_accepts_the_toy(toy, tmp_path, capsys):
    program = tmp_path / "prog.mlir"
    program.write_text(
        "functional.func @double(%x: !functional.unknown) -> !functional.unknown {\n"
        '  %s = functional.prim "add"(%x, %x) : (!functional.unknown, !functional.unknown) -> !functional.unknown\n'
        "  functional.return %s : !functional.unknown\n}\n"
    )
    assert abir_run.main([str(program), "--arg", "[1, 5]", "--backend", "toy"]) == 0
    assert capsys.readouterr().out.splitlines() == ["result 0: int64 [2, 10]"]
    assert ToyBackend.runs > 0


def test_the_differential_runner_accepts_the_toy(toy):
    assert "toy" in default_backends() and {"toy", "toy-numpy"} <= set(variants())
    assert isinstance(make_backend("toy"), ToyBackend)
    source = Variant("toy").backend_source()
    assert isinstance(eval(source, {"abir": abir}), ToyBackend)
    result = run_campaign(3, 0, ("toy",), out=lambda line: None, shrink_failures=False)
    assert result.reports == []
    assert ToyBackend.runs >= 3


def test_the_backend_fixture_reads_the_registry(toy):
    assert backend_params()[-1] == "toy"
    assert backend_params() == [min(spec.names, key=len) for spec in backend_specs()]
    assert backend_params()[:3] == ["numpy", "jax", "tf"]


def test_each_fixture_backend_is_a_registered_backend(backend_name):
    assert spec_named(backend_name) is not None
