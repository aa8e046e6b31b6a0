"""The TensorFlow backend (`TensorFlowBackend`), one module per concern, each row building only
on the rows below it (import-linter, `pyproject.toml`):

* `backend`: `TensorFlowBackend`, the protocol on TF ops, and how a run is compiled and launched;
* `loop`: the machine loop on TF's primitives; `tensor`: how opaque helpers see tensors
  (`NumpyTensor`); `staging`: runs staged into a TF graph and their errors (`tf_function`,
  `CheckedFunction`, `UnreportedErrorsWarning`);
* `prim_ops`: builtin prims on TF ops with NumPy's semantics.
"""

from abir.backends.tf.backend import TensorFlowBackend
from abir.backends.tf.staging import CheckedFunction, UnreportedErrorsWarning, tf_function
from abir.backends.tf.tensor import NumpyTensor

__all__ = ["CheckedFunction", "NumpyTensor", "TensorFlowBackend", "UnreportedErrorsWarning", "tf_function"]
