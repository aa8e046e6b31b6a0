"""A standalone JAX run in launches (`abir.backends.jax.backend.Launch`): a loop compiled as one
kernel copies the state entries it changes inside its kernel (`abir.backends.jax.loop.in_own_buffers`),
so its computation has no copies of its own before the kernel; nothing it is given is changed,
and runs over many launches equal the per-member Python run.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import abir
from abir.backends.jax import one_kernel
from abir.backends.jax.compaction import limits_on_device
from abir.backends.jax.loop import in_own_buffers

ctx = abir.Context()


@ctx.batch(type_inference=lambda types: types[0])
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


@ctx.batch(type_inference=lambda types: types[1])
def walk(table, node):
    """A read-only per-member table, followed until a negative entry: its register is never written."""
    steps = node - node
    while table[node] >= 0:
        node = table[node]
        steps += 1
    return steps


def runner(cache: dict) -> one_kernel.OneKernelWherePossible:
    """The one compiled loop a call left in its `code_cache`."""
    (entry,) = cache.values()
    assert isinstance(entry[1], one_kernel.OneKernelWherePossible)
    return entry[1]


def entry_computation(loop: one_kernel.OneKernelWherePossible) -> str:
    """The HLO text of the entry computation of `loop`'s one kernel, compiled for its state."""
    ((signature, chosen),) = loop.chosen.items()
    assert chosen is loop.fused
    specs = {key: jax.ShapeDtypeStruct(shape, dtype) for key, shape, dtype in signature}
    with jax.enable_x64(True):
        text = loop.fused.compiled(specs, jax.ShapeDtypeStruct((2,), np.int32)).as_text()
    return text[text.index("\nENTRY") :]


def test_a_one_kernel_loop_copies_no_argument_before_its_kernel() -> None:
    n = np.arange(16) % 12
    cache: dict = {}
    got = fib(n, backend=abir.JaxBackend(code_cache=cache), max_stack_depth=14)
    np.testing.assert_array_equal(np.asarray(got), fib(n, dry_run=True))
    entry = entry_computation(runner(cache))
    assert "xla_cpu_small_call" in entry
    assert " copy(" not in entry


def test_the_copies_inside_cover_only_the_entries_the_loop_changes() -> None:
    state = {"changed": jnp.arange(4.0), "read": jnp.ones((4, 3)), "counters": {"c": jnp.zeros(4, np.int32)}}

    def loop(state, iterations):
        return {**state, "changed": state["changed"] + 1}

    traced = str(jax.make_jaxpr(in_own_buffers(loop, lambda state: {"read"}))(state, limits_on_device(8, 0)))
    assert traced.count("select_n") == 2  # "changed" and the counter, not "read"
    out = in_own_buffers(loop, lambda state: {"read"})(state, limits_on_device(8, 0))
    np.testing.assert_array_equal(out["changed"], np.arange(4.0) + 1)


def test_runs_over_many_launches_equal_python_and_change_none_of_their_arguments() -> None:
    n = np.array([17, 3, 12, 0, 16, 9, 1, 15])
    on_device = jnp.asarray(n)
    backend = abir.JaxBackend(launch_seconds=1e-4)  # launches of the fewest iterations, 64
    want = fib(n, dry_run=True)
    for arguments in (n, on_device, n):  # later calls reuse the zeros the first put on the device
        got = fib(arguments, backend=backend, max_stack_depth=20)
        np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(on_device), n)


def test_a_read_only_register_stays_the_callers_over_many_launches() -> None:
    rng = np.random.default_rng(0)
    size = 40
    table = np.empty((8, size), np.int32)
    for row in table:  # each member's nodes in one chain, in random order, ending in -1
        order = rng.permutation(size)
        row[order] = np.append(order[1:], -1)
    node = rng.integers(0, size, 8).astype(np.int32)
    on_device = jnp.asarray(table)
    got = walk(on_device, node, backend=abir.JaxBackend(launch_seconds=1e-4))
    np.testing.assert_array_equal(np.asarray(got), walk(table, node, dry_run=True))
    np.testing.assert_array_equal(np.asarray(on_device), table)
