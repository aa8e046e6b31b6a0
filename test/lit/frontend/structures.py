# RUN: python %s | filecheck %s
# RUN: python %s | abir-opt | filecheck %s
# Tuples, lists and namedtuples are compile-time structures: flattened into several function
# arguments and results, specialized per argument structure (@step.s1), rebuilt at calls.
# Namedtuple state goes through recursion; nested destructuring; `t.x` and `_replace`.
import collections

import abir.context

ctx = abir.context.Context()
State = collections.namedtuple("State", ["x", "n"])


@ctx.batch()
def step(s):
    if s.n > 10:
        return s
    return step(s._replace(x=s.x * 2, n=s.n + 1))


@ctx.batch()
def pairs(n):
    if n > 0:
        a, (b, c) = pairs(n - 1)
        return a + 1, [b, c]
    return 0, [n, n]


@ctx.batch()
def main(x):
    s = step(State(x, 0))
    first, rest = pairs(x)
    return s.x, rest[1]


print(ctx.module())

# CHECK-LABEL: functional.func @main(%x: !functional.unknown) -> (!functional.unknown, !functional.unknown) {
# CHECK-NEXT:    %0 = functional.constant weak 0 : i64
# CHECK-NEXT:    %1, %2 = functional.call @step.s1(%x, %0) {abir.loc = "{{.*}}structures.py:31"} : (!functional.unknown, i64) -> (!functional.unknown, !functional.unknown)
# CHECK-NEXT:    %first, %3, %4 = functional.call @pairs(%x) {abir.loc = "{{.*}}structures.py:32"} : (!functional.unknown) -> (!functional.unknown, !functional.unknown, !functional.unknown)
# CHECK-NEXT:    functional.return %1, %4 : !functional.unknown, !functional.unknown

# CHECK-LABEL: functional.func @step.s1(%s: !functional.unknown, %s_1: !functional.unknown) -> (!functional.unknown, !functional.unknown) {
# CHECK:         %1 = functional.prim "greater"(%s_1, %0)
# CHECK:         functional.return %s, %s_1 : !functional.unknown, !functional.unknown
# CHECK:         %3 = functional.prim "multiply"(%s, %2)
# CHECK:         %5 = functional.prim "add"(%s_1, %4)
# CHECK-NEXT:    %6, %7 = functional.call @step.s1(%3, %5)
# CHECK-NEXT:    functional.return %6, %7

# The recursive call's result structure comes from the base case, lowered after it.
# CHECK-LABEL: functional.func @pairs(%n: !functional.unknown) -> (!functional.unknown, !functional.unknown, !functional.unknown) {
# CHECK:         %a, %b, %c = functional.call @pairs(%3)
# CHECK:         %5 = functional.prim "add"(%a, %4)
# CHECK-NEXT:    functional.return %5, %b, %c
# CHECK:         functional.return %6, %n, %n : i64, !functional.unknown, !functional.unknown
