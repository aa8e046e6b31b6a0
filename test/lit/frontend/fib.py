# RUN: python %s | filecheck %s
# RUN: python %s | abir-opt | filecheck %s
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
# CHECK-NEXT:   %0 = functional.constant weak 2 : i64
# CHECK-NEXT:   %1 = functional.prim "greater"(%n, %0) : (!functional.unknown, i64) -> i1
# CHECK-NEXT:   cf.cond_br %1, ^bb1, ^bb2
# CHECK-NEXT: ^bb1:
# CHECK-NEXT:   %2 = functional.constant weak 1 : i64
# CHECK-NEXT:   %3 = functional.prim "subtract"(%n, %2) : (!functional.unknown, i64) -> !functional.unknown
# CHECK-NEXT:   %4 = functional.call @fib(%3) {abir.loc = "{{.*}}fib.py:13"} : (!functional.unknown) -> !functional.unknown
# CHECK:        %7 = functional.call @fib(%6) {abir.loc = "{{.*}}fib.py:13"} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %8 = functional.prim "add"(%4, %7) : (!functional.unknown, !functional.unknown) -> !functional.unknown
# CHECK-NEXT:   functional.return %8 : !functional.unknown
# CHECK-NEXT: ^bb2:
# CHECK-NEXT:   %9 = functional.constant weak 1 : i64
# CHECK-NEXT:   functional.return %9 : i64
# CHECK-NEXT: }
