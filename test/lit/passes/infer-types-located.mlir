// RUN: not abir-opt %s -p infer-types 2>&1 | filecheck %s
// RUN: not abir-run %s --arg '[[1.0, 2.0, 3.0]]' --arg '[[1.0, 2.0, 3.0, 4.0]]' 2>&1 | filecheck %s --check-prefix=RUNNER
// A prim that infer-types cannot apply to its operands' types, in IR read from text, is an error
// at the prim's line (a prim the frontend emitted names its Python line instead), in abir-opt and
// in abir-run, which types the module on a copy for the arguments.

functional.func @f(%x: tensor<3xf64>, %y: tensor<4xf64>) -> !functional.unknown {
  %s = functional.prim "add"(%x, %y) : (tensor<3xf64>, tensor<4xf64>) -> !functional.unknown
  functional.return %s : !functional.unknown
}

// CHECK:      abir-opt: error: {{.*}}infer-types-located.mlir:[[# @LINE - 4]]:3
// CHECK-NEXT:   %s = functional.prim "add"(%x, %y)
// CHECK-NEXT:   ^^^^
// CHECK-NEXT:   in @f: builtin prim "add" cannot be applied to (tensor<3xf64>, tensor<4xf64>): operands could not be broadcast together
// CHECK-NEXT:   in: @f

// RUNNER:      abir-run: error: {{.*}}infer-types-located.mlir:[[# @LINE - 10]]:3
// RUNNER-NEXT:   %s = functional.prim "add"(%x, %y)
// RUNNER-NEXT:   ^^^^
// RUNNER-NEXT:   in @f: builtin prim "add" cannot be applied to (tensor<3xf64>, tensor<4xf64>): operands could not be broadcast together
// RUNNER-NEXT:   in: @f
