// RUN: abir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One chunk per verifier check of the array prim "numpy".

functional.func @f(%v: tensor<5xf64>) -> tensor<5xf64> {
  %r = functional.prim "numpy" <{function = "unique", arguments = "([{'operand': 0}], {})"}>(%v) : (tensor<5xf64>) -> tensor<5xf64>
  functional.return %r : tensor<5xf64>
}

// CHECK: array prim "numpy": "unique" is not a NumPy function abir runs per member

// -----

functional.func @f(%v: tensor<5xf64>) -> tensor<5xf64> {
  %r = functional.prim "numpy" <{function = "flip", arguments = "[{'operand': 0}]"}>(%v) : (tensor<5xf64>) -> tensor<5xf64>
  functional.return %r : tensor<5xf64>
}

// CHECK: array prim "numpy": arguments "[{'operand': 0}]" are not a template ([positional], {keywords})

// -----

functional.func @f(%v: tensor<5xf64>) -> tensor<5xf64> {
  %r = functional.prim "numpy" <{function = "flip", arguments = "([{'operand': 1}], {})"}>(%v) : (tensor<5xf64>) -> tensor<5xf64>
  functional.return %r : tensor<5xf64>
}

// CHECK: array prim "numpy": the operands of arguments "([{'operand': 1}], {})" are not numbered 0..n-1, once each

// -----

functional.func @f(%v: tensor<5xf64>) -> tensor<5xf64> {
  %r = functional.prim "numpy" <{function = "flip", arguments = "([{'operand': 0}], {})"}>(%v, %v) : (tensor<5xf64>, tensor<5xf64>) -> tensor<5xf64>
  functional.return %r : tensor<5xf64>
}

// CHECK: array prim "numpy": its arguments place 1 operand(s), got 2

// -----

functional.func @f(%v: tensor<5xf64>) -> tensor<5xf64> {
  %r = functional.prim "numpy" <{arguments = "([{'operand': 0}], {})"}>(%v) : (tensor<5xf64>) -> tensor<5xf64>
  functional.return %r : tensor<5xf64>
}

// CHECK: array prim "numpy" needs the parameter "function" (a string)
