"""NumPy functions with their per-member meaning: the `numpy` array prim.

A call `np.flip(v)` in a batched function means, for each member, `np.flip` of that member's
`v`. The frontend lowers such a call to the array prim

    functional.prim "numpy" <{function = "flip", arguments = "<template>", output = 0}>(%v)

whose `function` names the NumPy function (`"flip"`, `"linalg.solve"`, `"fft.rfft"`), whose
`arguments` template (a Python literal, `encode_arguments`) holds the call's compile-time
arguments with `{'operand': k}` where the k-th operand goes, and whose `output` selects one result of a function
that returns several (`slogdet`, `eigh`, `divmod`). `FUNCTIONS` lists every function abir
knows, with how it batches; `resolve` finds a callable's entry; a NumPy function missing from it
is refused by the frontend, never called on the whole batch.

`make_call` builds the run-time callable, given whole-batch operands `[B, *member_shape]` (or a
batch of 1 for constants) of any backend:
* NumPy: a batching rule where the function has one (a ufunc or gufunc with the batch as a loop
  dimension, an axis function with its axes shifted past the batch axis, a stacked linear-algebra
  function), else the function called member by member and the results stacked;
* JAX: `jax.vmap` of the `jax.numpy` counterpart (a host callback of the NumPy path where
  `jax.numpy` has none);
* TensorFlow: the NumPy path as a `tf.numpy_function` (not XLA-compilable).
Results are cast to the dtype NumPy gives, so every backend agrees with type inference.

Linear algebra on a singular or indefinite member gives NaN, as under JAX, instead of raising
`LinAlgError`: the prim also runs on the rows of members standing at other blocks, whose values
may be junk (`abir.array_ops`).
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import linecache
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from abir.errors import AbirError

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


def _numpy_object(name: str, namespace: Any = np) -> Any:
    for part in name.split("."):
        namespace = getattr(namespace, part, None)
    return namespace


@cache
def _by_object() -> dict[int, str]:
    found: dict[int, str] = {}
    for name in FUNCTIONS:
        obj = _numpy_object(name)
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
    if listed is not None and _numpy_object(listed) is fn:
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


# -- argument templates ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Operand:
    """Where the k-th batched operand goes in a call's arguments."""

    index: int


class NotCompilableError(AbirError):
    """A NumPy call that cannot run where the program is compiled (NumPy code under XLA), at
    the call's line in the user's function."""


_CALL_SITES: dict[tuple[str, str, int], dict[str, str]] = {}
"""The source lines (`file:line` to the call's text) each `numpy` prim was written at, by
(function, arguments, output): prims lose their location once typed (equal prims are merged),
so run-time errors look it up here."""


def remember_call_site(function: str, arguments: str, output: int, location: str, source: str) -> None:
    """Record that the prim (`function`, `arguments`, `output`) is the call `source` at `location`."""
    _CALL_SITES.setdefault((function, arguments, output), {})[location] = source


def _call_site(call: Call) -> str:
    """Where the user wrote `call`: `file:line` and the line's text (each place, if several)."""
    sites = _CALL_SITES.get((call.entry.name, encode_arguments(call.args, call.kwargs), call.output), {})
    if not sites:
        return f"np.{call.entry.name}"
    places = []
    for location, source in sites.items():
        filename, _, line = location.rpartition(":")
        text = linecache.getline(filename, int(line)).strip() if line.isdigit() else ""
        places.append(f"{location}: `{source}`" + (f"\n    {text}" if text else ""))
    return "\n".join(places) + "\n"


def _not_compilable_message(call: Call) -> str:
    return (
        f"{_call_site(call)}np.{call.entry.name} runs per member through NumPy on TensorFlow (no rule in "
        "TF's ops gives NumPy's result for it), which XLA cannot compile: run it with "
        "TensorFlowBackend(jit_compile=False), or on the JAX backend"
    )


class UnencodableArgument(TypeError):
    """A compile-time argument the IR cannot hold (a function, an arbitrary object)."""


def encode_arguments(args: Sequence[Any], kwargs: dict[str, Any]) -> str:
    """The template of a call's arguments, a Python literal (`Operand`s where batched operands
    go): `([{'operand': 0}, 1], {'axis': -1})`."""
    return repr((_encode(list(args)), {k: _encode(kwargs[k]) for k in sorted(kwargs)}))


def decode_arguments(text: str) -> tuple[list[Any], dict[str, Any]]:
    """The arguments a template encodes (`Operand`s where batched operands go); a ValueError
    saying what is malformed."""
    try:
        args, kwargs = ast.literal_eval(text)
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ValueError
        return [_decode(a) for a in args], {str(k): _decode(v) for k, v in kwargs.items()}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, KeyError):
        raise ValueError(
            f"arguments {text[:60]!r} are not a template ([positional], {{keywords}}) of literals, "
            "{'operand': k}, {'array': [...], 'dtype': '<f8'}, {'dtype': '<f8'}, {'scalar': x, 'dtype': ...}, "
            "{'slice': (start, stop, step)}, {'float': 'nan'}, {'complex': (re, im)}, {'ellipsis': True}"
        ) from None


def operand_count(text: str) -> int:
    """How many operands the template of `text` takes (each index once, from 0)."""
    args, kwargs = decode_arguments(text)
    indices = sorted(o.index for o in _operands((args, kwargs)))
    if indices != list(range(len(indices))):
        raise ValueError(f"the operands of arguments {text[:60]!r} are not numbered 0..n-1, once each")
    return len(indices)


def _operands(value: Any) -> list[Operand]:
    if isinstance(value, Operand):
        return [value]
    if isinstance(value, list | tuple):
        return [o for v in value for o in _operands(v)]
    if isinstance(value, dict):
        return [o for v in value.values() for o in _operands(v)]
    return []


def _encode(value: Any) -> Any:
    if isinstance(value, Operand):
        return {"operand": value.index}
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, complex):
        return {"complex": (_encode(value.real), _encode(value.imag))}
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        return {"scalar": _encode(value.item()), "dtype": value.dtype.str}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biufc":
        return {"array": _encode(value.tolist()), "dtype": value.dtype.str}
    if isinstance(value, np.dtype) or isinstance(value, type) and issubclass(value, np.generic | bool | int | float | complex):
        return {"dtype": np.dtype(value).str}
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_encode(v) for v in value)
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, slice):
        return {"slice": (_encode(value.start), _encode(value.stop), _encode(value.step))}
    if value is Ellipsis:
        return {"ellipsis": True}
    raise UnencodableArgument(f"a compile-time {type(value).__name__} ({value!r:.40})")


_DECODERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "operand": lambda v: Operand(int(v["operand"])),
    "float": lambda v: float(v["float"]),
    "complex": lambda v: complex(*(_decode(p) for p in v["complex"])),
    "scalar": lambda v: np.dtype(v["dtype"]).type(_decode(v["scalar"])),
    "array": lambda v: np.asarray(_decode(v["array"]), dtype=np.dtype(v["dtype"])),
    "dtype": lambda v: np.dtype(v["dtype"]).type,
    "slice": lambda v: slice(*(_decode(p) for p in v["slice"])),
    "ellipsis": lambda v: Ellipsis,
}
"""Tagged values of a template, by their first tag (`scalar` and `array` also carry `dtype`)."""


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_decode(v) for v in value)
    if not isinstance(value, dict):
        return value
    tag = next((t for t in _DECODERS if t in value and t != "dtype"), "dtype")
    if tag not in value:
        raise ValueError(f"unknown tagged value {value!r:.60}")
    return _DECODERS[tag](value)


def _fill(template: Any, operands: Sequence[Any]) -> Any:
    if isinstance(template, Operand):
        return operands[template.index]
    if isinstance(template, list):
        return [_fill(v, operands) for v in template]
    if isinstance(template, tuple):
        return tuple(_fill(v, operands) for v in template)
    if isinstance(template, dict):
        return {k: _fill(v, operands) for k, v in template.items()}
    return template


# -- run time ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One NumPy function with its argument template, bound for running on whole batches."""

    entry: NumpyFunction
    args: list[Any]
    kwargs: dict[str, Any]
    output: int
    bound: dict[str, Any] = field(default_factory=dict)
    """The template's arguments by parameter name (positional ones included, when the
    function has a signature)."""

    def member(self, operands: Sequence[Any]) -> Any:
        """The function on one member's operands (NumPy), the selected output as an array."""
        fn = _numpy_object(self.entry.name)
        result = fn(*_fill(self.args, operands), **_fill(self.kwargs, operands))
        if self.entry.output_count(self.bound) > 1 or isinstance(result, tuple | list):
            result = result[self.output]
        return np.asarray(result)


def make_call(function: str, arguments: str, output: int = 0) -> Callable[..., Any]:
    """The callable running NumPy `function` per member on whole-batch operands of any backend."""
    return _make_call(function, arguments, output)


@cache
def _make_call(function: str, arguments: str, output: int) -> Callable[..., Any]:
    entry = entry_named(function)
    args, kwargs = decode_arguments(arguments)
    signature = parameters(_numpy_object(function))
    bound: dict[str, Any] = dict(kwargs)
    if signature is not None:
        with contextlib.suppress(TypeError):
            bound = dict(signature.bind_partial(*args, **kwargs).arguments)
    call = Call(entry, args, kwargs, output, bound)

    def numpy_call(*operands: Any) -> Any:
        family = _family(operands)
        if family == "jax":
            return _jax_call(call, operands)
        if family == "tf":
            return _tf_call(call, operands)
        return _numpy_call(call, [np.asarray(o) for o in operands])

    numpy_call.__qualname__ = f"numpy_call[{function}]"
    return numpy_call


def entry_named(function: str) -> NumpyFunction:
    """The entry of the NumPy function named `function`; a ValueError if abir does not know it."""
    if function in FUNCTIONS:
        return FUNCTIONS[function]
    fn = _numpy_object(function)
    entry = resolve(fn) if fn is not None else None
    if entry is None:
        raise ValueError(f'"{function}" is not a NumPy function abir runs per member')
    return entry


def _family(operands: Sequence[Any]) -> str:
    modules = {type(o).__module__.split(".")[0] for o in operands}
    if "tensorflow" in modules:
        return "tf"
    if "jax" in modules or "jaxlib" in modules:
        return "jax"
    return "numpy"


def _quietly(fn: Callable[[], Any]) -> Any:
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


# -- NumPy -----------------------------------------------------------------------------------------


def _numpy_call(call: Call, operands: list[np.ndarray]) -> np.ndarray:
    batch = max((o.shape[0] for o in operands), default=1)
    if operands:
        fast = _whole_batch_rule(call, operands, np)
        if fast is not None:
            try:
                return _quietly(fast)
            except Exception:  # noqa: BLE001  (a member's own call says what is wrong, or fills in)
                pass
    return _member_by_member(call, operands, batch)


def _member_by_member(call: Call, operands: list[np.ndarray], batch: int) -> np.ndarray:
    rows = [o if o.shape[0] == batch else np.broadcast_to(o, (batch, *o.shape[1:])) for o in operands]
    results: list[np.ndarray | None] = []
    for b in range(batch):
        try:
            results.append(_quietly(lambda b=b: call.member([r[b] for r in rows])))
        except (np.linalg.LinAlgError, FloatingPointError):
            results.append(None)
    shapes = {r.shape for r in results if r is not None}
    if len(shapes) > 1:
        raise ValueError(
            f"np.{call.entry.name} returned results of shapes {sorted(shapes)} for different members; "
            "a per-member result must have one shape for every member"
        )
    template = next((r for r in results if r is not None), None)
    if template is None:
        template = _member_template(call, [r[0] if len(r) else np.zeros(r.shape[1:], r.dtype) for r in rows])
    filler = np.full(template.shape, np.nan if template.dtype.kind in "fc" else 0, template.dtype)
    if not results:
        return np.empty((0, *template.shape), template.dtype)
    return np.stack([filler if r is None else r for r in results])


def _member_template(call: Call, member: list[np.ndarray]) -> np.ndarray:
    """The result of one member whose values made the function fail (a singular matrix): run
    on well-conditioned stand-ins of the same shapes for the result's shape and dtype."""
    stand_ins = [_well_conditioned(m) for m in member]
    return _quietly(lambda: call.member(stand_ins))


def _well_conditioned(x: np.ndarray) -> np.ndarray:
    if x.ndim >= 2 and x.shape[-1] == x.shape[-2] and x.dtype.kind in "fc":
        return np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape).copy()
    return np.ones_like(x)


def _whole_batch_rule(call: Call, operands: list[Any], xp: Any = np) -> Callable[[], Any] | None:
    """The whole-batch computation of `call` in namespace `xp` (NumPy, or TensorFlow's NumPy
    API), if its batching has one for these operands and `xp` has the function."""
    fn = _numpy_object(call.entry.name, xp)
    if fn is None:
        return None
    if call.entry.name in _SPECIAL_RULES:
        return _SPECIAL_RULES[call.entry.name](call, operands, xp, fn)
    if call.entry.batching == UFUNC:
        return _ufunc_rule(call, operands, xp, fn)
    if call.entry.batching == AXIS:
        return _axis_rule(call, operands, xp, fn)
    return None


def _rank(x: Any) -> int:
    return len(x.shape)


def _select_output(call: Call, result: Any, xp: Any) -> Any:
    if call.entry.output_count(call.bound) > 1 or isinstance(result, tuple | list):
        result = result[call.output]
    return xp.asarray(result)


def _top_level_operands(call: Call) -> dict[str, Operand] | None:
    """The parameter each operand is passed as (a whole argument), or None if one sits inside a
    structure."""
    placed: dict[str, Operand] = {}
    for name, value in _named_arguments(call).items():
        if isinstance(value, Operand):
            placed[name] = value
        elif _operands(value):
            return None
    return placed


def _named_arguments(call: Call) -> dict[str, Any]:
    """The template's arguments by parameter name (`#0`, `#1`, ... without a signature)."""
    return call.bound or {**{f"#{i}": a for i, a in enumerate(call.args)}, **call.kwargs}


def _ufunc_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """Elementwise functions and gufuncs: the batch is one more loop dimension, once each
    operand's loop dimensions are padded to a common rank after the batch axis."""
    placed = _top_level_operands(call)
    entry = call.entry
    if placed is None or entry.elementwise_in and not set(placed) <= set(entry.elementwise_in):
        return None
    if entry.name.endswith("_like") and "shape" in call.bound:
        return None
    named = _named_arguments(call)
    cores = {name: (entry.core[i] if i < len(entry.core) else 0) for i, name in enumerate(named)}
    loop_ranks = {name: _rank(operands[p.index]) - 1 - cores[name] for name, p in placed.items()}
    if min(loop_ranks.values(), default=0) < 0:
        return None
    broadcast = entry.elementwise_in or tuple(named)
    static_ranks = [
        np.ndim(v) - cores[name] for name, v in named.items() if name in broadcast and isinstance(v, np.ndarray | list)
    ]
    loop_rank = max([*loop_ranks.values(), *static_ranks, 0])
    aligned = list(operands)
    for name, place in placed.items():
        o = operands[place.index]
        shape = tuple(int(d) for d in o.shape)
        aligned[place.index] = xp.reshape(o, (shape[0], *(1,) * (loop_rank - loop_ranks[name]), *shape[1:]))
    return lambda: _select_output(call, fn(*_fill(call.args, aligned), **_fill(call.kwargs, aligned)), xp)


def _axis_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """Axis functions whose batched operands all are the first argument: the axes shifted past
    the batch axis (`axis=None` per `none_axis`)."""
    if not call.bound or not call.args or not isinstance(call.args[0], Operand):
        return None
    first = call.args[0]
    if any(o.index != first.index for o in _operands((call.args[1:], call.kwargs))):
        return None
    x = operands[first.index]
    if call.entry.name == "pad":
        return _pad_rule(call, x, xp, fn)
    shape = tuple(int(d) for d in x.shape)
    arguments = dict(call.bound)
    restore: tuple[int, ...] | None = None
    for name in call.entry.axes:
        value = arguments.get(name, _default(call.entry.name, name))
        if value is not None:
            arguments[name] = _shift_axes(value)
        elif call.entry.none_axis == ALL_AXES:
            every = tuple(range(1, len(shape)))
            arguments[name] = every[0] if len(every) == 1 else every
        elif call.bound.get("keepdims"):
            return None
        else:
            restore = shape if call.entry.none_axis == FLATTEN_RESTORE else None
            x = xp.reshape(x, (shape[0], -1))
            arguments[name] = 1
    if call.entry.name.endswith(("percentile", "quantile")) and np.ndim(arguments.get("q")) != 0:
        return None
    arguments[next(iter(call.bound))] = x
    positional = [arguments.pop(name) for name in _positional_only(call.entry.name) if name in arguments]

    def run() -> Any:
        result = _select_output(call, fn(*positional, **arguments), xp)
        return xp.reshape(result, restore) if restore is not None else result

    return run


def _positional_only(name: str) -> list[str]:
    signature = parameters(_numpy_object(name))
    if signature is None:
        return []
    return [p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.POSITIONAL_ONLY]


def _default(function: str, parameter: str) -> Any:
    signature = parameters(_numpy_object(function))
    if signature is None or parameter not in signature.parameters:
        return None
    default = signature.parameters[parameter].default
    return None if default is inspect.Parameter.empty else default


def _shift_axes(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return type(value)(_shift_axes(v) for v in value)
    return value + 1 if value >= 0 else value


def _pad_rule(call: Call, x: Any, xp: Any, fn: Callable[..., Any]) -> Callable[[], Any]:
    """`np.pad` with no padding on the batch axis (each per-axis argument gains a first row)."""
    rank = _rank(x) - 1
    widths = np.broadcast_to(np.asarray(call.bound.get("pad_width"), dtype=np.int64), (rank, 2))
    kwargs = {k: v for k, v in call.bound.items() if k not in ("array", "pad_width", "kwargs")}
    kwargs.update(call.bound.get("kwargs", {}))
    for key in ("constant_values", "end_values", "stat_length"):
        if key in kwargs and np.ndim(kwargs[key]) >= 1:
            values = np.broadcast_to(np.asarray(kwargs[key]), (rank, 2))
            kwargs[key] = np.concatenate([np.zeros((1, 2), values.dtype), values])
    return lambda: fn(x, np.concatenate([np.zeros((1, 2), np.int64), widths]), **kwargs)


def _solve_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`solve(a, b)` on stacks; a member's vector `b` becomes a one-column matrix (NumPy reads a
    batch of vectors `[B, n]` as one matrix)."""
    named = _named_arguments(call)
    a, b = named.get("a"), named.get("b")
    if not isinstance(b, Operand) or not isinstance(a, Operand | np.ndarray):
        return None
    rhs = operands[b.index]
    a_value = operands[a.index] if isinstance(a, Operand) else a
    if _rank(rhs) == 2:
        return lambda: fn(a_value, rhs[..., None])[..., 0]
    if _rank(rhs) == 3:
        return lambda: fn(a_value, rhs)
    return None


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _einsum_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`einsum` with a new index for the batch axis on every batched operand and in front of the
    output (an implicit output made explicit first)."""
    subscripts, *inputs = call.args
    if call.kwargs or not isinstance(subscripts, str) or "." in subscripts:
        return None
    spec = subscripts.replace(" ", "")
    ins, _, out = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(inputs) or any(not isinstance(i, Operand | np.ndarray) for i in inputs):
        return None
    if "->" not in spec:
        letters = "".join(terms)
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    batch = next(c for c in _LETTERS if c not in spec)
    terms = [batch + t if isinstance(i, Operand) else t for t, i in zip(terms, inputs, strict=True)]
    values = [operands[i.index] if isinstance(i, Operand) else i for i in inputs]
    return lambda: fn(",".join(terms) + "->" + batch + out, *values)


_SPECIAL_RULES: dict[str, Callable[..., Callable[[], Any] | None]] = {
    "linalg.solve": _solve_rule,
    "einsum": _einsum_rule,
    "searchsorted": lambda *a: _searchsorted_rule(*a),
    "interp": lambda *a: _interp_rule(*a),
    "histogram": lambda *a: _histogram_rule(*a),
    "convolve": lambda *a: _convolution_rule(correlate=False)(*a),
    "correlate": lambda *a: _convolution_rule(correlate=True)(*a),
}
"""Whole-batch rules of functions that batch in their own way (`pad`'s is an axis rule's)."""


# -- JAX and TensorFlow ----------------------------------------------------------------------------


@cache
def result_dtype(call_key: tuple[str, str, int], member_types: tuple[tuple[tuple[int, ...], str], ...]) -> np.dtype:
    """The dtype NumPy gives the call on members of these shapes and dtypes."""
    function, arguments, output = call_key
    members = [np.zeros((1, *shape), dtype) for shape, dtype in member_types]
    return np.dtype(_make_call(function, arguments, output)(*members).dtype)


def _member_types(operands: Sequence[Any]) -> tuple[tuple[tuple[int, ...], str], ...]:
    return tuple((tuple(int(d) for d in o.shape[1:]), np.dtype(getattr(o.dtype, "as_numpy_dtype", o.dtype)).str) for o in operands)


def _call_key(call: Call) -> tuple[str, str, int]:
    return (call.entry.name, encode_arguments(call.args, call.kwargs), call.output)


def _jax_call(call: Call, operands: Sequence[Any]) -> Any:
    import jax
    import jax.numpy as jnp

    dtype = result_dtype(_call_key(call), _member_types(operands))
    fn = _numpy_object(call.entry.name, jnp)
    if fn is None:
        return _jax_host_call(call, operands, dtype)
    batch = max(o.shape[0] for o in operands)
    in_axes = [0 if o.shape[0] == batch and batch != 1 else None for o in operands]
    members = [o if axis == 0 else o[0] for o, axis in zip(operands, in_axes, strict=True)]

    args, kwargs = _as_jax_arguments(call, fn)

    def member(*values: Any) -> Any:
        result = fn(*_fill(args, values), **_fill(kwargs, values))
        if call.entry.output_count(call.bound) > 1 or isinstance(result, tuple | list):
            result = result[call.output]
        return jnp.asarray(result)

    if all(axis is None for axis in in_axes):
        result = member(*members)[None]
    else:
        result = jax.vmap(member, in_axes=in_axes)(*members)
    return result.astype(dtype)


def _as_jax_arguments(call: Call, fn: Callable[..., Any]) -> tuple[list[Any], dict[str, Any]]:
    """The template for `jax.numpy`: compile-time lists of numbers as arrays (it takes no
    lists), and no `dtype=` where the function has none (the result is cast to NumPy's dtype)."""
    args = [_static_lists_as_arrays(a) for a in call.args]
    kwargs = {k: _static_lists_as_arrays(v) for k, v in call.kwargs.items()}
    signature = parameters(fn)
    if "dtype" in kwargs and (signature is None or "dtype" not in signature.parameters):
        del kwargs["dtype"]
    return args, kwargs


def _static_lists_as_arrays(value: Any) -> Any:
    if isinstance(value, list) and not _operands(value):
        return np.asarray(value)
    if isinstance(value, list):
        return [_static_lists_as_arrays(v) for v in value]
    return value


def _jax_host_call(call: Call, operands: Sequence[Any], dtype: np.dtype) -> Any:
    import jax

    batch = max(o.shape[0] for o in operands)
    host, shape = _on_host(call, operands, dtype)
    return jax.pure_callback(host, jax.ShapeDtypeStruct((batch, *shape), dtype), *operands)


def _on_host(call: Call, operands: Sequence[Any], dtype: np.dtype) -> tuple[Callable[..., np.ndarray], tuple[int, ...]]:
    """The NumPy path as a host function of whole-batch arrays, and the member shape it returns."""
    members = [np.zeros((1, *o.shape[1:]), np.dtype(getattr(o.dtype, "as_numpy_dtype", o.dtype))) for o in operands]
    shape = tuple(_numpy_call(call, members).shape[1:])

    def host(*arrays: np.ndarray) -> np.ndarray:
        return _numpy_call(call, [np.asarray(a) for a in arrays]).astype(dtype)

    return host, shape


def _tf_call(call: Call, operands: Sequence[Any]) -> Any:
    """TensorFlow's NumPy API on the whole batch where a batching rule applies, else the NumPy
    path as a `tf.numpy_function` (which XLA cannot compile: an error under XLA)."""
    import tensorflow as tf

    dtype = result_dtype(_call_key(call), _member_types(operands))
    batch = max(int(o.shape[0]) for o in operands)
    operands = [tf.broadcast_to(o, (batch, *o.shape[1:])) if int(o.shape[0]) != batch else o for o in operands]
    host, shape = _on_host(call, operands, dtype)
    for rule in (_tf_rule, lambda c, o: _whole_batch_rule(c, o, _tf_numpy()), _tf_member_map):
        with contextlib.suppress(Exception):  # not traceable with TF's ops: the next rule
            fast = rule(call, list(operands))
            result = None if fast is None else tf.cast(fast(), dtype)
            if result is not None and tuple(result.shape) == (batch, *shape):
                return result
    if tf.executing_eagerly():
        return tf.convert_to_tensor(host(*(o.numpy() for o in operands)))
    if _compiled_by_xla():
        raise NotCompilableError(_not_compilable_message(call))
    result = tf.numpy_function(host, list(operands), tf.as_dtype(dtype), stateful=False)
    result.set_shape((batch, *shape))
    return result


def _compiled_by_xla() -> bool:
    """Whether the TensorFlow graph being built is compiled by XLA."""
    import tensorflow as tf
    from tensorflow.python.ops import control_flow_util

    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


# -- TensorFlow's own ops --------------------------------------------------------------------------


def _tf_rule(call: Call, operands: Sequence[Any]) -> Callable[[], Any] | None:
    """The whole-batch computation of `call` in TensorFlow's own ops (`tf.linalg`, `tf.signal`,
    `tf.sort`, ...; XLA-compilable), for the functions and arguments `_tf_rules` covers."""
    name = call.entry.name
    if name in _TF_OPERAND_RULES:
        return _TF_OPERAND_RULES[name](call, operands)
    rule = _tf_rules().get(name)
    named = _named_arguments(call)
    first = next(iter(named.values()), None)
    if rule is None or not isinstance(first, Operand):
        return None
    static = dict(list(named.items())[1:])
    if _operands(list(static.values())):
        return None
    return rule(call, _tf_inexact(operands[first.index]), static)


def _tf_member_map(call: Call, operands: Sequence[Any]) -> Callable[[], Any] | None:
    """TensorFlow's NumPy API called per member under `tf.vectorized_map` (batched ops where
    TF has batching rules for them, else a loop XLA still compiles)."""
    import tensorflow as tf
    import tensorflow.experimental.numpy as tnp

    fn = _numpy_object(call.entry.name, _tf_numpy())
    if fn is None:
        return None
    args, kwargs = _as_jax_arguments(call, fn)
    signature = parameters(fn)
    if signature is None or not set(kwargs) <= _named_parameters(signature):
        return None  # a keyword TF's function would take through `**kwargs`, maybe ignoring it

    def member(values: tuple[Any, ...]) -> Any:
        result = fn(*_fill(args, values), **_fill(kwargs, values))
        return _select_output(call, result, tnp)

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


def _tf_selected(call: Call, results: Sequence[Any]) -> Any:
    return results[call.output]


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

    if set(static) - {"hermitian"} or static.get("hermitian") or _rank(x) < 3:
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
    if axis is not None or static.get("keepdims") or _rank(x) not in (2, 3):
        return None
    a = tf.abs(x)
    if _rank(x) == 2:
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

    if static.get("p") is not None or _rank(x) != 3:
        return None

    def run() -> Any:
        s = _tf_singular_values(x)
        return s[..., 0] / s[..., -1]

    return run


def _tf_fft_length(static: dict[str, Any], x: Any, inverse_real: bool) -> int | None:
    """The transform length of a one-axis FFT along the last member axis (None: not covered)."""
    if static.get("axis", -1) not in (-1, _rank(x) - 2) or static.get("out") is not None:
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
    return tf.pad(x, [[0, 0]] * (_rank(x) - 1) + [[0, n - m]])


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
        if n is None or n < 1 or norm not in _FFT_NORMS or _rank(x) < 2:
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

        rank = _rank(x) - 1
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

        rank = _rank(x) - 1
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
        if set(static) - set(allowed) or _rank(x) < 3:
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
            if _rank(x) < 3 or static.get("hermitian") or _lapack_signed(call):
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
            (lambda: _tf_matrix_power(x, int(static["n"]))) if _rank(x) >= 3 and set(static) == {"n"} else None
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


_TF_OPERAND_RULES: dict[str, Callable[[Call, Sequence[Any]], Callable[[], Any] | None]] = {}
"""TensorFlow rules of functions of several batched operands."""


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
        return -_TfNumpy.nanmax(-_tf_numpy().asarray(a), axis=axis, keepdims=keepdims)

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
        tnp = _tf_numpy()
        v = tnp.asarray(v)
        found = _sorted_positions(tnp.asarray(a)[None], tnp.reshape(v, (1, -1)), side, tnp)
        return tnp.reshape(found, v.shape)

    @staticmethod
    def convolve(a: Any, v: Any, mode: str = "full") -> Any:
        tnp = _tf_numpy()
        return _sliding_product(tnp.asarray(a)[None], tnp.asarray(v)[None], mode, False, tnp)[0]

    @staticmethod
    def correlate(a: Any, v: Any, mode: str = "valid") -> Any:
        tnp = _tf_numpy()
        return _sliding_product(tnp.asarray(a)[None], tnp.asarray(v)[None], mode, True, tnp)[0]

    @staticmethod
    def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
        tnp = _tf_numpy()
        if period is not None:
            raise NotImplementedError("interp with a period")
        x = tnp.asarray(x)
        flat = tnp.reshape(x, (1, -1))
        return tnp.reshape(_interpolated(flat, tnp.asarray(xp)[None], tnp.asarray(fp)[None], left, right, tnp), x.shape)

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
            tnp = _tf_numpy()
            x = tnp.asarray(x)
            edges = tnp.asarray(bins)[None]
            found = _sorted_positions(edges, tnp.reshape(x, (1, -1)), "left" if right else "right", tnp)
            return tnp.reshape(found, x.shape)
        raise NotImplementedError("digitize with batched or decreasing bins")

    @staticmethod
    def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False) -> Any:
        tnp = _tf_numpy()
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
    def unwrap(p: Any, discont: Any = None, axis: int = -1, period: float = 2 * math.pi) -> Any:
        import tensorflow as tf

        tnp = _tf_numpy()
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
        tnp = _tf_numpy()
        p = tnp.asarray(p)
        for _ in range(m):
            n = int(p.shape[0]) - 1
            p = p[:-1] * np.arange(n, 0, -1) if n > 0 else tnp.zeros((1,), p.dtype)
        return p

    @staticmethod
    def gradient(f: Any, axis: Any = None, edge_order: int = 1) -> Any:
        tnp = _tf_numpy()
        f = _tf_inexact(tnp.asarray(f))
        if len(f.shape) != 1 or edge_order != 1 or int(f.shape[0]) < 2:
            raise NotImplementedError("gradient of a matrix, or of second order")
        inner = (f[2:] - f[:-2]) / 2
        return tnp.concatenate([f[1:2] - f[:1], inner, f[-1:] - f[-2:-1]])

    @staticmethod
    def cov(m: Any, rowvar: bool = True, bias: bool = False, ddof: Any = None) -> Any:
        import tensorflow as tf

        tnp = _tf_numpy()
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
        tnp = _tf_numpy()
        flat = tnp.ravel(tnp.asarray(a))
        shape = (new_shape,) if isinstance(new_shape, int) else tuple(new_shape)
        size, n = math.prod(shape), int(flat.shape[0])
        if n == 0:
            raise NotImplementedError("resize of an empty array")
        return tnp.reshape(tnp.take(flat, np.arange(size) % n), shape)

    @staticmethod
    def delete(arr: Any, obj: Any, axis: Any = None) -> Any:
        tnp = _tf_numpy()
        arr = tnp.asarray(arr)
        if axis is None:
            arr, axis = tnp.ravel(arr), 0
        n = int(arr.shape[axis])
        keep = np.delete(np.arange(n), obj)
        return tnp.take(arr, keep, axis=axis)

    @staticmethod
    def insert(arr: Any, obj: Any, values: Any, axis: Any = None) -> Any:
        tnp = _tf_numpy()
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
        tnp = _tf_numpy()
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
def _tf_numpy() -> _TfNumpy:
    return _TfNumpy()


# -- rules of functions of several per-member arrays (NumPy and TensorFlow alike) ---------------


def _as_rows(value: Any, batch: int, xp: Any) -> Any | None:
    """A whole-batch operand, or a compile-time 1-D argument repeated for every member, as
    rows `[B, n]`; None if it is not a vector per member."""
    rows = xp.asarray(value)
    if _rank(rows) not in (1, 2):
        return None
    if _rank(rows) == 1:
        return xp.broadcast_to(rows[None], (batch, int(rows.shape[0])))
    return xp.broadcast_to(rows, (batch, int(rows.shape[1])))


def _vector_pair(
    call: Call, operands: Sequence[Any], xp: Any, first: str, second: str, others: tuple[str, ...] = ()
) -> tuple[Any, Any] | None:
    """Arguments `first` and `second` (each a batched vector or a compile-time vector) as rows
    `[B, n]`, `[B, m]`; None if an argument but these and `others` is batched, or either is
    not a vector."""
    named = _named_arguments(call)
    if any(name not in (first, second, *others) for name in _top_level_operands(call) or {"#": None}):
        return None
    batch = max(int(o.shape[0]) for o in operands)
    values = [operands[v.index] if isinstance(v, Operand) else v for v in (named.get(first), named.get(second))]
    if any(isinstance(v, Operand) and _rank(operands[v.index]) != 2 for v in (named.get(first), named.get(second))):
        return None
    a, b = (_as_rows(v, batch, xp) for v in values)
    return None if a is None or b is None else (a, b)


def _sliding_product(a: Any, v: Any, mode: str, correlate: bool, xp: Any) -> Any:
    """`np.convolve` (or `np.correlate`) of rows `a` [B, n] and `v` [B, m]: the full result is
    the windows of `a` zero-padded by m-1 times `v` reversed (or conjugated), then cut to `mode`."""
    n, m = int(a.shape[1]), int(v.shape[1])
    zeros = xp.zeros((int(a.shape[0]), m - 1), dtype=a.dtype)
    padded = xp.concatenate([zeros, a, zeros], axis=1)
    windows = xp.take(padded, np.arange(n + m - 1)[:, None] + np.arange(m)[None], axis=1)
    kernel = xp.conj(v) if correlate else xp.flip(v, axis=1)
    full = xp.sum(windows * kernel[:, None, :], axis=-1)
    short, long = min(n, m), max(n, m)
    if mode == "full":
        return full
    if mode == "valid":
        return full[:, short - 1 : long]
    start = short // 2 if correlate and n < m else (short - 1) // 2
    return full[:, start : start + long]


def _convolution_rule(correlate: bool) -> Callable[..., Callable[[], Any] | None]:
    def rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
        mode = call.bound.get("mode", "valid" if correlate else "full")
        pair = _vector_pair(call, operands, xp, "a", "v")
        if pair is None or mode not in ("full", "same", "valid") or min(int(pair[0].shape[1]), int(pair[1].shape[1])) < 1:
            return None
        return lambda: _sliding_product(*pair, mode, correlate, xp)

    return rule


def _sorted_positions(a: Any, v: Any, side: str, xp: Any) -> Any:
    """`np.searchsorted` of rows `v` [B, m] in sorted rows `a` [B, n]: a binary search of every
    value at once, ordering NaN last as NumPy sorts it."""
    n = int(a.shape[1])

    def less(x: Any, y: Any) -> Any:
        return xp.logical_or(x < y, xp.logical_and(xp.isnan(y), xp.logical_not(xp.isnan(x))))

    low = xp.zeros(v.shape, dtype=np.int64)
    high = xp.full(v.shape, n, dtype=np.int64)
    for _ in range(max(n, 1).bit_length()):
        middle = (low + high) // 2
        pivot = xp.take_along_axis(a, xp.minimum(middle, max(n - 1, 0)), axis=1)
        right = less(pivot, v) if side == "left" else xp.logical_not(less(v, pivot))
        active = low < high
        low = xp.where(xp.logical_and(active, right), middle + 1, low)
        high = xp.where(xp.logical_and(active, xp.logical_not(right)), middle, high)
    return low


def _searchsorted_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`searchsorted(a, v)` of a batched sorted `a` (a compile-time `a` is the ufunc rule's)."""
    named = _named_arguments(call)
    a, v, side = named.get("a"), named.get("v"), call.bound.get("side", "left")
    if not isinstance(a, Operand) or call.bound.get("sorter") is not None or side not in ("left", "right"):
        return None
    rows = operands[a.index]
    if _rank(rows) != 2 or np.dtype(getattr(rows.dtype, "as_numpy_dtype", rows.dtype)).kind == "c":
        return None
    batch = int(rows.shape[0])
    values = operands[v.index] if isinstance(v, Operand) else xp.broadcast_to(xp.asarray(v)[None], (batch, *np.shape(v)))
    shape = tuple(int(d) for d in values.shape)
    flat = xp.reshape(values, (batch, -1))
    return lambda: xp.reshape(_sorted_positions(rows, flat, side, xp), shape)


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
        tnp = _tf_numpy()
        result = tnp.asarray(arrays[0])
        for array in arrays[1:]:
            result = tnp.matmul(result, array)
        return result


def _interp_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`interp(x, xp, fp)` with per-member sample points: each value's interval found by
    `_sorted_positions`, then NumPy's formula (a compile-time `xp` and `fp` is the ufunc rule's)."""
    named = _named_arguments(call)
    if not isinstance(named.get("xp"), Operand) and not isinstance(named.get("fp"), Operand):
        return _ufunc_rule(call, operands, xp, fn)
    if call.bound.get("period") is not None or any(isinstance(named.get(k), Operand) for k in ("left", "right")):
        return None
    pair = _vector_pair(call, operands, xp, "xp", "fp", others=("x",))
    x = named.get("x")
    if pair is None or int(pair[0].shape[1]) != int(pair[1].shape[1]) or int(pair[0].shape[1]) < 2:
        return None
    batch = int(pair[0].shape[0])
    values = operands[x.index] if isinstance(x, Operand) else xp.broadcast_to(xp.asarray(x)[None], (batch, *np.shape(x)))
    shape = tuple(int(d) for d in values.shape)
    left, right = call.bound.get("left"), call.bound.get("right")
    return lambda: xp.reshape(_interpolated(xp.reshape(values, (batch, -1)), *pair, left, right, xp), shape)


def _interpolated(x: Any, points: Any, samples: Any, left: Any, right: Any, xp: Any) -> Any:
    """`np.interp` of rows `x` [B, m] on rows of sample points and values [B, n], as NumPy's C code computes it."""
    n = int(points.shape[1])
    points, samples = xp.asarray(points, dtype=np.float64), xp.asarray(samples)
    samples = samples if samples.dtype in (np.complex64, np.complex128) else xp.asarray(samples, dtype=np.float64)
    x = xp.asarray(x, dtype=np.float64)
    j = xp.clip(_sorted_positions(points, x, "right", xp) - 1, 0, n - 2)
    x0, x1 = xp.take_along_axis(points, j, axis=1), xp.take_along_axis(points, j + 1, axis=1)
    y0, y1 = xp.take_along_axis(samples, j, axis=1), xp.take_along_axis(samples, j + 1, axis=1)
    slope = (y1 - y0) / (x1 - x0)
    result = slope * (x - x0) + y0
    result = xp.where(xp.isnan(result), slope * (x - x1) + y1, result)
    result = xp.where(xp.logical_and(xp.isnan(result), y0 == y1), y0, result)
    first, last = samples[:, :1], samples[:, n - 1 : n]
    result = xp.where(x == points[:, n - 1 : n], last, result)
    result = xp.where(x > points[:, n - 1 : n], last if right is None else right, result)
    return xp.where(x < points[:, :1], first if left is None else left, result)


def _tf_quantile(a: Any, q: Any, axis: Any, method: str, keepdims: bool) -> Any:
    """`np.quantile` with linear interpolation between the sorted values (NaN where a NaN is
    among them, as NumPy gives)."""
    import tensorflow as tf

    tnp = _tf_numpy()
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


def _histogram_rule(call: Call, operands: list[Any], xp: Any, fn: Callable[..., Any]) -> Callable[[], Any] | None:
    """`histogram(a, bins=n, range=...)` with a number of equal bins and no weights: NumPy's own
    bin search (scaled position, corrected against the edges), counted with one `bincount`."""
    named = _named_arguments(call)
    a, bins, bounds = named.get("a"), call.bound.get("bins", 10), call.bound.get("range")
    if xp is not np or not isinstance(a, Operand) or set(_top_level_operands(call) or {"#": 0}) != {"a"}:
        return None
    if not isinstance(bins, int) or bins < 1 or call.bound.get("weights") is not None or call.bound.get("density"):
        return None
    values = operands[a.index]
    if values.dtype.kind not in "biuf" or values.ndim < 1:
        return None
    return lambda: _equal_bin_histogram(values.reshape(values.shape[0], -1), bins, bounds)[call.output]


def _equal_bin_histogram(a: np.ndarray, bins: int, bounds: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each row's `np.histogram(row, bins, bounds)`, computed as NumPy's equal-bin path does."""
    dtype = a.dtype if a.dtype.kind == "f" else np.dtype(np.float64)
    if bounds is not None:
        first, last = np.full(len(a), bounds[0], dtype), np.full(len(a), bounds[1], dtype)
    elif a.shape[1] == 0:
        first, last = np.zeros(len(a), dtype), np.ones(len(a), dtype)
    else:
        first, last = a.min(axis=1).astype(dtype), a.max(axis=1).astype(dtype)
    if not (np.all(np.isfinite(first)) and np.all(np.isfinite(last)) and np.all(first <= last)):
        raise ValueError("histogram range must be finite and increasing")
    same = first == last
    first, last = np.where(same, first - 0.5, first), np.where(same, last + 0.5, last)
    exact = np.float64 if bounds is not None else dtype  # NumPy's linspace runs in its edges' type
    edges = np.linspace(first.astype(exact), last.astype(exact), bins + 1, endpoint=True, axis=1).astype(dtype)
    keep = (a >= first[:, None]) & (a <= last[:, None])
    values = a.astype(dtype)
    scaled = (values - first[:, None]) / (last - first)[:, None] * bins
    index = np.where(keep, scaled, 0).astype(np.intp)
    index[index == bins] -= 1
    index -= values < np.take_along_axis(edges, index, axis=1)
    index += (values >= np.take_along_axis(edges, np.minimum(index + 1, bins), axis=1)) & (index != bins - 1)
    flat = (index + bins * np.arange(len(a))[:, None])[keep]
    counts = np.bincount(flat, minlength=bins * len(a)).reshape(len(a), bins)
    return counts.astype(np.int64), edges
