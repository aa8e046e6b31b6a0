// RUN: abir-opt %s -p 'infer-types,lower-calls' | filecheck %s --check-prefix=STACK
// RUN: abir-opt %s -p 'infer-types,lower-calls' | abir-opt | filecheck %s --check-prefix=STACK
// RUN: abir-opt %s -p 'abir-lower' | filecheck %s --check-prefix=VM
// RUN: abir-opt %s -p 'abir-lower' | abir-opt --print-op-generic | abir-opt | filecheck %s --check-prefix=VM

// Array prims keep their parameters through lowering: stack.prim and vm.prim print them as
// functional.prim does, and parse them back.

functional.func @pick(%m: tensor<3x4xf64>, %i: i64) -> (f64, tensor<4x3xf64>) {
  %row = functional.prim "getitem" <{index = ["?", "1:"]}>(%m, %i) : (tensor<3x4xf64>, i64) -> tensor<3xf64>
  %s = functional.prim "sum" <{axis = 0 : i64}>(%row) : (tensor<3xf64>) -> f64
  %t = functional.prim "permute_dims" <{axes = array<i64: 1, 0>}>(%m) : (tensor<3x4xf64>) -> tensor<4x3xf64>
  functional.return %s, %t : f64, tensor<4x3xf64>
}

// STACK-LABEL: stack.program @pick
// STACK:       stack.prim "getitem" <{index = ["?", "1:"]}>(@[[M:[^,]+]], @[[I:[^)]+]]) -> (@[[ROW:[^)]+]])
// STACK-NEXT:  stack.prim "sum" <{axis = 0 : i64}>(@[[ROW]]) -> ({{.*}})
// STACK-NEXT:  stack.prim "permute_dims" <{axes = array<i64: 1, 0>}>(@[[M]]) -> ({{.*}})

// VM-LABEL: vm.program @pick
// VM:       %[[ROW:.*]] = vm.prim "getitem" <{index = ["?", "1:"]}>(%{{.*}}, %{{.*}}) : (tensor<3x4xf64>, i64) -> tensor<3xf64>
// VM-NEXT:  vm.prim "sum" <{axis = 0 : i64}>(%[[ROW]]) : (tensor<3xf64>) -> f64
// VM:       vm.prim "permute_dims" <{axes = array<i64: 1, 0>}>(%{{.*}}) : (tensor<3x4xf64>) -> tensor<4x3xf64>
