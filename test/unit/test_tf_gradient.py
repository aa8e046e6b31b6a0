"""`tf.GradientTape` through batched functions on the TensorFlow backend
(`abir.backends.tf.reverse`).

Each gradient is checked against `tf.GradientTape` of the same per-member Python function run
member by member on TF tensors (float64, rtol 1e-9), and each value against the plain
per-member Python run (`dry_run=True`): through loops with per-member trip counts, branches,
early returns, recursion and mutual recursion (the programs of test_reverse_mode), with respect
to per-member arguments and to arguments shared by all members (`tf.Variable`s too), eagerly,
with a tape inside a `tf.function` (with and without XLA) and around one. A run longer than its
undo log, and one differentiated by whole-state checkpoints, give the same gradients; integer
arguments and results have none; a run's error under a tape is abir's error.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytest.importorskip("jax")  # test_reverse_mode's programs

from test_reverse_mode import (  # noqa: E402 (on PYTHONPATH)
    CASES,
    PAIRS,
    RTOL,
    TABLE,
    N,
    W,
    X,
    branchy,
    damped,
    early,
    halving_steps,
    ping,
    pong,
    power,
    rescaled,
    tree_sum,
)
from test_reverse_mode import K as TABLE_INDEX  # noqa: E402

import abir  # noqa: E402
from abir.backends import reverse_scheme  # noqa: E402
from abir.backends.tf import reverse as tf_reverse  # noqa: E402
from abir.errors import StackOverflowError  # noqa: E402

FUNCTIONS = {f.__name__: f for f in (damped, branchy, early, power, tree_sum, ping, rescaled, halving_steps)}


def fresh(name):
    """The batched function of test_reverse_mode's program `name`, in a context of its own (a
    new trace: nothing compiled by another test)."""
    context = abir.Context()
    if name == "ping":
        context.batch_uncurried(pong)
    return context.batch_uncurried(FUNCTIONS[name])


@functools.cache
def per_member_gradients(name):
    """(values, d/dx per member, d/dshared summed over members), by `tf.GradientTape` of the
    per-member Python function on TF scalars, member by member (once per program: the inputs
    are fixed)."""
    arguments, shared = CASES[name]
    values, dx, dshared = [], [], np.zeros(len(shared))
    for x, n in zip(X, N, strict=True):
        x = tf.constant(x, tf.float64)
        weights = [tf.constant(s, tf.float64) for s in shared]
        with tf.GradientTape() as tape:
            tape.watch([x, *weights])
            value = FUNCTIONS[name](*arguments(x, weights, int(n)))
        gx, *gshared = tape.gradient(value, [x, *weights])
        values.append(float(value))
        dx.append(0.0 if gx is None else float(gx))
        dshared += [0.0 if g is None else float(g) for g in gshared]
    return np.array(values), np.array(dx), dshared


def taped_call(function, name, backend, x, shared):
    """(sum of the batched call's results, d/dx, d/dshared) by one tape around the call."""
    arguments, _ = CASES[name]
    with tf.GradientTape() as tape:
        tape.watch([x, *[s for s in shared if not isinstance(s, tf.Variable)]])
        total = tf.reduce_sum(function(*arguments(x, shared, N), backend=backend))
    dx, *dshared = tape.gradient(total, [x, *shared])
    return total, dx, dshared


def assert_gradients(name, total, dx, dshared):
    want_values, want_dx, want_dshared = per_member_gradients(name)
    np.testing.assert_allclose(float(total), want_values.sum(), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(dx), want_dx, rtol=RTOL)
    np.testing.assert_allclose([float(g) for g in dshared], want_dshared, rtol=RTOL)


@pytest.mark.parametrize(
    "name",
    # make test: tree_sum's gradients through test_a_tape_around_a_tf_function
    ["damped", "branchy", "ping", *(pytest.param(n, marks=pytest.mark.full) for n in ("tree_sum", "early", "power", "rescaled"))],
)
def test_gradient_tape_equals_per_member_tape(name):
    function = fresh(name)
    _, shared = CASES[name]
    shared = [tf.Variable(s, dtype=tf.float64) for s in shared]
    total, dx, dshared = taped_call(function, name, abir.TensorFlowBackend(), tf.constant(X), shared)
    np.testing.assert_allclose(np.asarray(function(*CASES[name][0](X, CASES[name][1], N), dry_run=True)), per_member_gradients(name)[0], rtol=RTOL)
    assert_gradients(name, total, dx, dshared)


@pytest.mark.parametrize("jit_compile", [False, pytest.param(True, marks=pytest.mark.full)])
@pytest.mark.parametrize("name", ["early", pytest.param("tree_sum", marks=pytest.mark.full)])
def test_a_tape_inside_a_tf_function(name, jit_compile):
    function = fresh(name)
    _, shared = CASES[name]
    shared = [tf.constant(s, tf.float64) for s in shared]
    backend = abir.TensorFlowBackend()

    @tf.function(jit_compile=jit_compile)
    def gradients(x, shared):
        return taped_call(function, name, backend, x, shared)

    assert_gradients(name, *gradients(tf.constant(X), shared))


def test_a_tape_around_a_tf_function():
    """A staged run no tape watched: TF differentiates the function's graph later, and the
    gradient replays the run to log it."""
    function = fresh("tree_sum")
    w = tf.Variable(W, dtype=tf.float64)
    backend = abir.TensorFlowBackend()
    compiled = tf.function(lambda x: tf.reduce_sum(function(x, w, N, backend=backend)))
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        total = compiled(x)
    dx, dw = tape.gradient(total, [x, w])
    assert_gradients("tree_sum", total, dx, [dw])


def test_a_shared_variable_indexed_per_member_gets_the_sum_over_members():
    def table_model(x, table, k, n):
        for _ in range(n):
            x = table[k] @ x * 0.5 + 1.0 / (1.0 + x * x)
        return x.sum()

    batched = abir.Context().batch_uncurried(table_model)
    table = tf.Variable(TABLE)
    x = tf.constant(PAIRS)
    with tf.GradientTape() as tape:
        tape.watch(x)
        total = tf.reduce_sum(batched(x, table[None], TABLE_INDEX, N, backend=abir.TensorFlowBackend()))
    dx, dtable = tape.gradient(total, [x, table])
    want_total, want_dx, want_dtable = 0.0, [], np.zeros_like(TABLE)
    for pair, k, n in zip(PAIRS, TABLE_INDEX, N, strict=True):
        pair, member_table = tf.constant(pair), tf.constant(TABLE)
        with tf.GradientTape() as member:
            member.watch([pair, member_table])
            y = pair
            for _ in range(int(n)):
                y = tf.linalg.matvec(member_table[int(k)], y) * 0.5 + 1.0 / (1.0 + y * y)
            value = tf.reduce_sum(y)
        gx, gt = member.gradient(value, [pair, member_table])
        want_total += float(value)
        want_dx.append(gx.numpy())
        want_dtable += 0.0 if gt is None else tf.convert_to_tensor(gt).numpy()
    np.testing.assert_allclose(float(total), want_total, rtol=RTOL)
    np.testing.assert_allclose(dx.numpy(), np.stack(want_dx), rtol=RTOL)
    np.testing.assert_allclose(tf.convert_to_tensor(dtable).numpy(), want_dtable, rtol=RTOL)


def test_integer_arguments_and_results_carry_no_gradient():
    batched = fresh("halving_steps")
    x = tf.constant([1.0, 10.0, 1000.0, 0.2], tf.float64)
    tolerance = tf.constant(0.3, tf.float64)
    n = tf.constant(N)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x, n])
        halved, steps = batched(x, tolerance, backend=abir.TensorFlowBackend())
        powered = fresh("power")(tf.constant(X), n, backend=abir.TensorFlowBackend())
    want_halved, want_steps = batched(x.numpy(), 0.3, dry_run=True)
    np.testing.assert_array_equal(steps.numpy(), want_steps)
    np.testing.assert_allclose(tape.gradient(halved, x).numpy(), 0.5**want_steps, rtol=RTOL)
    assert tape.gradient(steps, x) is None
    assert tape.gradient(powered, n) is None


def damped_gradients_agree(n):
    """d/dx and d/dw of `damped` batched on TF (a program of its own: a new trace) equal the
    per-member tape's."""
    batched = abir.Context().batch_uncurried(damped)
    x, w = tf.constant(X), tf.Variable(W, dtype=tf.float64)
    with tf.GradientTape() as tape:
        tape.watch(x)
        total = tf.reduce_sum(batched(x, w, n, backend=abir.TensorFlowBackend(jit_compile=False)))
    dx, dw = tape.gradient(total, [x, w])
    want_dx, want_dw = [], 0.0
    for member, k in zip(X, n, strict=True):
        xm, wm = tf.constant(member, tf.float64), tf.constant(W, tf.float64)
        with tf.GradientTape() as member_tape:
            member_tape.watch([xm, wm])
            y = damped(xm, wm, int(k))
        gx, gw = member_tape.gradient(y, [xm, wm])
        want_dx.append(float(gx))
        want_dw += 0.0 if gw is None else float(gw)
    np.testing.assert_allclose(dx.numpy(), want_dx, rtol=RTOL)
    np.testing.assert_allclose(float(dw), want_dw, rtol=RTOL)


def test_a_run_longer_than_its_undo_log_replays_from_the_start(monkeypatch):
    monkeypatch.setattr(reverse_scheme, "MAX_UNDO_ENTRIES", 3)
    damped_gradients_agree(np.array([9, 2, 6, 0, 8, 5]))


@pytest.mark.parametrize("checkpoints", [2, pytest.param(4, marks=pytest.mark.full)])
def test_a_run_longer_than_its_tape_thins_checkpoints_and_recomputes(monkeypatch, checkpoints):
    monkeypatch.setattr(tf_reverse, "undo_loggable", lambda kernels: False)
    monkeypatch.setattr(reverse_scheme, "MAX_CHECKPOINTS", checkpoints)
    damped_gradients_agree(np.array([9, 2, 6, 0, 8, 5]))


@pytest.mark.parametrize("where", ["eager", pytest.param("abir.tf_function(jit_compile=True)", marks=pytest.mark.full)])
def test_a_run_error_under_a_tape_is_abirs_error(where):
    n = N.copy()
    n[1] = 40
    batched = fresh("power")

    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            total = tf.reduce_sum(batched(x, n, backend=abir.TensorFlowBackend()))
        return tape.gradient(total, x)

    if where != "eager":
        gradient = abir.tf_function(jit_compile=True)(gradient)
    with pytest.raises(StackOverflowError, match=r"stack overflow in function 'power' at .*test_reverse_mode.py:\d+") as raised:
        gradient(tf.constant(X))
    assert raised.value.members == [1]


def test_a_tape_that_does_not_watch_the_inputs_runs_as_without_one():
    batched = fresh("power")
    with tf.GradientTape() as tape:
        tape.watch(tf.constant(1.0))
        result = batched(tf.constant(X), N, backend=abir.TensorFlowBackend())
    np.testing.assert_allclose(result.numpy(), batched(X, N, dry_run=True), rtol=RTOL)


DOUBLING_STACK_DEPTH = 6
"""The stack depth `doubling`'s test runs with: its deepest member (depth 4) fits, and under XLA
each span is written row by row over the whole depth (15 by default), so a shallow stack
compiles a smaller gradient."""


def doubling(depth, x):
    if depth == 0:
        return x
    return doubling(depth - 1, x) * 2.0 + doubling(depth - 1, x * x * 0.5 + 1.0)


@pytest.mark.parametrize("jit_compile", [None, pytest.param(False, marks=pytest.mark.full)])
def test_a_recursion_writing_spans_of_stack_rows_is_checkpointed(monkeypatch, jit_compile):
    """`doubling` descends its counter (`vm.descend`: whole spans of stack rows per member), so
    no undo log: checkpoints, and under XLA the spans written row by row."""
    loggable = []
    undo_loggable = tf_reverse.undo_loggable
    monkeypatch.setattr(tf_reverse, "undo_loggable", lambda kernels: loggable.append(undo_loggable(kernels)) or loggable[-1])
    batched = abir.Context().batch_uncurried(doubling)
    depths = np.array([0, 3, 1, 4, 2, 3])
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        tape.watch(x)
        total = tf.reduce_sum(batched(depths, x, backend=abir.TensorFlowBackend(jit_compile=jit_compile), max_stack_depth=DOUBLING_STACK_DEPTH))
    want_dx = []
    for depth, member in zip(depths, X, strict=True):
        xm = tf.constant(member, tf.float64)
        with tf.GradientTape() as member_tape:
            member_tape.watch(xm)
            y = doubling(int(depth), xm)
        want_dx.append(float(member_tape.gradient(y, xm)))
    np.testing.assert_allclose(float(total), batched(depths, X, dry_run=True).sum(), rtol=RTOL)
    np.testing.assert_allclose(tape.gradient(total, x).numpy(), want_dx, rtol=RTOL)
    assert loggable == [False]


@pytest.mark.parametrize("staged", [False, True], ids=["eager", "tf.function"])
def test_a_second_derivative_is_a_type_error_naming_jax(staged):
    """Eagerly and in a graph: a tape differentiating the gradient gets abir's error, not None."""
    batched = fresh("power")
    backend = abir.TensorFlowBackend()

    def second_derivative(x):
        with tf.GradientTape() as outer:
            outer.watch(x)
            with tf.GradientTape() as inner:
                inner.watch(x)
                total = tf.reduce_sum(batched(x, N, backend=backend))
            first = inner.gradient(total, x)
        return outer.gradient(first, x)

    with pytest.raises(TypeError, match=r"second derivative.*JAX backend \(jax.hessian"):
        (tf.function(second_derivative) if staged else second_derivative)(tf.constant(X))
