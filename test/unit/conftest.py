"""Backend fixtures for the unit tests, read from `abir.backend_registry`: a registered backend
is tested wherever these fixtures are used, without editing a test.

What `make test` runs and what only `make test-full` (the `full` marker, also run by CI's
`.ci/run`) runs; together they run every test. Each distinct program is an XLA compilation on
JAX and TensorFlow, most of the suite's time, so `make test` runs each compiled path once:

1. NumPy runs every test in `make test` (it compiles nothing).
2. A test parametrized over compiled backends (JAX, TF, TF+XLA and their modes) runs in `make
   test` on ONE of them; `make test-full` runs the others. The backend of a parametrization is
   read from its test id: the words of the id (split at `-` and `+`) that name a registered
   backend (`jax`, `tf`, `tensorflow`) or one of TensorFlow's modes (`xla`, `graph`, `eager`),
   with the machine's execution options (`switch`, `sweep`), form its variant (`tf-xla`,
   `jax-switch`), the first of them its backend. The one kept is, in this order:
   the variant or backend a `@pytest.mark.about_backend("tf-xla")` marker names (on the test,
   its class or its module's `pytestmark`: the backend the test is about, or where the bug it
   guards against was); the backend a file named `test_jax_*` or `test_tf_*` is about; else
   the backend picked by a stable hash (`zlib.crc32`) of the test function's name (not of its
   parameters, so all of a test's cases go to one backend, and JAX and TF each get about half
   the tests), and within that backend the variant the same hash picks. Variants already
   marked `full` are not candidates. A marker naming no backend, or a variant the test is not
   parametrized with, is a usage error, and `--strict-markers` rejects a misspelt marker name.
3. Still in `make test`: for every program family, one equality check against plain Python per
   member on every registered backend (test_machine_on_backends.py, test_end_to_end.py, the
   suite programs: marked `about_backend` with every backend where rule 2 would drop one), and
   the regression tests of bugs on the backend where the bug was (`about_backend`).
4. A parametrization over many cases that are not backends (programs, sizes, options) keeps a
   representative subset in `make test`, `full` the rest, the marker's comment saying why the
   subset represents the rest: `pytest.param(..., marks=pytest.mark.full)`, or
   `@pytest.mark.make_test_keeps({"name": value}, ...)` to keep only the parametrizations whose
   parameters include one of the given combinations.
5. Test tools, benches' smoke tests, statistical and long randomized sweeps run in `make test`
   at their smallest (one tiny run per bench script, the fuzzer a few programs), the rest in
   `full`: a whole test is marked `@pytest.mark.full`, and its comment names the test that
   covers its path in `make test`.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Mapping
from typing import Any

import pytest

from abir.backend_registry import backend_specs

# The words of test ids that name TensorFlow's modes (`jit_compile=True`, `False`, eager) rather
# than a backend of the registry, and the machine's execution options on a compiled backend.
TF_MODE_WORDS = ("xla", "graph", "eager")
OPTION_WORDS = ("switch", "sweep")
NUMPY = "numpy"


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
    config.addinivalue_line(
        "markers",
        "about_backend(*variants): the compiled backends or variants (\"jax\", \"tf\", \"tf-xla\") a test "
        "parametrized over backends runs on in `make test` (test/unit/conftest.py, rule 2)",
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


def test_name(item: pytest.Item) -> str:
    """The test a parametrization belongs to: its node id without the parameters."""
    return item.nodeid.partition("[")[0]


def is_full(item: pytest.Item) -> bool:
    return item.get_closest_marker("full") is not None


def apply_make_test_keeps(items: list[pytest.Item]) -> None:
    """Marks `full` the parametrizations a `make_test_keeps` marker leaves out."""
    by_test: dict[str, list[pytest.Item]] = {}
    for item in items:
        if item.get_closest_marker("make_test_keeps") is not None:
            by_test.setdefault(test_name(item), []).append(item)
    for test, test_items in by_test.items():
        combinations = test_items[0].get_closest_marker("make_test_keeps").args
        check_combinations(test, combinations, test_items)
        for item in test_items:
            if not kept_by_make_test(parameters_of(item), combinations):
                item.add_marker(pytest.mark.full)


def backend_words() -> dict[str, str]:
    """Each word naming a compiled backend or one of its modes in a test id, and that backend's name."""
    words = {name.lower(): spec.name for spec in backend_specs() if spec.name != NUMPY for name in spec.names}
    words.update(dict.fromkeys(TF_MODE_WORDS, "tensorflow"))
    return words


def compiled_variant(item: pytest.Item, words: Mapping[str, str]) -> str | None:
    """The compiled backend and modes of a parametrization ("jax", "tf-xla"), or None where its id
    names none (NumPy, or a test not parametrized over backends)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    id_words = re.split(r"[-+]", callspec.id.lower())
    if not any(word in words for word in id_words):
        return None
    return "-".join(word for word in id_words if word in words or word in OPTION_WORDS)


def variant_backend(variant: str, words: Mapping[str, str]) -> str:
    return next(words[word] for word in variant.split("-") if word in words)


def file_subject(item: pytest.Item, words: Mapping[str, str]) -> str | None:
    """The backend a file named test_jax_* or test_tf_* is about."""
    match = re.match(r"test_([a-z]+)_", item.path.name)
    return words.get(match.group(1)) if match else None


def check_named(test: str, name: Any, variants: list[str], words: Mapping[str, str]) -> str:
    """An `about_backend` argument, lower-cased, after checking that it names a backend or a variant
    of the test: a misspelt one would silently keep the hashed backend."""
    if (not isinstance(name, str) or not any(word in words for word in name.lower().split("-"))
            or any(word not in words and word not in OPTION_WORDS for word in name.lower().split("-"))):
        raise pytest.UsageError(
            f"{test}: about_backend({name!r}) names no compiled backend; name one of "
            f"{sorted(set(words))}, or a variant of the test's ids such as 'tf-xla'"
        )
    lowered = name.lower()
    if not any(variant == lowered or variant_backend(variant, words) == words.get(lowered) for variant in variants):
        raise pytest.UsageError(
            f"{test}: about_backend({name!r}) matches none of the test's compiled variants {variants}; "
            "name one of those"
        )
    return lowered


def named_variants(first: pytest.Item, names: tuple[Any, ...], variants: list[str], candidates: list[str],
                   words: Mapping[str, str]) -> list[str]:
    """The variants an `about_backend` marker keeps: each variant it names, and for each backend it
    names the variant of that backend the hash picks."""
    kept = []
    for name in (check_named(test_name(first), name, variants, words) for name in names):
        if name in variants:
            kept.append(name)
        elif any(variant_backend(variant, words) == words[name] for variant in candidates):
            kept.append(hashed_variant(first.originalname, candidates, words, words[name]))
    return kept


def hashed_variant(name: str, variants: list[str], words: Mapping[str, str], backend: str | None) -> str:
    """The variant a stable hash of the test function's name picks: first its backend (unless
    given), then the variant among that backend's."""
    digest = zlib.crc32(name.encode())
    if backend is None:
        backends = sorted({variant_backend(variant, words) for variant in variants})
        backend = backends[digest % len(backends)]
    own = [variant for variant in variants if variant_backend(variant, words) == backend]
    return own[(digest // 2) % len(own)]


def kept_variants(test_items: list[pytest.Item], variants: dict[pytest.Item, str], words: Mapping[str, str]) -> list[str]:
    """The compiled variants of one test that `make test` runs (rule 2 of the module docstring)."""
    candidates = list(dict.fromkeys(variants[item] for item in test_items if not is_full(item)))
    if not candidates:
        return []
    first = test_items[0]
    marker = first.get_closest_marker("about_backend")
    if marker is not None:
        return named_variants(first, marker.args, list(dict.fromkeys(variants.values())), candidates, words)
    subject = file_subject(first, words)
    if subject is not None and all(variant_backend(variant, words) != subject for variant in candidates):
        subject = None
    return [hashed_variant(first.originalname, candidates, words, subject)]


def apply_one_compiled_backend(items: list[pytest.Item]) -> None:
    """Marks `full` the parametrizations over compiled backends that rule 2 leaves out."""
    words = backend_words()
    by_test: dict[str, dict[pytest.Item, str]] = {}
    for item in items:
        variant = compiled_variant(item, words)
        if variant is not None:
            by_test.setdefault(test_name(item), {})[item] = variant
    for variants in by_test.values():
        kept = kept_variants(list(variants), variants, words)
        for item, variant in variants.items():
            if variant not in kept:
                item.add_marker(pytest.mark.full)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks `full` what `make test` leaves out (rules 2 and 4), before `-m` deselects by marker."""
    apply_make_test_keeps(items)
    apply_one_compiled_backend(items)
