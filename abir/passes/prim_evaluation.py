"""Abstract evaluation for `infer-types`: the facts a prim's results have, given its operands'.

Builtin elementwise prims run in NumPy on zero-size dummies (weak literals as Python scalars),
array prims (`abir.array_prims`) and opaque callables on zero-filled dummies with a small batch
axis, both cached by operand types. The frontend's requirements on a prim (`abir.*` attributes:
integer operands, in-place updates, the construct's location) become located errors here, and a
user's `type_inference` callable is asked for result types.
"""

from __future__ import annotations

import linecache
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import optree
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute, SSAValue

from abir import array_prims, prims
from abir.dialects import functional
from abir.dialects.functional import (
    ARRAY_OPERAND_ERROR_ATTR,
    IN_PLACE_RESULT_ATTR,
    LOCATION_ATTR,
    SCALAR_CONVERSION_ATTR,
    SOURCE_ATTR,
    TRUTH_VALUE_ATTR,
)
from abir.errors import (
    AbirError,
    LocatedSyntaxError,
    ScalarConversionError,
    TruthValueError,
    TypeInferenceError,
)
from abir.opaque import Helper, HelperStructureLearned, call_batch, helper_error, lookup_opaque, site_of
from abir.passes.type_lattice import (
    Fact,
    describe_fact,
    fmt,
    scalar_of,
    weak_probe,
)
from abir.types import TensorType, ir_type, is_value_type, tensor_type_of

LEAF = optree.tree_structure(0)  # the structure of one array


def member_dummy(tensor: TensorType, rank: int) -> np.ndarray:
    """A zero-size batch of `tensor`, its event shape padded on the left to `rank` axes after the
    batch axis: per-member shapes broadcast right-aligned, the batch axis stays in front (as the
    machine aligns operands)."""
    padded = (1,) * (rank - len(tensor.shape)) + tuple(tensor.shape)
    return np.zeros((0, *padded), tensor.dtype)


@dataclass
class PrimEvaluator:
    """Abstract evaluation of prims on dummies, cached by operand types."""

    sources: Mapping[str, str]
    cache: dict[tuple[Any, ...], list[Fact]] = field(default_factory=dict)

    def builtin(self, op: functional.PrimOp, facts: Sequence[Fact], constants: Sequence[Any]) -> Fact:
        name = op.prim_name
        if name == "astype":
            declared = op.res[0].type
            if isinstance(declared, functional.UnknownType):
                raise TypeInferenceError('prim "astype" needs a declared result type (e.g. `-> i1`)')
            dtype = (
                tensor_type_of(declared).dtype
                if is_value_type(declared)
                else tensor_type_of(
                    declared.get_element_type()  # type: ignore[attr-defined]
                ).dtype
            )
            return Fact(ir_type(dtype, facts[0].tensor.shape))
        rank = max(len(f.tensor.shape) for f in facts)
        args = [
            (const if const is not None else weak_probe(fact)) if fact.weak else member_dummy(fact.tensor, rank)
            for fact, const in zip(facts, constants, strict=True)
        ]
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = np.asarray(prims.apply_numpy(name, args))
        except Exception as exc:
            kinds = ", ".join(fmt(f) for f in facts)
            raise TypeInferenceError(f'builtin prim "{name}" cannot be applied to ({kinds}): {exc}') from exc
        all_weak = all(f.weak for f in facts)
        shape = out.shape if all_weak else out.shape[1:]
        return Fact(ir_type(out.dtype, shape), weak=all_weak)

    def array(self, op: functional.PrimOp, facts: Sequence[Fact]) -> Fact:
        """The result of builtin array prim `op` (`abir.array_prims`), run on zero dummies."""
        name, params = op.prim_name, op.param_values
        args = [f.tensor for f in facts]
        if name == "check_scalar" and args[0].shape:
            raise LocatedSyntaxError(params["message"])
        key = (name, repr(sorted(params.items())), tuple(f.type for f in facts))
        if key not in self.cache:
            batch = max([2, *(1 + d for a in args for d in a.shape)])
            try:
                out = self._evaluate(array_prims.implementation(name, params), args, batch)
            except AbirError:
                raise
            except Exception as exc:
                raise array_prim_error(op, args, exc) from exc
            self.cache[key] = [self._strip_batch(out, batch, f'array prim "{name}"')]
        return self.cache[key][0]

    def opaque(self, op: functional.PrimOp, facts: Sequence[Fact]) -> list[Fact]:
        name = op.prim_name
        key = (name, tuple(f.type for f in facts), len(op.res))
        if key not in self.cache:
            self.cache[key] = self._run_opaque(name, [f.tensor for f in facts], len(op.res))
        return self.cache[key]

    def _run_opaque(self, name: str, args: Sequence[TensorType], n_results: int) -> list[Fact]:
        fn = lookup_opaque(name)
        source = self.sources.get(name, "?")
        site = site_of(name)
        where = f"opaque callable @{name} (source: {source!r})"
        batch = max([2, *(1 + d for a in args for d in a.shape)])
        try:
            out = self._evaluate(fn, args, batch)
        except AbirError:
            raise
        except Exception as exc:
            if (helper_failure := helper_error(exc, when="at type inference, on zero-filled arrays")) is not None:
                raise helper_failure from exc
            if site is not None:
                raise LocatedTypeInferenceError(
                    f"{site.describe()}`{source}` cannot be computed for per-member values of types "
                    f"{_describe_types(args)}: {exc}"
                ) from exc
            raise TypeInferenceError(f"{where} failed on dummy inputs {list(args)}: {exc}") from exc
        if isinstance(fn, Helper):
            return [self._strip_batch(v, batch, where) for v in helper_result_leaves(fn, out, n_results)]
        values = list(out) if isinstance(out, tuple | list) else [out]
        if isinstance(out, tuple | list) and n_results == 1:
            raise TypeInferenceError(f"{where} returned a {type(out).__name__} where one array was expected")
        if len(values) != n_results:
            raise TypeInferenceError(f"{where} returned {len(values)} value(s), but {n_results} are used")
        return [self._strip_batch(v, batch, where) for v in values]

    def _evaluate(self, fn: Callable[..., Any], args: Sequence[TensorType], batch: int) -> Any:
        dummies = [np.zeros((batch, *a.shape), a.dtype) for a in args]
        call = fn.call_structured if isinstance(fn, Helper) else fn
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return call(*dummies)

    @staticmethod
    def _strip_batch(value: Any, batch: int, where: str) -> Fact:
        shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
        if shape is None or dtype is None:
            raise TypeInferenceError(f"{where} returned a {type(value).__name__}, not an array")
        shape = tuple(shape)
        if not shape or shape[0] != batch:
            raise TypeInferenceError(
                f"{where} returned shape {list(shape)} for arguments with {batch} rows (zero-filled stand-ins "
                f"for the batch at type inference{_users_batch()}); results must keep the leading batch "
                f"dimension: [{batch}, ...] here"
            )
        return Fact(ir_type(np.dtype(getattr(dtype, "as_numpy_dtype", dtype)), shape[1:]))


def _users_batch() -> str:
    """A clause naming the batch size of the call being compiled (`, for your batch of 3`), or
    "" outside a call."""
    batch = call_batch()
    return "" if batch is None else f", for your batch of {batch.size}"


class LocatedTypeInferenceError(TypeInferenceError):
    """A type inference error that already names the user's file and line."""


def array_prim_error(op: functional.PrimOp, args: Sequence[TensorType], exc: Exception) -> TypeInferenceError:
    """The error for array prim `op` failing on per-member operands of types `args`: located at
    the Python construct (`abir.loc`) when the frontend recorded it."""
    params = op.params
    what = f'array prim "{op.prim_name}"' + (f" {params}" if params is not None else "")
    if isinstance(source := op.attributes.get(SOURCE_ATTR), StringAttr):
        what = f"`{source.data}` ({what})"
    message = f"{what} cannot be computed for per-member values of types {_describe_types(args)}: {exc}"
    location = op.attributes.get(LOCATION_ATTR)
    if not isinstance(location, StringAttr):
        return TypeInferenceError(message)
    func = op.parent_op()
    while func is not None and not isinstance(func, functional.FuncOp):
        func = func.parent_op()
    return located_error(location.data, func.sym_name.data if func is not None else "?", message)


def located_error(location: str, function: str, message: str) -> LocatedTypeInferenceError:
    """An error at `location` (`file:line`) in IR function `function` (a specialization's symbol
    names its Python function first: `f.t1`), showing the source line."""
    filename, _, line = location.rpartition(":")
    source = linecache.getline(filename, int(line)).strip() if line.isdigit() else ""
    shown = f"\n    {source}\n" if source else "\n"
    return LocatedTypeInferenceError(f"{location}: in batched function '{function.split('.', 1)[0]}'{shown}{message}")


def check_integer_operands(requirement: Attribute, operands: Sequence[Fact]) -> None:
    if any(np.dtype(f.tensor.dtype).kind not in "biu" for f in operands):
        raise LocatedTypeInferenceError(requirement.data if isinstance(requirement, StringAttr) else str(requirement))


def check_in_place(op: functional.PrimOp, operands: Sequence[Fact], results: Sequence[Fact | None] = ()) -> None:
    """The requirements the frontend put on the prim of an augmented assignment `x op= v` (its
    `results` once known), which hold trivially when `x` is a per-member scalar (Python rebinds)."""
    if not operands or not operands[0].tensor.shape:
        return
    failed = op.attributes.get(ARRAY_OPERAND_ERROR_ATTR)
    if failed is None and results and results[0] is not None and results[0].type != operands[0].type:
        failed = op.attributes.get(IN_PLACE_RESULT_ATTR)
    if failed is not None:
        raise LocatedTypeInferenceError(failed.data if isinstance(failed, StringAttr) else str(failed))


def truth_value_fact(op: functional.PrimOp, operand: Fact, function: str) -> Fact:
    """The fact of `op`, an `astype` to i1 the frontend marked as a truth value
    (`TRUTH_VALUE_ATTR`): a per-member bool scalar when NumPy takes the truth value of an array
    of the operand's per-member type (one element; an empty array where the installed NumPy
    allows it), else a `TruthValueError` at the construct with NumPy's message."""
    tensor = operand.tensor
    if tensor.shape:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bool(np.zeros(tuple(tensor.shape), tensor.dtype))
        except ValueError as exc:
            raise truth_value_error(op, describe_fact(operand), str(exc), function) from None
    return Fact(ir_type(np.bool_))


def check_scalar_conversion(op: functional.PrimOp, operand: Fact, function: str) -> None:
    """`float(v)`/`int(v)` (`SCALAR_CONVERSION_ATTR`): NumPy converts only 0-dimensional arrays to
    Python scalars, so a per-member array raises a located `ScalarConversionError`."""
    if not operand.tensor.shape:
        return
    builtin = _string_attribute(op, SCALAR_CONVERSION_ATTR) or "float"
    source = _string_attribute(op, SOURCE_ATTR) or f"{builtin}(...)"
    message = (
        f"`{source}` converts each member's value, {describe_fact(operand)}, to a Python {builtin}, and "
        f"Python raises TypeError: only 0-dimensional arrays can be converted to Python scalars\nInstead: "
        f"convert element by element with `.astype({builtin})`, or take one element (`[0]`) or a reduction "
        f"(`.sum()`) first"
    )
    raise ScalarConversionError(located_message(op, function, message))


def truth_value_error(op: functional.PrimOp, described: str, numpy_message: str, function: str) -> TruthValueError:
    """The located error for the truth value `op` of a per-member value `described` (`a float64
    array of shape (3,)`) that NumPy refuses with `numpy_message`."""
    use = _string_attribute(op, TRUTH_VALUE_ATTR) or "a truth value"
    source = _string_attribute(op, SOURCE_ATTR) or "this value"
    message = (
        f"`{source}` is used as {use}, but each member's value is {described}, and Python's `bool()` of "
        f"it raises ValueError: {numpy_message}\nInstead: reduce it to one truth value, e.g. "
        f"`np.any({source})` or `np.all({source})`, or choose element by element with `np.where({source}, ..., ...)`"
    )
    return TruthValueError(located_message(op, function, message))


def located_message(op: functional.PrimOp, function: str, message: str) -> str:
    """`message` at the Python line of `op` (`abir.loc`) with its source line, or, where the
    frontend recorded none, in IR function `function`."""
    location = _string_attribute(op, LOCATION_ATTR)
    return f"in @{function}: {message}" if location is None else str(located_error(location, function, message))


def _string_attribute(op: functional.PrimOp, name: str) -> str | None:
    value = op.attributes.get(name)
    return value.data if isinstance(value, StringAttr) else None


def _describe_types(args: Sequence[TensorType]) -> str:
    return "(" + ", ".join(f"{np.dtype(a.dtype)}{list(a.shape) if a.shape else ''}" for a in args) + ")"


def helper_result_leaves(helper: Helper, out: Any, n_results: int) -> list[Any]:
    """The result leaves of an undecorated helper, learning the structure it returns. A structure
    its call was not lowered for (the frontend emitted `n_results` flat results), or one whose
    result the frontend lowered as a placeholder (`abir.opaque.stand_in`), raises
    `HelperStructureLearned`: lowering the program again keeps the structure."""
    leaves, structure = optree.tree_flatten(out)
    where = f"{helper.site.describe()}the helper '{helper.name}'"
    if not leaves:
        raise LocatedTypeInferenceError(
            f"{where} returned {out!r}; a helper called from a batched function returns arrays "
            "(or tuples, lists or namedtuples of them)"
        )
    known = helper.result_structure
    if known is not None and known != structure:
        raise LocatedTypeInferenceError(
            f"{where} returns {known} for some argument types and {structure} for others; return "
            "one structure"
        )
    helper.result_structure = structure
    flat = structure.num_leaves == n_results and (
        structure == LEAF or (n_results > 1 and isinstance(out, tuple | list) and len(out) == n_results)
    )
    if known is None and (not flat or helper.stood_in) or known is not None and known.num_leaves != n_results:
        raise HelperStructureLearned(helper)
    return leaves


def constant_value(value: SSAValue) -> Any:
    owner = value.owner
    if isinstance(owner, functional.ConstantOp) and owner.weak is not None:
        return scalar_of(owner.value)
    return None


def user_result_facts(name: str, fn: Callable[..., Any], params: Sequence[Fact]) -> list[Fact]:
    """Call a user's `type_inference` with the parameter TensorTypes; flatten its answer: a
    `TensorType`, a `Type`, or any nesting of tuples, lists and namedtuples of them, one leaf per
    result value (a `Context` passes each argument's types in that argument's structure)."""
    try:
        answer = fn([f.tensor for f in params])
    except Exception as exc:
        raise TypeInferenceError(
            f"the type_inference of @{name} failed on {[f.tensor for f in params]}: {exc}"
        ) from exc
    leaves = optree.tree_leaves(answer, is_leaf=lambda x: isinstance(x, TensorType), none_is_leaf=True)
    try:
        return [Fact(ir_type(_numpy_dtype(t.dtype), tuple(t.shape))) for t in leaves]
    except Exception as exc:
        raise TypeInferenceError(
            f"the type_inference of @{name} returned {answer!r}; return an abir.TensorType(dtype, shape) "
            "per result (a tuple or list of them, nested like the results, for several)"
        ) from exc


def _numpy_dtype(dtype: Any) -> np.dtype:
    """A NumPy dtype from a NumPy, TF (`tf.int32`) or JAX dtype or a dtype name."""
    return np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
