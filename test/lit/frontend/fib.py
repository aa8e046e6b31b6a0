# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
# Recursion, an early return inside `if`, Python literals as weak constants.
import abir.context

ctx = abir.context.Context()


@ctx.batch(type_inference=lambda arg_types: arg_types[0])
def fib(n):
    """Docstrings are ignored."""
    if n > 2:
        return fib(n - 1) + fib(n - 2)
    return 1


print(ctx.module())

# CHECK-LABEL: functional.func @fib(%n: !functional.unknown) -> !functional.unknown {
# CHECK-NEXT:   %[[C2:[^ ,:)]+]] = functional.constant weak 2 : i64
# CHECK-NEXT:   %[[GT:[^ ,:)]+]] = functional.prim "greater"(%n, %[[C2]]) : (!functional.unknown, i64) -> i1
# CHECK-NEXT:   %[[GT_T:[^ ,:)]+]] = functional.prim "astype"(%[[GT]]) {{.*}}abir.truth_value{{.*}} : (i1) -> i1
# CHECK-NEXT:   cf.cond_br %[[GT_T]], ^bb1, ^bb2
# CHECK-NEXT: ^bb1:
# CHECK-NEXT:   %[[C1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:   %[[SUB:[^ ,:)]+]] = functional.prim "subtract"(%n, %[[C1]]) : (!functional.unknown, i64) -> !functional.unknown
# CHECK-NEXT:   %[[CALL_FIB:[^ ,:)]+]] = functional.call @fib(%[[SUB]]) {abir.loc = "{{.*}}fib.py:13"} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %[[C2_1:[^ ,:)]+]] = functional.constant weak 2 : i64
# CHECK-NEXT:   %[[SUB1:[^ ,:)]+]] = functional.prim "subtract"(%n, %[[C2_1]]) : (!functional.unknown, i64) -> !functional.unknown
# CHECK-NEXT:   %[[CALL_FIB1:[^ ,:)]+]] = functional.call @fib(%[[SUB1]]) {abir.loc = "{{.*}}fib.py:13"} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %[[ADD:[^ ,:)]+]] = functional.prim "add"(%[[CALL_FIB]], %[[CALL_FIB1]]) : (!functional.unknown, !functional.unknown) -> !functional.unknown
# CHECK-NEXT:   functional.return %[[ADD]] : !functional.unknown
# CHECK-NEXT: ^bb2:
# CHECK-NEXT:   %[[C1_1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:   functional.return %[[C1_1]] : i64
# CHECK-NEXT: }
