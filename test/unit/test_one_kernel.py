"""A standalone JAX run's loop compiled as one XLA kernel (`abir.backends.jax.one_kernel`), where
the program gains by it (on a CPU, a small enough state or batch, cheap matrix products).

The loop is traced without scatters (stack writes column by column, compaction by gathers,
helper results materialized behind a conditional) and tagged for XLA's one-kernel emitter when
its jaxpr allows; otherwise, or when XLA refuses, the run falls back to the loop with scatters
as a sequence of kernels. Either way the results equal the per-member Python run.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import abir
from abir.backends.jax import array_ops, cost
from abir.backends.jax import one_kernel as compilation

ctx = abir.Context()


@ctx.batch(type_inference=lambda types: types[0])
def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


@ctx.batch(type_inference=lambda types: types[0])
def collatz(n):
    steps = n - n
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


@ctx.batch(type_inference=lambda types: types[0])
def bumped(x, n):
    """Item assignment at a per-member index, and at constant indices that repeat (the last
    write wins, as in NumPy)."""
    x = x.copy()
    i = n - n
    while i < n:
        x[i % 4] += 1.0
        x[REPEATED] = x[REPEATED] + np.array([1.0, 2.0, 5.0]) * (i + 1)
        i += 1
    return x


REPEATED = np.array([1, 3, 1])


@ctx.primitive
def bump_smallest(x):
    """Adds 1 to each member's smallest element (the first of equals); on a JAX batch by a
    scatter at per-member indices."""
    if hasattr(x, "at") and x.ndim == 2:
        return x.at[jnp.arange(x.shape[0]), jnp.argmin(x, axis=1)].add(1.0)
    x = np.array(x)
    x[np.argmin(x)] += 1.0
    return x


@ctx.batch(type_inference=lambda types: types[0])
def scattered(x, n):
    """A loop calling a primitive that scatters: no one kernel."""
    i = n - n
    while i < n:
        x = bump_smallest(x)
        i += 1
    return x


def runner(cache: dict) -> compilation.OneKernelWherePossible:
    """The one compiled loop a call left in its `code_cache`."""
    (entry,) = cache.values()
    assert isinstance(entry[1], compilation.OneKernelWherePossible)
    return entry[1]


def per_member(fn, *args):
    return np.asarray(fn(*args, dry_run=True))


NUMBERS = np.array([0, 1, 2, 5, 9, 12, 3, 7, 13, 14, 1, 6, 11, 8, 4, 10])


@pytest.mark.parametrize("fn", [fib, collatz], ids=["fib", "collatz"])
def test_a_small_loop_runs_as_one_kernel_and_equals_python(fn) -> None:
    cache: dict = {}
    got = fn(NUMBERS, backend=abir.JaxBackend(code_cache=cache), max_stack_depth=16)
    np.testing.assert_array_equal(np.asarray(got), per_member(fn, NUMBERS))
    loop = runner(cache)
    assert list(loop.chosen.values()) == [loop.fused]


def test_recursion_pushes_column_by_column_in_one_kernel() -> None:
    n = np.arange(64) % 13
    cache: dict = {}
    got = fib(n, backend=abir.JaxBackend(code_cache=cache), max_stack_depth=14)
    np.testing.assert_array_equal(np.asarray(got), per_member(fib, n))
    assert list(runner(cache).chosen.values()) == [runner(cache).fused]


def test_one_kernel_false_compiles_the_kernel_sequence() -> None:
    cache: dict = {}
    got = fib(NUMBERS, backend=abir.JaxBackend(code_cache=cache, one_kernel=False), max_stack_depth=16)
    np.testing.assert_array_equal(np.asarray(got), per_member(fib, NUMBERS))
    (entry,) = cache.values()
    assert not isinstance(entry[1], compilation.OneKernelWherePossible)


@pytest.mark.parametrize(
    ("max_bytes", "max_batch", "one_kernel", "fused"),
    [
        (64, 8, None, False),  # a large state and a large batch: kernels
        (64, 8, True, True),  # unless asked
        (64, 16, None, True),  # a small batch of a large state
        (1 << 20, 8, None, True),  # a large batch of a small state
    ],
)
def test_a_large_state_of_a_large_batch_runs_as_kernels_unless_asked(
    monkeypatch: pytest.MonkeyPatch, max_bytes: int, max_batch: int, one_kernel: bool | None, fused: bool
) -> None:
    monkeypatch.setattr(compilation, "ONE_KERNEL_MAX_STATE_BYTES", max_bytes)
    monkeypatch.setattr(compilation, "ONE_KERNEL_MAX_BATCH", max_batch)
    cache: dict = {}
    got = collatz(NUMBERS, backend=abir.JaxBackend(code_cache=cache, one_kernel=one_kernel))
    np.testing.assert_array_equal(np.asarray(got), per_member(collatz, NUMBERS))
    loop = runner(cache)
    assert (list(loop.chosen.values()) == [loop.fused]) is fused


def scattered_runs_as_kernels() -> None:
    """`scattered` equals Python, its loop run as the kernel sequence."""
    x, n = np.zeros((8, 4)), np.arange(8) % 6
    cache: dict = {}
    got = scattered(x, n, backend=abir.JaxBackend(code_cache=cache))
    np.testing.assert_array_equal(np.asarray(got), per_member(scattered, x, n))
    loop = runner(cache)
    assert list(loop.chosen.values()) == [loop.plain]


def test_a_loop_with_a_scatter_falls_back_to_kernels() -> None:
    scattered_runs_as_kernels()


def test_a_compilation_xla_refuses_falls_back_to_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    # told that the loop with a scatter can be one kernel, XLA refuses it as unimplemented
    monkeypatch.setattr(compilation, "one_kernel_possible", lambda jaxpr: True)
    scattered_runs_as_kernels()


def test_item_assignment_runs_in_one_kernel_and_equals_python() -> None:
    x, n = np.arange(32.0).reshape(8, 4), np.arange(8) % 6
    cache: dict = {}
    got = bumped(x, n, backend=abir.JaxBackend(code_cache=cache))
    np.testing.assert_array_equal(np.asarray(got), per_member(bumped, x, n))
    loop = runner(cache)
    assert list(loop.chosen.values()) == [loop.fused]


def test_the_decision_is_made_once_per_state_signature() -> None:
    cache: dict = {}
    backend = abir.JaxBackend(code_cache=cache)
    for _ in range(3):
        collatz(NUMBERS, backend=backend)
    # the third call also compiles its first launch as a program of the input leaves, in a
    # thread (`abir.backends.jax.backend.SteadyLaunch`): a trace of the loop of its own
    launches = [call.run.launch for call in ctx._compiler.steady.values() if call.options.backend is backend]
    for launch in launches:
        launch.compiling.join()
    programs = sum(launch.program is not None for launch in launches)
    assert programs == 1
    assert backend.trace_count == 1 + programs and len(runner(cache).chosen) == 1


def test_jaxprs_with_scatters_sorts_or_callbacks_cannot_be_one_kernel() -> None:
    def possible(fn, *args) -> bool:
        return compilation.one_kernel_possible(jax.make_jaxpr(fn)(*args).jaxpr)

    x = jnp.arange(4.0)
    assert possible(lambda x: jax.lax.cond(x[0] > 0, jnp.exp, jnp.sin, x), x)
    assert not possible(lambda x: x.at[1].set(0.0), x)
    assert not possible(lambda x: jax.lax.cond(x[0] > 0, lambda y: y.at[1].set(0.0), jnp.sin, x), x)
    assert not possible(jnp.sort, x)
    assert not possible(lambda x: jax.pure_callback(np.sin, x, x), x)


def test_one_kernel_must_be_none_or_a_bool() -> None:
    with pytest.raises(TypeError, match="one_kernel must be None, True or False"):
        abir.JaxBackend(one_kernel=1)


def test_a_run_with_statistics_is_one_kernel_too() -> None:
    cache: dict = {}
    backend = abir.JaxBackend(code_cache=cache, collect_stats=True)
    got = collatz(NUMBERS, backend=backend)
    np.testing.assert_array_equal(np.asarray(got), per_member(collatz, NUMBERS))
    loop = runner(cache)
    assert list(loop.chosen.values()) == [loop.fused]
    assert backend.last_stats.steps > 0 and sum(backend.last_stats.member_steps) > 0


def test_a_compiler_option_this_jaxlib_lacks_is_dropped() -> None:
    jitted = compilation.JitWithOptions(lambda x: x + 1, {"xla_no_such_option_anywhere": 1})
    np.testing.assert_array_equal(np.asarray(jitted(jnp.arange(3))), [1, 2, 3])
    with pytest.raises(TypeError):
        compilation.JitWithOptions(lambda x: x + "a", {})(jnp.arange(3))



def relaxation(matrix: np.ndarray):
    """A batched loop whose every round multiplies the member's vector by `matrix`."""

    def relax(x, n):
        i = n - n
        while i < n:
            x = 0.5 * x + 0.1 * np.tanh(x @ matrix)
            i += 1
        return x

    return abir.Context().batch_uncurried(relax)


@pytest.mark.parametrize(
    ("dim", "one_kernel", "fused"),
    [
        (100, None, False),  # products over an 80 KB matrix, read across its rows: kernels
        (100, True, True),  # unless asked (its products then one per member: `abir.backends.jax.array_ops`)
        (8, None, True),  # products over a 512-byte matrix: one kernel
    ],
)
def test_a_loop_of_large_matrix_products_runs_as_kernels_unless_asked(
    dim: int, one_kernel: bool | None, fused: bool
) -> None:
    relax = relaxation(np.random.default_rng(0).standard_normal((dim, dim)) / dim)
    x, n = np.random.default_rng(1).standard_normal((6, dim)), np.array([0, 1, 2, 3, 5, 8])
    cache: dict = {}
    got = relax(x, n, backend=abir.JaxBackend(code_cache=cache, one_kernel=one_kernel))
    np.testing.assert_allclose(np.asarray(got), per_member(relax, x, n), rtol=1e-12, atol=1e-14)
    loop = runner(cache)
    assert (list(loop.chosen.values()) == [loop.fused]) is fused


def tanh_rounds(y, rounds: int = 11):
    """`rounds` tanh of `y`: 10 element operations per element each (`cost.TRANSCENDENTAL_COST`)."""
    for _ in range(rounds):
        y = jnp.tanh(y)
    return y


def test_one_kernel_pays_while_its_products_cost_at_most_the_other_work() -> None:
    def pays(fn, *args) -> bool:
        return compilation.one_kernel_pays(cost.work_of(jax.make_jaxpr(fn)(*args).jaxpr))

    x, large = jnp.ones((64, 100), jnp.float32), jnp.ones((100, 100), jnp.float32)  # 40 KB: strided
    across_rows = (((1,), (0,)), ((), ()))  # x @ large: large read across its rows
    along_rows = (((1,), (1,)), ((), ()))  # x @ large.T: large read along its rows
    assert pays(tanh_rounds, x)  # no products
    assert pays(lambda x: tanh_rounds(x[:, :8] @ large[:8, :8]), x)  # 4,096 multiply-adds, 56,320 others
    assert not pays(lambda x: x[:, :8] @ large[:8, :8] + 1.0, x)  # 4,096 against 512
    # 640,000 multiply-adds against 704,000 others: paying along the rows, five times too dear across
    assert pays(lambda x: tanh_rounds(jax.lax.dot_general(x, large, along_rows)), x)
    assert not pays(lambda x: tanh_rounds(jax.lax.dot_general(x, large, across_rows)), x)


def test_work_counts_products_and_strided_products() -> None:
    def work(fn, *args) -> cost.Work:
        return cost.work_of(jax.make_jaxpr(fn)(*args).jaxpr)

    x, large, small = jnp.ones((64, 100)), jnp.ones((100, 100)), jnp.ones((10, 10))
    assert work(lambda x: x @ large, x) == cost.Work(products=640_000, strided_products=640_000)
    assert work(lambda x: x[:, :10] @ small, x) == cost.Work(products=6_400)  # 800 bytes
    assert work(lambda x: jnp.einsum("bi,bi->b", x, x), x) == cost.Work(products=6_400)  # along rows
    assert work(lambda x: jax.lax.cond(x[0, 0] > 0, lambda y: y @ large, lambda y: y + 1.0, x), x) == cost.Work(
        products=640_000, strided_products=640_000, elementwise=1
    )  # the costlier branch, and the predicate's comparison


def test_a_run_off_the_cpu_runs_as_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compilation, "on_cpu", lambda state: False)  # one kernel is a CPU compiler's tag
    cache: dict = {}
    got = collatz(NUMBERS, backend=abir.JaxBackend(code_cache=cache))
    np.testing.assert_array_equal(np.asarray(got), per_member(collatz, NUMBERS))
    loop = runner(cache)
    assert list(loop.chosen.values()) == [loop.plain]


def test_a_run_on_host_arrays_is_on_the_cpu_here() -> None:
    assert compilation.on_cpu({"pc": np.zeros(4, np.int32)}) is (jax.default_backend() == "cpu")
    assert compilation.on_cpu({"pc": jnp.zeros(4, jnp.int32)}) is (jax.devices()[0].platform == "cpu")


@pytest.mark.parametrize(("product_cost", "fused"), [(1, False), (0.01, True)])
def test_the_product_costs_decide_the_loop_of_large_products(
    monkeypatch: pytest.MonkeyPatch, product_cost: float, fused: bool
) -> None:
    """Priced a hundredth as much, the 100x100 products of `relaxation` no longer keep its loop
    from one kernel."""
    monkeypatch.setattr(compilation, "PRODUCT_COST_IN_ONE_KERNEL", product_cost)
    monkeypatch.setattr(compilation, "STRIDED_PRODUCT_COST_IN_ONE_KERNEL", 5 * product_cost)
    relax = relaxation(np.eye(100) / 2)
    x, n = np.random.default_rng(2).standard_normal((4, 100)), np.array([1, 4, 0, 2])
    cache: dict = {}
    got = relax(x, n, backend=abir.JaxBackend(code_cache=cache))
    np.testing.assert_allclose(np.asarray(got), per_member(relax, x, n), rtol=1e-12, atol=1e-14)
    loop = runner(cache)
    assert (list(loop.chosen.values()) == [loop.fused]) is fused


def test_products_by_a_large_matrix_are_products_per_member_in_one_kernel() -> None:
    """Traced to be one kernel, `[B, K] @ [K, N]` by an 80 KB matrix is a loop over the members'
    matrix-vector products (`abir.backends.jax.array_ops`), which `cost.work_of` counts in full
    and never as strided; elsewhere it stays one product."""
    from abir.backends.jax.array_ops import jax_array_ops
    from abir.backends.jax.mode import traced_as

    ops, x, matrix = jax_array_ops(), jnp.ones((6, 100)), jnp.ones((100, 100))
    with traced_as(scatter_free=True):
        per_member_jaxpr = jax.make_jaxpr(ops.matmul)(x, matrix).jaxpr
    plain_jaxpr = jax.make_jaxpr(ops.matmul)(x, matrix).jaxpr
    assert [eqn.primitive.name for eqn in per_member_jaxpr.eqns] == ["scan"]
    assert [eqn.primitive.name for eqn in plain_jaxpr.eqns] == ["dot_general"]
    assert cost.work_of(per_member_jaxpr) == cost.Work(products=60_000)
    assert cost.work_of(plain_jaxpr) == cost.Work(products=60_000, strided_products=60_000)
    rng = np.random.default_rng(3)
    x, matrix = rng.standard_normal((6, 100)).astype(np.float32), rng.standard_normal((100, 100)).astype(np.float32)
    with traced_as(scatter_free=True):
        got = jax.jit(ops.matmul)(jnp.asarray(x), jnp.asarray(matrix))
    np.testing.assert_allclose(np.asarray(got), x @ matrix, rtol=1e-5, atol=1e-5)


@ctx.batch(type_inference=lambda types: types[0])
def filled(x, n):
    """A slice assignment of more positions than `SELECTED_WRITES`: a scatter."""
    x = x.copy()
    x[1:] = x[1:] + n
    return x


def test_a_wide_item_assignment_keeps_its_scatter() -> None:
    x, n = np.zeros((8, 2 + array_ops.SELECTED_WRITES)), np.arange(8.0)
    cache: dict = {}
    got = filled(x, n, backend=abir.JaxBackend(code_cache=cache))
    np.testing.assert_array_equal(np.asarray(got), per_member(filled, x, n))
    loop = runner(cache)
    assert list(loop.chosen.values()) == [loop.plain]


@ctx.batch(type_inference=lambda types: types[0])
def wide_relax(x, n):
    """Per-member rounds of an elementwise contraction of the member's vector."""
    i = n - n
    while i < n:
        x = 0.5 * x + 1.0 / (1.0 + x * x)
        i += 1
    return x


def test_work_counts_the_wide_operations_xla_spreads_over_threads() -> None:
    def work(fn, *args) -> cost.Work:
        return cost.work_of(jax.make_jaxpr(fn)(*args).jaxpr)

    wide, narrow = jnp.ones((1024, 128), jnp.float32), jnp.ones((1024, 127), jnp.float32)  # 512 KiB, 508 KiB
    assert work(lambda x: x + 1.0, wide) == cost.Work(elementwise=131_072, threaded=131_072)
    assert work(lambda x: x + 1.0, narrow) == cost.Work(elementwise=130_048)
    assert work(lambda x: jnp.tanh(x), wide) == cost.Work(elementwise=1_310_720, threaded=1_310_720)
    # an update in place of a wide array writes one row
    assert work(lambda x: jax.lax.dynamic_update_index_in_dim(x, x[0] + 1.0, 3, 0), wide).threaded == 0


def test_kernels_spread_when_most_of_the_work_goes_over_two_threads_or_more() -> None:
    mostly = cost.Work(elementwise=100, threaded=50)
    assert cost.kernels_spread(mostly, cores=2)
    assert not cost.kernels_spread(mostly, cores=1)  # one thread: nothing to spread
    assert not cost.kernels_spread(cost.Work(elementwise=100, threaded=49), cores=2)
    assert not cost.kernels_spread(cost.Work(products=100, elementwise=100, threaded=99), cores=2)
    assert [cost.threaded_tasks(cores) for cores in (1, 2, 3, 4, 5, 9, 10)] == [1, 2, 2, 2, 3, 3, 4]


@pytest.mark.parametrize(("rows", "cores", "spread"), [(1024, 2, True), (1024, 1, False), (512, 2, False)])
def test_a_loop_of_wide_elementwise_work_runs_as_kernels_once_compiled_where_xla_spreads_it(
    monkeypatch: pytest.MonkeyPatch, rows: int, cores: int, spread: bool
) -> None:
    """[1024, 64] float64 registers (512 KiB) are split over two threads as kernels: on two
    cores the first call runs one kernel while the kernels compile (`KernelsLater`) and the
    calls after run them; on one core, or with half the rows (256 KiB registers, one thread),
    the loop stays one kernel."""
    monkeypatch.setattr(cost, "cpu_threads", lambda: cores)
    rng = np.random.default_rng(5)
    x, n = rng.standard_normal((rows, 64)), rng.integers(0, 6, rows)
    want = per_member(wide_relax, x[:32], n[:32])
    cache: dict = {}
    backend = abir.JaxBackend(code_cache=cache)
    got = wide_relax(x, n, backend=backend)
    np.testing.assert_allclose(np.asarray(got)[:32], want, rtol=1e-12, atol=1e-14)
    loop = runner(cache)
    (chosen,) = loop.chosen.values()
    if not spread:
        assert chosen is loop.fused
        return
    assert isinstance(chosen, compilation.KernelsLater)
    chosen.compiling.join()
    compiled, calls = chosen.kernels, []
    assert compiled is not None
    chosen.kernels = lambda state, limits: calls.append(limits) or compiled(state, limits)
    again = wide_relax(x, n, backend=backend)
    np.testing.assert_array_equal(np.asarray(again), np.asarray(got))
    assert calls  # the second call ran the kernels
