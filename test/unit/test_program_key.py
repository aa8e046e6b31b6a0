"""A compiled program's cache key (`abir.calling.ProgramKey`) hashes its items once: equal to,
and hashing as, the plain tuple of them, so either finds the program in a cache, and a steady
call's check of its program (`Compiler.still_steady`) does not hash the argument types again."""

from __future__ import annotations

import pickle

import numpy as np

import abir
from abir.calling import ProgramKey


class CountedHash:
    """A key item that counts how often it is hashed."""

    hashes = 0

    def __hash__(self) -> int:
        CountedHash.hashes += 1
        return 7

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountedHash)


def test_a_key_equals_and_hashes_as_its_tuple() -> None:
    items = ("abir.program", 3, ("f", (1, 2)), None)
    key = ProgramKey(items)
    assert key == items and hash(key) == hash(items)
    assert {items: "program"}[key] == "program" and {key: "program"}[items] == "program"
    assert pickle.loads(pickle.dumps(key)) == key


def test_a_key_hashes_its_items_once() -> None:
    CountedHash.hashes = 0
    key = ProgramKey(("abir.program", CountedHash()))
    for _ in range(5):
        hash(key)
    assert CountedHash.hashes == 1


def count_down(n):
    while n > 0:
        n = n - 1
    return n


def test_compiled_programs_are_cached_under_a_program_key() -> None:
    context = abir.Context()
    f = context.batch_uncurried(count_down)
    backend = abir.NumpyBackend()
    for _ in range(3):
        np.testing.assert_array_equal(f(np.array([3, 0, 5]), backend=backend), [0, 0, 0])
    (steady,) = context._compiler.steady.values()
    assert isinstance(steady.program_key, ProgramKey)
    assert context._compiler.still_steady(steady, (np.array([1, 2, 3]),))
