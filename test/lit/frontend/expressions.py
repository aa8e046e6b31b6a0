# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
# Operators, chained comparisons, and/or/not, conditional expressions, swaps, compile-time
# folding of literal arithmetic, NumPy scalars and arrays as strong constants.
import numpy as np

import abir.context

ctx = abir.context.Context()
SCALE = np.float32(0.5)
OFFSETS = np.array([1, 2, 3], dtype=np.int32)


@ctx.batch()
def operators(a, b):
    lo = 0 < a <= b
    either = a > 1 or b > 1
    neither = not (a or b)
    bigger = a if a > b else b
    a, b = b, a % b
    c = (2 ** 3 - 1) * a
    return lo, either, neither, bigger, -c, SCALE * b, OFFSETS + a


print(ctx.module())

# CHECK-LABEL: functional.func @operators(%a: !functional.unknown, %b: !functional.unknown)
# chained comparison: both comparisons, combined with logical_and
# CHECK-NEXT:  %[[C0:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:  %[[LT:[^ ,:)]+]] = functional.prim "less"(%[[C0]], %a) : (i64, !functional.unknown) -> i1
# CHECK-NEXT:  %[[LE:[^ ,:)]+]] = functional.prim "less_equal"(%a, %b) : (!functional.unknown, !functional.unknown) -> i1
# CHECK-NEXT:  %lo = functional.prim "logical_and"(%[[LT]], %[[LE]]) : (i1, i1) -> i1
# `or` of two comparisons: logical_or
# CHECK:       %either = functional.prim "logical_or"(%{{.*}}, %{{.*}}) : (i1, i1) -> i1
# `a or b` on numbers keeps Python's value semantics: a where a is truthy, else b
# CHECK-NEXT:  %[[TRUTH:.*]] = functional.prim "astype"(%a){{.*}} : (!functional.unknown) -> i1
# CHECK-NEXT:  %[[OR:.*]] = functional.prim "where"(%[[TRUTH]], %a, %b)
# CHECK-NEXT:  %[[OR_TRUTH:.*]] = functional.prim "astype"(%[[OR]]){{.*}} : (!functional.unknown) -> i1
# CHECK-NEXT:  %neither = functional.prim "logical_not"(%[[OR_TRUTH]]) : (i1) -> i1
# a conditional expression without calls selects with where
# CHECK-NEXT:  %[[GT:.*]] = functional.prim "greater"(%a, %b)
# CHECK-NEXT:  %[[GT_T:.*]] = functional.prim "astype"(%[[GT]]) {{.*}}abir.truth_value{{.*}} : (i1) -> i1
# CHECK-NEXT:  %bigger = functional.prim "where"(%[[GT_T]], %a, %b)
# the swap reads the old values: afterwards a is the old b, b is the old a % b
# CHECK-NEXT:  %b_1 = functional.prim "remainder"(%a, %b)
# literal arithmetic is folded at compile time
# CHECK-NEXT:  %[[SEVEN:.*]] = functional.constant weak 7 : i64
# CHECK-NEXT:  %c = functional.prim "multiply"(%[[SEVEN]], %b)
# CHECK-NEXT:  %{{.*}} = functional.prim "negative"(%c)
# NumPy values from the enclosing scope are strong constants with their own dtype
# CHECK-NEXT:  %[[HALF:.*]] = functional.constant 5.000000e-01 : f32
# CHECK-NEXT:  %{{.*}} = functional.prim "multiply"(%[[HALF]], %b_1)
# CHECK-NEXT:  %[[OFF:.*]] = functional.constant dense<[1, 2, 3]> : tensor<3xi32>
# CHECK-NEXT:  %{{.*}} = functional.prim "add"(%[[OFF]], %b)
# CHECK-NEXT:  functional.return %lo, %either, %neither, %bigger
