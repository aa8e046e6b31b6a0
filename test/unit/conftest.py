"""Backend fixtures for the unit tests, read from `abir.backend_registry`: a registered backend
is tested wherever these fixtures are used, without editing a test.

What `make test` runs and what only `make test-full` (the `full` marker, also run by CI's
`.ci/run`) runs. `make test` keeps, for every program family, at least one equality check
against plain Python per member on every registered backend, and every check that has caught a
bug; `full` takes what repeats a path `make test` already covers at the cost of more compiled
programs (each distinct program is an XLA compilation on JAX and TF, most of the suite's time):
statistical and long randomized sweeps, larger sizes, and the rest of a cross-product of cases
and backends or options. TensorFlow (its eager traces and XLA compilations cost two to three
times JAX's) counts as covered for a program family when `make test` runs the same construct or
library on TF in another test (NUTS: test_nuts.py's TF+XLA run covers `abir.samplers.nuts`'s), and
the default TF backend, which compiles with XLA every program XLA can compile, counts as covered
by a TF+XLA run of the same XLA-compilable program in the same test (not where errors are
checked: the default raises them where XLA compiles assertions away).
A check of the test tools themselves (the fuzzer's shrinking, a bench re-running itself) goes to
`full` when `make test` checks the abir path it exercises elsewhere. Each parametrization moved
to `full` names its covering test in a comment beside its marker. Mark a whole test `@pytest.mark.full`, one parameter
`pytest.param(..., marks=pytest.mark.full)`, or, where the backend comes from a fixture, keep
only some combinations with `@pytest.mark.make_test_keeps({"backend_name": "numpy"}, ...)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from abir.backend_registry import backend_specs


def backend_params() -> list[str]:
    """One test id per registered backend: its shortest name ("tf" for "tensorflow")."""
    return [min(spec.names, key=len) for spec in backend_specs()]


@pytest.fixture(scope="module", params=backend_params())
def backend_name(request: pytest.FixtureRequest) -> str:
    """Each registered backend's name."""
    return request.param


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "make_test_keeps(*combinations): `make test` runs only the parametrizations whose parameters "
        "include one of the given {name: value} dicts; the others are marked `full`",
    )


def same_parameter(value: Any, wanted: Any) -> bool:
    """A parameter is the wanted object, or an equal number or string (a parameter such as a
    dataclass holding arrays is named by the object itself: its `==` is not a truth value)."""
    return value is wanted or (isinstance(wanted, str | int | float) and type(value) is type(wanted) and value == wanted)


def kept_by_make_test(params: Mapping[str, Any], combinations: tuple[Mapping[str, Any], ...]) -> bool:
    """Whether an item with these parameters matches one of `make_test_keeps`' combinations."""
    return any(all(same_parameter(params[name], value) for name, value in combination.items())
               for combination in combinations)


def parameters_of(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    return callspec.params if callspec is not None else {}


def check_combinations(test: str, combinations: tuple[Mapping[str, Any], ...], items: list[pytest.Item]) -> None:
    """Each combination names parameters of the test and, where more than one of its
    parametrizations is collected, matches one of them: a misspelt value would silently move every
    parametrization to `full`."""
    for combination in combinations:
        for item in items:
            unknown = set(combination) - set(parameters_of(item))
            if unknown:
                raise pytest.UsageError(
                    f"{item.nodeid}: make_test_keeps names {sorted(unknown)}, which is not a parameter of the "
                    f"test (its parameters: {sorted(parameters_of(item))}); name one of those"
                )
        if len(items) > 1 and not any(kept_by_make_test(parameters_of(item), (combination,)) for item in items):
            raise pytest.UsageError(
                f"{test}: make_test_keeps({combination!r}) matches none of its parametrizations; give a value "
                "the test is parametrized with (the object itself for a parameter that is not a number or string)"
            )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks `full` the parametrizations a `make_test_keeps` marker leaves out, before `-m`
    deselects by marker."""
    by_test: dict[str, list[pytest.Item]] = {}
    for item in items:
        if item.get_closest_marker("make_test_keeps") is not None:
            by_test.setdefault(item.nodeid.partition("[")[0], []).append(item)
    for test, test_items in by_test.items():
        combinations = test_items[0].get_closest_marker("make_test_keeps").args
        check_combinations(test, combinations, test_items)
        for item in test_items:
            if not kept_by_make_test(parameters_of(item), combinations):
                item.add_marker(pytest.mark.full)
