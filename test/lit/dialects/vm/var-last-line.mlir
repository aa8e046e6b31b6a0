// RUN: not abir-opt %s 2>&1 | filecheck %s
// RUN: not abir-run %s --arg '[1]' 2>&1 | filecheck %s --check-prefix=RUNNER
// Something missing at the end of the file's last op is reported at that op, not at the end of
// the file (where the parser stands when it finds the gap).

// CHECK:      abir-opt: error: {{.*}}var-last-line.mlir:[[# @LINE + 6]]:1
// CHECK-NEXT: vm.var @x : i64
// CHECK-NEXT: ^^^^^^^^^^^^^^^
// CHECK-NEXT: expected the variable's storage class: register or stack

// RUNNER: abir-run: error: {{.*}}var-last-line.mlir:[[# @LINE + 1]]:1
vm.var @x : i64
