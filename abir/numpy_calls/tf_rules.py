"""TensorFlow rules in TF's own ops (`tf.linalg`, `tf.signal`, `tf.sort`, TF's NumPy API with the
functions it lacks, `tf.vectorized_map`), all XLA-compilable, giving NumPy's per-member result."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import numpy as np

from abir.numpy_calls.calls import Call, as_jax_arguments, member_rank, named_arguments, select_output
from abir.numpy_calls.numpy_rules import interpolated, sliding_product, sorted_positions
from abir.numpy_calls.registry import numpy_object, parameters
from abir.numpy_calls.templates import Operand, fill_template, template_operands

# -- TensorFlow's own ops --------------------------------------------------------------------------


def tf_rule(call: Call, operands: Sequence[Any]) -> Callable[[], Any] | None:
    """The whole-batch computation of `call` in TensorFlow's own ops (`tf.linalg`, `tf.signal`,
    `tf.sort`, ...; XLA-compilable), for the functions and arguments `_tf_rules` covers."""
    rule = _tf_rules().get(call.entry.name)
    named = named_arguments(call)
    first = next(iter(named.values()), None)
    if rule is None or not isinstance(first, Operand):
        return None
    static = dict(list(named.items())[1:])
    if template_operands(list(static.values())):
        return None
    return rule(call, _tf_inexact(operands[first.index]), static)


def tf_member_map(call: Call, operands: Sequence[Any]) -> Callable[[], Any] | None:
    """TensorFlow's NumPy API called per member under `tf.vectorized_map` (batched ops where
    TF has batching rules for them, else a loop XLA still compiles)."""
    import tensorflow as tf
    import tensorflow.experimental.numpy as tnp

    fn = numpy_object(call.entry.name, tf_numpy())
    if fn is None:
        return None
    args, kwargs = as_jax_arguments(call, fn)
    signature = parameters(fn)
    if signature is None or not set(kwargs) <= _named_parameters(signature):
        return None  # a keyword TF's function would take through `**kwargs`, maybe ignoring it

    def member(values: tuple[Any, ...]) -> Any:
        result = fn(*fill_template(args, values), **fill_template(kwargs, values))
        return select_output(call, result, tnp)

    return lambda: tf.vectorized_map(member, tuple(operands), fallback_to_while_loop=True)


def _named_parameters(signature: inspect.Signature) -> set[str]:
    return {p.name for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD}



def _tf_inexact(x: Any) -> Any:
    """`x` as floats where it holds integers or booleans (NumPy's linear algebra and FFTs compute in float64)."""
    import tensorflow as tf

    return x if x.dtype.is_floating or x.dtype.is_complex else tf.cast(x, tf.float64)


def _tf_complex(x: Any) -> Any:
    import tensorflow as tf

    if x.dtype.is_complex:
        return x
    return tf.cast(x, tf.complex64 if x.dtype == tf.float32 else tf.complex128)


def _tf_matrix_power(x: Any, n: int) -> Any:
    import tensorflow as tf

    if n < 0:
        x, n = tf.linalg.inv(x), -n
    result = tf.eye(int(x.shape[-1]), batch_shape=[int(d) for d in x.shape[:-2]], dtype=x.dtype)
    power = x
    while n:
        if n & 1:
            result = result @ power
        n >>= 1
        if n:
            power = power @ power
    return result


def _tf_pivots(x: Any) -> tuple[Any, Any]:
    """Gaussian elimination with partial pivoting, as LAPACK's LU (XLA has no LU or
    determinant kernel on CPU), unrolled over the member's `n` columns: the sign of the row
    permutation and U's diagonal."""
    import tensorflow as tf

    n = int(x.shape[-1])
    a = tf.reshape(x, (-1, n, n))
    sign = tf.ones(tf.shape(a)[:1], a.dtype)
    rows = tf.range(n, dtype=tf.int64)
    pivots = []
    for k in range(n):
        p = tf.argmax(tf.abs(a[:, k:, k]), axis=-1) + k
        swap = tf.where(rows == k, p[:, None], tf.where(rows == p[:, None], tf.constant(k, tf.int64), rows))
        a = tf.gather(a, swap, axis=1, batch_dims=1)
        sign = tf.where(p != k, -sign, sign)
        pivot = a[:, k, k]
        pivots.append(pivot)
        safe = tf.where(pivot == 0, tf.ones_like(pivot), pivot)
        factors = tf.where((pivot == 0)[:, None], tf.zeros_like(a[:, k + 1 :, k]), a[:, k + 1 :, k] / safe[:, None])
        a = tf.concat([a[:, : k + 1], a[:, k + 1 :] - factors[..., None] * a[:, k : k + 1]], axis=1)
    batch = tf.shape(x)[:-2]
    return tf.reshape(sign, batch), tf.reshape(tf.stack(pivots, axis=-1), tf.concat([batch, [n]], 0))


def _tf_det(x: Any) -> Any:
    import tensorflow as tf

    sign, pivots = _tf_pivots(x)
    return sign * tf.reduce_prod(pivots, axis=-1)


def _tf_slogdet(x: Any) -> tuple[Any, Any]:
    import tensorflow as tf

    sign, pivots = _tf_pivots(x)
    magnitude = tf.abs(pivots)
    phase = pivots / tf.cast(tf.where(magnitude == 0, tf.ones_like(magnitude), magnitude), pivots.dtype)
    signs = sign * tf.reduce_prod(phase, axis=-1)
    return signs, tf.reduce_sum(tf.math.log(magnitude), axis=-1)


def _tf_singular_values(x: Any) -> Any:
    import tensorflow as tf

    return tf.linalg.svd(x, compute_uv=False)


def _tf_matrix_rank(call: Call, x: Any, static: dict[str, Any]) -> Callable[[], Any] | None:
    import tensorflow as tf

    if set(static) - {"hermitian"} or static.get("hermitian") or member_rank(x) < 3:
        return None
    eps = np.finfo(x.dtype.real_dtype.as_numpy_dtype).eps
    size = max(int(x.shape[-1]), int(x.shape[-2]))

    def run() -> Any:
        s = _tf_singular_values(x)
        tol = tf.reduce_max(s, axis=-1, keepdims=True) * size * eps
        return tf.reduce_sum(tf.cast(s > tol, tf.int64), axis=-1)

    return run


def _tf_norm(call: Call, x: Any, static: dict[str, Any]) -> Callable[[], Any] | None:
    """`linalg.norm` of a vector (any order) or a matrix (None, 'fro', 'nuc', 2, -2, 1, -1, inf,
    -inf) over the whole member."""
    import tensorflow as tf

    ord_, axis = static.get("ord"), static.get("axis")
    if axis is not None or static.get("keepdims") or member_rank(x) not in (2, 3):
        return None
    a = tf.abs(x)
    if member_rank(x) == 2:
        return _tf_vector_norm(a, ord_)
    matrix = {
        None: lambda: tf.sqrt(tf.reduce_sum(a * a, axis=(1, 2))),
        "fro": lambda: tf.sqrt(tf.reduce_sum(a * a, axis=(1, 2))),
        "nuc": lambda: tf.reduce_sum(_tf_singular_values(x), axis=-1),
        2: lambda: tf.reduce_max(_tf_singular_values(x), axis=-1),
        -2: lambda: tf.reduce_min(_tf_singular_values(x), axis=-1),
        1: lambda: tf.reduce_max(tf.reduce_sum(a, axis=1), axis=-1),
        -1: lambda: tf.reduce_min(tf.reduce_sum(a, axis=1), axis=-1),
        math.inf: lambda: tf.reduce_max(tf.reduce_sum(a, axis=2), axis=-1),
        -math.inf: lambda: tf.reduce_min(tf.reduce_sum(a, axis=2), axis=-1),
    }
    return matrix.get(ord_)


def _tf_vector_norm(a: Any, ord_: Any) -> Callable[[], Any] | None:
    import tensorflow as tf

    if ord_ is None or ord_ == 2:
        return lambda: tf.sqrt(tf.reduce_sum(a * a, axis=1))
    if ord_ == math.inf:
        return lambda: tf.reduce_max(a, axis=1)
    if ord_ == -math.inf:
        return lambda: tf.reduce_min(a, axis=1)
    if ord_ == 0:
        return lambda: tf.reduce_sum(tf.cast(a != 0, a.dtype), axis=1)
    if isinstance(ord_, int | float) and not isinstance(ord_, bool):
        p = float(ord_)
        return lambda: tf.reduce_sum(a**p, axis=1) ** (1 / p)
    return None


def _tf_cond(call: Call, x: Any, static: dict[str, Any]) -> Callable[[], Any] | None:

    if static.get("p") is not None or member_rank(x) != 3:
        return None

    def run() -> Any:
        s = _tf_singular_values(x)
        return s[..., 0] / s[..., -1]

    return run


def _tf_fft_length(static: dict[str, Any], x: Any, inverse_real: bool) -> int | None:
    """The transform length of a one-axis FFT along the last member axis (None: not covered)."""
    if static.get("axis", -1) not in (-1, member_rank(x) - 2) or static.get("out") is not None:
        return None
    n = static.get("n")
    if n is not None:
        return int(n)
    m = int(x.shape[-1])
    return 2 * (m - 1) if inverse_real else m


def _tf_fit_last(x: Any, n: int) -> Any:
    """`x` cut or zero-padded to `n` along its last axis (NumPy's `n=`)."""
    import tensorflow as tf

    m = int(x.shape[-1])
    if n <= m:
        return x[..., :n]
    return tf.pad(x, [[0, 0]] * (member_rank(x) - 1) + [[0, n - m]])


_FFT_NORMS = (None, "backward", "ortho", "forward")


def _tf_scaled(y: Any, norm: Any, n: int, inverse: bool) -> Any:
    """TF's transform `y` (its inverses divide by `n`) scaled as NumPy's `norm` asks."""
    import tensorflow as tf

    forward = {"ortho": 1 / math.sqrt(n), "forward": 1 / n}
    factor = (1 / forward[norm] if inverse else forward[norm]) if norm in forward else 1.0
    return y * tf.cast(factor, y.dtype) if factor != 1.0 else y


def _tf_fft(kind: str) -> Callable[[Call, Any, dict[str, Any]], Callable[[], Any] | None]:
    """`fft.fft`, `ifft`, `rfft`, `irfft`, `hfft`, `ihfft` along the last member axis."""

    def rule(call: Call, x: Any, static: dict[str, Any]) -> Callable[[], Any] | None:
        import tensorflow as tf

        n = _tf_fft_length(static, x, kind in ("irfft", "hfft"))
        norm = static.get("norm")
        if n is None or n < 1 or norm not in _FFT_NORMS or member_rank(x) < 2:
            return None
        if kind in ("hfft", "ihfft") and norm not in (None, "backward"):
            return None
        if kind in ("rfft", "ihfft") and x.dtype.is_complex:
            return None
        real = tf.float32 if x.dtype in (tf.float32, tf.complex64) else tf.float64

        def run() -> Any:
            if kind == "fft":
                return _tf_scaled(tf.signal.fft(_tf_fit_last(_tf_complex(x), n)), norm, n, False)
            if kind == "ifft":
                return _tf_scaled(tf.signal.ifft(_tf_fit_last(_tf_complex(x), n)), norm, n, True)
            if kind == "rfft":
                return _tf_scaled(tf.signal.rfft(tf.cast(x, real), [n]), norm, n, False)
            if kind == "ihfft":
                return tf.math.conj(_tf_scaled(tf.signal.rfft(tf.cast(x, real), [n]), norm, n, False)) / n
            half = _tf_fit_last(_tf_complex(x), n // 2 + 1)
            if kind == "irfft":
                return _tf_scaled(tf.signal.irfft(half, [n]), norm, n, True)
            return _tf_scaled(tf.signal.irfft(tf.math.conj(half), [n]), norm, n, True) * n  # hfft

        return run

    return rule


def _tf_fft_all(kind: str) -> Callable[[Call, Any, dict[str, Any]], Callable[[], Any] | None]:
    """`fft.fft2`/`ifft2` over the last two member axes, `fftn`/`ifftn` over every member axis
    (up to three), without `s=` and with NumPy's default axes."""

    def rule(call: Call, x: Any, static: dict[str, Any]) -> Callable[[], Any] | None:
        import tensorflow as tf

        rank = member_rank(x) - 1
        axes, norm = static.get("axes"), static.get("norm")
        two_d = kind.endswith("2")
        default_axes = (-2, -1) if two_d else None
        if static.get("s") is not None or static.get("out") is not None or norm not in _FFT_NORMS:
            return None
        if axes not in (default_axes, None if two_d else tuple(range(rank))) or rank not in ((2,) if two_d else (1, 2, 3)):
            return None
        inverse = kind.startswith("i")
        ops = {1: (tf.signal.fft, tf.signal.ifft), 2: (tf.signal.fft2d, tf.signal.ifft2d), 3: (tf.signal.fft3d, tf.signal.ifft3d)}
        transform = ops[rank][inverse]
        n = math.prod(int(d) for d in x.shape[1:])
        return lambda: _tf_scaled(transform(_tf_complex(x)), norm, n, inverse)

    return rule


def _tf_fftshift(sign: int) -> Callable[[Call, Any, dict[str, Any]], Callable[[], Any] | None]:
    def rule(call: Call, x: Any, static: dict[str, Any]) -> Callable[[], Any] | None:
        import tensorflow as tf

        rank = member_rank(x) - 1
        axes = static.get("axes")
        axes = tuple(range(rank)) if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
        member_axes = [a % rank for a in axes]
        shifts = [sign * (int(x.shape[1 + a]) // 2) for a in member_axes]
        return lambda: tf.roll(x, shifts, [1 + a for a in member_axes])

    return rule


def _tf_stacked(fn: Callable[[Any], Any], *allowed: str) -> Callable[[Call, Any, dict[str, Any]], Callable[[], Any] | None]:
    """A `tf.linalg` function of the member matrix, with no arguments but `allowed` ones at
    their defaults (checked by the caller through `fn`'s keywords)."""

    def rule(call: Call, x: Any, static: dict[str, Any]) -> Callable[[], Any] | None:
        if set(static) - set(allowed) or member_rank(x) < 3:
            return None
        return lambda: fn(x, **static)

    return rule


def _lapack_signed(call: Call) -> bool:
    """Whether the output is eigenvectors or singular vectors, whose signs (phases) are LAPACK's
    free choice, which TF's kernels do not reproduce (and XLA's SVD is less accurate than
    LAPACK's, hence `pinv` too): they stay on NumPy."""
    if call.entry.name == "linalg.eigh":
        return call.output == 1
    return call.entry.name == "linalg.svd" and call.bound.get("compute_uv", True) and call.output != 1


def _tf_linalg_functions() -> dict[str, Callable[[Call, Any, dict[str, Any]], Callable[[], Any] | None]]:
    import tensorflow as tf

    def cholesky(x: Any, upper: bool = False) -> Any:
        lower = tf.linalg.cholesky(x)
        return tf.linalg.adjoint(lower) if upper else lower

    def eigh(x: Any, UPLO: str = "L") -> Any:  # noqa: N803  (NumPy's name)
        return tf.linalg.eigh(x if UPLO == "L" else tf.linalg.adjoint(x))

    def eigvalsh(x: Any, UPLO: str = "L") -> Any:  # noqa: N803
        return tf.linalg.eigvalsh(x if UPLO == "L" else tf.linalg.adjoint(x))

    def qr(x: Any, mode: str = "reduced") -> Any:
        if mode not in ("reduced", "complete", "r"):
            raise NotImplementedError(mode)
        q, r = tf.linalg.qr(x, full_matrices=mode == "complete")
        return (r,) if mode == "r" else (q, r)

    def svd(x: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
        if not compute_uv:
            return (tf.linalg.svd(x, compute_uv=False),)
        s, u, v = tf.linalg.svd(x, full_matrices=full_matrices)
        return u, s, tf.linalg.adjoint(v)

    def as_outputs(fn: Callable[..., Any]) -> Callable[[Call, Any, dict[str, Any]], Callable[[], Any] | None]:
        def rule(call: Call, x: Any, static: dict[str, Any]) -> Callable[[], Any] | None:
            if member_rank(x) < 3 or static.get("hermitian") or _lapack_signed(call):
                return None
            return lambda: fn(x, **{k: v for k, v in static.items() if k != "hermitian"})[call.output]

        return rule

    return {
        "linalg.inv": _tf_stacked(tf.linalg.inv),
        "linalg.det": _tf_stacked(_tf_det),
        "linalg.slogdet": as_outputs(_tf_slogdet),
        "linalg.cholesky": _tf_stacked(cholesky, "upper"),
        "linalg.eigh": as_outputs(eigh),
        "linalg.eigvalsh": _tf_stacked(eigvalsh, "UPLO"),
        "linalg.qr": as_outputs(qr),
        "linalg.svd": as_outputs(svd),
        "linalg.svdvals": _tf_stacked(_tf_singular_values),
        "linalg.matrix_rank": _tf_matrix_rank,
        "linalg.matrix_power": lambda call, x, static: (
            (lambda: _tf_matrix_power(x, int(static["n"]))) if member_rank(x) >= 3 and set(static) == {"n"} else None
        ),
        "linalg.norm": _tf_norm,
        "linalg.cond": _tf_cond,
    }


@cache
def _tf_rules() -> dict[str, Callable[[Call, Any, dict[str, Any]], Callable[[], Any] | None]]:
    """TensorFlow rules of functions of one batched operand (the first argument; the others static)."""
    return {**_TF_FFT_RULES, **_tf_linalg_functions()}


_TF_FFT_RULES: dict[str, Callable[[Call, Any, dict[str, Any]], Callable[[], Any] | None]] = {
    "fft.fft": _tf_fft("fft"), "fft.ifft": _tf_fft("ifft"), "fft.rfft": _tf_fft("rfft"),
    "fft.irfft": _tf_fft("irfft"), "fft.hfft": _tf_fft("hfft"), "fft.ihfft": _tf_fft("ihfft"),
    "fft.fft2": _tf_fft_all("fft2"), "fft.ifft2": _tf_fft_all("ifft2"),
    "fft.fftn": _tf_fft_all("fftn"), "fft.ifftn": _tf_fft_all("ifftn"),
    "fft.fftshift": _tf_fftshift(1), "fft.ifftshift": _tf_fftshift(-1),
}  # fmt: skip



class _TfNumpy:
    """TensorFlow's NumPy API (`tf.experimental.numpy`) with the NumPy functions it lacks,
    written in TF's own ops with NumPy's meaning (elementwise ones broadcast; axis ones take
    `axis`), so the ufunc and axis rules, and `tf.vectorized_map`, apply to them."""

    def __getattr__(self, name: str) -> Any:
        import tensorflow.experimental.numpy as tnp

        return getattr(tnp, name)

    @staticmethod
    def rint(x: Any) -> Any:
        import tensorflow as tf

        return tf.math.round(x)

    @staticmethod
    def degrees(x: Any) -> Any:
        return _tf_inexact(x) * (180 / math.pi)

    @staticmethod
    def radians(x: Any) -> Any:
        return _tf_inexact(x) * (math.pi / 180)

    @staticmethod
    def fmod(x: Any, y: Any) -> Any:
        import tensorflow as tf

        x, y = tf.convert_to_tensor(x), tf.convert_to_tensor(y)
        integral = x.dtype.is_integer and y.dtype.is_integer
        dtype = tf.int64 if integral else tf.float64
        return tf.truncatemod(tf.cast(x, dtype), tf.cast(y, dtype))

    @staticmethod
    def copysign(x: Any, y: Any) -> Any:
        import tensorflow as tf
        import tensorflow.experimental.numpy as tnp

        x, y = _tf_inexact(tnp.asarray(x)), tnp.asarray(y)
        return tf.where(tnp.signbit(y), -tf.abs(x), tf.abs(x))

    @staticmethod
    def fmax(x: Any, y: Any) -> Any:
        import tensorflow as tf
        import tensorflow.experimental.numpy as tnp

        x, y = tnp.asarray(x), tnp.asarray(y)
        return tf.where(tnp.isnan(y), x, tf.where(tnp.isnan(x), y, tnp.maximum(x, y)))

    @staticmethod
    def fmin(x: Any, y: Any) -> Any:
        import tensorflow as tf
        import tensorflow.experimental.numpy as tnp

        x, y = tnp.asarray(x), tnp.asarray(y)
        return tf.where(tnp.isnan(y), x, tf.where(tnp.isnan(x), y, tnp.minimum(x, y)))

    @staticmethod
    def ldexp(x: Any, n: Any) -> Any:
        import tensorflow as tf

        x = _tf_inexact(tf.convert_to_tensor(x))
        return x * tf.pow(tf.constant(2, x.dtype), tf.cast(n, x.dtype))

    @staticmethod
    def modf(x: Any) -> tuple[Any, Any]:
        import tensorflow as tf

        x = _tf_inexact(tf.convert_to_tensor(x))
        whole = tf.where(x < 0, tf.math.ceil(x), tf.math.floor(x))
        return x - whole, whole

    @staticmethod
    def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Any:
        import tensorflow as tf

        x = tf.convert_to_tensor(x)
        if not x.dtype.is_floating:
            return x
        info = np.finfo(x.dtype.as_numpy_dtype)
        high = tf.constant(info.max if posinf is None else posinf, x.dtype)
        low = tf.constant(info.min if neginf is None else neginf, x.dtype)
        x = tf.where(tf.math.is_nan(x), tf.constant(nan, x.dtype), x)
        return tf.where(x == math.inf, high, tf.where(x == -math.inf, low, x))

    @staticmethod
    def matrix_transpose(x: Any) -> Any:
        import tensorflow as tf

        return tf.linalg.matrix_transpose(x)

    @staticmethod
    def vecdot(x1: Any, x2: Any, axis: int = -1) -> Any:
        import tensorflow as tf
        import tensorflow.experimental.numpy as tnp

        return tnp.sum(tf.math.conj(x1) * x2, axis=axis) if tnp.asarray(x1).dtype.is_complex else tnp.sum(x1 * x2, axis=axis)

    @staticmethod
    def trapezoid(y: Any, x: Any = None, dx: float = 1.0, axis: int = -1) -> Any:
        import tensorflow.experimental.numpy as tnp

        if x is not None:
            raise NotImplementedError("trapezoid with sample points")
        y = _tf_inexact(tnp.asarray(y))
        n = int(y.shape[axis])
        head = tnp.take(y, list(range(1, n)), axis=axis)
        tail = tnp.take(y, list(range(n - 1)), axis=axis)
        return tnp.sum((head + tail) * (dx / 2), axis=axis)

    @staticmethod
    def cumulative_sum(x: Any, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
        import tensorflow as tf
        import tensorflow.experimental.numpy as tnp

        x = tnp.asarray(x)
        if axis is None:
            if len(x.shape) != 1:
                raise NotImplementedError("cumulative_sum of a matrix without an axis")
            axis = 0
        total = tnp.cumsum(x, axis=axis)
        if not include_initial:
            return total
        zero_shape = [1 if a == axis % len(x.shape) else int(d) for a, d in enumerate(x.shape)]
        return tf.concat([tf.zeros(zero_shape, total.dtype), total], axis=axis)

    @staticmethod
    def nanmax(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
        import tensorflow as tf
        import tensorflow.experimental.numpy as tnp

        a = tnp.asarray(a)
        if not a.dtype.is_floating:
            return tnp.max(a, axis=axis, keepdims=keepdims)
        masked = tf.where(tnp.isnan(a), tf.constant(-math.inf, a.dtype), a)
        every_nan = tnp.all(tnp.isnan(a), axis=axis, keepdims=keepdims)
        return tf.where(every_nan, tf.constant(math.nan, a.dtype), tnp.max(masked, axis=axis, keepdims=keepdims))

    @staticmethod
    def nanmin(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return -_TfNumpy.nanmax(-tf_numpy().asarray(a), axis=axis, keepdims=keepdims)

    @staticmethod
    def nancumsum(a: Any, axis: int | None = None) -> Any:
        import tensorflow as tf
        import tensorflow.experimental.numpy as tnp

        a = tnp.asarray(a)
        if a.dtype.is_floating:
            a = tf.where(tnp.isnan(a), tf.zeros_like(a), a)
        return tnp.cumsum(a, axis=axis)

    @staticmethod
    def nanstd(a: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
        import tensorflow as tf
        import tensorflow.experimental.numpy as tnp

        a = _tf_inexact(tnp.asarray(a))
        present = tf.logical_not(tnp.isnan(a))
        count = tnp.sum(tf.cast(present, a.dtype), axis=axis, keepdims=True)
        zeroed = tf.where(present, a, tf.zeros_like(a))
        mean = tnp.sum(zeroed, axis=axis, keepdims=True) / count
        squares = tf.where(present, (a - mean) ** 2, tf.zeros_like(a))
        variance = tnp.sum(squares, axis=axis, keepdims=True) / (count - ddof)
        result = tf.sqrt(variance)
        return result if keepdims else tnp.squeeze(result, axis=axis)

    @staticmethod
    def column_stack(tup: Sequence[Any]) -> Any:
        import tensorflow.experimental.numpy as tnp

        columns = [tnp.asarray(t) for t in tup]
        return tnp.concatenate([c[:, None] if len(c.shape) == 1 else c for c in columns], axis=1)

    @staticmethod
    def searchsorted(a: Any, v: Any, side: str = "left") -> Any:
        tnp = tf_numpy()
        v = tnp.asarray(v)
        found = sorted_positions(tnp.asarray(a)[None], tnp.reshape(v, (1, -1)), side, tnp)
        return tnp.reshape(found, v.shape)

    @staticmethod
    def convolve(a: Any, v: Any, mode: str = "full") -> Any:
        tnp = tf_numpy()
        return sliding_product(tnp.asarray(a)[None], tnp.asarray(v)[None], mode, False, tnp)[0]

    @staticmethod
    def correlate(a: Any, v: Any, mode: str = "valid") -> Any:
        tnp = tf_numpy()
        return sliding_product(tnp.asarray(a)[None], tnp.asarray(v)[None], mode, True, tnp)[0]

    @staticmethod
    def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
        tnp = tf_numpy()
        if period is not None:
            raise NotImplementedError("interp with a period")
        x = tnp.asarray(x)
        flat = tnp.reshape(x, (1, -1))
        return tnp.reshape(interpolated(flat, tnp.asarray(xp)[None], tnp.asarray(fp)[None], left, right, tnp), x.shape)

    @staticmethod
    def round(a: Any, decimals: int = 0) -> Any:
        import tensorflow as tf

        a = tf.convert_to_tensor(a)
        if not a.dtype.is_floating:
            raise NotImplementedError("round of integers")
        scale = tf.constant(10.0**decimals, a.dtype)
        return tf.math.round(a * scale) / scale

    around = round

    @staticmethod
    def digitize(x: Any, bins: Any, right: bool = False) -> Any:
        bins = np.asarray(bins)
        if isinstance(bins, np.ndarray) and bins.ndim == 1 and bins.size and np.all(np.diff(bins) >= 0):
            tnp = tf_numpy()
            x = tnp.asarray(x)
            edges = tnp.asarray(bins)[None]
            found = sorted_positions(edges, tnp.reshape(x, (1, -1)), "left" if right else "right", tnp)
            return tnp.reshape(found, x.shape)
        raise NotImplementedError("digitize with batched or decreasing bins")

    @staticmethod
    def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False) -> Any:
        tnp = tf_numpy()
        element = tnp.asarray(element)
        tests = tnp.ravel(tnp.asarray(test_elements))
        found = tnp.any(element[..., None] == tests, axis=-1)
        return tnp.logical_not(found) if invert else found

    @staticmethod
    def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
        import tensorflow.experimental.numpy as tnp

        a = tnp.asarray(a)
        parts = [a]
        for position, value in ((0, prepend), (2, append)):
            if value is not None:
                shape = [int(d) for d in a.shape]
                value = tnp.asarray(value, dtype=tnp.result_type(a, value))
                shape[axis] = 1 if len(value.shape) == 0 else int(value.shape[axis])
                parts.insert(min(position, len(parts)), tnp.broadcast_to(value, shape))
        return tnp.diff(tnp.concatenate(parts, axis=axis), n=n, axis=axis)

    @staticmethod
    def quantile(a: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False) -> Any:
        return _tf_quantile(a, q, axis, method, keepdims)

    @staticmethod
    def percentile(a: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False) -> Any:
        return _tf_quantile(a, np.asarray(q) / 100, axis, method, keepdims)

    @staticmethod
    def median(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return _tf_quantile(a, 0.5, axis, "linear", keepdims)

    @staticmethod
    def nanquantile(a: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False) -> Any:
        return _tf_nanquantile(a, q, axis, method, keepdims)

    @staticmethod
    def nanpercentile(a: Any, q: Any, axis: Any = None, method: str = "linear", keepdims: bool = False) -> Any:
        return _tf_nanquantile(a, np.asarray(q) / 100, axis, method, keepdims)

    @staticmethod
    def nanmedian(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return _tf_nanquantile(a, 0.5, axis, "linear", keepdims)

    @staticmethod
    def unwrap(p: Any, discont: Any = None, axis: int = -1, period: float = 2 * math.pi) -> Any:
        import tensorflow as tf

        tnp = tf_numpy()
        p = _tf_inexact(tnp.asarray(p))
        if period != 2 * math.pi or len(p.shape) != 1:
            raise NotImplementedError("unwrap of a matrix or with another period")
        dd = p[1:] - p[:-1]
        bound = math.pi if discont is None else max(float(discont), math.pi)
        wrapped = tnp.mod(dd + math.pi, 2 * math.pi) - math.pi
        wrapped = tf.where(tf.logical_and(wrapped == -math.pi, dd > 0), tf.constant(math.pi, p.dtype), wrapped)
        correction = tf.where(tf.abs(dd) < bound, tf.zeros_like(dd), wrapped - dd)
        return tf.concat([p[:1], p[1:] + tf.cumsum(correction)], axis=0)

    @staticmethod
    def pad(array: Any, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> Any:
        import tensorflow as tf

        array = tf.convert_to_tensor(array)
        widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (len(array.shape), 2))
        if mode == "constant" and np.ndim(constant_values) == 0:
            return tf.pad(array, widths, constant_values=tf.cast(constant_values, array.dtype))
        if mode in ("reflect", "symmetric") and np.all(widths < np.asarray(array.shape)[:, None]):
            return tf.pad(array, widths, mode=mode.upper())
        if mode == "edge":
            for axis, (before, after) in enumerate(widths):
                n = int(array.shape[axis])
                index = np.clip(np.arange(-before, n + after), 0, n - 1)
                array = tf.gather(array, index, axis=axis)
            return array
        raise NotImplementedError(f"pad mode {mode}")

    @staticmethod
    def polyder(p: Any, m: int = 1) -> Any:
        tnp = tf_numpy()
        p = tnp.asarray(p)
        for _ in range(m):
            n = int(p.shape[0]) - 1
            p = p[:-1] * np.arange(n, 0, -1) if n > 0 else tnp.zeros((1,), p.dtype)
        return p

    @staticmethod
    def gradient(f: Any, axis: Any = None, edge_order: int = 1) -> Any:
        tnp = tf_numpy()
        f = _tf_inexact(tnp.asarray(f))
        if len(f.shape) != 1 or edge_order != 1 or int(f.shape[0]) < 2:
            raise NotImplementedError("gradient of a matrix, or of second order")
        inner = (f[2:] - f[:-2]) / 2
        return tnp.concatenate([f[1:2] - f[:1], inner, f[-1:] - f[-2:-1]])

    @staticmethod
    def cov(m: Any, rowvar: bool = True, bias: bool = False, ddof: Any = None) -> Any:
        import tensorflow as tf

        tnp = tf_numpy()
        x = _tf_inexact(tnp.asarray(m))
        if len(x.shape) != 2 or x.dtype.is_complex:
            raise NotImplementedError("cov of a vector or of complex values")
        x = x if rowvar else tf.transpose(x)
        count = int(x.shape[1]) - (ddof if ddof is not None else 0 if bias else 1)
        centered = x - tnp.mean(x, axis=1, keepdims=True)
        return tf.matmul(centered, centered, transpose_b=True) / count

    @staticmethod
    def corrcoef(x: Any, rowvar: bool = True) -> Any:
        import tensorflow as tf

        c = _TfNumpy.cov(x, rowvar)
        d = tf.sqrt(tf.linalg.diag_part(c))
        return tf.clip_by_value(c / d[:, None] / d[None, :], -1, 1)

    @staticmethod
    def resize(a: Any, new_shape: Any) -> Any:
        tnp = tf_numpy()
        flat = tnp.ravel(tnp.asarray(a))
        shape = (new_shape,) if isinstance(new_shape, int) else tuple(new_shape)
        size, n = math.prod(shape), int(flat.shape[0])
        if n == 0:
            raise NotImplementedError("resize of an empty array")
        return tnp.reshape(tnp.take(flat, np.arange(size) % n), shape)

    @staticmethod
    def delete(arr: Any, obj: Any, axis: Any = None) -> Any:
        tnp = tf_numpy()
        arr = tnp.asarray(arr)
        if axis is None:
            arr, axis = tnp.ravel(arr), 0
        n = int(arr.shape[axis])
        keep = np.delete(np.arange(n), obj)
        return tnp.take(arr, keep, axis=axis)

    @staticmethod
    def insert(arr: Any, obj: Any, values: Any, axis: Any = None) -> Any:
        tnp = tf_numpy()
        arr = tnp.asarray(arr)
        if axis is not None or not isinstance(obj, int) or len(arr.shape) != 1:
            raise NotImplementedError("insert other than one position of a vector")
        values = tnp.ravel(tnp.asarray(values, dtype=arr.dtype))
        position = obj % (int(arr.shape[0]) + 1) if obj < 0 else obj
        return tnp.concatenate([arr[:position], values, arr[position:]])

    @staticmethod
    def lexsort(keys: Sequence[Any], axis: int = -1) -> Any:
        import tensorflow as tf

        order = None
        for key in keys:
            key = tf.convert_to_tensor(key)
            if len(key.shape) != 1:
                raise NotImplementedError("lexsort of matrices")
            if order is None:
                order = tf.argsort(key, stable=True)
            else:
                order = tf.gather(order, tf.argsort(tf.gather(key, order), stable=True))
        return order

    @staticmethod
    def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
        tnp = tf_numpy()
        ary = tnp.asarray(ary)
        n = int(ary.shape[axis])
        if isinstance(indices_or_sections, int):
            size, extra = divmod(n, indices_or_sections)
            sizes = [size + 1] * extra + [size] * (indices_or_sections - extra)
            bounds = np.cumsum([0, *sizes])
        else:
            bounds = [0, *indices_or_sections, n]
        return [tnp.take(ary, np.arange(n)[lo:hi], axis=axis) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]

    @property
    def linalg(self) -> Any:
        return _TfLinalg

    @staticmethod
    def ediff1d(ary: Any) -> Any:
        import tensorflow.experimental.numpy as tnp

        flat = tnp.ravel(tnp.asarray(ary))
        return flat[1:] - flat[:-1]


@cache
def tf_numpy() -> _TfNumpy:
    return _TfNumpy()




class _TfLinalg:
    """The `numpy.linalg` functions of several arrays, in `tf.linalg`'s ops."""

    @staticmethod
    def solve(a: Any, b: Any) -> Any:
        import tensorflow as tf

        a, b = _tf_inexact(tf.convert_to_tensor(a)), _tf_inexact(tf.convert_to_tensor(b))
        dtype = a.dtype if a.dtype.size >= b.dtype.size else b.dtype
        return tf.linalg.solve(tf.cast(a, dtype), tf.cast(b, dtype))

    @staticmethod
    def multi_dot(arrays: Sequence[Any]) -> Any:
        tnp = tf_numpy()
        result = tnp.asarray(arrays[0])
        for array in arrays[1:]:
            result = tnp.matmul(result, array)
        return result


def _tf_quantile(a: Any, q: Any, axis: Any, method: str, keepdims: bool) -> Any:
    """`np.quantile` with linear interpolation between the sorted values (NaN where a NaN is
    among them, as NumPy gives)."""
    import tensorflow as tf

    tnp = tf_numpy()
    a = _tf_inexact(tnp.asarray(a))
    if method != "linear" or keepdims or a.dtype.is_complex:
        raise NotImplementedError("quantile other than linear")
    if axis is None:
        a, axis = tnp.ravel(a), 0
    if not isinstance(axis, int):
        raise NotImplementedError("quantile over several axes")
    axis = axis % len(a.shape)
    moved = tnp.moveaxis(a, axis, -1)
    n = int(moved.shape[-1])
    ordered = tf.sort(moved, axis=-1)
    q = np.asarray(q, dtype=np.float64)
    position = q * (n - 1)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, n - 1)
    t = tf.constant(position - low, a.dtype)
    below, above = tf.gather(ordered, low, axis=-1), tf.gather(ordered, high, axis=-1)
    value = tf.where(t >= 0.5, above - (above - below) * (1 - t), below + (above - below) * t)
    has_nan = tnp.any(tnp.isnan(moved), axis=-1)
    value = tf.where(has_nan[..., None] if q.ndim else has_nan, tf.constant(math.nan, a.dtype), value)
    return tnp.moveaxis(value, -1, 0) if q.ndim else value


def _tf_nanquantile(a: Any, q: Any, axis: Any, method: str, keepdims: bool) -> Any:
    """`np.nanquantile`: the quantile of each slice's values that are not NaN (NaN sorted last as
    +inf, each slice's count setting its positions), NaN where a slice has none."""
    import tensorflow as tf

    tnp = tf_numpy()
    a = _tf_inexact(tnp.asarray(a))
    if method != "linear" or keepdims or a.dtype.is_complex:
        raise NotImplementedError("nanquantile other than linear")
    if axis is None:
        a, axis = tnp.ravel(a), 0
    if not isinstance(axis, int):
        raise NotImplementedError("nanquantile over several axes")
    moved = tnp.moveaxis(a, axis % len(a.shape), -1)
    missing = tnp.isnan(moved)
    ordered = tf.sort(tf.where(missing, tf.constant(math.inf, a.dtype), moved), axis=-1)
    count = tf.reduce_sum(tf.cast(tf.logical_not(missing), a.dtype), axis=-1, keepdims=True)
    q = np.asarray(q, dtype=np.float64)
    position = tf.constant(np.atleast_1d(q), a.dtype) * tf.maximum(count - 1, 0)
    low = tf.floor(position)
    t = position - low
    low_index = tf.cast(low, tf.int64)
    high_index = tf.minimum(low_index + 1, tf.maximum(tf.cast(count, tf.int64) - 1, 0))
    below = tf.gather(ordered, low_index, axis=-1, batch_dims=len(moved.shape) - 1)
    above = tf.gather(ordered, high_index, axis=-1, batch_dims=len(moved.shape) - 1)
    value = tf.where(t >= 0.5, above - (above - below) * (1 - t), below + (above - below) * t)
    value = tf.where(count > 0, value, tf.constant(math.nan, a.dtype))
    return tnp.moveaxis(value, -1, 0) if q.ndim else value[..., 0]
