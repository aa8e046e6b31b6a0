"""Backend-specific tests of `JaxBackend` (the shared protocol tests are in test_backend_conformance.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("jax")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import abir  # noqa: E402
from abir.backends.jax import JaxBackend, writes  # noqa: E402
from abir.backends.jax.cost import work_per_member  # noqa: E402
from abir.backends.jax.mode import TraceMode, trace_mode, traced_as  # noqa: E402
from abir.backends.jax.reductions import batch_any, batch_min, batch_sum  # noqa: E402


@pytest.fixture(scope="module")
def backend() -> JaxBackend:
    return JaxBackend()


def test_run_on_dummies_evaluates_abstractly(backend: JaxBackend) -> None:
    from abir.types import TensorType

    out = backend.run_on_dummies(
        lambda x, y: x * y.sum(), [TensorType(np.float32, (4,)), TensorType(np.int64, (4, 3))]
    )
    assert backend.type_of(out) == (np.dtype(np.float32), (4,))


@pytest.mark.parametrize("size", [1, 31, 32, 33, 64, 100, 192, 193, 300])
def test_batch_reductions_equal_numpy(size: int) -> None:
    values = np.random.default_rng(size).integers(-50, 50, size=size)
    for probe in (values, np.full(size, 7)):
        x = jnp.asarray(probe)
        assert bool(batch_any(x == 7)) == bool(np.any(probe == 7))
        assert int(batch_min(x)) == int(np.min(probe))
        assert int(batch_sum(x)) == int(np.sum(probe))


def test_a_batch_of_64_reduces_in_one_kernel() -> None:
    text = jax.jit(lambda pc: batch_any(pc == 3)).lower(jnp.zeros(64, jnp.int32)).compile().as_text()
    entry = text[text.index("ENTRY") :]
    assert entry.count("fusion(") == 1 and "reduce-window" not in entry


def test_materialized_copies_values_exactly() -> None:
    """The copy that keeps XLA from recomputing a costly helper in each consumer changes no
    bit: NaN, infinities and the sign of zero included."""
    with JaxBackend().scope():  # float64, as in a run
        values = jnp.asarray(np.array([[np.nan, -0.0], [np.inf, -np.inf], [1e-310, -2.5]]))
        assert values.dtype == np.float64
        got = np.asarray(jax.jit(writes.materialized)(values))
        np.testing.assert_array_equal(got.view(np.int64), np.asarray(values).view(np.int64))
        assert writes.materialized(jnp.float64(3.0)) == 3.0  # a scalar stays as it is


def test_one_normal_draw_per_member_gets_its_own_buffer() -> None:
    """`MATERIALIZE_MIN_ROW_WORK` is at most the work of one `abir.random.normal` draw per member,
    which XLA would otherwise recompute in every fusion that reads it."""
    backend = JaxBackend()
    keys = abir.random.fold_in(abir.random.key(0), np.arange(4))
    with backend.scope():
        work = work_per_member(abir.random.normal, [jnp.asarray(keys), jnp.arange(4)])
    assert work >= writes.MATERIALIZE_MIN_ROW_WORK


def test_costly_helper_results_get_their_own_buffer() -> None:
    """A helper above `MATERIALIZE_MIN_ROW_WORK` per member has its results scattered into a
    buffer of their own; a cheap one is called as it is."""
    backend = JaxBackend()

    def costly(x):
        for _ in range(writes.MATERIALIZE_MIN_ROW_WORK):
            x = x * 1.0001 + 1.0
        return x, x > 0

    def cheap(x):
        return x + 1.0

    with backend.scope():
        x = jnp.ones((4, 3))
        assert work_per_member(costly, [x]) >= writes.MATERIALIZE_MIN_ROW_WORK
        costly_jaxpr = str(jax.make_jaxpr(lambda x: backend.call_opaque(costly, [x]))(x))
        cheap_jaxpr = str(jax.make_jaxpr(lambda x: backend.call_opaque(cheap, [x]))(x))
        assert costly_jaxpr.count(" scatter[") == 2 and "scatter" not in cheap_jaxpr
        got, positive = backend.call_opaque(costly, [x])
        want, _ = costly(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert positive.dtype == jnp.bool_


def test_a_trace_mode_holds_inside_its_block_only() -> None:
    """`traced_as` sets the mode for what its block traces, nested blocks restore the outer
    mode, and an error inside leaves no mode behind."""
    seen = []

    def probe(x):
        seen.append(trace_mode())
        return x

    with traced_as(scatter_free=True):
        jax.jit(probe)(jnp.zeros(2))
        with traced_as(folds=(*trace_mode().folds, 3)):
            seen.append(trace_mode())
        seen.append(trace_mode())
    with pytest.raises(ValueError), traced_as(folds=(5,)):
        raise ValueError("inside the block")
    assert seen == [TraceMode(scatter_free=True), TraceMode(scatter_free=True, folds=(3,)), TraceMode(scatter_free=True)]
    assert trace_mode() == TraceMode()


def test_a_run_traced_without_scatters_leaves_neither_backend_nor_context_changed() -> None:
    """A standalone run traces its loop in the scatter-free mode first
    (`abir.backends.jax.one_kernel`); the mode never lands on the backend object and is gone
    after the run."""
    import abir

    ctx = abir.Context()

    @ctx.batch(type_inference=lambda types: types[0])
    def countdown(n):
        while n > 0:
            n = n - 1
        return n

    numbers = np.array([3, 0, 5, -2])
    backend = JaxBackend(code_cache={})
    before = dict(vars(backend))
    got = countdown(numbers, backend=backend)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(countdown(numbers, dry_run=True)))  # plain Python per member
    assert set(vars(backend)) == set(before) | {"last_stats"}
    assert trace_mode() == TraceMode()


def table_sum(table, i):
    total = 0
    while i > 0:
        total = total + table[i]
        i = i - 1
    return total


@pytest.mark.parametrize("one_kernel", [None, False])
def test_a_launch_returns_no_read_only_register(monkeypatch: pytest.MonkeyPatch, one_kernel: bool | None) -> None:
    """Each member's table is only read: the compiled loop does not return it (which would copy
    it on every launch), and the run's results still equal per-member Python."""
    import abir
    from abir.backends.jax.one_kernel import JitWithOptions, OneKernelWherePossible

    returned: list[set[str]] = []
    for cls in (OneKernelWherePossible, JitWithOptions):
        def spy(self, state, iterations, original=cls.__call__):  # type: ignore[no-untyped-def]
            out = original(self, state, iterations)
            returned.append(set(out))
            return out

        monkeypatch.setattr(cls, "__call__", spy)
    rng = np.random.default_rng(0)
    table, index = rng.integers(-9, 9, (6, 8)), rng.integers(0, 8, 6)
    batched = abir.Context().batch_uncurried(table_sum)
    got = batched(table, index, backend=JaxBackend(one_kernel=one_kernel))
    np.testing.assert_array_equal(np.asarray(got), [table_sum(t, i) for t, i in zip(table, index, strict=True)])
    assert returned and all("pc" in keys and "r:table_sum.table" not in keys for keys in returned)


def halve_and_split(n):
    steps = 0
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps, n % -3, n // -2, n % 5 + n // 7


def array_constants(jaxpr: Any) -> list[Any]:
    """The constants of a jaxpr and every jaxpr nested in it that are arrays, not scalars:
    captured ones, and array literals of its equations."""
    from jax.extend.core import Literal, jaxprs_in_params

    found = list(getattr(jaxpr, "consts", []))
    inner = getattr(jaxpr, "jaxpr", jaxpr)
    found += [v.aval for v in inner.constvars if v.aval.shape != ()]
    for eqn in inner.eqns:
        found += [v.val for v in eqn.invars if isinstance(v, Literal) and np.shape(v.val) != ()]
        for sub in jaxprs_in_params(eqn.params):
            found += array_constants(sub)
    return found


def test_a_kernels_one_element_constants_are_literals_of_the_trace() -> None:
    import abir

    f = abir.Context().batch_uncurried(halve_and_split)
    n = np.array([1, 6, 7, 27, 100, 3])
    want = [halve_and_split(int(v)) for v in n]
    for _ in range(3):
        got = f(n, backend="jax")
        for k in range(len(want[0])):
            np.testing.assert_array_equal(np.asarray(got[k]), [w[k] for w in want])
    launch = next(iter(f._context._compiler.steady.values())).run.launch
    launch.compiling.join()
    with jax.enable_x64(True):
        # a captured array would be an operand of the loop XLA cannot fold
        assert array_constants(launch.program.trace(n).jaxpr) == []
