# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
# A conditional expression whose arm recurses branches (only the members choosing that arm call),
# and the other arm tells what the function returns: the arm calling the function being lowered
# is left out of the join in the first round, as a base case would be. An arm of cheap operators
# is computed for every member and selected with `where`.
import abir.context

ctx = abir.context.Context()


@ctx.batch()
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


@ctx.batch()
def clamp_div(x, d):
    return x // d if d != 0 else 0


print(ctx.module())

# CHECK-LABEL: functional.func @fib(%n: !functional.unknown) -> !functional.unknown {
# CHECK-NEXT:    %[[C2:[^ ,:)]+]] = functional.constant weak 2 : i64
# CHECK-NEXT:    %[[LT:[^ ,:)]+]] = functional.prim "less"(%n, %[[C2]]) : (!functional.unknown, i64) -> i1
# CHECK-NEXT:    %[[LT_T:[^ ,:)]+]] = functional.prim "astype"(%[[LT]]) {{.*}}abir.truth_value{{.*}} : (i1) -> i1
# CHECK-NEXT:    cf.cond_br %[[LT_T]], ^bb1, ^bb2
# CHECK-NEXT:  ^bb1:
# CHECK-NEXT:    cf.br ^bb3(%n : !functional.unknown)
# CHECK-NEXT:  ^bb2:
# CHECK-NEXT:    %[[C1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:    %[[SUB:[^ ,:)]+]] = functional.prim "subtract"(%n, %[[C1]]) : (!functional.unknown, i64) -> !functional.unknown
# CHECK-NEXT:    %[[CALL_FIB:[^ ,:)]+]] = functional.call @fib(%[[SUB]]) {abir.loc = "{{.*}}ternary_recursion.py:14"} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:    %[[C2_1:[^ ,:)]+]] = functional.constant weak 2 : i64
# CHECK-NEXT:    %[[SUB1:[^ ,:)]+]] = functional.prim "subtract"(%n, %[[C2_1]]) : (!functional.unknown, i64) -> !functional.unknown
# CHECK-NEXT:    %[[CALL_FIB1:[^ ,:)]+]] = functional.call @fib(%[[SUB1]]) {abir.loc = "{{.*}}ternary_recursion.py:14"} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:    %[[ADD:[^ ,:)]+]] = functional.prim "add"(%[[CALL_FIB]], %[[CALL_FIB1]]) : (!functional.unknown, !functional.unknown) -> !functional.unknown
# CHECK-NEXT:    cf.br ^bb3(%[[ADD]] : !functional.unknown)
# CHECK-NEXT:  ^bb3(%[[ARG:[^ ,:)]+]]: !functional.unknown):
# CHECK-NEXT:    functional.return %[[ARG]] : !functional.unknown
# CHECK-NEXT:  }

# CHECK-LABEL: functional.func @clamp_div(%x: !functional.unknown, %d: !functional.unknown) -> !functional.unknown {
# CHECK:         %[[Q:.*]] = functional.prim "floor_divide"(%x, %d)
# CHECK:         %[[R:.*]] = functional.prim "where"(%{{.*}}, %[[Q]], %{{.*}})
# CHECK-NEXT:    functional.return %[[R]]
# CHECK-NOT:     cf.cond_br
