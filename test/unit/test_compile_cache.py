"""Compiled programs and runs a long-running process can live with: bounded, freed, and shared
between nearby batch sizes.

* `abir.lru.LRUCache` keeps the most recently used entries;
* a `Context` keeps at most `cache_size` compiled programs, each at most `RUN_CACHE_SIZE`
  compiled runs, and everything it compiled is freed when the context is garbage-collected;
* a function is compiled once per signature, whatever the batch size and backend object;
* `pad_batch=True` runs the machine on the next power of two rows (the padding members halted
  from the start): B = 100, 101, 102 compile one run, and each equals the per-member Python run.
"""

from __future__ import annotations

import gc
import logging
import weakref

import numpy as np
import pytest

import abir
from abir.backends.base import RUN_CACHE_SIZE
from abir.calling import Compiler, padded_size
from abir.lru import LRUCache
from abir.vm import machine as machine_module


def fib(n):
    if n > 2:
        return fib(n - 1) + fib(n - 2)
    return 1


def collatz(n, scale):
    steps = 0
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps * scale


def test_lru_cache_drops_the_least_recently_used_entry():
    cache = LRUCache(2)
    cache["a"], cache["b"] = 1, 2
    assert cache["a"] == 1  # "b" is now the least recently used
    cache["c"] = 3
    assert sorted(cache) == ["a", "c"]
    assert cache.get("b") is None and len(cache) == 2


def test_looking_at_a_caches_entries_does_not_use_them():
    cache = LRUCache(2)
    cache["a"], cache["b"] = 1, 2
    assert list(cache.items()) == [("a", 1), ("b", 2)]
    assert list(cache.values()) == [1, 2]
    cache["c"] = 3  # "a" is still the least recently used
    assert list(cache) == ["b", "c"]


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
def test_a_cache_size_must_be_a_positive_int(size):
    with pytest.raises(ValueError, match="cache size must be a positive int"):
        abir.Context(cache_size=size)


def test_a_context_keeps_at_most_cache_size_programs():
    ctx = abir.Context(cache_size=2)
    batched = ctx.batch_uncurried(fib)
    for dtype in (np.int8, np.int16, np.int32):
        np.testing.assert_array_equal(batched(np.array([3, 7], dtype)), [2, 13])
    assert len(ctx.compile_cache) == 2


def test_a_program_keeps_at_most_run_cache_size_compiled_runs(monkeypatch):
    """Each program's runs are an `LRUCache` of `RUN_CACHE_SIZE`; that its bound drops compiled
    runs is checked with a bound of 2 (two compiled runs more than it, not `RUN_CACHE_SIZE`)."""
    ctx = abir.Context()
    ctx.batch_uncurried(fib)(np.array([3, 7]))
    (program,) = ctx.compile_cache.values()
    assert isinstance(program.machine.run_cache, LRUCache) and program.machine.run_cache.maxsize == RUN_CACHE_SIZE
    monkeypatch.setattr(machine_module, "RUN_CACHE_SIZE", 2)
    ctx = abir.Context()
    batched = ctx.batch_uncurried(fib)
    backend = abir.JaxBackend()
    for batch in range(1, 2 + 3):
        n = np.arange(batch) % 9
        np.testing.assert_array_equal(np.asarray(batched(n, backend=backend)), batched(n, dry_run=True))
    (program,) = ctx.compile_cache.values()
    assert len(program.machine.run_cache) == 2


def _compile_and_forget(make_backend) -> tuple[weakref.ref, list[weakref.ref]]:
    """Compile and run fib in a fresh context; weak references to its machine and its
    compiled runs, once the context is gone from this frame."""
    ctx = abir.Context()
    batched = ctx.batch_uncurried(fib)
    np.testing.assert_array_equal(np.asarray(batched(np.array([3, 7, 10]), backend=make_backend())), [2, 13, 55])
    (program,) = ctx.compile_cache.values()
    runs = [weakref.ref(run) for _, run in program.machine.run_cache.values()]
    assert runs
    return weakref.ref(program.machine), runs


@pytest.mark.parametrize("backend", ["jax", "tf"])
def test_compiled_programs_and_runs_are_freed_with_their_context(backend):
    make = abir.JaxBackend if backend == "jax" else abir.TensorFlowBackend
    machine, runs = _compile_and_forget(make)
    gc.collect()
    assert machine() is None
    assert all(run() is None for run in runs)


def test_padded_size_is_the_next_power_of_two():
    assert [padded_size(b) for b in (1, 2, 3, 64, 100, 128, 129)] == [1, 2, 4, 64, 128, 128, 256]


@pytest.fixture(scope="module")
def batched_collatz():
    ctx = abir.Context()
    return ctx.batch_uncurried(collatz), ctx.batch_uncurried(fib)


@pytest.mark.parametrize("backend", ["jax", "tf"])
def test_padded_batches_of_nearby_sizes_compile_one_run(batched_collatz, backend):
    collatz_batched, _ = batched_collatz
    instance = abir.JaxBackend() if backend == "jax" else abir.TensorFlowBackend()
    for batch in (100, 101, 102):
        starts = np.arange(1, batch + 1)
        got = collatz_batched(starts, 2, backend=instance, pad_batch=True)
        assert got.shape == (batch,)
        np.testing.assert_array_equal(np.asarray(got), collatz_batched(starts, 2, dry_run=True))
    assert instance.trace_count == 1


def test_without_padding_each_batch_size_compiles_its_run(batched_collatz):
    collatz_batched, _ = batched_collatz
    backend = abir.JaxBackend()
    for batch in (100, 101, 102):
        collatz_batched(np.arange(1, batch + 1), 2, backend=backend)
    assert backend.trace_count == 3


def test_a_function_compiles_once_for_every_batch_size_and_backend_object(monkeypatch):
    """The frontend, the passes and the machine's plan run once per function and signature: a
    call of another batch size, or with another backend object of the same kind, reuses them
    (only the backend's run is compiled per batch size), and every result equals Python."""
    compiles = []
    compile_program = Compiler.compile

    def counted(self, *args, **kwargs):
        compiles.append(args[0])
        return compile_program(self, *args, **kwargs)

    monkeypatch.setattr(Compiler, "compile", counted)
    collatz_batched = abir.Context().batch_uncurried(collatz)
    backends = [abir.JaxBackend(), abir.JaxBackend()]
    for batch, backend in [(8, backends[0]), (64, backends[0]), (8, backends[1]), (64, backends[1])]:
        starts = np.arange(1, batch + 1)
        got = collatz_batched(starts, 2, backend=backend)
        np.testing.assert_array_equal(np.asarray(got), collatz_batched(starts, 2, dry_run=True))
    assert compiles == ["collatz"]
    assert [backend.trace_count for backend in backends] == [2, 0]


@pytest.mark.parametrize("backend", ["numpy", "jax", "tf"])
def test_a_padded_run_equals_the_unpadded_one(batched_collatz, backend):
    """Recursion (stacks), a size-1 argument broadcast, a step limit: the padding members never
    run, so they neither change the results nor trip the limit or the stacks."""
    collatz_batched, fib_batched = batched_collatz
    n = np.array([3, 9, 1, 12, 5])
    plain = fib_batched(n, backend=backend, max_steps=10_000)
    padded = fib_batched(n, backend=backend, max_steps=10_000, pad_batch=True)
    np.testing.assert_array_equal(np.asarray(padded), np.asarray(plain))
    np.testing.assert_array_equal(np.asarray(padded), fib_batched(n, dry_run=True))
    scale = np.array([3])
    got = collatz_batched(n, scale, backend=backend, pad_batch=True)
    np.testing.assert_array_equal(np.asarray(got), collatz_batched(n, scale, dry_run=True))


def test_pad_batch_is_checked():
    ctx = abir.Context()
    batched = ctx.batch_uncurried(fib)
    with pytest.raises(TypeError, match="pad_batch must be True or False"):
        batched(np.array([3]), pad_batch=1)
    with pytest.raises(ValueError, match="stackless"):
        batched(np.array([3]), pad_batch=True, stackless=True)


def test_options_equal_to_ones_parsed_before_are_still_checked():
    """A call naming its backend reuses the options parsed for the same keywords; a value equal
    to an accepted one but of another type (1 == True) is still checked."""
    ctx = abir.Context()
    batched = ctx.batch_uncurried(fib)
    backend = abir.NumpyBackend()
    batched(np.array([3]), backend=backend, pad_batch=True, max_stack_depth=20)
    with pytest.raises(TypeError, match="pad_batch must be True or False"):
        batched(np.array([3]), backend=backend, pad_batch=1, max_stack_depth=20)
    batched(np.array([3]), backend=backend, max_stack_depth=1)
    with pytest.raises(ValueError, match="max_stack_depth must be a positive integer, got True"):
        batched(np.array([3]), backend=backend, max_stack_depth=True)


def _fail_staged_and_forget() -> weakref.ref:
    """A staged run of fib in a fresh context that overflows; a weak reference to its machine."""
    import jax

    ctx = abir.Context()
    batched = ctx.batch_uncurried(fib)
    staged = jax.jit(lambda n: batched(n, backend=abir.JaxBackend(), max_stack_depth=3))
    with pytest.raises(jax.errors.JaxRuntimeError) as raised:
        jax.block_until_ready(staged(np.array([3, 9])))
    assert abir.staged_error(raised.value).members == [1]
    (program,) = ctx.compile_cache.values()
    return weakref.ref(program.machine)


def test_the_errors_kept_for_staged_error_do_not_keep_their_context_alive():
    """A run staged into the user's `jax.jit` is part of the user's computation, which JAX's own
    caches keep (`jax.clear_caches()` drops them); the error `abir.staged_error` keeps for it
    holds no reference to the program."""
    jax = pytest.importorskip("jax")
    # JAX logs a failing callback's exception with its traceback, whose frames hold the machine,
    # and pytest keeps the records of a test for its report: no record here
    logger = logging.getLogger("jax._src.debugging")
    logger.disabled = True
    try:
        machine = _fail_staged_and_forget()
    finally:
        logger.disabled = False
    jax.clear_caches()
    gc.collect()
    assert machine() is None
