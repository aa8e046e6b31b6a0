// RUN: abir-opt %s -p 'infer-types{entry=double arg-types=i32}' | filecheck %s
// RUN: abir-opt %s -p 'infer-types{entry=double arg-types="tensor<3xf32>"}' | filecheck %s --check-prefix=VEC
// RUN: abir-opt %s -p 'infer-types{arg-types=i32}' | filecheck %s
// The entry's parameter types come from the pass option when the IR leaves them unknown
// (as the frontend prints them). The module's only function is the entry when none is named.

builtin.module {
  functional.func @double(%x: !functional.unknown) -> !functional.unknown {
    %c = functional.constant weak 2 : i64
    %y = functional.prim "multiply"(%x, %c) : (!functional.unknown, i64) -> !functional.unknown
    functional.return %y : !functional.unknown
  }
}

// CHECK-LABEL: functional.func @double(%x: i32) -> i32 {
// CHECK-NEXT:   %c = functional.constant 2 : i32
// CHECK-NEXT:   %y = functional.prim "multiply"(%x, %c) : (i32, i32) -> i32
// CHECK-NEXT:   functional.return %y : i32

// VEC-LABEL: functional.func @double(%x: tensor<3xf32>) -> tensor<3xf32> {
// VEC-NEXT:   %c = functional.constant 2.000000e+00 : f32
