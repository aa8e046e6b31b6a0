"""Counter-based random numbers: the same draws for a member on every backend and in plain Python.

A batched function cannot hold a stateful generator (`np.random.default_rng()`): members would
share it and their draws would depend on the batch. Here a draw is a pure function of the
member's key and a counter the program carries (a transition index, a draw number), so member
`b` draws the same numbers in the per-member Python run, in `dry_run` and in a batch of any size
or composition, on NumPy, JAX and TensorFlow (with or without XLA):

    key = abir.random.key(seed)                       # uint32[2] per member
    p = abir.random.normal(key, counter, shape=(dim,))
    if abir.random.uniform(key, counter + 1) < accept:
        ...
    counter = counter + 2                             # never reuse a (key, counter) pair

The generator is Threefry-2x32 with 20 rounds (Salmon, Moraes, Dror and Shaw, "Parallel random
numbers: as easy as 1, 2, 3", SC 2011), the generator of `jax.random`. Element `i` of draw
`counter` is the block of the key and the counter words `(counter mod 2**32, i)`: that is
element `counter * 2**32 + i` of the stream JAX draws from a key (in its default
`jax_threefry_partitionable` mode), so for counter 0 `bits` and `uniform` equal
`jax.random.bits` and `jax.random.uniform` of the same key bit for bit (float64 with
`jax_enable_x64`). `key`, `fold_in` and `split` are JAX's as well.

Called inside a batched function these are opaque primitives (see the README, "Writing batched
functions"): they get whole-batch arrays of the backend (NumPy arrays, JAX arrays or tracers,
TensorFlow tensors or the `NumpyTensor`s abir hands to helpers) and compute with that library's
ops. Every argument except `shape` and `dtype` is one value per member (a scalar in the
per-member code), broadcast NumPy-style; the draws have shape `lead + shape`, `lead` the shape of
those arguments together (`[B]` in a batch, `()` for one member).

What is exact: keys and `bits` are uint32 and bit-identical on every backend; `uniform` builds
its floats from the bits by exact operations (float32: the top 23 bits times 2**-23; float64:
52 bits times 2**-52), so it is bit-identical too, as are `bernoulli` and `randint`. `normal`
applies `log`, `cos` and `sqrt` in float64 (then rounds to the requested dtype): backends agree
to within a few ulps, not bit for bit.
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

Array = Any  # a NumPy, JAX or TensorFlow array, or a NumPy scalar

ROUNDS = 20
# Rotation distances of Threefry-2x32, round r using ROTATIONS[r % 8] (Salmon et al., table 4).
ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
# The constant of the key schedule's third word (Threefish's "C240" for 32-bit words).
KEY_PARITY = 0x1BD11BDA
MAX_DRAW_SIZE = 2**32  # elements per draw: the element index is one 32-bit word

__all__ = [
    "bernoulli",
    "bits",
    "fold_in",
    "key",
    "normal",
    "randint",
    "split",
    "threefry2x32",
    "uniform",
]


# ----- array namespaces ----------------------------------------------------------------------


class _ArrayOps:
    """The few operations the generator needs, on NumPy (`xp` = numpy) or JAX (`xp` = jax.numpy)
    arrays: uint32 additions wrap modulo 2**32, right shifts of unsigned words are logical."""

    def __init__(self, xp: Any):
        self.xp = xp

    def asarray(self, value: Any) -> Array:
        return self.xp.asarray(value)

    def output(self, value: Array) -> Array:
        return value

    def dtype(self, array: Array) -> np.dtype:
        return np.dtype(array.dtype)

    def static_shape(self, array: Array) -> tuple[int | None, ...]:
        return tuple(array.shape)

    def cast(self, array: Array, dtype: Any) -> Array:
        return self.xp.asarray(array).astype(dtype)

    def constant(self, value: Any, dtype: Any) -> Array:
        return self.xp.asarray(np.asarray(value, dtype))

    def add(self, a: Array, b: Array) -> Array:
        return self.xp.add(a, b)

    def subtract(self, a: Array, b: Array) -> Array:
        return self.xp.subtract(a, b)

    def multiply(self, a: Array, b: Array) -> Array:
        return self.xp.multiply(a, b)

    def xor(self, a: Array, b: Array) -> Array:
        return self.xp.bitwise_xor(a, b)

    def shift_left(self, a: Array, distance: int) -> Array:
        return self.xp.left_shift(a, self.constant(distance, self.dtype(a)))

    def shift_right(self, a: Array, distance: int) -> Array:
        return self.xp.right_shift(a, self.constant(distance, self.dtype(a)))

    def bitwise_or(self, a: Array, b: Array) -> Array:
        return self.xp.bitwise_or(a, b)

    def bitwise_and(self, a: Array, b: Array) -> Array:
        return self.xp.bitwise_and(a, b)

    def rotate_left(self, a: Array, distance: int) -> Array:
        """The uint32 words `a` rotated left by `distance` bits."""
        return self.bitwise_or(self.shift_left(a, distance), self.shift_right(a, 32 - distance))

    def less(self, a: Array, b: Array) -> Array:
        return self.xp.less(a, b)

    def clip(self, a: Array, low: Any, high: Any) -> Array:
        return self.xp.clip(a, low, high)

    def log(self, a: Array) -> Array:
        return self.xp.log(a)

    def cos(self, a: Array) -> Array:
        return self.xp.cos(a)

    def sqrt(self, a: Array) -> Array:
        return self.xp.sqrt(a)

    def expand_last(self, a: Array) -> Array:
        return self.xp.expand_dims(a, -1)

    def take_last(self, a: Array, index: int) -> Array:
        return a[..., index]

    def stack_last(self, arrays: Sequence[Array]) -> Array:
        return self.xp.stack(arrays, axis=-1)

    def reshape_last(self, a: Array, shape: tuple[int, ...]) -> Array:
        """`a` with its last axis replaced by the axes `shape` (of the same total size)."""
        return self.xp.reshape(a, (*a.shape[:-1], *shape))


class _TensorFlowOps(_ArrayOps):
    """The same operations on TensorFlow tensors (`tf.bitwise` for the bit operations, which
    TensorFlow's operators do not map). Results are `NumpyTensor`s again when the arguments
    were (abir's view of tensors inside helpers), so a helper can keep using NumPy operators."""

    def __init__(self, tf: Any, wrap: Any):
        self.tf = tf
        self.wrap = wrap

    def asarray(self, value: Any) -> Array:
        value = getattr(value, "tensor", value)  # a NumpyTensor's tensor
        if self.tf.is_tensor(value):
            return value
        return self.tf.convert_to_tensor(np.asarray(value))

    def output(self, value: Array) -> Array:
        return self.wrap(value) if self.wrap is not None else value

    def dtype(self, array: Array) -> np.dtype:
        return np.dtype(array.dtype.as_numpy_dtype)

    def cast(self, array: Array, dtype: Any) -> Array:
        return self.tf.cast(array, self.tf.as_dtype(np.dtype(dtype)))

    def constant(self, value: Any, dtype: Any) -> Array:
        return self.tf.constant(np.asarray(value, dtype))

    def add(self, a: Array, b: Array) -> Array:
        """Terms of different static shapes are broadcast first, as abir's TF backend does for
        its own sums: TF 2.21's graph optimizer miscomputes some sums of differently shaped
        terms inside loops and conditionals."""
        if a.shape.is_fully_defined() and b.shape.is_fully_defined() and a.shape != b.shape:
            shape = self.tf.broadcast_static_shape(a.shape, b.shape)
            a, b = self.tf.broadcast_to(a, shape), self.tf.broadcast_to(b, shape)
        return self.tf.math.add(a, b)

    def subtract(self, a: Array, b: Array) -> Array:
        return self.tf.math.subtract(a, b)

    def multiply(self, a: Array, b: Array) -> Array:
        return self.tf.math.multiply(a, b)

    def xor(self, a: Array, b: Array) -> Array:
        return self.tf.bitwise.bitwise_xor(a, b)

    def shift_left(self, a: Array, distance: int) -> Array:
        return self.tf.bitwise.left_shift(a, self.constant(distance, self.dtype(a)))

    def shift_right(self, a: Array, distance: int) -> Array:
        return self.tf.bitwise.right_shift(a, self.constant(distance, self.dtype(a)))

    def bitwise_or(self, a: Array, b: Array) -> Array:
        return self.tf.bitwise.bitwise_or(a, b)

    def bitwise_and(self, a: Array, b: Array) -> Array:
        return self.tf.bitwise.bitwise_and(a, b)

    def less(self, a: Array, b: Array) -> Array:
        return self.tf.math.less(a, b)

    def clip(self, a: Array, low: Any, high: Any) -> Array:
        dtype = self.dtype(a)
        return self.tf.clip_by_value(a, self.constant(low, dtype), self.constant(high, dtype))

    def log(self, a: Array) -> Array:
        return self.tf.math.log(a)

    def cos(self, a: Array) -> Array:
        return self.tf.math.cos(a)

    def sqrt(self, a: Array) -> Array:
        return self.tf.math.sqrt(a)

    def expand_last(self, a: Array) -> Array:
        return self.tf.expand_dims(a, -1)

    def stack_last(self, arrays: Sequence[Array]) -> Array:
        return self.tf.stack(arrays, axis=-1)

    def reshape_last(self, a: Array, shape: tuple[int, ...]) -> Array:
        tf = self.tf
        return tf.reshape(a, tf.concat([tf.shape(a)[:-1], tf.constant(shape, tf.int32)], 0))


class _NumpyOps(_ArrayOps):
    """NumPy's namespace; zero-dimensional results become NumPy scalars, as NumPy's own are."""

    def __init__(self) -> None:
        super().__init__(np)

    def output(self, value: Array) -> Array:
        return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


_NUMPY_OPS = _NumpyOps()


class _PythonWordOps:
    """The word operations `_threefry` uses, on Python ints holding uint32 values: one block of
    the per-member run (a scalar draw) costs a tenth of the same block on NumPy scalars."""

    MASK = 0xFFFFFFFF

    def constant(self, value: int, dtype: Any) -> int:
        return int(value)

    def add(self, a: int, b: int) -> int:
        return (a + b) & self.MASK

    def xor(self, a: int, b: int) -> int:
        return a ^ b

    def bitwise_or(self, a: int, b: int) -> int:
        return a | b

    def shift_left(self, a: int, distance: int) -> int:
        return (a << distance) & self.MASK

    def shift_right(self, a: int, distance: int) -> int:
        return a >> distance

    def rotate_left(self, a: int, distance: int) -> int:
        return ((a << distance) | (a >> (32 - distance))) & self.MASK


_PYTHON_WORDS = _PythonWordOps()


_NUMPY_TYPES = (np.ndarray, np.generic, int, float, bool)


def _ops_for(*values: Any) -> _ArrayOps:
    """The namespace of the arguments: TensorFlow if any is a tensor, else JAX if any is a JAX
    array (or tracer), else NumPy. Libraries not yet imported cannot have made an argument."""
    if all(isinstance(value, _NUMPY_TYPES) for value in values):
        return _NUMPY_OPS  # checked first: the per-member run calls these functions often
    tf_backend = sys.modules.get("abir.backends.tf")
    tf = sys.modules.get("tensorflow")
    for value in values:
        if tf_backend is not None and isinstance(value, tf_backend.NumpyTensor):
            return _TensorFlowOps(tf, lambda t, backend=value.backend: tf_backend.NumpyTensor(t, backend))
    if tf is not None and any(tf.is_tensor(value) for value in values):
        return _TensorFlowOps(tf, None)
    jax = sys.modules.get("jax")
    if jax is not None and any(isinstance(value, jax.Array) for value in values):
        import jax.numpy as jnp

        return _ArrayOps(jnp)
    return _NUMPY_OPS


# ----- Threefry-2x32 ---------------------------------------------------------------------------


def _threefry(ops: _ArrayOps, k0: Array, k1: Array, x0: Array, x1: Array) -> tuple[Array, Array]:
    """Threefry-2x32-20 of the uint32 words (x0, x1) under the key (k0, k1), broadcasting.

    Each round adds the second word into the first, rotates the second and xors the first into
    it; every fourth round injects the key schedule (k0, k1, k0 ^ k1 ^ KEY_PARITY) rotated by
    the injection number s, plus s itself in the second word."""
    add, xor, rotate_left = ops.add, ops.xor, ops.rotate_left  # the hot loop of per-member runs
    schedule = (k0, k1, xor(xor(k0, k1), ops.constant(KEY_PARITY, np.uint32)))
    x0, x1 = add(x0, k0), add(x1, k1)
    for r in range(ROUNDS):
        x0 = add(x0, x1)
        x1 = xor(rotate_left(x1, ROTATIONS[r % 8]), x0)
        if r % 4 == 3:
            s = r // 4 + 1
            x0 = add(x0, schedule[s % 3])
            x1 = add(x1, add(schedule[(s + 1) % 3], ops.constant(s, np.uint32)))
    return x0, x1


def threefry2x32(key: Array, x0: Any, x1: Any) -> tuple[Array, Array]:
    """The Threefry-2x32-20 block: the two uint32 output words for the input words `(x0, x1)`
    under `key` (uint32 `[..., 2]`); `x0` and `x1` are integers taken modulo 2**32, everything
    broadcasts. The generator every other function is built on.

    >>> y0, y1 = threefry2x32(np.array([0, 0], np.uint32), 0, 0)
    >>> hex(int(y0)), hex(int(y1))
    ('0x6b200159', '0x99ba4efe')
    """
    ops = _ops_for(key, x0, x1)
    k0, k1 = _key_words(ops, key, "threefry2x32")
    words = [_low_word(ops, x, name, "threefry2x32") for x, name in ((x0, "x0"), (x1, "x1"))]
    y0, y1 = _threefry(ops, k0, k1, *words)
    return ops.output(y0), ops.output(y1)


# ----- argument checks -------------------------------------------------------------------------


def _describe(ops: _ArrayOps, value: Any) -> str:
    if isinstance(value, bool | int | float | complex):
        return f"a Python {type(value).__name__}"
    array = ops.asarray(value)
    return f"an array of dtype {ops.dtype(array)} and shape {ops.static_shape(array)}"


def _key_words(ops: _ArrayOps, key: Any, function: str) -> tuple[Array, Array]:
    """The two uint32 words of `key` (each of the key's shape without its last axis)."""
    array = None if isinstance(key, bool | int | float | complex) else ops.asarray(key)
    shape = () if array is None else ops.static_shape(array)
    if array is None or ops.dtype(array) != np.uint32 or not shape or shape[-1] != 2:
        raise TypeError(
            f"abir.random.{function}: `key` must be a uint32 array with a last axis of 2 (one key "
            f"per member, made by abir.random.key(seed)), got {_describe(ops, key)}"
        )
    return ops.take_last(array, 0), ops.take_last(array, 1)


def _integer_array(ops: _ArrayOps, value: Any, name: str, function: str) -> Array:
    """`value` as an integer array; a Python int outside int64 is taken modulo 2**64."""
    if isinstance(value, int) and not isinstance(value, bool):
        if -(2**63) <= value < 2**63:
            return ops.constant(value, np.int64)
        return ops.constant(value % 2**64, np.uint64)
    array = None if isinstance(value, bool | float | complex) else ops.asarray(value)
    if array is None or ops.dtype(array).kind not in "iu":
        raise TypeError(
            f"abir.random.{function}: `{name}` must be an integer (one per member), got {_describe(ops, value)}"
        )
    return array


def _words(ops: _ArrayOps, value: Any, name: str, function: str) -> tuple[Array, Array]:
    """The (high, low) uint32 words of an integer taken modulo 2**64 (two's complement)."""
    array = _integer_array(ops, value, name, function)
    dtype = ops.dtype(array)
    if dtype.itemsize == 8:
        wide = ops.cast(array, np.int64)  # same bits; the arithmetic shift keeps the high word
        return ops.cast(ops.shift_right(wide, 32), np.uint32), ops.cast(wide, np.uint32)
    if dtype.kind == "u":
        low = ops.cast(array, np.uint32)
        return ops.xor(low, low), low
    narrow = ops.cast(array, np.int32)
    return ops.cast(ops.shift_right(narrow, 31), np.uint32), ops.cast(narrow, np.uint32)


def _low_word(ops: _ArrayOps, value: Any, name: str, function: str) -> Array:
    """The integer `value` modulo 2**32, as uint32."""
    return ops.cast(_integer_array(ops, value, name, function), np.uint32)


def _draw_shape(shape: Any, function: str) -> tuple[int, ...]:
    """`shape` (an int or a sequence of ints, the same for every member) as a tuple."""
    try:
        dims = (operator.index(shape),) if not isinstance(shape, Sequence) else tuple(map(operator.index, shape))
    except TypeError:
        kinds = ", ".join(type(d).__name__ for d in shape) if isinstance(shape, Sequence) else type(shape).__name__
        raise TypeError(
            f"abir.random.{function}: `shape` must be an int or a tuple of ints known when the function "
            f"is compiled (every member draws the same shape; a per-member value is an array), got {kinds}"
        ) from None
    if any(d < 0 for d in dims) or math.prod(dims) > MAX_DRAW_SIZE:
        raise ValueError(f"abir.random.{function}: `shape` {dims} must be non-negative with at most 2**32 elements")
    return dims


def _float_dtype(dtype: Any, function: str) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"abir.random.{function}: `dtype` must be np.float32 or np.float64, got {dtype!r}")
    return dt


# ----- draws -----------------------------------------------------------------------------------


def _blocks(ops: _ArrayOps, key: Any, counter: Any, shape: tuple[int, ...], function: str) -> tuple[Array, Array]:
    """Both output words for every element of draw `counter`, shaped `lead + (n,)` (n the size
    of `shape`): element i is the block of the counter words (counter mod 2**32, i)."""
    k0, k1 = _key_words(ops, key, function)
    draw = _low_word(ops, counter, "counter", function)
    size = math.prod(shape)
    if ops is _NUMPY_OPS and size == 1 and np.ndim(k0) == np.ndim(k1) == np.ndim(draw) == 0:
        y0, y1 = _threefry(_PYTHON_WORDS, int(k0), int(k1), int(draw), 0)  # type: ignore[arg-type]  (one block, on ints)
        return np.full(1, y0, np.uint32), np.full(1, y1, np.uint32)
    index = ops.constant(np.arange(size, dtype=np.uint32), np.uint32)
    return _threefry(ops, ops.expand_last(k0), ops.expand_last(k1), ops.expand_last(draw), index)


def _uniform_blocks(ops: _ArrayOps, y0: Array, y1: Array, dtype: np.dtype) -> Array:
    """Floats in [0, 1) from the words by exact operations: float32 from the top 23 bits of
    y0 ^ y1, float64 from the top 52 bits of the 64-bit word y0:y1 (as `jax.random.uniform`)."""
    if dtype == np.float32:
        top = ops.shift_right(ops.xor(y0, y1), 9)
        return ops.multiply(ops.cast(top, np.float32), ops.constant(2.0**-23, np.float32))
    high = ops.multiply(ops.cast(y0, np.float64), ops.constant(2.0**-32, np.float64))
    low = ops.multiply(ops.cast(ops.shift_right(y1, 12), np.float64), ops.constant(2.0**-52, np.float64))
    return ops.add(high, low)


def key(seed: Any) -> Array:
    """A key (uint32 `[..., 2]`) from an integer `seed` per member: its high and low 32-bit
    words (of the seed modulo 2**64), as `jax.random.key_data(jax.random.key(seed))`.

    Give each member its own key, e.g. `fold_in(key(seed), member_index)`, or seed it with a
    per-member integer.

    >>> abir.random.key(42)
    array([ 0, 42], dtype=uint32)
    >>> abir.random.key(np.arange(3))[:, 1]
    array([0, 1, 2], dtype=uint32)
    """
    ops = _ops_for(seed)
    return ops.output(ops.stack_last(list(_words(ops, seed, "seed", "key"))))


def fold_in(key: Any, data: Any) -> Array:
    """A new key from `key` and the integer `data` (modulo 2**32), as `jax.random.fold_in`:
    the block of the counter words (0, data). Keys folded with different data are independent.

    Draws made with `key` itself at counter 0 share these blocks (as JAX's keys do): use a key
    either to draw from or to derive keys from, not both.

    >>> keys = abir.random.fold_in(abir.random.key(7), np.arange(4))   # one key per member
    >>> keys.shape, keys.dtype
    ((4, 2), dtype('uint32'))
    """
    ops = _ops_for(key, data)
    k0, k1 = _key_words(ops, key, "fold_in")
    word = _low_word(ops, data, "data", "fold_in")
    y0, y1 = _threefry(ops, k0, k1, ops.xor(word, word), word)
    return ops.output(ops.stack_last([y0, y1]))


def split(key: Any, num: int = 2) -> tuple[Array, ...]:
    """`num` new keys from `key` (a tuple: write `key, sub = abir.random.split(key)`); key `j`
    is `fold_in(key, j)`, as `jax.random.split(key, num)[j]`.

    >>> parent = abir.random.key(0)
    >>> key, sub = abir.random.split(parent)
    >>> bool((sub == abir.random.fold_in(parent, 1)).all())
    True
    """
    if not isinstance(num, int) or isinstance(num, bool) or num < 1:
        raise TypeError(f"abir.random.split: `num` must be a positive Python int, got {num!r}")
    ops = _ops_for(key)
    k0, k1 = _key_words(ops, key, "split")
    index = ops.constant(np.arange(num, dtype=np.uint32), np.uint32)
    y0, y1 = _threefry(ops, ops.expand_last(k0), ops.expand_last(k1), ops.xor(index, index), index)
    keys = ops.stack_last([y0, y1])  # [..., num, 2]
    return tuple(ops.output(keys[..., j, :]) for j in range(num))


def bits(key: Any, counter: Any, shape: Any = ()) -> Array:
    """Random uint32 words of shape `lead + shape`: draw number `counter` (an integer per member,
    taken modulo 2**32) of the member's `key`. Element i is the xor of the two words of the
    Threefry block of (counter, i); for counter 0, `jax.random.bits(key, shape)`.

    >>> k = abir.random.key(0)
    >>> abir.random.bits(k, 3, shape=(2,)).dtype
    dtype('uint32')
    >>> bool((abir.random.bits(k, 3, shape=(2,)) == abir.random.bits(k, 3, shape=(2,))).all())
    True
    """
    dims = _draw_shape(shape, "bits")
    ops = _ops_for(key, counter)
    y0, y1 = _blocks(ops, key, counter, dims, "bits")
    return ops.output(ops.reshape_last(ops.xor(y0, y1), dims))


def uniform(key: Any, counter: Any, shape: Any = (), dtype: Any = np.float64) -> Array:
    """Uniform floats in [0, 1) of shape `lead + shape` and `dtype` (np.float32: multiples of
    2**-23; np.float64, the default: multiples of 2**-52), from draw `counter` of `key`.
    Bit-identical on every backend; for counter 0, `jax.random.uniform(key, shape, dtype)`.

    >>> u = abir.random.uniform(abir.random.key(0), 0)
    >>> bool(0.0 <= u < 1.0), u.dtype
    (True, dtype('float64'))
    """
    dims = _draw_shape(shape, "uniform")
    dt = _float_dtype(dtype, "uniform")
    ops = _ops_for(key, counter)
    y0, y1 = _blocks(ops, key, counter, dims, "uniform")
    return ops.output(ops.reshape_last(_uniform_blocks(ops, y0, y1, dt), dims))


def normal(key: Any, counter: Any, shape: Any = (), dtype: Any = np.float64) -> Array:
    """Standard normal floats of shape `lead + shape`, from draw `counter` of `key`: the
    Box-Muller transform `sqrt(-2 log(1 - u1)) * cos(2 pi u2)` of the float64 uniforms
    `(u1, u2) = uniform(key, counter, shape + (2,))[..., 0 and 1]`, computed in float64 and then
    rounded to `dtype`. `log` and `cos` round differently on each backend: results agree to a few
    ulps, not bit for bit. |z| never exceeds 8.5 (u1 has 52 bits).

    >>> z = abir.random.normal(abir.random.key(0), 5, shape=(1000,))
    >>> z.shape, bool(abs(z.mean()) < 0.1)
    ((1000,), True)
    """
    dims = _draw_shape(shape, "normal")
    dt = _float_dtype(dtype, "normal")
    ops = _ops_for(key, counter)
    y0, y1 = _blocks(ops, key, counter, (*dims, 2), "normal")
    u = ops.reshape_last(_uniform_blocks(ops, y0, y1, np.dtype(np.float64)), (*dims, 2))
    f64 = np.float64
    log_u1 = ops.log(ops.subtract(ops.constant(1.0, f64), ops.take_last(u, 0)))  # 1 - u1 is in (0, 1]
    radius = ops.sqrt(ops.multiply(ops.constant(-2.0, f64), log_u1))
    z = ops.multiply(radius, ops.cos(ops.multiply(ops.constant(2.0 * math.pi, f64), ops.take_last(u, 1))))
    return ops.output(z if dt == np.float64 else ops.cast(z, dt))


def bernoulli(key: Any, counter: Any, p: Any = 0.5, shape: Any = ()) -> Array:
    """Booleans of shape `lead + shape`, each True with probability `p` (a number per member):
    `uniform(key, counter, shape) < p` in float64, so bit-identical on every backend. For a
    probability per element, write `abir.random.uniform(key, counter, shape) < p` yourself.

    >>> abir.random.bernoulli(abir.random.key(0), 0, 0.0), abir.random.bernoulli(abir.random.key(0), 0, 1.0)
    (np.False_, np.True_)
    """
    dims = _draw_shape(shape, "bernoulli")
    ops = _ops_for(key, counter, p)
    p = ops.asarray(p)
    if ops.dtype(p).kind not in "fiub":
        raise TypeError(f"abir.random.bernoulli: `p` must be a real number per member, got {_describe(ops, p)}")
    y0, y1 = _blocks(ops, key, counter, dims, "bernoulli")
    u = _uniform_blocks(ops, y0, y1, np.dtype(np.float64))
    return ops.output(ops.reshape_last(ops.less(u, ops.expand_last(ops.cast(p, np.float64))), dims))


def randint(key: Any, counter: Any, low: Any, high: Any, shape: Any = (), dtype: Any = np.int64) -> Array:
    """Integers in [low, high) of shape `lead + shape` and `dtype` (np.int64 or np.int32), from
    draw `counter` of `key`; `low` and `high` are integers per member with `high - low` in
    [1, 2**32]. The value is `low + (b * (high - low)) >> 32` for the draw's `bits` b, computed
    exactly in int64 (each value has probability within (high - low) / 2**32 of uniform).
    `high - low` is clipped into [1, 2**32] rather than checked, since members that stand elsewhere
    in a batched program may hold any values.

    >>> r = abir.random.randint(abir.random.key(0), 0, 10, 20, shape=(1000,))
    >>> int(r.min()), int(r.max()), r.dtype
    (10, 19, dtype('int64'))
    """
    dims = _draw_shape(shape, "randint")
    if np.dtype(dtype) not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TypeError(f"abir.random.randint: `dtype` must be np.int32 or np.int64, got {dtype!r}")
    ops = _ops_for(key, counter, low, high)
    low = ops.cast(_integer_array(ops, low, "low", "randint"), np.int64)
    high = ops.cast(_integer_array(ops, high, "high", "randint"), np.int64)
    y0, y1 = _blocks(ops, key, counter, dims, "randint")
    word = ops.cast(ops.xor(y0, y1), np.int64)
    span = ops.expand_last(ops.clip(ops.subtract(high, low), 1, 2**32))
    # (word * span) >> 32 without overflowing int64: split the word into 16-bit halves.
    top = ops.multiply(ops.shift_right(word, 16), span)
    bottom = ops.multiply(ops.bitwise_and(word, ops.constant(0xFFFF, np.int64)), span)
    offset = ops.shift_right(ops.add(top, ops.shift_right(bottom, 16)), 16)
    value = ops.add(ops.expand_last(low), offset)
    return ops.output(ops.cast(ops.reshape_last(value, dims), dtype))
