"""The JAX backend (`JaxBackend`), one module per concern, each row building only on the rows
below it (import-linter, `pyproject.toml`):

* `backend`: `JaxBackend`, the protocol on jax.numpy, and how a run is compiled and launched;
* `loop`: the machine loop on JAX's primitives; `one_kernel`: compiling it as one XLA kernel;
  `sharding`: one machine per shard of a batch sharded over devices;
* `staging`: runs staged into the caller's JAX computation and their errors (`staged_error`);
  `compaction`: costly blocks run on the gathered rows of the few members there;
* `writes`: stack writes and the buffers of costly helpers' results; `array_ops`: the array
  prims' operations on JAX arrays (products by a large matrix in one kernel);
* `cost`: a jaxpr cost model; `reductions`: batch reductions by chunks; `mode`: what the trace
  being built is for (`TraceMode`), scoped to that trace.
"""

from abir.backends.jax.backend import JaxBackend
from abir.backends.jax.staging import staged_error

__all__ = ["JaxBackend", "staged_error"]
