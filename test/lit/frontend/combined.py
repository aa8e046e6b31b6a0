# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
# Constructs combined: a loop in a recursive function, an early return from nested loops, a
# variable defined only on the path that uses it, and `truthy` conditions.
import abir.context
from abir.context import truthy

ctx = abir.context.Context()


@ctx.batch()
def power_sum(n, k):
    if n <= 0:
        return 0
    term = 1
    for _ in range(k):
        term = term * n
    return term + power_sum(n - 1, k)


@ctx.batch()
def find(n, target):
    for i in range(n):
        j = 0
        while j < n:
            if i * j == target:
                found = i + j
                return found
            j += 1
    return -1


@ctx.batch()
def flag(x):
    if truthy(x):
        return 1
    return 0


print(ctx.module())

# CHECK-LABEL: functional.func @power_sum(%n: !functional.unknown, %k: !functional.unknown)
# CHECK:         cf.br ^bb3(%{{.*}}, %{{.*}} : i64, i64)
# CHECK-NEXT:  ^bb3(%{{.*}}: !functional.unknown, %term: !functional.unknown):
# CHECK:         %term_1 = functional.prim "multiply"(%term, %n)
# CHECK:         functional.call @power_sum(%{{.*}}, %k)

# CHECK-LABEL: functional.func @find(%n: !functional.unknown, %target: !functional.unknown)
# CHECK:       ^bb1(%i: !functional.unknown):
# CHECK:       ^bb3(%j: !functional.unknown):
# CHECK:         %found = functional.prim "add"(%i, %j)
# CHECK-NEXT:    functional.return %found : !functional.unknown
# CHECK:         %[[M1:.*]] = functional.constant weak -1 : i64
# CHECK-NEXT:    functional.return %[[M1]] : i64

# CHECK-LABEL: functional.func @flag(%x: !functional.unknown)
# CHECK-NEXT:    %[[CAST:[^ ,:)]+]] = functional.prim "astype"(%x) {{.*}}abir.truth_value{{.*}} : (!functional.unknown) -> i1
# CHECK-NEXT:    cf.cond_br %[[CAST]], ^bb1, ^bb2
