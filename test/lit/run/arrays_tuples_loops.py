# RUN: python %s > %t.mlir && abir-opt < %t.mlir | abir-run - --entry power --arg '[[[2.0, 1.0], [1.0, 3.0]], [[1.0, 0.0], [0.0, 2.0]]]' --arg '[1e-9, 1e-3]' | filecheck %s --check-prefix=POWER
# RUN: abir-opt < %t.mlir | abir-run - --entry histogram --arg '[[3, 30, 55, 99, 80], [0, 0, 26, 51, 76]]' | filecheck %s --check-prefix=HIST
# RUN: abir-opt --print-op-generic < %t.mlir | abir-run - --entry swap_steps --arg '[1, 2]' --arg '[10, 20]' --arg '[3, 0]' | filecheck %s --check-prefix=SWAP
# RUN: abir-opt < %t.mlir | filecheck %s --check-prefix=IR
# Python -> text -> abir-opt -> abir-run for programs with arrays (matmul, norms, reductions,
# per-member indexing and item assignment), tuples (arguments and results flattened into
# leaves) and loops with per-member trip counts.
import numpy as np

import abir.context

ctx = abir.context.Context()


@ctx.batch()
def power(m, tol):
    v = m.sum(axis=0) * 0.0 + 1.0
    v = v / np.linalg.norm(v)
    value = 0.0
    for _ in range(100):
        w = m @ v
        new = np.dot(v, w)
        v = w / np.linalg.norm(w)
        if abs(new - value) < tol:
            return new, v
        value = new
    return value, v


@ctx.batch()
def histogram(values):
    counts = np.zeros(4, dtype=np.int64)
    for k in range(len(values)):
        counts[values[k] // 25] += 1
    return counts, counts.argmax()


@ctx.batch()
def step(pair):
    a, b = pair
    return b, a + b


@ctx.batch()
def swap_steps(a, b, n):
    pair = (a, b)
    while n > 0:
        pair = step(pair)
        n = n - 1
    return pair


print(ctx.module())

# The second member stops early (tolerance 1e-3): per-member trip counts.
# POWER: result 0: float64 [3.61803398867{{[0-9]*}}, 1.99975591896{{[0-9]*}}]
# POWER-NEXT: result 1: float64 [[0.52573304{{[0-9]*}}, 0.85064961{{[0-9]*}}], [0.00781226{{[0-9]*}}, 0.99996948{{[0-9]*}}]]
# HIST: result 0: int64 [[1, 1, 1, 2], [2, 1, 1, 1]]
# HIST-NEXT: result 1: int64 [3, 0]
# SWAP: result 0: int64 [21, 2]
# SWAP-NEXT: result 1: int64 [32, 20]
# IR-NOT: functional.opaque
# IR: functional.func @power
# IR: functional.prim "matmul"
# IR: functional.prim "vector_norm"
# IR-LABEL: functional.func @histogram
# IR: functional.prim "setitem" <{index = ["?"]}>
