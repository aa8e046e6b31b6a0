// RUN: not abir-opt %s 2>&1 | filecheck %s
// RUN: not abir-run %s --entry f --arg '[1]' 2>&1 | filecheck %s --check-prefix=RUNNER
// A symbol defined twice is an error at its second definition (xDSL's check of the symbol
// table fails at the module).

functional.func @f(%x: i64) -> i64 {
  functional.return %x : i64
}
vm.var @f : i64 register

// CHECK:      abir-opt: error: {{.*}}verify-duplicate-symbol.mlir:[[# @LINE - 2]]:1
// CHECK-NEXT: vm.var @f : i64 register
// CHECK-NEXT: {{^}}^^^^^^^^^^^^^^^^^^^^^^^^{{$}}
// CHECK-NEXT: @f is defined twice, here and by the functional.func before; rename or remove one

// RUNNER:      abir-run: error: {{.*}}verify-duplicate-symbol.mlir:[[# @LINE - 7]]:1
// RUNNER:      the module does not verify: @f is defined twice
