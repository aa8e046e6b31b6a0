"""The NumPy functions abir runs per member, and how each batches (`FUNCTIONS`)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

# -- the functions -------------------------------------------------------------------------------

UFUNC = "ufunc"
"""Broadcasts member by member (ufuncs, gufuncs, and functions like them, with `core` ranks)."""
AXIS = "axis"
"""Works along the axes its axis parameters name, member axes otherwise independent."""
LOOP = "loop"
"""No whole-batch rule on NumPy: called once per member."""

FLATTEN, ALL_AXES, FLATTEN_RESTORE = "flatten", "all", "flatten-restore"
"""What `axis=None` means to an AXIS function: the flattened member, every member axis, or the
flattened member reshaped back (`np.roll`)."""


@dataclass(frozen=True)
class NumpyFunction:
    """How a NumPy function batches. `static` parameters must be compile-time (they set the
    result's shape); axis parameters always are."""

    name: str
    batching: str = LOOP
    axes: tuple[str, ...] = ()
    """AXIS: the parameters that name axes of the first argument (shifted past the batch axis)."""
    none_axis: str = FLATTEN
    static: tuple[str, ...] = ()
    core: tuple[int, ...] = ()
    """UFUNC: the member rank each array argument's core takes (missing: 0)."""
    elementwise_in: tuple[str, ...] = ()
    """UFUNC: the parameters that broadcast member by member; empty: every parameter."""
    outputs: int | Callable[[dict[str, Any]], int] = 1
    view: bool = False
    """Whether NumPy returns a view of the first argument."""

    def output_count(self, static_arguments: dict[str, Any]) -> int:
        return self.outputs(static_arguments) if callable(self.outputs) else self.outputs


def _axis(name: str, *axes: str, none_axis: str = FLATTEN, static: tuple[str, ...] = (), **kw: Any) -> NumpyFunction:
    return NumpyFunction(name, AXIS, axes or ("axis",), none_axis, static, **kw)


def _ufunc(name: str, *elementwise_in: str, static: tuple[str, ...] = (), **kw: Any) -> NumpyFunction:
    return NumpyFunction(name, UFUNC, static=static, elementwise_in=elementwise_in, **kw)


def _loop(name: str, *static: str, **kw: Any) -> NumpyFunction:
    return NumpyFunction(name, LOOP, static=static, **kw)


def _stacked(name: str, *core: int, static: tuple[str, ...] = (), **kw: Any) -> NumpyFunction:
    return NumpyFunction(name, UFUNC, static=static, core=core or (2,), **kw)


def _svd_outputs(arguments: dict[str, Any]) -> int:
    return 3 if arguments.get("compute_uv", True) else 1


def _split_outputs(arguments: dict[str, Any]) -> int:
    sections = arguments.get("indices_or_sections")
    return int(sections) if isinstance(sections, int | np.integer) else len(sections) + 1


def _qr_outputs(arguments: dict[str, Any]) -> int:
    return 1 if arguments.get("mode", "reduced") == "r" else 2


_FUNCTIONS: tuple[NumpyFunction, ...] = (
    # elementwise functions that are not ufuncs (every ufunc is one: `resolve`)
    _ufunc("round", "a", static=("decimals",)), _ufunc("around", "a", static=("decimals",)),
    _ufunc("real", view=True), _ufunc("imag", view=True), _ufunc("conj"), _ufunc("conjugate"),
    _ufunc("angle", "z", static=("deg",)), _ufunc("isclose", "a", "b"), _ufunc("sinc"), _ufunc("i0"),
    _ufunc("fix"), _ufunc("nan_to_num", "x", static=("copy",)), _ufunc("isreal"), _ufunc("iscomplex"),
    _ufunc("isneginf"), _ufunc("isposinf"), _ufunc("zeros_like", "a", static=("dtype", "shape")),
    _ufunc("ones_like", "a", static=("dtype", "shape")), _ufunc("empty_like", "prototype", static=("dtype", "shape")),
    _ufunc("full_like", "a", "fill_value", static=("dtype", "shape")), _ufunc("copy", "a"),
    _ufunc("asarray", "a", static=("dtype",), view=True), _ufunc("interp", "x"), _ufunc("polyval", "x"),
    _ufunc("digitize", "x", static=("right",)), _ufunc("isin", "element", static=("invert",)),
    _ufunc("where", "condition", "x", "y"),
    # along axes
    _axis("flip", none_axis=ALL_AXES, view=True), _axis("roll", none_axis=FLATTEN_RESTORE),
    _axis("sort", static=("kind",)), _axis("argsort", static=("kind", "stable")),
    _axis("diff", static=("n",)), _axis("median"), _axis("percentile", static=("method",)),
    _axis("quantile", static=("method",)), _axis("nanmedian"), _axis("nanpercentile", static=("method",)),
    _axis("nanquantile", static=("method",)), _axis("nanmean"), _axis("nansum"), _axis("nanprod"),
    _axis("nanmax"), _axis("nanmin"), _axis("nanstd", static=("ddof",)), _axis("nanvar", static=("ddof",)),
    _axis("nanargmax"), _axis("nanargmin"), _axis("nancumsum"), _axis("nancumprod"), _axis("ptp"),
    _axis("count_nonzero"), _axis("average"), _axis("trapezoid"), _axis("unwrap"),
    _axis("cumulative_sum", static=("include_initial",)), _axis("cumulative_prod", static=("include_initial",)),
    _axis("take"), _axis("take_along_axis"), _axis("expand_dims", view=True),
    _axis("swapaxes", "axis1", "axis2", view=True), _axis("moveaxis", "source", "destination", view=True),
    _axis("trace", "axis1", "axis2", static=("offset",)), _axis("diagonal", "axis1", "axis2", static=("offset",), view=True),
    _axis("rot90", "axes", static=("k",), view=True), _axis("repeat", static=("repeats",)),
    _axis("partition", static=("kth",)), _axis("argpartition", static=("kth",)),
    _axis("pad", static=("pad_width", "mode", "stat_length", "reflect_type")),
    _axis("fft.fft", static=("n", "norm")), _axis("fft.ifft", static=("n", "norm")),
    _axis("fft.rfft", static=("n", "norm")), _axis("fft.irfft", static=("n", "norm")),
    _axis("fft.hfft", static=("n", "norm")), _axis("fft.ihfft", static=("n", "norm")),
    _axis("fft.fft2", "axes", static=("s", "norm")), _axis("fft.ifft2", "axes", static=("s", "norm")),
    _axis("fft.rfft2", "axes", static=("s", "norm")), _axis("fft.irfft2", "axes", static=("s", "norm")),
    _axis("fft.fftn", "axes", none_axis=ALL_AXES, static=("s", "norm")),
    _axis("fft.ifftn", "axes", none_axis=ALL_AXES, static=("s", "norm")),
    _axis("fft.rfftn", "axes", none_axis=ALL_AXES, static=("s", "norm")),
    _axis("fft.irfftn", "axes", none_axis=ALL_AXES, static=("s", "norm")),
    _axis("fft.fftshift", "axes", none_axis=ALL_AXES), _axis("fft.ifftshift", "axes", none_axis=ALL_AXES),
    # stacked linear algebra (the last two axes; any leading ones are stacks)
    _stacked("linalg.inv"), _stacked("linalg.det"), _stacked("linalg.slogdet", outputs=2),
    _stacked("linalg.cholesky", static=("upper",)), _stacked("linalg.eigh", static=("UPLO",), outputs=2),
    _stacked("linalg.eigvalsh", static=("UPLO",)), _stacked("linalg.qr", static=("mode",), outputs=_qr_outputs),
    _stacked("linalg.svd", static=("full_matrices", "compute_uv", "hermitian"), outputs=_svd_outputs),
    _stacked("linalg.svdvals"), _stacked("linalg.pinv", static=("hermitian",)),
    _stacked("linalg.matrix_rank", static=("hermitian",)), _stacked("linalg.matrix_power", static=("n",)),
    _stacked("linalg.matrix_transpose", view=True), _stacked("matrix_transpose", view=True),
    _stacked("triu", static=("k",)), _stacked("tril", static=("k",)),
    _stacked("vecdot", 1, 1), _stacked("linalg.vecdot", 1, 1), _stacked("linalg.cross", 1, 1),
    _stacked("linalg.matmul", 2, 2),
    # member by member
    _loop("linalg.solve"), _loop("linalg.outer"), _loop("linalg.norm", "ord", "axis", "keepdims"),
    _loop("linalg.vector_norm", "ord", "axis", "keepdims"), _loop("linalg.matrix_norm", "ord", "keepdims"),
    _loop("linalg.cond", "p"), _loop("linalg.multi_dot"), _loop("linalg.lstsq", "rcond", outputs=4),
    _loop("linalg.trace", "offset"), _loop("linalg.diagonal", "offset"), _loop("linalg.tensorsolve", "axes"),
    _loop("linalg.tensorinv", "ind"),
    _loop("einsum", "subscripts", "optimize"), _loop("tensordot", "axes"), _loop("vdot"), _loop("kron"),
    _loop("cross", "axisa", "axisb", "axisc", "axis"), _loop("convolve", "mode"), _loop("correlate", "mode"),
    _loop("searchsorted", "side"), _loop("diag", "k"), _loop("diagflat", "k"), _loop("vander", "N", "increasing"),
    _loop("tile", "reps"), _loop("fliplr", view=True), _loop("flipud", view=True), _loop("append", "axis"),
    _loop("insert", "obj", "axis"), _loop("delete", "obj", "axis"), _loop("hstack"), _loop("vstack"),
    _loop("dstack"), _loop("column_stack"), _loop("atleast_1d", view=True), _loop("atleast_2d", view=True),
    _loop("atleast_3d", view=True), _loop("broadcast_to", "shape", view=True), _loop("resize", "new_shape"),
    _loop("split", "indices_or_sections", "axis", outputs=_split_outputs),
    _loop("array_split", "indices_or_sections", "axis", outputs=_split_outputs),
    _loop("histogram", "bins", "range", "density", outputs=2), _loop("cov", "rowvar", "bias", "ddof"),
    _loop("corrcoef", "rowvar"), _loop("gradient", "axis", "edge_order"), _loop("select"), _loop("choose", "mode"),
    _loop("array_equal", "equal_nan"), _loop("array_equiv"), _loop("allclose", "rtol", "atol", "equal_nan"),
    _loop("lexsort", "axis"), _loop("ediff1d"), _loop("linspace", "num", "endpoint", "retstep", "dtype", "axis"),
    _loop("logspace", "num", "endpoint", "base", "dtype", "axis"), _loop("geomspace", "num", "endpoint", "dtype", "axis"),
    _loop("full", "shape", "dtype"), _loop("array", "dtype", "ndmin", "copy"), _loop("matvec"), _loop("vecmat"),
    _loop("ravel_multi_index", "dims", "mode", "order"), _loop("unravel_index", "shape", outputs=lambda a: len(a["shape"])),
    _loop("polyder", "m"), _loop("polyint", "m"), _loop("polyadd"), _loop("polysub"),
    _loop("outer"), _loop("inner"), _loop("dot"), _loop("matmul"), _loop("trim_zeros", "trim"),
    _loop("linalg.eig", outputs=2), _loop("linalg.eigvals"),
    _loop("zeros", "shape", "dtype"), _loop("ones", "shape", "dtype"), _loop("empty", "shape", "dtype"),
    _loop("eye", "N", "M", "k", "dtype"), _loop("identity", "n", "dtype"), _loop("tri", "N", "M", "k", "dtype"),
    _loop("arange", "start_or_stop", "stop", "step", "dtype"),
)  # fmt: skip

VALUE_DEPENDENT = frozenset({
    "unique", "unique_values", "unique_counts", "unique_inverse", "unique_all", "nonzero", "flatnonzero",
    "argwhere", "extract", "compress", "bincount", "setdiff1d", "union1d", "intersect1d", "setxor1d",
    "histogram_bin_edges", "real_if_close", "trim_zeros", "polymul", "polydiv", "roots", "poly", "place", "put", "putmask", "copyto", "fill_diagonal",
})  # fmt: skip
"""NumPy functions refused on per-member values: their result's shape (or dtype) depends on each
member's values, or they write into an argument."""

FUNCTIONS: dict[str, NumpyFunction] = {f.name: f for f in _FUNCTIONS if f.name not in VALUE_DEPENDENT}
"""Every NumPy function abir runs per member, by its name under `numpy`."""

METHODS: dict[str, str] = {
    "argsort": "argsort", "round": "round", "trace": "trace", "diagonal": "diagonal", "conj": "conj",
    "conjugate": "conjugate", "repeat": "repeat", "swapaxes": "swapaxes", "take": "take",
    "searchsorted": "searchsorted", "nonzero": "nonzero", "compress": "compress", "choose": "choose",
    "argpartition": "argpartition",
}  # fmt: skip
"""Array methods that are the NumPy function of the same name with the array first."""
ATTRIBUTES: dict[str, str] = {"real": "real", "imag": "imag", "mT": "matrix_transpose"}
"""Array attributes that are a NumPy function of the array."""


def numpy_object(name: str, namespace: Any = np) -> Any:
    for part in name.split("."):
        namespace = getattr(namespace, part, None)
    return namespace


@cache
def _by_object() -> dict[int, str]:
    found: dict[int, str] = {}
    for name in FUNCTIONS:
        obj = numpy_object(name)
        if obj is not None:
            found.setdefault(id(obj), name)
    return found


def numpy_name(fn: Any) -> str | None:
    """`fn`'s name under `numpy` (`"flip"`, `"linalg.solve"`) if it is a NumPy function, else None."""
    if isinstance(fn, np.ufunc):
        return fn.__name__
    module = getattr(fn, "__module__", None) or ""
    if not module.startswith("numpy") or module.startswith("numpy.random"):
        return None
    name = getattr(fn, "__name__", None)
    if name is None:
        return None
    for prefix in ("linalg", "fft"):
        if module.startswith(f"numpy.{prefix}") and getattr(getattr(np, prefix), name, None) is fn:
            return f"{prefix}.{name}"
    return name


def resolve(fn: Any) -> NumpyFunction | None:
    """The entry of NumPy function `fn`: listed in `FUNCTIONS`, or a ufunc (elementwise, or a
    gufunc with its core ranks)."""
    try:
        listed = _by_object().get(id(fn))
    except TypeError:
        return None
    if listed is not None and numpy_object(listed) is fn:
        return FUNCTIONS[listed]
    if isinstance(fn, np.ufunc) and getattr(np, fn.__name__, None) is fn:
        return _ufunc(fn.__name__, outputs=fn.nout, core=_gufunc_core(fn))
    return None


def _gufunc_core(fn: np.ufunc) -> tuple[int, ...]:
    if fn.signature is None:
        return ()
    inputs = fn.signature.split("->")[0]
    return tuple(len([d for d in part.split(",") if d.strip()]) for part in inputs.replace(" ", "").split("),("))


def parameters(fn: Any) -> inspect.Signature | None:
    """`fn`'s signature, or None (ufuncs, some C functions): then arguments bind by position."""
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None
