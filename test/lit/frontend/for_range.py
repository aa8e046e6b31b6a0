# RUN: python %s | filecheck %s
# RUN: python %s | abir-opt | filecheck %s
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
# CHECK-NEXT:    %0 = functional.constant weak 0 : i64
# CHECK-NEXT:    %1 = functional.constant weak 0 : i64
# CHECK-NEXT:    cf.br ^bb1(%0, %1 : i64, i64)
# CHECK-NEXT:  ^bb1(%i: !functional.unknown, %total: !functional.unknown):
# A bound of unknown dtype: type inference rejects a float with the located error on the comparison.
# CHECK-NEXT:    %2 = functional.prim "less"(%i, %n) {abir.integer_operands = "{{.*}}for_range.py:12:14: in batched function 'triangle': range() arguments must be integers, but an argument of `range(n)` is a per-member float{{.*}}"} : (!functional.unknown, !functional.unknown) -> i1
# CHECK-NEXT:    cf.cond_br %2, ^bb2, ^bb8
# continue: straight to the latch ^bb7, which increments the counter
# CHECK:         %4 = functional.prim "equal"(%i, %3)
# CHECK-NEXT:    cf.cond_br %4, ^bb3, ^bb4
# CHECK-NEXT:  ^bb3:
# CHECK-NEXT:    cf.br ^bb7(%total : !functional.unknown)
# break: to the loop exit ^bb8
# CHECK:       ^bb5:
# CHECK-NEXT:    cf.br ^bb8
# CHECK-NEXT:  ^bb6:
# CHECK-NEXT:    %total_1 = functional.prim "add"(%total, %i)
# CHECK-NEXT:    cf.br ^bb7(%total_1 : !functional.unknown)
# CHECK-NEXT:  ^bb7(%total_2: !functional.unknown):
# CHECK-NEXT:    %7 = functional.constant weak 1 : i64
# CHECK-NEXT:    %8 = functional.prim "add"(%i, %7)
# CHECK-NEXT:    cf.br ^bb1(%8, %total_2 : !functional.unknown, !functional.unknown)
# CHECK-NEXT:  ^bb8:
# CHECK-NEXT:    functional.return %total : !functional.unknown

# A batched step: the loop runs while (step > 0 and i < hi) or (step < 0 and i > hi).
# CHECK-LABEL: functional.func @stepped(%lo: !functional.unknown, %hi: !functional.unknown, %step: !functional.unknown)
# CHECK:         cf.br ^bb1(%lo, %0 : !functional.unknown, i64)
# CHECK-NEXT:  ^bb1(%i: !functional.unknown, %total: !functional.unknown):
# CHECK-NEXT:    %1 = functional.constant weak 0 : i64
# CHECK-NEXT:    %2 = functional.prim "greater"(%step, %1) {abir.integer_operands = {{.*}}range(lo, hi, step){{.*}}}
# CHECK-NEXT:    %3 = functional.prim "less"(%i, %hi) {abir.integer_operands
# CHECK-NEXT:    %4 = functional.prim "logical_and"(%2, %3) : (i1, i1) -> i1
# CHECK-NEXT:    %5 = functional.prim "less"(%step, %1)
# CHECK-NEXT:    %6 = functional.prim "greater"(%i, %hi)
# CHECK-NEXT:    %7 = functional.prim "logical_and"(%5, %6) : (i1, i1) -> i1
# CHECK-NEXT:    %8 = functional.prim "logical_or"(%4, %7) : (i1, i1) -> i1
# CHECK-NEXT:    cf.cond_br %8, ^bb2, ^bb3
# CHECK:         %9 = functional.prim "add"(%i, %step)
# A constant negative step compares with "greater"; constant bounds need no check.
# CHECK:       ^bb4(%j: !functional.unknown, %total_2: !functional.unknown):
# CHECK-NEXT:    %11 = functional.constant weak 0 : i64
# CHECK-NEXT:    %12 = functional.prim "greater"(%j, %11) :
# CHECK:         %13 = functional.constant weak -2 : i64
# CHECK-NEXT:    %14 = functional.prim "add"(%j, %13)
