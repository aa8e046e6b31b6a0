# RUN: python %s > %t.mlir && abir-opt < %t.mlir | abir-run - --entry fib --arg '[3, 7, 10]' | filecheck %s --check-prefix=FIB
# RUN: abir-opt < %t.mlir | abir-run - --entry is_even --arg '[0, 7, 10]' | filecheck %s --check-prefix=EVEN
# RUN: abir-opt -p 'abir-lower{entry=fib arg-types="i32"}' < %t.mlir | abir-run - --arg 'int32:[20]' --max-stack-depth 30 | filecheck %s --check-prefix=VM
# Python -> functional IR text -> abir-opt -> abir-run: recursion and mutual recursion, run from
# the text alone (functional IR lowered for the arguments' types, or the vm module abir-lower
# prints).
import abir.context

ctx = abir.context.Context()


@ctx.batch()
def fib(n):
    if n > 2:
        return fib(n - 1) + fib(n - 2)
    return 1


@ctx.batch()
def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)


@ctx.batch()
def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)


print(ctx.module())

# FIB: result 0: int64 [2, 13, 55]
# FIB-NOT: result 1
# EVEN: result 0: bool [true, false, true]
# VM: result 0: int64 [6765]
