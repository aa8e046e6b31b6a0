# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
# Item assignment is a functional update: `x[i] = v` and `x[i] += v` become `setitem` array prims
# (the write counterpart of `getitem`, the same index spec) whose result is the variable's new value; a name holding
# the same array is rebound to it too, and a loop carries the updated array around.
import numpy as np

import abir.context

ctx = abir.context.Context()


@ctx.batch()
def histogram(values, n):
    counts = np.zeros(4, dtype=np.int64)
    same = counts
    for k in range(n):
        counts[values[k] // 25] += 1
    counts[0:2] = -1
    return same


print(ctx.module())

# CHECK-NOT:   functional.opaque
# CHECK-LABEL: functional.func @histogram(%values: !functional.unknown, %n: !functional.unknown) -> !functional.unknown {
# The compile-time np.zeros is a constant; the loop carries the array (`same` and `counts` are one).
# CHECK-NEXT:    %[[C0:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:    %[[DENSE:[^ ,:)]+]] = functional.constant dense<0> : tensor<4xi64>
# CHECK-NEXT:    cf.br ^bb1(%[[C0]], %[[DENSE]] : i64, tensor<4xi64>)
# CHECK-NEXT:  ^bb1(%k: !functional.unknown, %counts: !functional.unknown):
# CHECK:       ^bb2:
# CHECK-NEXT:    %[[BUCKET:.*]] = functional.prim "getitem" <{index = ["?"]}>(%values, %k)
# CHECK-NEXT:    %[[Q:.*]] = functional.constant weak 25 : i64
# CHECK-NEXT:    %[[I:.*]] = functional.prim "floor_divide"(%[[BUCKET]], %[[Q]])
# `counts[i] += 1`: read the item, add, write it back into a new value of `counts`.
# CHECK-NEXT:    %[[OLD:.*]] = functional.prim "getitem" <{index = ["?"]}>(%counts, %[[I]])
# CHECK-NEXT:    %[[ONE:.*]] = functional.constant weak 1 : i64
# CHECK-NEXT:    %[[NEW:.*]] = functional.prim "add"(%[[OLD]], %[[ONE]])
# CHECK-NEXT:    %counts_1 = functional.prim "setitem" <{index = ["?"]}>(%counts, %[[NEW]], %[[I]]) {{.*}} : (!functional.unknown, !functional.unknown, !functional.unknown) -> !functional.unknown
# CHECK:         cf.br ^bb1(%{{.*}}, %counts_1 : !functional.unknown, !functional.unknown)
# After the loop a slice is written; `same` is the same array, so the function returns the update.
# CHECK-NEXT:  ^bb3:
# CHECK-NEXT:    %[[MINUS:.*]] = functional.constant weak -1 : i64
# CHECK-NEXT:    %counts_2 = functional.prim "setitem" <{index = ["0:2"]}>(%counts, %[[MINUS]]) {{.*}} : (!functional.unknown, i64) -> !functional.unknown
# CHECK-NEXT:    functional.return %counts_2 : !functional.unknown
# CHECK-NEXT:  }
