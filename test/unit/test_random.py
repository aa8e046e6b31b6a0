"""abir.random: Threefry-2x32 draws, bit-identical to JAX's, the same per member on every backend.

* known answers: the Random123 vectors of Threefry-2x32-20 and JAX's own `jax.random` (the
  block, `key`, `fold_in`, `split`, `bits`, `uniform`);
* each function on NumPy, JAX and TensorFlow arrays (eager and XLA) equals the member-by-member
  NumPy run: exactly, except `normal` (transcendentals: a few ulps);
* batched through abir (loops whose trip counts depend on the draws) equals the per-member
  Python run on every backend;
* cheap statistical sanity and the argument errors.
"""

from __future__ import annotations

import doctest

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorflow as tf
from conftest import backend_params
from jax.extend.random import threefry_2x32 as jax_threefry_2x32

import abir
from abir import random as R
from abir.backend_registry import spec_named


@pytest.fixture(autouse=True)
def jax_x64():
    """JAX's own draws compared here are float64 and take 64-bit seeds: 64-bit JAX for every test
    of this module (abir scopes its own runs to 64-bit; the comparisons made outside them)."""
    with jax.enable_x64(True):
        yield

# ----- known answers ---------------------------------------------------------------------------

# Threefry-2x32 with 20 rounds, from the known-answer file of the Random123 library
# (key, counter) -> output words.
RANDOM123_VECTORS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


@pytest.mark.parametrize(("key", "counter", "expected"), RANDOM123_VECTORS)
def test_threefry_known_answers(key, counter, expected):
    y0, y1 = R.threefry2x32(np.array(key, np.uint32), np.uint32(counter[0]), np.uint32(counter[1]))
    assert (int(y0), int(y1)) == expected


def test_threefry_block_equals_jax():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 2**32, (8, 2), dtype=np.uint64).astype(np.uint32)
    counters = rng.integers(0, 2**32, (8, 2), dtype=np.uint64).astype(np.uint32)
    for key, counter in zip(keys, counters, strict=True):
        want = np.asarray(jax_threefry_2x32(jnp.asarray(key), jnp.asarray(counter)))
        got = R.threefry2x32(key, counter[0], counter[1])
        np.testing.assert_array_equal(np.array(got), want)
    # broadcasting over whole arrays of keys and counters gives the same words
    y0, y1 = R.threefry2x32(keys, counters[:, 0], counters[:, 1])
    for b in range(len(keys)):
        want = np.asarray(jax_threefry_2x32(jnp.asarray(keys[b]), jnp.asarray(counters[b])))
        np.testing.assert_array_equal([y0[b], y1[b]], want)


@pytest.fixture
def partitionable_jax():
    with jax.threefry_partitionable(True):
        yield


@pytest.mark.parametrize("seed", [0, 42, 2**40 + 17])
def test_keys_equal_jax(partitionable_jax, seed):
    jax_key = jax.random.key(seed)
    np.testing.assert_array_equal(R.key(seed), jax.random.key_data(jax_key))
    np.testing.assert_array_equal(R.fold_in(R.key(seed), 12345), jax.random.key_data(jax.random.fold_in(jax_key, 12345)))
    np.testing.assert_array_equal(np.stack(R.split(R.key(seed), 3)), jax.random.key_data(jax.random.split(jax_key, 3)))


@pytest.mark.parametrize("seed", [0, 7, 2**33 + 5])
def test_draw_zero_equals_jax(partitionable_jax, seed):
    """Draw 0 is JAX's draw with the same key; draw c is element c * 2**32 + i of JAX's stream."""
    jax_key, key = jax.random.key(seed), R.key(seed)
    shape = (3, 5)
    np.testing.assert_array_equal(R.bits(key, 0, shape), jax.random.bits(jax_key, shape, dtype=jnp.uint32))
    for dtype in (np.float32, np.float64):
        np.testing.assert_array_equal(R.uniform(key, 0, shape, dtype), jax.random.uniform(jax_key, shape, dtype))
    y0, y1 = R.threefry2x32(key, 9, np.arange(4))
    np.testing.assert_array_equal(R.bits(key, 9, 4), y0 ^ y1)


# ----- the same draws on every array library ------------------------------------------------------

MEMBERS = 5
KEYS = R.fold_in(R.key(2024), np.arange(MEMBERS))
COUNTERS = np.array([0, 1, 2**31 + 3, 77, -4], np.int64)

CALLS = {
    "key": (R.key, (np.array([0, 1, -1, 2**40, 99], np.int64),)),
    "fold_in": (R.fold_in, (KEYS, COUNTERS)),
    "bits": (R.bits, (KEYS, COUNTERS, (2, 3))),
    "uniform64": (R.uniform, (KEYS, COUNTERS, (4,))),
    "uniform32": (R.uniform, (KEYS, COUNTERS, (4,), np.float32)),
    "uniform-scalar": (R.uniform, (KEYS, COUNTERS)),
    "normal64": (R.normal, (KEYS, COUNTERS, (3,))),
    "normal32": (R.normal, (KEYS, COUNTERS, (), np.float32)),
    "bernoulli": (R.bernoulli, (KEYS, COUNTERS, np.array([0.0, 0.3, 0.5, 0.9, 1.0]), (6,))),
    "randint": (R.randint, (KEYS, COUNTERS, np.array([0, -5, 10, 0, 3]), np.array([1, 5, 2**32 + 10, 7, 4]), (6,))),
    "randint32": (R.randint, (KEYS, COUNTERS, 0, 100, (), np.int32)),
}


def _per_member(fn, args):
    """fn member by member on one member's NumPy values (the plain Python run)."""
    rows = [fn(*(a[b] if isinstance(a, np.ndarray) else a for a in args)) for b in range(MEMBERS)]
    return np.stack([np.asarray(r) for r in rows])


def _on_library(fn, args, library):
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    if library == "numpy":
        return np.asarray(fn(*args))
    if library == "jax":
        return np.asarray(jax.jit(lambda *xs: fn(*_fill(args, arrays, xs)))(*(args[i] for i in arrays)))
    compiled = tf.function(lambda *xs: fn(*_fill(args, arrays, xs)), jit_compile=library == "tf-xla")
    if library == "tf-eager":
        compiled = lambda *xs: fn(*_fill(args, arrays, xs))  # noqa: E731
    return compiled(*(tf.constant(args[i]) for i in arrays)).numpy()


def _fill(args, positions, values):
    full = list(args)
    for i, value in zip(positions, values, strict=True):
        full[i] = value
    return full


def _assert_draws_equal(got, want, name):
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, got.shape, want.dtype, want.shape)
    if name.startswith("normal"):
        np.testing.assert_allclose(got, want, rtol=1e-12 if want.dtype == np.float64 else 1e-6, err_msg=name)
    else:
        np.testing.assert_array_equal(got, want, err_msg=name)


# tf.function without XLA runs the kernels TF's eager mode runs: under `full` only
@pytest.mark.parametrize("library", ["numpy", "jax", "tf-eager", pytest.param("tf", marks=pytest.mark.full), "tf-xla"])
@pytest.mark.parametrize("name", list(CALLS))
def test_same_draws_on_every_library(name, library):
    fn, args = CALLS[name]
    _assert_draws_equal(_on_library(fn, args, library), _per_member(fn, args), name)


def test_split_on_every_library():
    want = np.stack([np.stack(R.split(KEYS[b], 3)) for b in range(MEMBERS)])  # [B, 3, 2]
    np.testing.assert_array_equal(np.stack(R.split(KEYS, 3), axis=1), want)
    np.testing.assert_array_equal(np.stack(jax.jit(lambda k: R.split(k, 3))(KEYS), axis=1), want)
    got = tf.function(lambda k: R.split(k, 3), jit_compile=True)(tf.constant(KEYS))
    np.testing.assert_array_equal(np.stack([t.numpy() for t in got], axis=1), want)


def test_draws_depend_on_key_counter_and_element():
    key = R.key(5)
    draws = [R.bits(key, 0, 4), R.bits(key, 1, 4), R.bits(R.fold_in(key, 1), 0, 4)]
    words = np.concatenate(draws)
    assert len(set(words.tolist())) == len(words)


# ----- batched by abir ---------------------------------------------------------------------------

SHARED_KEY = R.key(99)  # a closure constant: every member draws from it with its own counter


def random_walk(seed, threshold):
    """Normal steps until |position| >= threshold: the trip count differs per member."""
    key = abir.random.key(seed)
    position = 0.0
    steps = 0
    while position * position < threshold * threshold:
        position = position + abir.random.normal(key, steps)
        steps += 1
    return position, steps


def dice_and_coins(key, n):
    """n rounds of a coin, a die and a float32 uniform, then a few vector draws."""
    heads = 0
    pips = 0
    total = 0.0
    i = 0
    while i < n:
        if abir.random.bernoulli(key, i, 0.3):
            heads += 1
        pips = pips + abir.random.randint(key, i, 1, 7)
        total = total + abir.random.uniform(key, i, dtype=np.float32)
        i += 1
    words = abir.random.bits(key, n, shape=(3,))
    shared = abir.random.uniform(SHARED_KEY, n, shape=(2,))
    return heads, pips, total, words, shared


def derived_keys(key, n):
    """Keys split and folded inside the batched function."""
    key, sub = abir.random.split(key)
    count = 0
    for j in range(n):
        if abir.random.uniform(abir.random.fold_in(sub, j), 0) < 0.5:
            count += 1
    return key, count, abir.random.normal(key, count, shape=(2,), dtype=np.float32)


def _context_functions():
    ctx = abir.Context()
    return {fn.__name__: ctx.batch_uncurried(fn) for fn in (random_walk, dice_and_coins, derived_keys)}


FUNCTIONS = _context_functions()

BACKENDS = {name: spec_named(name).backend_class() for name in backend_params()} | {
    "tf-xla": lambda: abir.TensorFlowBackend(jit_compile=True),
}

BATCHED_CASES = {
    "random_walk": (random_walk, (np.arange(6, dtype=np.int64), np.array([0.5, 1.0, 2.0, 3.0, 1.5, 2.5]))),
    "dice_and_coins": (dice_and_coins, (KEYS, np.array([0, 3, 10, 1, 6], np.int64))),
    "derived_keys": (derived_keys, (KEYS, np.array([4, 0, 7, 2, 9], np.int64))),
}


def _assert_member_equal(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


# TF compiles these programs with XLA by default, as tf-xla requires: "tf" under `full` only
@pytest.mark.parametrize(
    "backend",
    [pytest.param(backend, id=name, marks=[pytest.mark.full] if name == "tf" else []) for name, backend in BACKENDS.items()],
)
@pytest.mark.parametrize("case", list(BATCHED_CASES))
def test_batched_equals_per_member(case, backend):
    program, args = BATCHED_CASES[case]
    results = FUNCTIONS[case](*args, backend=backend())
    batch = len(args[0])
    for b in range(batch):
        want = program(*(a[b] for a in args))
        for k, (g, w) in enumerate(zip(results, want, strict=True)):
            _assert_member_equal(np.asarray(g)[b], w, f"{case} member {b} result {k}")
    if case == "random_walk":
        assert len(set(np.asarray(results[1]).tolist())) > 1, "members should take different numbers of steps"


def test_dry_run_is_the_per_member_run():
    program, args = BATCHED_CASES["dice_and_coins"]
    one = tuple(a[2:3] for a in args)
    got = FUNCTIONS["dice_and_coins"](*one, dry_run=True)
    want = program(*(a[2] for a in args))
    for g, w in zip(got, want, strict=True):
        _assert_member_equal(np.asarray(g).reshape(np.shape(w)), w, "dry_run")


def shape_per_member(key, n):
    return abir.random.uniform(key, 0, shape=n)


def key_of_wrong_dtype(seed):
    return abir.random.uniform(seed, 0)


@pytest.mark.parametrize(
    ("program", "args", "message"),
    [
        (shape_per_member, (KEYS, np.arange(MEMBERS)), "`shape` must be an int or a tuple of ints known"),
        (key_of_wrong_dtype, (np.arange(MEMBERS),), "`key` must be a uint32 array with a last axis of 2"),
    ],
    ids=["shape", "key"],
)
def test_misuse_inside_a_batched_function(program, args, message):
    """Caught when the program is compiled (the draws run on dummies then), as an abir error."""
    batched = abir.Context().batch_uncurried(program)
    with pytest.raises(abir.AbirError, match=message) as caught:
        batched(*args, backend=abir.NumpyBackend())
    assert isinstance(caught.value, TypeError)


# ----- statistics --------------------------------------------------------------------------------

N = 100_000


def _within(value, expected, standard_error):
    assert abs(value - expected) < 5 * standard_error, (value, expected, standard_error)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_uniform_moments(dtype):
    u = R.uniform(R.key(1), 3, shape=N, dtype=dtype).astype(np.float64)
    assert u.min() >= 0.0 and u.max() < 1.0
    _within(u.mean(), 0.5, np.sqrt(1 / 12 / N))
    _within(u.var(), 1 / 12, np.sqrt(1 / 180 / N))  # var of (u - 1/2)**2 is 1/180
    # consecutive counters and neighbouring keys are uncorrelated
    v = R.uniform(R.key(1), 4, shape=N)
    w = R.uniform(R.key(2), 3, shape=N)
    _within(np.corrcoef(u, v)[0, 1], 0.0, 1 / np.sqrt(N))
    _within(np.corrcoef(u, w)[0, 1], 0.0, 1 / np.sqrt(N))


def test_normal_moments():
    z = R.normal(R.key(2), 0, shape=N)
    _within(z.mean(), 0.0, 1 / np.sqrt(N))
    _within(z.var(), 1.0, np.sqrt(2 / N))
    _within(np.mean(z**3), 0.0, np.sqrt(15 / N))
    _within(np.mean(np.abs(z) < 1.0), 0.6826894921370859, np.sqrt(0.22 / N))


def test_bernoulli_and_randint_frequencies():
    heads = R.bernoulli(R.key(3), 0, 0.2, shape=N)
    _within(heads.mean(), 0.2, np.sqrt(0.16 / N))
    faces = R.randint(R.key(3), 1, -2, 4, shape=N)
    counts = np.bincount(faces + 2, minlength=6)
    assert faces.min() == -2 and faces.max() == 3
    np.testing.assert_allclose(counts / N, 1 / 6, atol=5 * np.sqrt(5 / 36 / N))


# ----- errors and documentation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: R.uniform(np.array([1, 2]), 0), r"`key` must be a uint32 array with a last axis of 2 .* got an array of dtype int64"),
        (lambda: R.uniform(np.zeros(3, np.uint32), 0), r"`key` must be a uint32 array .* shape \(3,\)"),
        (lambda: R.uniform([0, 1], 0), "`key` must be a uint32 array"),
        (lambda: R.normal(R.key(0), 1.5), "`counter` must be an integer"),
        (lambda: R.bits(R.key(0), True), "`counter` must be an integer"),
        (lambda: R.key(2.0), "`seed` must be an integer"),
        (lambda: R.uniform(R.key(0), 0, shape=(2.5,)), "`shape` must be an int or a tuple of ints"),
        (lambda: R.uniform(R.key(0), 0, dtype=np.int32), "`dtype` must be np.float32 or np.float64"),
        (lambda: R.randint(R.key(0), 0, 0.0, 5), "`low` must be an integer"),
        (lambda: R.randint(R.key(0), 0, 0, 5, dtype=np.float64), "`dtype` must be np.int32 or np.int64"),
        (lambda: R.bernoulli(R.key(0), 0, "half"), "`p` must be a real number"),
        (lambda: R.split(R.key(0), 0), "`num` must be a positive Python int"),
    ],
)
def test_argument_errors(call, message):
    with pytest.raises(TypeError, match=message):
        call()


def test_shape_too_large():
    with pytest.raises(ValueError, match="at most 2\\*\\*32 elements"):
        R.bits(R.key(0), 0, shape=(2**16, 2**16 + 1))


def test_docstring_examples():
    result = doctest.testmod(R, extraglobs={"abir": abir, "np": np})
    assert result.attempted > 10 and result.failed == 0
