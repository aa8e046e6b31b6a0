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
* NumPy (`numpy_rules`): a batching rule where the function has one (a ufunc or gufunc with the
  batch as a loop dimension, an axis function with its axes shifted past the batch axis, a
  stacked linear-algebra function, a rule of its own such as `searchsorted`'s), else the
  function called member by member and the results stacked;
* JAX (`compiled`): `jax.vmap` of the `jax.numpy` counterpart (a host callback of the NumPy path
  where `jax.numpy` has none);
* TensorFlow (`tf_rules`, `compiled`): a rule in TensorFlow's own ops, XLA-compilable, else the
  NumPy path as a `tf.numpy_function`, which under XLA is a `NotCompilableError` at the call's
  line (`remember_call_site`).
Results are cast to the dtype NumPy gives, so every backend agrees with type inference. The
package's modules: `registry` (the functions), `templates` (argument templates), `calls` (a bound
call), `numpy_rules`, `tf_rules`, `compiled` (the JAX and TensorFlow paths).

Linear algebra on a singular or indefinite member gives NaN, as under JAX, instead of raising
`LinAlgError`: the prim also runs on the rows of members standing at other blocks, whose values
may be junk (`abir.array_ops`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import numpy as np

from abir.numpy_calls.calls import Call, bind_call, entry_named
from abir.numpy_calls.compiled import jax_call, result_dtype, tf_call
from abir.numpy_calls.numpy_rules import numpy_whole_batch_call
from abir.numpy_calls.registry import (
    ALL_AXES,
    ATTRIBUTES,
    AXIS,
    FLATTEN,
    FLATTEN_RESTORE,
    FUNCTIONS,
    LOOP,
    METHODS,
    UFUNC,
    VALUE_DEPENDENT,
    NumpyFunction,
    numpy_name,
    parameters,
    resolve,
)
from abir.numpy_calls.templates import (
    NotCompilableError,
    Operand,
    UnencodableArgument,
    decode_arguments,
    encode_arguments,
    operand_count,
    remember_call_site,
)

__all__ = ['ALL_AXES', 'ATTRIBUTES', 'AXIS', 'Call', 'FLATTEN', 'FLATTEN_RESTORE', 'FUNCTIONS', 'LOOP', 'METHODS', 'NotCompilableError', 'NumpyFunction', 'Operand', 'UFUNC', 'UnencodableArgument', 'VALUE_DEPENDENT', 'decode_arguments', 'encode_arguments', 'entry_named', 'make_call', 'numpy_name', 'operand_count', 'parameters', 'remember_call_site', 'resolve', 'result_dtype']


def make_call(function: str, arguments: str, output: int = 0) -> Callable[..., Any]:
    """The callable running NumPy `function` per member on whole-batch operands of any backend."""
    return _make_call(function, arguments, output)


@cache
def _make_call(function: str, arguments: str, output: int) -> Callable[..., Any]:
    call = bind_call(function, arguments, output)

    def numpy_call(*operands: Any) -> Any:
        family = _family(operands)
        if family == "jax":
            return jax_call(call, operands)
        if family == "tf":
            return tf_call(call, operands)
        return numpy_whole_batch_call(call, [np.asarray(o) for o in operands])

    numpy_call.__qualname__ = f"numpy_call[{function}]"
    return numpy_call


def _family(operands: Sequence[Any]) -> str:
    modules = {type(o).__module__.split(".")[0] for o in operands}
    if "tensorflow" in modules:
        return "tf"
    if "jax" in modules or "jaxlib" in modules:
        return "jax"
    return "numpy"
