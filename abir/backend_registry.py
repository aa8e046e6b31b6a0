"""The one list of abir's backends: what every part of abir that names, builds or recognises a
backend reads.

A `BackendSpec` says, for one backend: its name and aliases (the strings `backend=` accepts),
its class, the NumPy-like operations the array prims use on its arrays, the operations the
counter-based random draws use on them, and how to recognise its arrays (the module prefixes of
their types). Classes and operations are named by import path strings ("module:attribute") and
imported on first use, so this module sits at the bottom of abir's layers and importing abir
imports neither JAX nor TensorFlow. A value whose type's module matches no prefix is NumPy's.

`register_backend(spec)` adds a backend (or replaces one of the same name); `calling.py`,
`abir-run`, the differential runner and fuzzer, the array prims, `abir.random` and the tests'
backend fixture all read the registry, so a new backend needs no other edit.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BackendSpec:
    """One backend. `class_path`, `array_ops` and `random_ops` are "module:attribute" paths:
    the class (built with no arguments for a `backend="name"` call), a callable returning the
    array prims' operations (an `abir.array_ops.ArrayOps`), and a callable taking the values of
    a random draw and returning `abir.random`'s operations for them. `array_modules` are module
    prefixes of the backend's array types, `helper_modules` those of the types it hands Python
    helpers in place of arrays (random draws recognise both, array prims only arrays); when a call mixes arrays of several backends, the one
    with the highest `priority` decides (NumPy arrays and Python numbers mix with any)."""

    name: str
    class_path: str
    array_ops: str = "abir.array_ops:numpy_ops"
    random_ops: str = "abir.random:numpy_random_ops"
    aliases: tuple[str, ...] = ()
    array_modules: tuple[str, ...] = ()
    helper_modules: tuple[str, ...] = ()
    priority: int = 0

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def backend_class(self) -> type:
        return load(self.class_path)

    def new_backend(self) -> Any:
        return self.backend_class()()

    def owns(self, value: Any, helpers: bool = False) -> bool:
        """Whether `value`'s type belongs to this backend (by its module); with `helpers`, a
        helper's view of an array counts too."""
        prefixes = self.array_modules + self.helper_modules if helpers else self.array_modules
        return bool(prefixes) and type(value).__module__.startswith(prefixes)


_SPECS: dict[str, BackendSpec] = {}


def load(path: str) -> Any:
    """The attribute a "module:attribute" path names, importing the module."""
    module, _, attribute = path.partition(":")
    if not attribute:
        raise ValueError(f"backend registry path {path!r} must be 'module:attribute', e.g. 'abir.backends.numpy_backend:NumpyBackend'")
    return getattr(importlib.import_module(module), attribute)


def register_backend(spec: BackendSpec) -> BackendSpec:
    """Add `spec` (replacing a backend of the same name); its names must not be another's."""
    for name in spec.names:
        owner = spec_named(name)
        if owner is not None and owner.name != spec.name:
            raise ValueError(f"backend name {name!r} of {spec.name!r} already names backend {owner.name!r}; choose another alias")
    _SPECS[spec.name] = spec
    return spec


def unregister_backend(name: str) -> None:
    """Remove the backend registered as `name` (for tests registering a toy backend)."""
    del _SPECS[name]


def backend_specs() -> tuple[BackendSpec, ...]:
    """Every registered backend, in registration order."""
    return tuple(_SPECS.values())


def backend_names() -> tuple[str, ...]:
    """Every name and alias `backend=` accepts."""
    return tuple(name for spec in _SPECS.values() for name in spec.names)


def spec_named(name: str) -> BackendSpec | None:
    """The backend a name or alias (any case) names, or None."""
    name = name.lower()
    return next((spec for spec in _SPECS.values() if name in spec.names), None)


def spec_of_arrays(values: Iterable[Any], helpers: bool = False) -> BackendSpec | None:
    """The backend whose arrays these are (the highest priority among the owners), or None when
    no registered backend claims any of them (NumPy arrays and Python numbers). `helpers` as in
    `BackendSpec.owns`."""
    owners = [spec for value in values for spec in _SPECS.values() if spec.owns(value, helpers)]
    return max(owners, key=lambda spec: spec.priority, default=None)


register_backend(BackendSpec("numpy", "abir.backends.numpy_backend:NumpyBackend"))
register_backend(BackendSpec(
    "jax", "abir.backends.jax:JaxBackend", array_ops="abir.backends.jax.array_ops:jax_array_ops",
    random_ops="abir.random:jax_random_ops", array_modules=("jax", "jaxlib"), priority=1,
))
register_backend(BackendSpec(
    "tensorflow", "abir.backends.tf:TensorFlowBackend", array_ops="abir.backends.tf.array_ops:tensorflow_ops",
    random_ops="abir.backends.tf.array_ops:tensorflow_random_ops", aliases=("tf",),
    array_modules=("tensorflow",), helper_modules=("abir.backends.tf",), priority=2,
))
