"""The JAX and TensorFlow paths: `jax.vmap` of `jax.numpy`, TensorFlow's own ops, else the NumPy path
on the host (`jax.pure_callback`, `tf.numpy_function`: not XLA-compilable, a located error there)."""

from __future__ import annotations

import contextlib
import linecache
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

import numpy as np

from abir.numpy_calls.calls import Call, as_jax_arguments, bind_call
from abir.numpy_calls.numpy_rules import numpy_whole_batch_call, whole_batch_rule
from abir.numpy_calls.registry import numpy_object
from abir.numpy_calls.templates import CALL_SITES, NotCompilableError, encode_arguments, fill_template
from abir.numpy_calls.tf_rules import tf_member_map, tf_numpy, tf_rule

# -- JAX and TensorFlow ----------------------------------------------------------------------------


@cache
def result_dtype(call_key: tuple[str, str, int], member_types: tuple[tuple[tuple[int, ...], str], ...]) -> np.dtype:
    """The dtype NumPy gives the call on members of these shapes and dtypes."""
    function, arguments, output = call_key
    members = [np.zeros((1, *shape), dtype) for shape, dtype in member_types]
    return np.dtype(numpy_whole_batch_call(bind_call(function, arguments, output), members).dtype)


def _member_types(operands: Sequence[Any]) -> tuple[tuple[tuple[int, ...], str], ...]:
    return tuple((tuple(int(d) for d in o.shape[1:]), np.dtype(getattr(o.dtype, "as_numpy_dtype", o.dtype)).str) for o in operands)


def _call_key(call: Call) -> tuple[str, str, int]:
    return (call.entry.name, encode_arguments(call.args, call.kwargs), call.output)


def jax_call(call: Call, operands: Sequence[Any]) -> Any:
    import jax
    import jax.numpy as jnp

    dtype = result_dtype(_call_key(call), _member_types(operands))
    fn = numpy_object(call.entry.name, jnp)
    if fn is None:
        return _jax_host_call(call, operands, dtype)
    batch = max(o.shape[0] for o in operands)
    in_axes = [0 if o.shape[0] == batch and batch != 1 else None for o in operands]
    members = [o if axis == 0 else o[0] for o, axis in zip(operands, in_axes, strict=True)]

    args, kwargs = as_jax_arguments(call, fn)

    def member(*values: Any) -> Any:
        result = fn(*fill_template(args, values), **fill_template(kwargs, values))
        if call.entry.output_count(call.bound) > 1 or isinstance(result, tuple | list):
            result = result[call.output]
        return jnp.asarray(result)

    if all(axis is None for axis in in_axes):
        result = member(*members)[None]
    else:
        result = jax.vmap(member, in_axes=in_axes)(*members)
    return result.astype(dtype)


def _jax_host_call(call: Call, operands: Sequence[Any], dtype: np.dtype) -> Any:
    import jax

    batch = max(o.shape[0] for o in operands)
    host, shape = _on_host(call, operands, dtype)
    return jax.pure_callback(host, jax.ShapeDtypeStruct((batch, *shape), dtype), *operands)


def _on_host(call: Call, operands: Sequence[Any], dtype: np.dtype) -> tuple[Callable[..., np.ndarray], tuple[int, ...]]:
    """The NumPy path as a host function of whole-batch arrays, and the member shape it returns."""
    members = [np.zeros((1, *o.shape[1:]), np.dtype(getattr(o.dtype, "as_numpy_dtype", o.dtype))) for o in operands]
    shape = tuple(numpy_whole_batch_call(call, members).shape[1:])

    def host(*arrays: np.ndarray) -> np.ndarray:
        return numpy_whole_batch_call(call, [np.asarray(a) for a in arrays]).astype(dtype)

    return host, shape


def tf_call(call: Call, operands: Sequence[Any]) -> Any:
    """The first of: a rule in TF's own ops (`tf_rules`), the NumPy path's batching rule in TF's
    NumPy API, the function per member under `tf.vectorized_map`, that traces and gives the
    member shape NumPy gives; else the NumPy path as a `tf.numpy_function` (which XLA cannot
    compile: a `NotCompilableError` at the call's line under XLA)."""
    import tensorflow as tf

    dtype = result_dtype(_call_key(call), _member_types(operands))
    batch = max(int(o.shape[0]) for o in operands)
    operands = [tf.broadcast_to(o, (batch, *o.shape[1:])) if int(o.shape[0]) != batch else o for o in operands]
    host, shape = _on_host(call, operands, dtype)
    for rule in (tf_rule, lambda c, o: whole_batch_rule(c, o, tf_numpy()), tf_member_map):
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




def _call_site(call: Call) -> str:
    """Where the user wrote `call`: `file:line` and the line's text (each place, if several)."""
    sites = CALL_SITES.get((call.entry.name, encode_arguments(call.args, call.kwargs), call.output), {})
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
