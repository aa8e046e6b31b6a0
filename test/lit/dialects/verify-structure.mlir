// RUN: not abir-opt %s 2>&1 | filecheck %s
// RUN: not abir-run %s --arg '[1]' 2>&1 | filecheck %s --check-prefix=RUNNER
// xDSL's structural checks (a block must end in a terminator) come without the op they reject;
// abir-opt and abir-run find it and point at its line, as for any verifier error.

stack.var @x : i64 register
stack.program @main(@x) -> (@x) {
  stack.write @x = @x
}

// CHECK:      abir-opt: error: {{.*}}verify-structure.mlir:[[# @LINE - 3]]:3
// CHECK-NEXT:   stack.write @x = @x
// CHECK-NEXT: {{^}}  ^^^^^^^^^^^^^^^^^^^{{$}}
// CHECK-NEXT:   Operation stack.write terminates block in single-block region but is not a terminator
// CHECK-NEXT:   in: @main

// RUNNER:      abir-run: error: {{.*}}verify-structure.mlir:[[# @LINE - 9]]:3
// RUNNER:        the module does not verify: Operation stack.write terminates block in single-block region but is not a terminator
// RUNNER-NEXT:   in: @main
