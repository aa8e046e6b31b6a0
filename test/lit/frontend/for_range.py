# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
# for/range with 1 to 3 arguments (batched bounds, a batched step), break and continue.
import abir.context

ctx = abir.context.Context()


@ctx.batch()
def triangle(n):
    total = 0
    for i in range(n):
        if i == 3:
            continue
        if total > 100:
            break
        total += i
    return total


@ctx.batch()
def stepped(lo, hi, step):
    total = 0
    for i in range(lo, hi, step):
        total = total + i
    for j in range(10, 0, -2):
        total = total - j
    return total


print(ctx.module())

# CHECK-LABEL: functional.func @triangle(%n: !functional.unknown) -> !functional.unknown {
# CHECK-NEXT:    %[[C0:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:    %[[C0_1:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:    cf.br ^bb1(%[[C0]], %[[C0_1]] : i64, i64)
# CHECK-NEXT:  ^bb1(%i: !functional.unknown, %total: !functional.unknown):
# A bound of unknown dtype: type inference rejects a float with the located error on the comparison.
# CHECK-NEXT:    %[[LT:[^ ,:)]+]] = functional.prim "less"(%i, %n) {abir.integer_operands = "{{.*}}for_range.py:12:14: in batched function 'triangle': range() arguments must be integers, but an argument of `range(n)` is a per-member float{{.*}}"} : (!functional.unknown, !functional.unknown) -> i1
# CHECK-NEXT:    cf.cond_br %[[LT]], ^bb2, ^bb8
# continue: straight to the latch ^bb7, which increments the counter
# CHECK-NEXT:  ^bb2:
# CHECK-NEXT:    %[[C3:[^ ,:)]+]] = functional.constant weak 3 : i64
# CHECK-NEXT:    %[[EQ:[^ ,:)]+]] = functional.prim "equal"(%i, %[[C3]])
# CHECK-NEXT:    cf.cond_br %[[EQ]], ^bb3, ^bb4
# CHECK-NEXT:  ^bb3:
# CHECK-NEXT:    cf.br ^bb7(%total : !functional.unknown)
# break: to the loop exit ^bb8
# CHECK:       ^bb5:
# CHECK-NEXT:    cf.br ^bb8
# CHECK-NEXT:  ^bb6:
# CHECK-NEXT:    %total_1 = functional.prim "add"(%total, %i)
# CHECK-NEXT:    cf.br ^bb7(%total_1 : !functional.unknown)
# CHECK-NEXT:  ^bb7(%total_2: !functional.unknown):
# CHECK-NEXT:    %[[C1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:    %[[ADD:[^ ,:)]+]] = functional.prim "add"(%i, %[[C1]])
# CHECK-NEXT:    cf.br ^bb1(%[[ADD]], %total_2 : !functional.unknown, !functional.unknown)
# CHECK-NEXT:  ^bb8:
# CHECK-NEXT:    functional.return %total : !functional.unknown

# A batched step: the loop runs while (step > 0 and i < hi) or (step < 0 and i > hi).
# CHECK-LABEL: functional.func @stepped(%lo: !functional.unknown, %hi: !functional.unknown, %step: !functional.unknown)
# CHECK-NEXT:    %[[TOTAL0:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:    cf.br ^bb1(%lo, %[[TOTAL0]] : !functional.unknown, i64)
# CHECK-NEXT:  ^bb1(%i: !functional.unknown, %total: !functional.unknown):
# CHECK-NEXT:    %[[C0:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:    %[[GT:[^ ,:)]+]] = functional.prim "greater"(%step, %[[C0]]) {abir.integer_operands = {{.*}}range(lo, hi, step){{.*}}}
# CHECK-NEXT:    %[[LT:[^ ,:)]+]] = functional.prim "less"(%i, %hi) {abir.integer_operands
# CHECK-NEXT:    %[[AND:[^ ,:)]+]] = functional.prim "logical_and"(%[[GT]], %[[LT]]) : (i1, i1) -> i1
# CHECK-NEXT:    %[[LT1:[^ ,:)]+]] = functional.prim "less"(%step, %[[C0]])
# CHECK-NEXT:    %[[GT1:[^ ,:)]+]] = functional.prim "greater"(%i, %hi)
# CHECK-NEXT:    %[[AND1:[^ ,:)]+]] = functional.prim "logical_and"(%[[LT1]], %[[GT1]]) : (i1, i1) -> i1
# CHECK-NEXT:    %[[OR:[^ ,:)]+]] = functional.prim "logical_or"(%[[AND]], %[[AND1]]) : (i1, i1) -> i1
# CHECK-NEXT:    cf.cond_br %[[OR]], ^bb2, ^bb3
# CHECK-NEXT:  ^bb2:
# CHECK-NEXT:    %total_1 = functional.prim "add"(%total, %i)
# CHECK-NEXT:    %[[NEXT:[^ ,:)]+]] = functional.prim "add"(%i, %step)
# CHECK-NEXT:    cf.br ^bb1(%[[NEXT]], %total_1 : !functional.unknown, !functional.unknown)
# A constant negative step compares with "greater"; constant bounds need no check.
# CHECK:       ^bb4(%j: !functional.unknown, %total_2: !functional.unknown):
# CHECK-NEXT:    %[[C0_1:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:    %[[GT2:[^ ,:)]+]] = functional.prim "greater"(%j, %[[C0_1]]) :
# CHECK-NEXT:    cf.cond_br %[[GT2]], ^bb5, ^bb6
# CHECK-NEXT:  ^bb5:
# CHECK-NEXT:    %total_3 = functional.prim "subtract"(%total_2, %j)
# CHECK-NEXT:    %[[CM2:[^ ,:)]+]] = functional.constant weak -2 : i64
# CHECK-NEXT:    %[[ADD1:[^ ,:)]+]] = functional.prim "add"(%j, %[[CM2]])
# CHECK-NEXT:    cf.br ^bb4(%[[ADD1]], %total_3 : !functional.unknown, !functional.unknown)
