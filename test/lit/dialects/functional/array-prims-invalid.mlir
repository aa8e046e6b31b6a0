// RUN: abir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One chunk per verifier check of the array prims' parameters and operands.

functional.func @f(%x: tensor<3xf64>) -> f64 {
  %r = functional.prim "sum" <{axes = 0 : i64}>(%x) : (tensor<3xf64>) -> f64
  functional.return %r : f64
}

// CHECK: array prim "sum" has no parameter "axes" (its parameters: axis, keepdims)

// -----

functional.func @f(%x: tensor<3xf64>) -> tensor<3xf64> {
  %r = functional.prim "reshape"(%x) : (tensor<3xf64>) -> tensor<3xf64>
  functional.return %r : tensor<3xf64>
}

// CHECK: array prim "reshape" needs the parameter "shape" (an array of integers (array<i64: ...>))

// -----

functional.func @f(%x: tensor<3xf64>) -> f64 {
  %r = functional.prim "argmax" <{axis = array<i64: 0, 1>}>(%x) : (tensor<3xf64>) -> f64
  functional.return %r : f64
}

// CHECK: array prim "argmax": parameter "axis" must be an integer, got (0, 1)

// -----

functional.func @f(%x: tensor<3xf64>, %i: i64) -> f64 {
  %r = functional.prim "getitem" <{index = ["?", "?"]}>(%x, %i) : (tensor<3xf64>, i64) -> f64
  functional.return %r : f64
}

// CHECK: array prim "getitem" takes 3 operand(s) here, got 2

// -----

functional.func @f(%x: tensor<3xf64>) -> f64 {
  %r = functional.prim "getitem" <{index = ["1.5"]}>(%x) : (tensor<3xf64>) -> f64
  functional.return %r : f64
}

// CHECK: index entry '1.5' is not an integer, a slice, '...', 'newaxis', '?' or an integer array such as '[0, 2]'

// -----

functional.func @f(%x: tensor<3xf64>) -> f64 {
  %r = functional.prim "getitem" <{index = ["[[0], [1, 2]]"]}>(%x) : (tensor<3xf64>) -> f64
  functional.return %r : f64
}

// CHECK: index entry '[[0], [1, 2]]' must be a rectangular list of integers

// -----

functional.func @f(%x: tensor<3xf64>) -> f64 {
  %r = functional.prim "add" <{axis = 0 : i64}>(%x, %x) : (tensor<3xf64>, tensor<3xf64>) -> f64
  functional.return %r : f64
}

// CHECK: builtin prim "add" takes no parameters

// -----

functional.func @f(%x: tensor<3xf64>) -> f64 {
  %r = functional.prim "sum" <{axis = 1.0 : f64}>(%x) : (tensor<3xf64>) -> f64
  functional.return %r : f64
}

// CHECK: prim parameter axis = 1.000000e+00 : f64 is not an integer, array<i64: ...>, unit flag, string or array of strings

// -----

functional.func @f(%x: tensor<3xf64>) -> f64 {
  %r = functional.prim "gather"(%x) : (tensor<3xf64>) -> f64
  functional.return %r : f64
}

// CHECK: unknown builtin prim "gather"; use an Array-API name such as "add" or "less", or an array prim
