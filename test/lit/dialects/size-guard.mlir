// RUN: not abir-opt %s 2>&1 | filecheck %s
// RUN: not abir-run %s --arg '[1.0]' 2>&1 | filecheck %s --check-prefix=RUNNER
// RUN: abir-opt %s --split-input-file --parsing-diagnostics | filecheck %s --check-prefix=EACH
// A per-member type above 16 Mi elements is refused while the text is read, at the type and
// before anything that large is allocated: the splat below would otherwise become 10^10
// numbers. abir-opt and abir-run share the check.

functional.func @f(%x: f64) -> f64 {
  %c = functional.constant dense<0.0> : tensor<100000x100000xf64>
  functional.return %x : f64
}

// CHECK:      abir-opt: error: {{.*}}size-guard.mlir:[[# @LINE - 4]]:41
// CHECK-NEXT:   %c = functional.constant dense<0.0> : tensor<100000x100000xf64>
// CHECK-NEXT: {{^}}                                        ^^^^^^^^^^^^^^^^^^^^^^^^^{{$}}
// CHECK-NEXT: tensor<100000x100000xf64> has 10000000000 elements, more than 16777216 per member (16 Mi); abir refuses larger types rather than allocate them: use a smaller shape

// RUNNER:      abir-run: error: {{.*}}size-guard.mlir:[[# @LINE - 9]]:41
// RUNNER:      tensor<100000x100000xf64> has 10000000000 elements

// EACH: size-guard.mlir:[[# @LINE - 12]]:41

// -----

// A type in a signature, a variable's type and a vector type: the same check.
functional.func @g(%x: tensor<4096x4096x4096xf32>) -> f32 {
  %c = functional.constant 0.0 : f32
  functional.return %c : f32
}

// EACH:      size-guard.mlir:[[# @LINE - 5]]:24
// EACH:      tensor<4096x4096x4096xf32> has 68719476736 elements

// -----

vm.var @v : tensor<1x1x1x1x1x1x1x1x16777217xi1> register

// EACH:      size-guard.mlir:[[# @LINE - 2]]:13
// EACH:      tensor<1x1x1x1x1x1x1x1x16777217xi1> has 16777217 elements

// -----

%c = "arith.constant"() <{value = dense<1> : vector<8192x8192xi32>}> : () -> vector<8192x8192xi32>

// EACH:      size-guard.mlir:[[# @LINE - 2]]:46
// EACH:      vector<8192x8192xi32> has 67108864 elements

// -----

// The largest allowed shape is read (a type alone allocates nothing).
vm.var @w : tensor<4096x4096xi1> register

// EACH: vm.var @w : tensor<4096x4096xi1> register
