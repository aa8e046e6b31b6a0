# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
# Mutual recursion with a forward reference; `and` with a call in its right operand branches
# (short circuit), so is_even runs only where n != 0.
import abir.context

ctx = abir.context.Context()


@ctx.batch()
def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


@ctx.batch()
def is_odd(n):
    return n != 0 and is_even(n - 1)


print(ctx.module())

# CHECK-LABEL: functional.func @is_even(%n: !functional.unknown) -> !functional.unknown {
# CHECK-NEXT:   %[[C0:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:   %[[EQ:[^ ,:)]+]] = functional.prim "equal"(%n, %[[C0]]) : (!functional.unknown, i64) -> i1
# CHECK-NEXT:   %[[EQ_T:[^ ,:)]+]] = functional.prim "astype"(%[[EQ]]) {{.*}}abir.truth_value{{.*}} : (i1) -> i1
# CHECK-NEXT:   cf.cond_br %[[EQ_T]], ^bb1, ^bb2
# CHECK-NEXT: ^bb1:
# CHECK-NEXT:   %[[TRUE:[^ ,:)]+]] = functional.constant weak true
# CHECK-NEXT:   functional.return %[[TRUE]] : i1
# CHECK-NEXT: ^bb2:
# CHECK-NEXT:   %[[C1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:   %[[SUB:[^ ,:)]+]] = functional.prim "subtract"(%n, %[[C1]]) : (!functional.unknown, i64) -> !functional.unknown
# CHECK-NEXT:   %[[CALL_IS_ODD:[^ ,:)]+]] = functional.call @is_odd(%[[SUB]]) {abir.loc = "{{.*}}mutual_recursion.py:14"} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   functional.return %[[CALL_IS_ODD]] : !functional.unknown

# CHECK-LABEL: functional.func @is_odd(%n: !functional.unknown) -> !functional.unknown {
# CHECK-NEXT:   %[[C0:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:   %[[NE:[^ ,:)]+]] = functional.prim "not_equal"(%n, %[[C0]]) : (!functional.unknown, i64) -> i1
# CHECK-NEXT:   %[[NE_T:[^ ,:)]+]] = functional.prim "astype"(%[[NE]]) {{.*}}abir.truth_value{{.*}} : (i1) -> i1
# CHECK-NEXT:   cf.cond_br %[[NE_T]], ^bb1, ^bb2(%[[NE]] : i1)
# CHECK-NEXT: ^bb1:
# CHECK-NEXT:   %[[C1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:   %[[SUB:[^ ,:)]+]] = functional.prim "subtract"(%n, %[[C1]]) : (!functional.unknown, i64) -> !functional.unknown
# CHECK-NEXT:   %[[CALL_IS_EVEN:[^ ,:)]+]] = functional.call @is_even(%[[SUB]]) {abir.loc = "{{.*}}mutual_recursion.py:19"} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   cf.br ^bb2(%[[CALL_IS_EVEN]] : !functional.unknown)
# CHECK-NEXT: ^bb2(%[[ARG:[^ ,:)]+]]: !functional.unknown):
# CHECK-NEXT:   functional.return %[[ARG]] : !functional.unknown
