# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
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
# CHECK-NEXT:    %[[C0:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:    %[[S0:[^ ,:)]+]], %[[S1:[^ ,:)]+]] = functional.call @step.s1(%x, %[[C0]]) {abir.loc = "{{.*}}structures.py:31"} : (!functional.unknown, i64) -> (!functional.unknown, !functional.unknown)
# CHECK-NEXT:    %first, %[[P1:[^ ,:)]+]], %[[P2:[^ ,:)]+]] = functional.call @pairs(%x) {abir.loc = "{{.*}}structures.py:32"} : (!functional.unknown) -> (!functional.unknown, !functional.unknown, !functional.unknown)
# CHECK-NEXT:    functional.return %[[S0]], %[[P2]] : !functional.unknown, !functional.unknown

# CHECK-LABEL: functional.func @step.s1(%s: !functional.unknown, %s_1: !functional.unknown) -> (!functional.unknown, !functional.unknown) {
# CHECK-NEXT:    %[[C10:[^ ,:)]+]] = functional.constant weak 10 : i64
# CHECK-NEXT:    %[[GT:[^ ,:)]+]] = functional.prim "greater"(%s_1, %[[C10]])
# CHECK-NEXT:    %[[GT_T:[^ ,:)]+]] = functional.prim "astype"(%[[GT]]) {{.*}}abir.truth_value{{.*}} : (i1) -> i1
# CHECK-NEXT:    cf.cond_br %[[GT_T]], ^bb1, ^bb2
# CHECK-NEXT:  ^bb1:
# CHECK-NEXT:    functional.return %s, %s_1 : !functional.unknown, !functional.unknown
# CHECK-NEXT:  ^bb2:
# CHECK-NEXT:    %[[C2:[^ ,:)]+]] = functional.constant weak 2 : i64
# CHECK-NEXT:    %[[MUL:[^ ,:)]+]] = functional.prim "multiply"(%s, %[[C2]])
# CHECK-NEXT:    %[[C1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:    %[[ADD:[^ ,:)]+]] = functional.prim "add"(%s_1, %[[C1]])
# CHECK-NEXT:    %[[R0:[^ ,:)]+]], %[[R1:[^ ,:)]+]] = functional.call @step.s1(%[[MUL]], %[[ADD]])
# CHECK-NEXT:    functional.return %[[R0]], %[[R1]]

# The recursive call's result structure comes from the base case, lowered after it.
# CHECK-LABEL: functional.func @pairs(%n: !functional.unknown) -> (!functional.unknown, !functional.unknown, !functional.unknown) {
# CHECK:       ^bb1:
# CHECK-NEXT:    %[[C1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:    %[[SUB:[^ ,:)]+]] = functional.prim "subtract"(%n, %[[C1]])
# CHECK-NEXT:    %a, %b, %c = functional.call @pairs(%[[SUB]])
# CHECK-NEXT:    %[[C1_1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:    %[[ADD:[^ ,:)]+]] = functional.prim "add"(%a, %[[C1_1]])
# CHECK-NEXT:    functional.return %[[ADD]], %b, %c
# CHECK-NEXT:  ^bb2:
# CHECK-NEXT:    %[[C0:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:    functional.return %[[C0]], %n, %n : i64, !functional.unknown, !functional.unknown
