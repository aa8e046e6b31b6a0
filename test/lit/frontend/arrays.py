# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
# Array syntax on batched values: indexing with compile-time and per-member indices, methods,
# attributes and axis-aware NumPy functions become builtin array prims with their static
# parameters (index spec, axis, shape) in the op and the Python line in `abir.loc`; astype with a
# compile-time dtype is the builtin prim with that dtype as result type; a primitive
# (`ctx.primitive`) stays an opaque prim; starred compile-time tuples are spread.
import numpy as np

import abir.context

TABLE = np.array([10, 20, 30])


def pair(a, b):
    return a + b


ctx = abir.context.Context()
ctx.primitive(pair)


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

# CHECK:      functional.opaque @pair_{{[0-9]+}} "pair(*parts)"
# CHECK-NOT:  functional.opaque
# CHECK-LABEL: functional.func @arrays(%x: !functional.unknown, %i: !functional.unknown)
# CHECK-NEXT:   %first = functional.prim "getitem" <{index = ["0"]}>(%x) {abir.loc = "{{.*}}arrays.py:25", abir.source = "x[0]"} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %rest = functional.prim "getitem" <{index = ["1:", "...", "newaxis"]}>(%x)
# CHECK-NEXT:   %picked = functional.prim "getitem" <{index = ["?"]}>(%x, %i) {{.*}} : (!functional.unknown, !functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %[[TABLE:.*]] = functional.constant dense<[10, 20, 30]> : tensor<3xi64>
# CHECK-NEXT:   %looked_up = functional.prim "getitem" <{index = ["?"]}>(%[[TABLE]], %i) {{.*}} : (tensor<3xi64>, !functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %[[S0:.*]] = functional.prim "sum" <{axis = 0 : i64}>(%x)
# CHECK-NEXT:   %[[S1:.*]] = functional.prim "sum"(%x)
# CHECK-NEXT:   %total = functional.prim "add"(%[[S0]], %[[S1]])
# CHECK-NEXT:   %[[N0:.*]] = functional.prim "vector_norm"(%x)
# CHECK-NEXT:   %[[N1:.*]] = functional.prim "matmul"(%x, %x)
# CHECK-NEXT:   %norm = functional.prim "add"(%[[N0]], %[[N1]])
# CHECK-NEXT:   %[[L0:.*]] = functional.prim "dim" <{axis = 0 : i64}>(%x)
# CHECK-NEXT:   %[[L1:.*]] = functional.prim "dim" <{axis = -1 : i64}>(%x)
# CHECK-NEXT:   %size = functional.prim "add"(%[[L0]], %[[L1]])
# CHECK-NEXT:   %single = functional.prim "astype"(%x) : (!functional.unknown) -> f32
# CHECK-NEXT:   %[[M:.*]] = functional.prim "multiply"(%picked, %x)
# CHECK-NEXT:   %[[T:.*]] = functional.prim "permute_dims"(%x)
# CHECK-NEXT:   %[[P:.*]] = functional.prim @pair_{{[0-9]+}}(%x, %[[M]]) : (!functional.unknown, !functional.unknown) -> !functional.unknown
# CHECK-NEXT:   functional.return %first, %rest, %picked, %looked_up, %total, %norm, %size, %single, %[[T]], %[[P]]
