# RUN: python %s > %t.mlir && abir-opt < %t.mlir | filecheck %s --check-prefix=IR
# RUN: abir-opt < %t.mlir | abir-run - --entry smooth --arg '[[3.0, 1.0, 2.0, 5.0], [0.0, 4.0, 4.0, 1.0]]' | filecheck %s --check-prefix=SMOOTH
# Python -> text -> abir-run for NumPy calls: each is the array prim "numpy", run per member (on
# JAX and TF too: compiled-backends.full.py; np.flip and np.roll reverse and rotate each member's own
# vector, never the batch).
import numpy as np

import abir.context

ctx = abir.context.Context()


@ctx.batch()
def smooth(v):
    s = np.sort(v)
    return np.flip(s), np.roll(v, 1), np.median(v), np.diff(s)


print(ctx.module())

# IR: functional.prim "numpy" <{function = "sort", arguments = "([{'operand': 0}], {})"}>
# IR: functional.prim "numpy" <{function = "flip", arguments = "([{'operand': 0}], {})"}>
# IR: functional.prim "numpy" <{function = "roll", arguments = "([{'operand': 0}, 1], {})"}>
# IR-NOT: functional.opaque

# SMOOTH: result 0: float64 {{\[}}[5.0, 3.0, 2.0, 1.0], [4.0, 4.0, 1.0, 0.0]]
# SMOOTH-NEXT: result 1: float64 {{\[}}[5.0, 3.0, 1.0, 2.0], [1.0, 0.0, 4.0, 4.0]]
# SMOOTH-NEXT: result 2: float64 [2.5, 2.5]
# SMOOTH-NEXT: result 3: float64 {{\[}}[1.0, 1.0, 2.0], [1.0, 3.0, 0.0]]
