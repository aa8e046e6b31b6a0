"""Backend-specific tests of `TensorFlowBackend` (the shared protocol tests are in test_backend_conformance.py):
prims and opaque helpers in a graph, and the sweeping execution (results equal to the switching
one and NumPy, statistics counted inside the loop, options checked), in graph mode and with XLA."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tensorflow")

import tensorflow as tf  # noqa: E402
from test_machine import FIB, parse  # noqa: E402

from abir.backends.tf import NumpyTensor, TensorFlowBackend  # noqa: E402
from abir.vm import compile_machine  # noqa: E402


@pytest.fixture(scope="module")
def backend() -> TensorFlowBackend:
    return TensorFlowBackend()


def test_run_on_dummies_runs_on_zero_tensors(backend: TensorFlowBackend) -> None:
    from abir.types import TensorType

    out = backend.run_on_dummies(
        lambda x, y: x * tf.cast(tf.reduce_sum(y, axis=1), x.dtype),
        [TensorType(np.float32, (4,)), TensorType(np.int64, (4, 3))],
    )
    assert backend.type_of(out) == (np.dtype(np.float32), (4,))


def test_prims_inside_a_graph_with_junk_zero_divisors(backend: TensorFlowBackend) -> None:
    """Inactive rows may hold zeros: integer division must not raise inside tf.function."""
    fn = tf.function(lambda x, y: backend.builtin_prim("floor_divide", [x, y], np.int64))
    got = fn(tf.constant([7, -7, 3], tf.int64), tf.constant([2, 0, 0], tf.int64))
    np.testing.assert_array_equal(got.numpy(), [3, 0, 0])


def test_call_opaque_numpy_semantics_inside_a_graph(backend: TensorFlowBackend) -> None:
    """A helper written for NumPy arrays gets `NumpyTensor`s: NumPy's functions that have a
    method or a builtin prim behind them stay TF ops, with NumPy's dtypes."""

    def numpy_fn(x, y):
        return np.sum(x, axis=-1, keepdims=True) + y, np.int32(2) * y

    fn = tf.function(lambda x, y: backend.call_opaque(numpy_fn, [x, y]), autograph=False)
    total, doubled = fn(tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([[1.0], [2.0]]))
    np.testing.assert_array_equal(total.numpy(), [[4.0], [9.0]])
    assert doubled.dtype == tf.float64 and doubled.shape == (2, 1)  # NumPy: int32 * float32


def test_call_opaque_numpy_function_inside_a_graph(backend: TensorFlowBackend) -> None:
    """NumPy code that needs the values runs through tf.numpy_function in graph mode."""

    def numpy_fn(x):
        return np.sort(x, axis=-1)

    fn = tf.function(lambda x: backend.call_opaque(numpy_fn, [x]), autograph=False)
    np.testing.assert_array_equal(fn(tf.constant([[3.0, 1.0, 2.0]])).numpy(), [[1.0, 2.0, 3.0]])


def mix32(x):
    """A 32-bit integer hash: uint32 shifts, xors and wrapping multiplies."""
    x = x ^ (x >> 16)
    x = x * 0x7FEB352D
    x = x ^ (x >> 15)
    x = x * 0x846CA68B
    return x ^ (x >> 16)


def numpy_helper(key, q, p, direction):
    bits = mix32(mix32(key * 64) + key)
    u = (bits >> 8).astype(np.float64) * 2.0**-24 + 2.0**-25
    turn = (direction * ((q - p) * p).sum(axis=-1) >= 0.0) & (np.log(u) < 0.0)
    return u, turn, -q @ np.eye(3), abs(-key.astype(np.int8))


@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_call_opaque_numpy_operators_compile(jit_compile: bool) -> None:
    """NumPy's operators, `astype`, `sum(axis=)`, ufuncs and `@` on `NumpyTensor`s are TF ops
    (XLA-compilable) and give NumPy's values and dtypes, uint32 wrap-around included."""
    backend = TensorFlowBackend(jit_compile)
    rng = np.random.default_rng(0)
    args = [
        np.array([0, 1, 7, 0xFFFFFFFF, 0x9E3779B9], np.uint32),
        rng.normal(size=(5, 3)),
        rng.normal(size=(5, 3)),
        np.array([1.0, -1.0, 1.0, -1.0, 1.0]),
    ]
    fn = tf.function(lambda *xs: backend.call_opaque(numpy_helper, xs), jit_compile=jit_compile, autograph=False)
    got = fn(*map(tf.constant, args))
    with np.errstate(over="ignore"):
        want = numpy_helper(*args)
    for have, expected in zip(got, want, strict=True):
        assert tf.is_tensor(have) and have.dtype.as_numpy_dtype == expected.dtype
        np.testing.assert_allclose(have.numpy(), expected, rtol=1e-15)


def test_numpy_tensor_attributes(backend: TensorFlowBackend) -> None:
    x = NumpyTensor(tf.constant([[1, 2, 3], [4, 5, 6]], tf.int32), backend)
    assert x.dtype == np.int32 and x.shape == (2, 3) and x.ndim == 2
    assert backend.is_native(x)
    np.testing.assert_array_equal(np.asarray(x.reshape(3, 2)), [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(np.asarray(x[:, 1]), [2, 5])
    assert x.sum().dtype == np.int64 and int(np.asarray(x.sum())) == 21
    np.testing.assert_array_equal(tf.reduce_max(x, axis=1).numpy(), [3, 6])  # TF takes it as a tensor
    np.testing.assert_array_equal(np.cumsum(x, axis=1), [[1, 3, 6], [4, 9, 15]])  # eager: the values


def test_call_opaque_other_errors_propagate(backend: TensorFlowBackend) -> None:
    def broken(x):
        raise TypeError("bad operand")

    fn = tf.function(lambda x: backend.call_opaque(broken, [x]), autograph=False)
    with pytest.raises(TypeError, match="bad operand"):
        fn(tf.constant([1.0]))


# ----- the sweeping execution (the shared checks are in test_sweep.py) ----------------------------
def test_sweep_statistics_equal_jax() -> None:
    """Both traced backends sweep the same way: the same counts, block by block."""
    jax_backend = pytest.importorskip("abir.backends.jax")
    machine = compile_machine(parse(FIB))
    inputs = np.array([0, 1, 5, 9, 3, 12])
    tf_backend, jax = TensorFlowBackend(collect_stats=True), jax_backend.JaxBackend(collect_stats=True)
    machine.run([inputs], tf_backend, max_stack_depth=20)
    machine.run([inputs], jax, max_stack_depth=20)
    assert tf_backend.last_stats == jax.last_stats


# ----- TF graph-mode workaround -----------------------------------------------------------------
@pytest.mark.parametrize("jit_compile", [False, True], ids=["graph", "xla"])
def test_sums_sharing_a_term_inside_a_conditional(jit_compile: bool) -> None:
    """Grappler (TF 2.21) turns `(x + 1) + x` inside a tf.cond branch into an empty float32
    tensor unless the terms have one shape; `builtin_prim("add")` broadcasts them."""
    backend = TensorFlowBackend(jit_compile)

    def branch(x: tf.Tensor) -> tf.Tensor:
        inner = backend.builtin_prim("add", [x, np.int64(1)], np.int64)
        return backend.builtin_prim("add", [inner, x], np.int64)

    fn = tf.function(lambda x, p: tf.cond(p, lambda: branch(x), lambda: x), jit_compile=jit_compile, autograph=False)
    got = fn(tf.constant([1, 2, 3], tf.int64), tf.constant(True))
    np.testing.assert_array_equal(got.numpy(), [3, 5, 7])


def doubled(p):
    """An undecorated helper: Grappler's arithmetic optimizer used to turn its sum, inside the
    machine loop's conditional, into an empty float32 tensor."""
    return p + p * 1


@pytest.mark.parametrize("jit_compile", [False, True, None], ids=["graph", "xla", "default"])
def test_helper_sums_survive_the_graph_optimizer(jit_compile: bool) -> None:
    import abir

    ctx = abir.Context()

    @ctx.batch()
    def twice(x):
        y = doubled(x)
        if y > 2:
            return y
        return y + 1

    x = np.array([1, 2, 5])
    backend = TensorFlowBackend(jit_compile, code_cache={})
    for _ in range(3):  # every call: the second one used to run under the optimizer again
        got = twice(x, backend=backend)
        np.testing.assert_array_equal(np.asarray(got), twice(x, dry_run=True))
    assert tf.config.optimizer.get_experimental_options().get("arithmetic_optimization", True)


def compiled_loops(code_cache: dict) -> list:
    """The compiled machine loops a backend keeps in `code_cache` (entries: kernels, loop)."""
    return [loop for _, loop in code_cache.values()]


def clipped_step(x):
    """A compilable program: control flow and arithmetic only."""
    while x > 1.0:
        x = x / 2.0 - 0.25
    return x


def smallest(v):
    """A primitive (`batched` declares it) needing NumPy's values: TF runs it on the host
    (`tf.numpy_function`)."""
    return np.partition(v, 0, axis=-1)[..., 0]


def smallest_or_zero(v):
    if v[0] > 0.0:
        return smallest(v)
    return 0.0 * v[1]


def scaled_i0(x):
    """A NumPy call no rule in TF's ops runs (`NOT_XLA_COMPILABLE` in test_numpy_calls.py)."""
    if x > 0.5:
        return np.i0(x)
    return x


def batched(fn):
    """`fn` batched in a fresh context where `smallest` is a primitive."""
    import abir

    ctx = abir.Context()
    ctx.primitive(smallest)
    return ctx.batch()(fn)


def per_member(fn, *args) -> np.ndarray:
    return np.array([fn(*(a[b] for a in args)) for b in range(len(args[0]))])


def test_default_compiles_a_compilable_program_with_xla() -> None:
    x = np.array([0.5, 3.0, 17.0, 1.5])
    code_cache: dict = {}
    got = batched(clipped_step)(x, backend=TensorFlowBackend(code_cache=code_cache))
    np.testing.assert_array_equal(got, per_member(clipped_step, x))
    assert [loop.xla for loop in compiled_loops(code_cache)] == [True]


@pytest.mark.parametrize(("fn", "args"), [
    (smallest_or_zero, (np.array([[2.0, -1.0, 4.0], [-1.0, 3.0, 0.5], [5.0, 6.0, 7.0]]),)),
    (scaled_i0, (np.array([0.25, 0.75, 2.0]),)),
], ids=["opaque-helper", "numpy-call"])  # fmt: skip
def test_default_runs_a_program_xla_cannot_compile_without_it(fn, args) -> None:
    code_cache: dict = {}
    backend, run = TensorFlowBackend(code_cache=code_cache), batched(fn)
    for _ in range(2):  # the second call reuses the plain function
        np.testing.assert_allclose(np.asarray(run(*args, backend=backend)), per_member(fn, *args), rtol=1e-12)
    assert [loop.xla for loop in compiled_loops(code_cache)] == [False]


def test_forced_xla_names_the_helper_it_cannot_compile() -> None:
    from abir.numpy_calls import NotCompilableError

    v = np.array([[2.0, -1.0, 4.0], [-1.0, 3.0, 0.5]])
    with pytest.raises(NotCompilableError, match=r"(?s)test_tf_backend\.py:\d+: in batched function 'smallest_or_zero'.*the primitive smallest .*jit_compile=False"):
        batched(smallest_or_zero)(v, backend=TensorFlowBackend(jit_compile=True, code_cache={}))


@pytest.mark.parametrize("jit_compile", [None, True, False], ids=["default", "xla", "graph"])
def test_runs_leave_the_global_optimizer_options_alone(jit_compile, monkeypatch) -> None:
    """Setting Grappler's global options around a loop's first run changed the configuration the
    next call instantiates the function under: it was instantiated again (an XLA loop compiled
    again, a plain one optimized by the arithmetic optimizer after all)."""
    toggled = []
    monkeypatch.setattr(tf.config.optimizer, "set_experimental_options", toggled.append)
    x = np.array([0.5, 3.0, 17.0, 1.5])
    backend = TensorFlowBackend(jit_compile, code_cache={})
    run = batched(clipped_step)
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(run(x, backend=backend)), per_member(clipped_step, x))
    assert toggled == []
