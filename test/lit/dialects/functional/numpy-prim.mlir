// RUN: abir-opt %s --split-input-file | abir-opt --split-input-file | filecheck %s
// RUN: abir-opt %s --split-input-file --print-op-generic | abir-opt --split-input-file | filecheck %s
// RUN: abir-opt %s --split-input-file -p 'abir-lower' | filecheck %s --check-prefix=VM

// The array prim "numpy": a NumPy function run per member. `function` names it under `numpy`,
// `arguments` is the call's template (a Python literal: positional arguments, then keywords,
// `{'operand': k}` where the k-th operand goes), `output` picks one result of a function that
// returns several.

functional.func @flip(%v: tensor<5xf64>) -> tensor<5xf64> {
  %r = functional.prim "numpy" <{function = "flip", arguments = "([{'operand': 0}], {})"}>(%v) : (tensor<5xf64>) -> tensor<5xf64>
  functional.return %r : tensor<5xf64>
}

// CHECK: functional.prim "numpy" <{function = "flip", arguments = "([{'operand': 0}], {})"}>(%{{.*}}) : (tensor<5xf64>) -> tensor<5xf64>
// VM: vm.prim "numpy" <{function = "flip", arguments = "([{'operand': 0}], {})"}>(%{{.*}}) : (tensor<5xf64>) -> tensor<5xf64>

// -----

functional.func @logdet(%m: tensor<3x3xf64>) -> f64 {
  %r = functional.prim "numpy" <{function = "linalg.slogdet", arguments = "([{'operand': 0}], {})", output = 1 : i64}>(%m) : (tensor<3x3xf64>) -> f64
  functional.return %r : f64
}

// CHECK: functional.prim "numpy" <{function = "linalg.slogdet", arguments = "([{'operand': 0}], {})", output = 1 : i64}>

// -----

functional.func @padded(%v: tensor<5xf64>, %s: f64) -> tensor<8xf64> {
  %r = functional.prim "numpy" <{function = "pad", arguments = "([{'operand': 0}, (1, 2)], {'constant_values': {'operand': 1}, 'mode': 'constant'})"}>(%v, %s) : (tensor<5xf64>, f64) -> tensor<8xf64>
  functional.return %r : tensor<8xf64>
}

// CHECK: functional.prim "numpy" <{function = "pad", arguments = "([{'operand': 0}, (1, 2)], {'constant_values': {'operand': 1}, 'mode': 'constant'})"}>(%{{.*}}, %{{.*}})
