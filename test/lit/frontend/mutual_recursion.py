# RUN: python %s | filecheck %s
# RUN: python %s | abir-opt | filecheck %s
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
# CHECK:        %1 = functional.prim "equal"(%n, %0) : (!functional.unknown, i64) -> i1
# CHECK-NEXT:   cf.cond_br %1, ^bb1, ^bb2
# CHECK-NEXT: ^bb1:
# CHECK-NEXT:   %2 = functional.constant weak true
# CHECK-NEXT:   functional.return %2 : i1
# CHECK-NEXT: ^bb2:
# CHECK:        %5 = functional.call @is_odd(%4) {abir.loc = "{{.*}}mutual_recursion.py:14"} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   functional.return %5 : !functional.unknown

# CHECK-LABEL: functional.func @is_odd(%n: !functional.unknown) -> !functional.unknown {
# CHECK:        %1 = functional.prim "not_equal"(%n, %0) : (!functional.unknown, i64) -> i1
# CHECK-NEXT:   cf.cond_br %1, ^bb1, ^bb2(%1 : i1)
# CHECK-NEXT: ^bb1:
# CHECK:        %4 = functional.call @is_even(%3) {abir.loc = "{{.*}}mutual_recursion.py:19"} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   cf.br ^bb2(%4 : !functional.unknown)
# CHECK-NEXT: ^bb2(%5: !functional.unknown):
# CHECK-NEXT:   functional.return %5 : !functional.unknown
