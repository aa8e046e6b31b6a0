"""Every NumPy call (and Python's `sum`, `max`, `min`, `any`, `all` over an array) means, for each
member, what it means on that member alone: checked call by call against plain Python run per
member, on NumPy, JAX and TensorFlow.

`CALLS` are each written as a user would, on per-member vectors `v`, `w`, `p` (5 floats, `p`
positive), matrices `m` (3x3, well conditioned) and `spd` (symmetric positive definite), vectors
`v3`, `w3` (3 floats) and scalars `n`, `i`, `k` (ints) and `s` (a float). Each must equal the
call made member by member, in value, dtype and shape. `REFUSED` are calls whose result's shape
would differ between members (or that abir does not run per member): each must be an abir error
naming the call's line, never a result.
"""

from __future__ import annotations

import linecache

import numpy as np
import optree
import pytest

import abir
from abir import numpy_calls
from abir.errors import AbirError
from abir.numpy_calls import NotCompilableError
from abir.numpy_calls.numpy_rules import whole_batch_rule

CALLS = [
    "np.arctan2(v, w)",
    "np.hypot(v, w)",
    "np.isclose(v, w)",
    "np.isclose(v, v)",
    "np.exp2(v)",
    "np.cbrt(v)",
    "np.reciprocal(p)",
    "np.rint(v)",
    "np.fix(v)",
    "np.deg2rad(v)",
    "np.rad2deg(v)",
    "np.degrees(v)",
    "np.radians(v)",
    "np.logaddexp2(v, w)",
    "np.fmod(v, 0.7)",
    "np.mod(v, 0.7)",
    "np.copysign(v, w)",
    "np.heaviside(v, 0.5)",
    "np.signbit(v)",
    "np.fmax(v, w)",
    "np.fmin(v, w)",
    "np.float_power(p, 1.5)",
    "np.sinc(v)",
    "np.i0(v)",
    "np.nan_to_num(v)",
    "np.round(v, 2)",
    "np.around(v, 1)",
    "np.real(v)",
    "np.conj(v)",
    "np.angle(v)",
    "np.divmod(v, 0.7)",
    "np.modf(v)",
    "np.frexp(v)",
    "np.ldexp(v, 2)",
    "np.gcd(n, 6)",
    "np.lcm(n, 4)",
    "np.spacing(v)",
    "np.nextafter(v, w)",
    "np.zeros_like(v)",
    "np.ones_like(m)",
    "np.full_like(v, 2.5)",
    "np.full_like(v, s)",
    "np.copy(v)",
    "np.asarray(v)",
    "np.interp(v, XP, FP)",
    "np.interp(s, np.sort(v), w)",
    "np.polyval(COEF, v)",
    "np.polyval(v, s)",
    "np.digitize(v, BINS)",
    "np.isin(n, [1, 2, 3])",
    "np.where(v > 0, v, w)",
    "np.where(v > 0, 1.0, 0.0)",
    "np.clip(v, -0.5, 0.5)",
    "np.sign(v)",
    "np.logical_and(v > 0, w > 0)",
    "np.maximum(v, s)",
    "np.square(v)",
    "np.positive(v)",
    "np.isneginf(v)",
    "np.isreal(v)",
    "np.exp(v, dtype=np.float32)",
    "np.add(v, w)",
    "np.true_divide(v, p)",
    "np.flip(v)",
    "np.flip(m)",
    "np.flip(m, axis=0)",
    "np.flip(m, 1)",
    "np.roll(v, 1)",
    "np.roll(m, 1)",
    "np.roll(m, 1, axis=1)",
    "np.roll(v, k)",
    "np.sort(v)",
    "np.sort(m, axis=0)",
    "np.sort(m, axis=None)",
    "np.argsort(v)",
    "np.argsort(m, axis=0)",
    "np.diff(v)",
    "np.diff(v, n=2)",
    "np.diff(m, axis=0)",
    "np.diff(v, prepend=0.0)",
    "np.median(v)",
    "np.median(m, axis=0)",
    "np.percentile(v, 25)",
    "np.percentile(m, 75, axis=1)",
    "np.percentile(v, [10, 90])",
    "np.quantile(v, 0.3)",
    "np.nanmean(v)",
    "np.nansum(m, axis=1)",
    "np.nanmax(v)",
    "np.nanstd(v)",
    "np.nanargmax(v)",
    "np.nancumsum(v)",
    "np.nanmedian(m)",
    "np.nanmedian(m, axis=0)",
    "np.nanpercentile(v, [10, 90])",
    "np.ptp(v)",
    "np.count_nonzero(v > 0)",
    "np.average(v)",
    "np.average(v, weights=WTS)",
    "np.trapezoid(v)",
    "np.unwrap(v * 3)",
    "np.cumulative_sum(v)",
    "np.take(v, [0, 2])",
    "np.take(v, i)",
    "np.take_along_axis(m, np.argsort(m, axis=1), axis=1)",
    "np.expand_dims(v, 0)",
    "np.expand_dims(v, -1)",
    "np.swapaxes(m, 0, 1)",
    "np.moveaxis(m, 0, -1)",
    "np.trace(m)",
    "np.trace(m, offset=1)",
    "np.diagonal(m)",
    "np.rot90(m)",
    "np.repeat(v, 2)",
    "np.repeat(m, 2, axis=0)",
    "np.pad(v, 1)",
    "np.pad(m, ((1, 0), (0, 2)))",
    'np.pad(v, 2, mode="edge")',
    "np.pad(v, (1, 2), constant_values=9.0)",
    "np.fft.fft(v)",
    "np.fft.ifft(v)",
    "np.fft.rfft(v)",
    "np.fft.irfft(np.fft.rfft(v))",
    "np.fft.fft2(m)",
    "np.fft.fftn(m)",
    "np.fft.fftshift(v)",
    "np.fft.ifftshift(m)",
    "np.fft.fft(v).real",
    "np.fft.fft(v).imag",
    "np.fft.hfft(v)",
    "np.linalg.inv(m)",
    "np.linalg.det(m)",
    "np.linalg.slogdet(m)",
    "np.linalg.cholesky(spd)",
    "np.linalg.eigh(spd)",
    "np.linalg.eigvalsh(spd)",
    "np.linalg.qr(m)",
    "np.linalg.svd(m)",
    "np.linalg.svd(m, compute_uv=False)",
    "np.linalg.pinv(m)",
    "np.linalg.matrix_rank(m)",
    "np.linalg.matrix_power(m, 3)",
    "np.triu(m)",
    "np.tril(m, -1)",
    "np.linalg.solve(m, v3)",
    "np.linalg.solve(m, m)",
    'np.linalg.norm(m, "fro")',
    "np.linalg.norm(v, 1)",
    "np.linalg.norm(m, 2)",
    "np.linalg.norm(v, np.inf)",
    "np.linalg.cond(m)",
    "np.linalg.multi_dot([m, m, m])",
    "np.linalg.lstsq(m, v3)",
    'np.einsum("ij,j->i", m, v3)',
    'np.einsum("ii", m)',
    'np.einsum("ij->ji", m)',
    'np.einsum("i,i", v, w)',
    "np.tensordot(m, m)",
    "np.vdot(v, w)",
    "np.kron(v3, v3)",
    "np.cross(v3, w3)",
    "np.convolve(v, w)",
    "np.correlate(v, w)",
    'np.convolve(v, [1.0, -1.0], mode="valid")',
    "np.searchsorted(np.sort(v), s)",
    "np.searchsorted(SORTED, v)",
    "np.diag(v)",
    "np.diag(m)",
    "np.diag(m, 1)",
    "np.vander(v3)",
    "np.tile(v, 2)",
    "np.tile(v, (2, 1))",
    "np.fliplr(m)",
    "np.flipud(m)",
    "np.append(v, w)",
    "np.append(v, 1.0)",
    "np.insert(v, 1, s)",
    "np.delete(v, [0, 2])",
    "np.hstack([v, w])",
    "np.vstack([v, w])",
    "np.dstack([v, w])",
    "np.column_stack([v, w])",
    "np.atleast_2d(v)",
    "np.broadcast_to(v, (2, 5))",
    "np.resize(v, 7)",
    "np.split(m, 3)",
    "np.array_split(v, 2)",
    "np.histogram(v, bins=3, range=(-2, 2))",
    "np.cov(m)",
    "np.corrcoef(m)",
    "np.gradient(v)",
    "np.select([v > 0.5, v < -0.5], [v, -v], 0.0)",
    "np.array_equal(v, w)",
    "np.allclose(v, v)",
    "np.lexsort((v, w))",
    "np.ediff1d(v)",
    "np.linspace(0.0, s, 4)",
    "np.full(3, s)",
    "np.array([s, 2 * s])",
    "np.vecdot(v, w)",
    "np.matrix_transpose(m)",
    "m.mT",
    "np.unravel_index(n, (3, 4))",
    "np.polyder(v)",
    "np.outer(v, w)",
    "np.inner(v, w)",
    "np.dot(m, v3)",
    "np.concatenate([v, w])",
    "np.stack([v, w], axis=1)",
    "np.transpose(m)",
    "np.reshape(m, (9,))",
    "np.squeeze(m[None])",
    "np.ravel(m)",
    "np.cumsum(m, axis=0)",
    "np.cumprod(v)",
    "np.sum(m, axis=0)",
    "np.mean(m, axis=1)",
    "np.std(v)",
    "np.var(m, axis=0)",
    "np.max(m, axis=1)",
    "np.argmax(m, axis=0)",
    "np.prod(v)",
    "np.any(v > 1)",
    "np.all(m > -3, axis=0)",
    "np.linalg.norm(v)",
    "np.size(m)",
    "np.ndim(m)",
    "v.argsort()",
    "v.round(2)",
    "m.trace()",
    "m.diagonal()",
    "v.conj()",
    "v.repeat(2)",
    "m.swapaxes(0, 1)",
    "v.take([1, 3])",
    "np.sort(v).searchsorted(s)",
    "v.real",
    "v.imag",
    "m.T",
    "m.sum(axis=1)",
    "m.mean(axis=0)",
    "m.max(axis=1)",
    "v.cumsum()",
    "v.std(ddof=1)",
    "m.reshape(9)",
    "m.flatten()",
    "v.clip(-0.1, 0.1)",
    "v.astype(np.float32)",
    "m.dot(v3)",
    "v.copy()",
    "m.ravel()",
    "sum(v)",
    "sum(v, 10.0)",
    "sum(m)",
    "max(v)",
    "min(v)",
    "any(v > 0)",
    "all(v > -5)",
]

REFUSED = [
    "np.unique(v)",
    "np.nonzero(v > 0)",
    "np.flatnonzero(v)",
    "np.zeros(len(v))",
    "np.argwhere(v)",
    "np.apply_along_axis(np.sum, 0, m)",
    "np.bincount(n)",
    "np.compress(v > 0, v)",
    "np.trim_zeros(v)",
    "v.nonzero()",
    "np.arange(n)",
    "np.repeat(v, n)",
    "np.polymul(v3, w3)",
    "max(m)",
]

PARAMETERS = "v, w, p, m, spd, n, s, i, k, v3, w3"
CONSTANTS = {
    "XP": np.array([-2.0, 0.0, 2.0]),
    "FP": np.array([0.0, 1.0, 4.0]),
    "COEF": np.array([1.0, -2.0, 0.5]),
    "BINS": np.array([-1.0, 0.0, 1.0]),
    "WTS": np.array([1.0, 2.0, 3.0, 4.0, 5.0]),
    "SORTED": np.array([-1.0, -0.2, 0.3, 1.1]),
}
BATCH = 4
GROUP = 40
"""Calls per batched function on JAX and TF (one compilation each)."""


def _arguments() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(BATCH, 3, 3))
    return {
        "v": rng.normal(size=(BATCH, 5)),
        "w": rng.normal(size=(BATCH, 5)),
        "p": rng.uniform(0.5, 2.0, size=(BATCH, 5)),
        "m": a + 3 * np.eye(3),
        "spd": a @ a.transpose(0, 2, 1) + np.eye(3),
        "n": rng.integers(1, 10, size=BATCH),
        "s": rng.normal(size=BATCH),
        "i": rng.integers(0, 5, size=BATCH),
        "k": rng.integers(-3, 3, size=BATCH),
        "v3": rng.normal(size=(BATCH, 3)),
        "w3": rng.normal(size=(BATCH, 3)),
    }


ARGUMENTS = _arguments()


def _define(name: str, body: str) -> object:
    """A function `name(PARAMETERS)` returning `body`, with source abir can read."""
    filename = f"<numpy-calls {name}>"
    source = f"def {name}({PARAMETERS}):\n    return {body}\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = {"np": np, **CONSTANTS}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def _per_member(fn: object) -> list:
    names = PARAMETERS.split(", ")
    return [fn(*(ARGUMENTS[a][b] for a in names)) for b in range(BATCH)]  # type: ignore[operator]


def _batched(fn: object, backend: str) -> object:
    ctx = abir.Context()
    return ctx.batch()(fn)(*(ARGUMENTS[a] for a in PARAMETERS.split(", ")), backend=backend)


def _assert_same(call: str, got: object, members: list) -> None:
    expected_leaves = [optree.tree_leaves(m) for m in members]
    got_leaves = optree.tree_leaves(got)
    assert len(got_leaves) == len(expected_leaves[0]), call
    for k, leaf in enumerate(got_leaves):
        expected = np.stack([np.asarray(m[k]) for m in expected_leaves])
        leaf = np.asarray(leaf)
        assert leaf.dtype == expected.dtype, f"{call}: dtype {leaf.dtype}, per member {expected.dtype}"
        assert leaf.shape == expected.shape, f"{call}: shape {leaf.shape}, per member {expected.shape}"
        np.testing.assert_allclose(leaf, expected, rtol=1e-6, atol=1e-9, err_msg=call)


def _run_under_xla(fn: object) -> object:
    ctx = abir.Context()
    backend = abir.TensorFlowBackend(jit_compile=True)
    return ctx.batch()(fn)(*(ARGUMENTS[a] for a in PARAMETERS.split(", ")), backend=backend)


def not_compilable_under_xla(calls: list[str]) -> list[str]:
    """The calls that raise `NotCompilableError` when compiled alone under
    `TensorFlowBackend(jit_compile=True)` (they run through `tf.numpy_function`); each must
    name the call's line and the fix. Count them with `len(not_compilable_under_xla(CALLS))`."""
    found = []
    for call in calls:
        try:
            _run_under_xla(_define("xla", call))
        except NotCompilableError as error:
            assert "<numpy-calls xla>:2" in str(error) and "jit_compile=False" in str(error), (call, str(error))
            found.append(call)
    return found


NOT_XLA_COMPILABLE = [
    "np.i0(v)",
    "np.frexp(v)",
    "np.spacing(v)",
    "np.nanargmax(v)",
    "np.linalg.eigh(spd)",
    "np.linalg.svd(m)",
    "np.linalg.pinv(m)",
    "np.linalg.lstsq(m, v3)",
    'np.histogram(v, bins=3, range=(-2, 2))',
    "np.unravel_index(n, (3, 4))",
]
"""The calls no rule in TF's own ops runs (on `tf.numpy_function`, which XLA cannot compile)."""


def test_enough_calls_are_checked():
    assert len(CALLS) + len(REFUSED) >= 150
    assert len(set(CALLS)) == len(CALLS)


@pytest.mark.parametrize("call", CALLS)
def test_call_on_numpy_equals_the_call_per_member(call):
    fn = _define("numpy_call", call)
    _assert_same(call, _batched(fn, "numpy"), _per_member(fn))


def alternate_groups(kept: int) -> list:
    """The starts of the groups of `CALLS`, every other one (the even groups for `kept=0`) in
    `make test` and the rest `full`: `make test` runs each call on one compiled backend, the even
    groups on JAX and the odd ones on TF under XLA (test/unit/conftest.py, rule 2)."""
    return [start if start // GROUP % 2 == kept else pytest.param(start, marks=pytest.mark.full)
            for start in range(0, len(CALLS), GROUP)]


@pytest.mark.parametrize("backend", ["jax", "tf"])
@pytest.mark.parametrize("start", alternate_groups(0))
@pytest.mark.make_test_keeps({"backend": "jax"})
def test_calls_on_compiled_backends_equal_the_calls_per_member(backend, start):
    """On TF under `full` only: `make test` runs the other groups of calls on TF under XLA (the
    next test) and the calls XLA cannot compile in TF's plain `tf.function` (the one after)."""
    group = CALLS[start : start + GROUP]
    fn = _define(f"calls_{start}", "(" + ", ".join(group) + ",)")
    got = _batched(fn, backend)
    members = _per_member(fn)
    for k, call in enumerate(group):
        _assert_same(call, got[k], [m[k] for m in members])


@pytest.mark.parametrize("start", alternate_groups(1))
def test_calls_under_xla_equal_the_calls_per_member(start):
    group = [c for c in CALLS[start : start + GROUP] if c not in NOT_XLA_COMPILABLE]
    fn = _define(f"xla_calls_{start}", "(" + ", ".join(group) + ",)")
    got = _run_under_xla(fn)
    members = _per_member(fn)
    for k, call in enumerate(group):
        _assert_same(call, got[k], [m[k] for m in members])


def test_calls_outside_xla_on_tf_equal_the_calls_per_member():
    """The calls XLA cannot compile, on the default TF backend: its plain `tf.function`."""
    fn = _define("calls_outside_xla", "(" + ", ".join(NOT_XLA_COMPILABLE) + ",)")
    got = _batched(fn, "tf")
    members = _per_member(fn)
    for k, call in enumerate(NOT_XLA_COMPILABLE):
        _assert_same(call, got[k], [m[k] for m in members])


def test_calls_not_compilable_under_xla_are_pinned_and_located():
    assert set(NOT_XLA_COMPILABLE) <= set(CALLS)
    assert not_compilable_under_xla(NOT_XLA_COMPILABLE) == NOT_XLA_COMPILABLE


@pytest.mark.parametrize("backend", ["numpy", "jax", "tf"])
@pytest.mark.parametrize("call", REFUSED)
def test_call_whose_result_shape_may_differ_per_member_is_refused(call, backend):
    fn = _define("refused", call)
    with pytest.raises(AbirError, match=r"<numpy-calls refused>:2"):
        _batched(fn, backend)


def test_numpy_calls_are_array_prims_not_opaque_callables():
    fn = _define("in_the_ir", "(" + ", ".join(CALLS[:GROUP]) + ",)")
    ctx = abir.Context()
    ctx.batch()(fn)
    text = str(ctx.program("in_the_ir"))
    assert "functional.opaque" not in text
    assert 'functional.prim "numpy" <{function = "arctan2"' in text


def spectrum_power(z, n):
    power = z * 0
    while n > 0:
        power = power + z * z.conj()
        n = n - 1
    return power, np.abs(z), z.real, np.angle(z)


@pytest.mark.parametrize("backend", ["numpy", "jax", "tf"])
def test_complex_values_mix_with_real_literals_and_prims(backend):
    z = np.array([[1 + 2j, 3 - 1j], [0.5j, 2 + 0j], [1, 1j]])
    n = np.array([1, 2, 3])
    got = abir.Context().batch()(spectrum_power)(z, n, backend=backend)
    _assert_same("spectrum_power", got, [spectrum_power(z[b], n[b]) for b in range(3)])


def _rows(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    sorted_rows = np.sort(rng.integers(0, 5, size=(30, 7)).astype(float), axis=1)
    sorted_rows[::3, -2:] = np.nan
    values = rng.integers(-1, 6, size=(30, 4)).astype(float)
    values[::4, 0] = np.nan
    points = np.sort(rng.normal(size=(30, 6)), axis=1)
    points[:, 2] = points[:, 3]
    return {
        "sorted": sorted_rows, "values": values, "points": points, "samples": rng.normal(size=(30, 6)),
        "x": np.concatenate([points[:, :2], 3 * rng.normal(size=(30, 5))], axis=1),
        "long": rng.normal(size=(30, 9)), "short": rng.integers(-3, 4, size=(30, 3)),
        "float32": rng.normal(size=(30, 8)).astype(np.float32), "ints": rng.integers(0, 7, size=(30, 12)),
    }  # fmt: skip


WHOLE_BATCH_NUMPY = [
    ("searchsorted", ["sorted", "values"], {}),
    ("searchsorted", ["sorted", "values"], {"side": "right"}),
    ("interp", ["x", "points", "samples"], {}),
    ("interp", ["x", "points", "samples"], {"left": -5.0, "right": 7.0}),
    ("convolve", ["long", "short"], {"mode": "same"}),
    ("convolve", ["short", "long"], {"mode": "valid"}),
    ("correlate", ["short", "long"], {"mode": "full"}),
    ("correlate", ["long", "short"], {"mode": "same"}),
    ("histogram", ["long"], {"bins": 4, "range": (-1.5, 2)}),
    ("histogram", ["float32"], {"bins": 3, "range": (-2, 2)}),
    ("histogram", ["ints"], {"bins": 5}),
    ("gradient", ["long"], {"edge_order": 2}),
]
"""Calls the NumPy path runs with a whole-batch rule of its own (not member by member), on
values that reach their edge cases (NaN, ties, values on bin edges, either argument longer)."""


@pytest.mark.parametrize(("function", "operands", "kwargs"), WHOLE_BATCH_NUMPY)
def test_whole_batch_numpy_rule_equals_the_call_per_member(function, operands, kwargs):
    rows = _rows(1)
    values = [rows[name] for name in operands]
    template = numpy_calls.encode_arguments([numpy_calls.Operand(k) for k in range(len(values))], kwargs)
    for output in range(2 if function == "histogram" else 1):
        rule = whole_batch_rule(numpy_calls.bind_call(function, template, output), values, np)
        assert rule is not None, function
        got = rule()
        call = getattr(np, function)
        members = [call(*(v[b] for v in values), **kwargs) for b in range(len(values[0]))]
        expected = np.stack([m[output] if isinstance(m, tuple) else m for m in members])
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0, err_msg=function)
