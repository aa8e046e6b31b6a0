"""Reverse-mode derivatives (`jax.grad`, `jax.vjp`, `jax.value_and_grad`, `jax.jacrev`) of
batched functions on the JAX backend (`abir.backends.jax.reverse`).

Each derivative is checked against `jax.grad` of the same per-member Python function run member
by member (float64, rtol 1e-9), and each value against the plain per-member Python run
(`dry_run=True`): through loops with per-member trip counts, branches, early returns, recursion
and mutual recursion, with respect to per-member arguments and to arguments shared by all
members (model parameters, which the differentiated run keeps as one row), under `jax.jit`,
`jax.vmap` and forward-over-reverse. A run longer
than its undo log (replayed from its start), and one differentiated by whole-state checkpoints
(thinned, sweeps recomputed), give the same derivatives. What does not differentiate raises a
clear error.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import abir  # noqa: E402
from abir.backends import reverse_scheme  # noqa: E402
from abir.backends.jax import reverse  # noqa: E402

RTOL = 1e-9


def damped(x, w, n):
    for _ in range(n):
        x = x * w + 1.0 / (1.0 + x * x)
    return x


def branchy(x, w):
    if x > 0.5:
        y = x * x * w
    elif x > -0.5:
        y = w / (1.0 + x * x)
    else:
        y = x - w
    return y * 2.0


def early(x, w, n):
    i = 0
    while i < n:
        if x > 4.0:
            return x * w
        x = x * x * w + 0.5
        i += 1
    return x - 1.0


def power(x, n):
    if n == 0:
        return x * 0.0 + 1.0
    return x * power(x, n - 1)


def tree_sum(x, w, depth):
    if depth <= 0:
        return x
    return w * tree_sum(x * 0.5, w, depth - 1) + tree_sum(x + w, w, depth - 2) * 0.25


def ping(x, n):
    if n <= 0:
        return x
    return pong(x * 1.5, n - 1)


def pong(x, n):
    return ping(x * x * 0.3 + 0.2, n - 1)


def table_model(x, table, k, n):
    for _ in range(n):
        x = table[k] @ x * 0.5 + 1.0 / (1.0 + x * x)
    return x.sum()


def rescaled(x, w, n):
    while n > 0:
        w = w * 0.9
        x = x * w + 0.25
        n -= 1
    return x


def halving_steps(x, tolerance):
    steps = 0
    while x > tolerance:
        x = x * 0.5
        steps += 1
    return x, steps


CTX = abir.Context()
PROGRAMS = {
    function.__name__: CTX.batch_uncurried(function) for function in (damped, branchy, early, power, tree_sum, ping, halving_steps, rescaled)
}
CTX.batch_uncurried(pong)
BACKEND = abir.JaxBackend()

X = np.array([0.3, -1.2, 2.0, 0.9, -0.1, 1.7])
N = np.array([3, 0, 7, 1, 5, 2])
W = 0.8
CASES = {  # name: (the arguments given x, the shared arguments and n; the shared arguments)
    "damped": (lambda x, shared, n: (x, shared[0], n), [W]),
    "branchy": (lambda x, shared, n: (x, shared[0]), [W]),
    "early": (lambda x, shared, n: (x, shared[0], n), [W]),
    "power": (lambda x, shared, n: (x, n), []),
    "tree_sum": (lambda x, shared, n: (x, shared[0], n), [W]),
    "ping": (lambda x, shared, n: (x, n), []),
    "rescaled": (lambda x, shared, n: (x, shared[0], n), [W]),
}


def batched_call(name, x, shared, n=N):
    arguments, _ = CASES[name]
    return PROGRAMS[name](*arguments(x, shared, n), backend=BACKEND)


def dry_call(name):
    """The plain per-member Python run of the batched function (`dry_run=True`)."""
    arguments, shared = CASES[name]
    return np.asarray(PROGRAMS[name](*arguments(X, shared, N), dry_run=True))


@functools.cache
def per_member_gradients(name):
    """(values, d/dx per member, d/dshared summed over members), by jax.grad of the per-member
    Python function member by member (computed once per program: the inputs are fixed)."""
    arguments, shared = CASES[name]
    function = globals()[name]
    values, dx, dshared = [], [], np.zeros(len(shared))
    for x, n in zip(X, N, strict=True):
        value, (gx, gshared) = jax.value_and_grad(lambda x, shared, n=int(n): function(*arguments(x, shared, n)), argnums=(0, 1))(
            jnp.float64(x), [jnp.float64(s) for s in shared]
        )
        values.append(float(value))
        dx.append(float(gx))
        dshared += np.array([float(g) for g in gshared])
    return np.array(values), np.array(dx), dshared


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


# make test: tree_sum's gradients through test_a_recursive_run_longer_than_its_undo_log_restores_its_stacks
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.full) if n == "tree_sum" else n for n in CASES])
def test_value_and_grad_equals_jax_grad_per_member(name):
    _, shared = CASES[name]
    want_values, want_dx, want_dshared = per_member_gradients(name)
    value, (dx, dshared) = jax.value_and_grad(lambda x, shared: batched_call(name, x, shared).sum(), argnums=(0, 1))(
        jnp.asarray(X), [jnp.float64(s) for s in shared]
    )
    np.testing.assert_allclose(dry_call(name), want_values, rtol=RTOL)
    np.testing.assert_allclose(float(value), want_values.sum(), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(dx), want_dx, rtol=RTOL)
    np.testing.assert_allclose(np.array([float(g) for g in dshared]), want_dshared, rtol=RTOL)


@pytest.mark.parametrize("name", ["damped", pytest.param("tree_sum", marks=pytest.mark.full)])
def test_grad_under_jit_vjp_and_jacrev(name):
    _, shared = CASES[name]
    _, want_dx, want_dshared = per_member_gradients(name)
    x = jnp.asarray(X)
    shared = [jnp.float64(s) for s in shared]

    dx, dshared = jax.jit(jax.grad(lambda x, s: batched_call(name, x, s).sum(), argnums=(0, 1)))(x, shared)
    np.testing.assert_allclose(np.asarray(dx), want_dx, rtol=RTOL)
    np.testing.assert_allclose(float(dshared[0]), want_dshared[0], rtol=RTOL)

    values, pull = jax.vjp(lambda x: batched_call(name, x, shared), x)
    cotangent = jnp.arange(1.0, len(X) + 1.0)
    np.testing.assert_allclose(np.asarray(pull(cotangent)[0]), want_dx * np.asarray(cotangent), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(values), dry_call(name), rtol=RTOL)

    jacobian = jax.jacrev(lambda x: batched_call(name, x, shared))(x)
    np.testing.assert_allclose(np.asarray(jacobian), np.diag(want_dx), rtol=RTOL, atol=0)


def test_forward_mode_still_works_and_agrees_with_reverse_mode():
    _, shared = CASES["early"]
    x = jnp.asarray(X)

    def call(x):
        return batched_call("early", x, shared)

    np.testing.assert_allclose(np.asarray(jax.jacfwd(call)(x)), np.asarray(jax.jacrev(call)(x)), rtol=RTOL)
    _, tangent = jax.jvp(call, (x,), (jnp.ones_like(x),))
    np.testing.assert_allclose(np.asarray(tangent), per_member_gradients("early")[1], rtol=RTOL)


def test_hessian_is_forward_over_reverse():
    x = jnp.asarray(X)

    def loss(x):
        return PROGRAMS["power"](x, N, backend=BACKEND).sum()

    want = [float(jax.hessian(lambda v, n=int(n): power(v, n))(jnp.float64(v))) for v, n in zip(X, N, strict=True)]
    np.testing.assert_allclose(np.asarray(jax.hessian(loss)(x)), np.diag(want), rtol=RTOL, atol=0)


@pytest.mark.parametrize("shared", ["scalar", pytest.param("matrix table", marks=pytest.mark.full)])
def test_hessian_with_respect_to_a_shared_parameter_sums_the_members(shared):
    """Forward over reverse with respect to a parameter every member shares (one row in the
    differentiated run): the sum over members of each member's own hessian."""
    if shared == "scalar":
        batched = abir.Context().batch_uncurried(damped)
        got = jax.hessian(lambda w: batched(jnp.asarray(X), w, N, backend=BACKEND).sum())(jnp.float64(W))
        members = [jax.hessian(lambda w, x=x, n=int(n): damped(x, w, n))(jnp.float64(W)) for x, n in zip(X, N, strict=True)]
    else:
        batched = abir.Context().batch_uncurried(table_model)
        got = jax.hessian(lambda t: batched(jnp.asarray(PAIRS), t[None], K, N, backend=BACKEND).sum())(jnp.asarray(TABLE))
        members = [
            jax.hessian(lambda t, x=x, k=int(k), n=int(n): table_model(jnp.asarray(x), t, k, n))(jnp.asarray(TABLE))
            for x, k, n in zip(PAIRS, K, N, strict=True)
        ]
    np.testing.assert_allclose(np.asarray(got), np.sum([np.asarray(m) for m in members], axis=0), rtol=RTOL, atol=1e-12)


@pytest.mark.parametrize("order", ["vmap of grad", "grad of vmap"])
def test_grad_and_vmap_compose(order):
    xs = jnp.asarray(np.stack([X, X * 0.5 + 0.1]))

    def loss(x):
        return PROGRAMS["power"](x, N, backend=BACKEND).sum()

    if order == "vmap of grad":
        got = jax.vmap(jax.grad(loss))(xs)
    else:
        got = jax.grad(lambda xs: jax.vmap(lambda x: PROGRAMS["power"](x, N, backend=BACKEND))(xs).sum())(xs)
    want = [[float(jax.grad(lambda v, n=int(n): power(v, n))(jnp.float64(v))) for v, n in zip(row, N, strict=True)] for row in np.asarray(xs)]
    np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL)


def test_integer_results_carry_no_gradient():
    x = jnp.asarray([1.0, 10.0, 1000.0, 0.2])
    (halved, steps), pull = jax.vjp(lambda x: PROGRAMS["halving_steps"](x, 0.3, backend=BACKEND), x)
    want_halved, want_steps = PROGRAMS["halving_steps"](np.asarray(x), 0.3, dry_run=True)
    np.testing.assert_array_equal(np.asarray(steps), want_steps)
    np.testing.assert_allclose(np.asarray(halved), want_halved, rtol=RTOL)
    (dx,) = pull((jnp.ones_like(halved), np.zeros(steps.shape, jax.dtypes.float0)))
    np.testing.assert_allclose(np.asarray(dx), 0.5**want_steps, rtol=RTOL)


LONG_N = (9, 2, 6, 0, 8, 5)
"""Trip counts of `damped` for the tests of runs longer than their log or tape."""


@functools.cache
def damped_per_member_gradients(n):
    """(d/dx per member, d/dw summed over members) of `damped` with trip counts `n` (a tuple), by
    jax.grad member by member."""
    want = [jax.grad(lambda x, w, k=k: damped(x, w, k), argnums=(0, 1))(jnp.float64(x), W) for x, k in zip(X, n, strict=True)]
    return [float(g[0]) for g in want], sum(float(g[1]) for g in want)


def damped_gradients_agree(n):
    """d/dx and d/dw of `damped` batched (a context of its own: a new trace) equal jax.grad per member."""
    context = abir.Context()
    long_damped = context.batch_uncurried(damped)
    dx, dw = jax.grad(lambda x, w: long_damped(x, w, np.array(n), backend=abir.JaxBackend()).sum(), argnums=(0, 1))(jnp.asarray(X), W)
    want_dx, want_dw = damped_per_member_gradients(n)
    np.testing.assert_allclose(np.asarray(dx), want_dx, rtol=RTOL)
    np.testing.assert_allclose(float(dw), want_dw, rtol=RTOL)


# make test: a log of three (the rounds over the forward log are the same loops for any length)
@pytest.mark.parametrize("entries", [pytest.param(2, marks=pytest.mark.full), 3])
def test_a_run_longer_than_its_undo_log_replays_from_the_start(monkeypatch, entries):
    """An undo log of two or three sweeps for runs of at least 10: the backward pass undoes the
    sweeps the log holds, replays the run from its start to refill the log, and so on."""
    monkeypatch.setattr(reverse_scheme, "MAX_UNDO_ENTRIES", entries)
    damped_gradients_agree(LONG_N)


@pytest.mark.parametrize("replay_bytes", [16, 5])
def test_a_run_longer_than_its_forward_log_replays_its_first_sweeps_into_a_longer_log(monkeypatch, replay_bytes):
    """A forward log of two sweeps (entries of one byte each for the size arithmetic) for runs of
    up to 10: the backward pass undoes those two, then replays the first sweeps from the start
    into a log of the shortest replay length that holds them (4 or 16), or, when the memory for
    replays holds only 5 entries, by rounds over a log of 5 (4 being too close to 5 to be
    offered). Replay memory for 16 entries offers only the lengths these runs take (each length
    is a copy of the backward pass's loops to compile)."""
    monkeypatch.setattr(reverse_scheme, "spec_bytes", lambda specs: 1)
    monkeypatch.setattr(reverse_scheme, "UNDO_TAPE_BYTES", 2)
    monkeypatch.setattr(reverse_scheme, "REPLAY_LOG_BYTES", replay_bytes)
    assert reverse_scheme.replay_lengths(2, 1) == ((4, 16) if replay_bytes == 16 else (5,))
    damped_gradients_agree(LONG_N)


def test_a_recursive_run_longer_than_its_undo_log_restores_its_stacks(monkeypatch):
    """Tree recursion with an undo log of three sweeps: the stacks' overwritten rows are restored
    sweep by sweep, across replays."""
    monkeypatch.setattr(reverse_scheme, "MAX_UNDO_ENTRIES", 3)
    context = abir.Context()
    recursive = context.batch_uncurried(tree_sum)
    want_values, want_dx, want_dw = per_member_gradients("tree_sum")
    value, (dx, dw) = jax.value_and_grad(lambda x, w: recursive(x, w, N, backend=abir.JaxBackend()).sum(), argnums=(0, 1))(
        jnp.asarray(X), W
    )
    np.testing.assert_allclose(float(value), want_values.sum(), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(dx), want_dx, rtol=RTOL)
    np.testing.assert_allclose(float(dw), want_dw[0], rtol=RTOL)


class FakeKernel:
    """A kernel as `reverse_scheme.stack_windows` sees it: its write requests and pops per stack."""

    def __init__(self, writes, pops):
        self.writes = writes
        self.pops = pops


def test_a_stacks_undo_window_holds_the_rows_a_sweeps_blocks_may_pop():
    """A stack's window is the sum of its blocks' pops (each block runs once per sweep), at most
    its depth; a stack never pushed, or never popped, needs none."""
    specs = {"s:a": ((8, 4), np.float64), "s:b": ((2, 4), np.float64), "s:c": ((8, 4), np.float64), "s:d": ((8, 4), np.float64)}
    kernels = [
        FakeKernel({"s:a": 1, "s:b": 1, "s:c": 1}, (("s:a", "sp:a", 1), ("s:b", "sp:b", 2))),
        FakeKernel({}, (("s:a", "sp:a", 2), ("s:b", "sp:b", 1), ("s:d", "sp:d", 1))),
    ]
    windows = reverse_scheme.stack_windows(kernels, specs)
    assert windows == [reverse_scheme.StackWindow("s:a", "sp:a", 3), reverse_scheme.StackWindow("s:b", "sp:b", 2)]


# make test: the same undo through test_a_recursive_run_longer_than_its_undo_log_restores_its_stacks
@pytest.mark.full
def test_a_block_popping_then_pushing_the_same_stack_differentiates():
    """A member pops a saved value and pushes another in its place within one sweep: the undo
    restores the row it overwrote (recursion whose two calls follow each other)."""
    want_values, want_dx, want_dw = per_member_gradients("tree_sum")
    value, (dx, dw) = jax.value_and_grad(lambda x, w: batched_call("tree_sum", x, [w]).sum(), argnums=(0, 1))(jnp.asarray(X), W)
    np.testing.assert_allclose(float(value), want_values.sum(), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(dx), want_dx, rtol=RTOL)
    np.testing.assert_allclose(float(dw), want_dw[0], rtol=RTOL)


def test_undo_log_length_follows_the_entrys_size():
    assert reverse_scheme.undo_length(1) == reverse_scheme.MAX_UNDO_ENTRIES
    assert reverse_scheme.undo_length(reverse_scheme.UNDO_TAPE_BYTES // 10) == 10
    assert reverse_scheme.undo_length(reverse_scheme.UNDO_TAPE_BYTES * 4) == 2  # the least a log holds


def test_replay_log_lengths_grow_by_their_ratio_up_to_their_memory():
    """Lengths 2 L, 2 L r, ... (r = REPLAY_LOG_RATIO) for a forward log of L entries, then the
    longest that REPLAY_LOG_BYTES holds (less a length over half the longest); only L when the
    longest would hold fewer than 2 L."""
    ratio, entry = reverse_scheme.REPLAY_LOG_RATIO, 1000
    longest = min(reverse_scheme.MAX_UNDO_ENTRIES, reverse_scheme.REPLAY_LOG_BYTES // entry)
    lengths = reverse_scheme.replay_lengths(8, entry)
    assert lengths[0] == 16 and lengths[-1] == longest
    assert all(longer == shorter * ratio for shorter, longer in zip(lengths[:-2], lengths[1:-1], strict=True))
    assert lengths[-2] < longest <= lengths[-2] * ratio
    assert reverse_scheme.replay_lengths(30, reverse_scheme.REPLAY_LOG_BYTES // 20) == (30,)
    assert reverse_scheme.replay_lengths(30, reverse_scheme.REPLAY_LOG_BYTES // 59) == (30,)
    assert reverse_scheme.replay_lengths(30, reverse_scheme.REPLAY_LOG_BYTES // 60) == (60,)
    assert reverse_scheme.replay_lengths(30, reverse_scheme.REPLAY_LOG_BYTES // 119) == (119,)  # not (60, 119)
    assert reverse_scheme.replay_lengths(30, reverse_scheme.REPLAY_LOG_BYTES // 120) == (60, 120)


@pytest.mark.parametrize("checkpoints", [2, 4])
def test_a_run_longer_than_its_tape_thins_checkpoints_and_recomputes(monkeypatch, checkpoints):
    """Without an undo log (as for blocks writing whole spans of stack rows): two or four
    checkpoints for runs of at least 10 sweeps: the stride doubles, the backward pass recomputes
    segments (with two, every other state of a segment: substride 2 or more)."""
    monkeypatch.setattr(reverse, "undo_loggable", lambda kernels: False)
    monkeypatch.setattr(reverse_scheme, "MAX_CHECKPOINTS", checkpoints)
    damped_gradients_agree(LONG_N)


def test_tape_length_follows_the_states_size():
    def state_bytes(*shape):
        return reverse_scheme.spec_bytes({"pc": (shape[-1:], np.int32), "s:x": (shape, np.float64)})

    assert reverse_scheme.tape_length(state_bytes(15, 4)) == reverse_scheme.MAX_CHECKPOINTS
    mebibyte = state_bytes(16, 2**13)  # 1 MiB of floats, 32 KiB of program counters
    fitting = reverse_scheme.TAPE_BYTES // (2**20 + 2**15) // 2 * 2
    assert 2 < fitting < reverse_scheme.MAX_CHECKPOINTS
    assert reverse_scheme.tape_length(mebibyte) == fitting
    assert reverse_scheme.tape_length(state_bytes(15, 2**20)) == 2  # larger than TAPE_BYTES: the least a tape holds


def test_lanes_are_not_differentiated():
    with pytest.raises(ValueError, match=r"lanes=\.\.\.\) runs outside traced functions"):
        jax.grad(lambda x: PROGRAMS["power"](x, N, backend=BACKEND, lanes=2).sum())(jnp.asarray(X))


def test_grad_of_a_jit_compiled_call_is_jaxs_linearization_error():
    """jax.jit traced the call before jax.grad saw it: the machine's loop is already a plain while
    loop (put jax.jit outside jax.grad instead, as test_grad_under_jit_vjp_and_jacrev does)."""
    compiled = jax.jit(lambda x: PROGRAMS["power"](x, N, backend=BACKEND))
    with pytest.raises(ValueError, match="Linearization failed to produce known values"):
        jax.grad(lambda x: compiled(x).sum())(jnp.asarray(X))


def test_a_run_error_under_grad_is_a_staged_error():
    """As in any run staged into a JAX computation: the callback raises abir's error."""
    n = N.copy()
    n[1] = 40
    with pytest.raises(jax.errors.JaxRuntimeError, match="stack overflow in function 'power'") as raised:
        jax.block_until_ready(jax.jit(jax.grad(lambda x: PROGRAMS["power"](x, n, backend=BACKEND).sum()))(jnp.asarray(X)))
    assert abir.staged_error(raised.value).members == [1]


def test_reverse_over_forward_is_a_type_error_naming_forward_over_reverse():
    def call(x):
        return PROGRAMS["power"](x, N, backend=BACKEND)

    with pytest.raises(TypeError, match=r"reverse mode .* of forward mode .*jax.hessian, jax.jacfwd\(jax.grad\(f\)\)"):
        jax.grad(lambda x: jax.jvp(call, (x,), (jnp.ones_like(x),))[1].sum())(jnp.asarray(X))


def logged_states(monkeypatch):
    """The initial states of the undo-logged runs traced while the returned list is watched
    (a program of a fresh context: a compiled run would not be traced again)."""
    states = []
    logged_run = reverse.undo_logged_run

    def watched(scheme, state):
        states.append(state)
        return logged_run(scheme, state)

    monkeypatch.setattr(reverse, "undo_logged_run", watched)
    return states


TABLE = np.array([[[0.9, -0.4], [0.3, 0.7]], [[-0.5, 0.2], [0.8, 0.1]], [[0.6, 0.6], [-0.2, 0.4]]])
PAIRS = np.stack([X, X[::-1] * 0.5], axis=1)
K = np.array([0, 2, 1, 1, 0, 2])


# make test: the padded batch, whose run holds the table as one row as the unpadded one does
@pytest.mark.parametrize("pad_batch", [pytest.param(False, marks=pytest.mark.full), True])
def test_a_shared_parameter_stays_one_row_and_its_cotangent_is_the_sum_over_members(monkeypatch, pad_batch):
    """A matrix table shared by all members, indexed per member: the differentiated run holds it
    as one row (no per-member copy), and its cotangent equals the sum over members of jax.grad
    of the per-member function; so does that of the per-member inputs, with the batch padded
    too (the padding rows are members halted from the start)."""
    states = logged_states(monkeypatch)
    batched = abir.Context().batch_uncurried(table_model)
    value, (dx, dtable) = jax.value_and_grad(
        lambda x, table: batched(x, table[None], K, N, backend=abir.JaxBackend(), pad_batch=pad_batch).sum(), argnums=(0, 1)
    )(jnp.asarray(PAIRS), jnp.asarray(TABLE))
    (state,) = states
    assert state["r:table_model.table"].shape == (1, *TABLE.shape)
    assert state["pc"].shape == (8 if pad_batch else len(X),)
    want_value, want_dx, want_dtable = 0.0, [], np.zeros_like(TABLE)
    for x, k, n in zip(PAIRS, K, N, strict=True):
        v, (gx, gt) = jax.value_and_grad(lambda x, t, k=int(k), n=int(n): table_model(x, t, k, n), argnums=(0, 1))(
            jnp.asarray(x), jnp.asarray(TABLE)
        )
        want_value += float(v)
        want_dx.append(np.asarray(gx))
        want_dtable += np.asarray(gt)
    np.testing.assert_allclose(float(value), want_value, rtol=RTOL)
    np.testing.assert_allclose(np.asarray(dx), np.stack(want_dx), rtol=RTOL)
    np.testing.assert_allclose(np.asarray(dtable), want_dtable, rtol=RTOL)


def test_a_shared_argument_the_program_assigns_becomes_per_member(monkeypatch):
    """`rescaled` assigns its shared `w`: the run spreads it to every member, as without reverse
    mode, and the derivatives stay those of jax.grad per member."""
    states = logged_states(monkeypatch)
    monkeypatch.setitem(PROGRAMS, "rescaled", abir.Context().batch_uncurried(rescaled))
    test_value_and_grad_equals_jax_grad_per_member("rescaled")
    (state,) = states
    assert state["r:rescaled.w"].shape == (len(X),)


def logged_schemes(monkeypatch):
    """The undo schemes of the runs traced while the returned list is watched."""
    schemes = []
    logged_run = reverse.undo_logged_run

    def watched(scheme, state):
        schemes.append(scheme)
        return logged_run(scheme, state)

    monkeypatch.setattr(reverse, "undo_logged_run", watched)
    return schemes


@pytest.mark.parametrize("name", ["damped", pytest.param("tree_sum", marks=pytest.mark.full)])
def test_the_pull_back_goes_block_by_block_and_equals_the_vjp_of_the_whole_sweep(monkeypatch, name):
    """The backward step through one sweep, at states where each block has members and where
    none does: equal to `jax.vjp` of the whole sweep, staged as one conditional per block that
    runs it again and one that pulls back through it, with no conditional inside the latter
    (the vjp of the block alone)."""
    schemes = logged_schemes(monkeypatch)
    monkeypatch.setitem(PROGRAMS, name, abir.Context().batch_uncurried(globals()[name]))
    jax.grad(lambda x: batched_call(name, x, CASES[name][1]).sum())(jnp.asarray(X))
    (scheme,) = schemes
    rng = np.random.default_rng(1)
    pull_back = jax.jit(scheme.pull_back)

    @jax.jit
    def whole_sweep_vjp(state, adjoint):
        others = {key: value for key, value in state.items() if key not in floats}
        _, pull = jax.vjp(lambda f: {key: scheme.sweep({**others, **f})[key] for key in floats}, {key: state[key] for key in floats})
        return pull(adjoint)[0]

    floats = [key for key, (_, dtype) in scheme.specs.items() if np.issubdtype(dtype, np.floating)]
    for pcs in ([0] * len(X), rng.integers(0, scheme.halt_index + 1, len(X)), [scheme.halt_index] * len(X)):
        state = {key: jnp.asarray(rng.normal(size=shape) if key in floats else np.zeros(shape), dtype) for key, (shape, dtype) in scheme.specs.items()}
        state["pc"] = jnp.asarray(pcs, jnp.int32)
        adjoint = {key: jnp.asarray(rng.normal(size=state[key].shape)) for key in floats}
        want, got = whole_sweep_vjp(state, adjoint), pull_back(state, adjoint)
        for key in floats:
            np.testing.assert_allclose(np.asarray(got[key]), np.asarray(want[key]), rtol=RTOL, atol=1e-12, err_msg=key)
    conds = [eqn for eqn in jax.make_jaxpr(scheme.pull_back)(state, adjoint).eqns if eqn.primitive.name == "cond"]
    backward = conds[len(conds) // 2 :]
    assert len(conds) % 2 == 0 and backward
    assert not any(inner.primitive.name == "cond" for eqn in backward for branch in eqn.params["branches"] for inner in branch.jaxpr.eqns)
