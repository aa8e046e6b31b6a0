// RUN: not abir-opt %s -p infer-types 2>&1 | filecheck %s
// A prim that infer-types cannot apply to its operands' types, in IR read from text, is an error
// at the prim's line (a prim the frontend emitted names its Python line instead).

functional.func @f(%x: tensor<3xf64>, %y: tensor<4xf64>) -> !functional.unknown {
  %s = functional.prim "add"(%x, %y) : (tensor<3xf64>, tensor<4xf64>) -> !functional.unknown
  functional.return %s : !functional.unknown
}

// CHECK:      abir-opt: error: {{.*}}infer-types-located.mlir:[[# @LINE - 4]]:3
// CHECK-NEXT:   %s = functional.prim "add"(%x, %y)
// CHECK-NEXT:   ^^^^
// CHECK-NEXT:   in @f: builtin prim "add" cannot be applied to (tensor<3xf64>, tensor<4xf64>): operands could not be broadcast together
// CHECK-NEXT:   in: @f
