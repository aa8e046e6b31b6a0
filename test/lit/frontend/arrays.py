# RUN: python %s | filecheck %s
# RUN: python %s | abir-opt | filecheck %s
# Array syntax on batched values: indexing with compile-time and per-member indices, methods,
# attributes and axis-aware NumPy functions become opaque prims (declared with their source
# text) whose callables act on the member's own axes; astype with a compile-time dtype is the
# builtin prim with that dtype as result type; starred compile-time tuples are spread.
import numpy as np

import abir.context

TABLE = np.array([10, 20, 30])


def pair(a, b):
    return a + b


ctx = abir.context.Context()


@ctx.batch()
def arrays(x, i):
    first = x[0]
    rest = x[1:, ..., None]
    picked = x[i]
    looked_up = TABLE[i]
    total = x.sum(axis=0) + np.sum(x)
    norm = np.linalg.norm(x) + x @ x
    size = len(x) + x.shape[-1]
    single = x.astype(np.float32)
    parts = (x, picked * x)
    return first, rest, picked, looked_up, total, norm, size, single, x.T, pair(*parts)


print(ctx.module())

# CHECK:      functional.opaque @getitem_{{[0-9]+}} "x[0]"
# CHECK-NEXT: functional.opaque @getitem_{{[0-9]+}} "x[1:, ..., None]"
# CHECK-NEXT: functional.opaque @getitem_{{[0-9]+}} "x[i]"
# CHECK-NEXT: functional.opaque @getitem_{{[0-9]+}} "TABLE[i]"
# CHECK-NEXT: functional.opaque @sum_{{[0-9]+}} "x.sum(axis=0)"
# CHECK-NEXT: functional.opaque @sum_{{[0-9]+}} "np.sum(x)"
# CHECK-NEXT: functional.opaque @norm_{{[0-9]+}} "np.linalg.norm(x)"
# CHECK-NEXT: functional.opaque @matmul_{{[0-9]+}} "x @ x"
# CHECK-NEXT: functional.opaque @len_{{[0-9]+}} "len(x)"
# CHECK-NEXT: functional.opaque @shape_{{[0-9]+}} "x.shape[-1]"
# CHECK-NEXT: functional.opaque @transpose_{{[0-9]+}} "x.T"
# CHECK-NEXT: functional.opaque @pair_{{[0-9]+}} "pair(*parts)"
# CHECK-LABEL: functional.func @arrays(%x: !functional.unknown, %i: !functional.unknown)
# CHECK-NEXT:   %first = functional.prim @getitem_{{[0-9]+}}(%x) : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %rest = functional.prim @getitem_{{[0-9]+}}(%x) : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %picked = functional.prim @getitem_{{[0-9]+}}(%x, %i) : (!functional.unknown, !functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %[[TABLE:.*]] = functional.constant dense<[10, 20, 30]> : tensor<3xi64>
# CHECK-NEXT:   %looked_up = functional.prim @getitem_{{[0-9]+}}(%[[TABLE]], %i) : (tensor<3xi64>, !functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %[[S0:.*]] = functional.prim @sum_{{[0-9]+}}(%x)
# CHECK-NEXT:   %[[S1:.*]] = functional.prim @sum_{{[0-9]+}}(%x)
# CHECK-NEXT:   %total = functional.prim "add"(%[[S0]], %[[S1]])
# CHECK-NEXT:   %[[N0:.*]] = functional.prim @norm_{{[0-9]+}}(%x)
# CHECK-NEXT:   %[[N1:.*]] = functional.prim @matmul_{{[0-9]+}}(%x, %x)
# CHECK-NEXT:   %norm = functional.prim "add"(%[[N0]], %[[N1]])
# CHECK-NEXT:   %[[L0:.*]] = functional.prim @len_{{[0-9]+}}(%x)
# CHECK-NEXT:   %[[L1:.*]] = functional.prim @shape_{{[0-9]+}}(%x)
# CHECK-NEXT:   %size = functional.prim "add"(%[[L0]], %[[L1]])
# CHECK-NEXT:   %single = functional.prim "astype"(%x) : (!functional.unknown) -> f32
# CHECK-NEXT:   %[[M:.*]] = functional.prim "multiply"(%picked, %x)
# CHECK-NEXT:   %[[T:.*]] = functional.prim @transpose_{{[0-9]+}}(%x)
# CHECK-NEXT:   %[[P:.*]] = functional.prim @pair_{{[0-9]+}}(%x, %[[M]]) : (!functional.unknown, !functional.unknown) -> !functional.unknown
# CHECK-NEXT:   functional.return %first, %rest, %picked, %looked_up, %total, %norm, %size, %single, %[[T]], %[[P]]
