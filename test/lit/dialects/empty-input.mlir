// RUN: python -c "print('// nothing but a comment')" > %t.mlir
// RUN: not abir-opt %t.mlir 2>&1 | filecheck %s
// RUN: not abir-run %t.mlir --arg '[1]' 2>&1 | filecheck %s --check-prefix=RUNNER
// Text without any op says so at its start (xDSL said "Could not parse entire input!" at the
// end of the text).

// CHECK:      abir-opt: error: {{.*}}.mlir:1:1
// CHECK-NEXT: // nothing but a comment
// CHECK-NEXT: ^
// CHECK-NEXT: the text holds no op; a module is a list of ops, such as functional.func, stack.program or vm.program with their variables
// RUNNER: abir-run: error: {{.*}}.mlir:1:1
