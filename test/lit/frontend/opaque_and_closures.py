# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
# Calls of primitives (callables declared `ctx.primitive`) become opaque prims with their source
# text; compile-time arguments (keywords, closure constants) are bound in the registered callable. NumPy functions
# with an Array-API name become builtin prims, axis-aware ones (`np.sum(x, axis=0)`) array
# prims. Names from the enclosing scope (modules, module attributes, closure cells, config
# objects) are compile-time constants.
import types

import numpy as np

import abir.context


def split(v, scale=1.0):
    return v * scale, v - 1


def make(ctx, cfg):
    @ctx.batch()
    def clip(x):
        lo, hi = split(x, scale=cfg.scale)
        total = np.sum(x, axis=0)
        return np.minimum(np.sin(lo), cfg.limit), hi, total

    return clip


ctx = abir.context.Context()
ctx.primitive(split)
make(ctx, types.SimpleNamespace(limit=3.0, scale=2.0))
print(ctx.module())

# CHECK:      functional.opaque @split_{{[0-9]+}} "split(x, scale=cfg.scale)"
# CHECK-NOT:  functional.opaque
# CHECK-LABEL: functional.func @clip(%x: !functional.unknown)
# CHECK-NEXT:   %lo, %hi = functional.prim @split_{{[0-9]+}}(%x) : (!functional.unknown) -> (!functional.unknown, !functional.unknown)
# CHECK-NEXT:   %total = functional.prim "sum" <{axis = 0 : i64}>(%x) {{.*}} : (!functional.unknown) -> !functional.unknown
# CHECK-NEXT:   %[[SIN:[^ ,:)]+]] = functional.prim "sin"(%lo)
# CHECK-NEXT:   %[[CST:[^ ,:)]+]] = functional.constant weak 3.000000e+00 : f64
# CHECK-NEXT:   %[[MIN:[^ ,:)]+]] = functional.prim "minimum"(%[[SIN]], %[[CST]])
# CHECK-NEXT:   functional.return %[[MIN]], %hi, %total
