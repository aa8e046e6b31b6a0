// RUN: not abir-opt %s 2>&1 | filecheck %s
// RUN: not abir-run %s --entry f --arg '[1, 2]' 2>&1 | filecheck %s --check-prefix=RUNNER
// RUN: abir-opt %s --verify-diagnostics | filecheck %s --check-prefix=MARKED
// A verifier's diagnostic points at the op it rejects, as a parse error does: the file, line
// and column of the op, its line with carets under it, what is wrong, and the function around
// it. --verify-diagnostics keeps xDSL's form: the op in generic form, marked.

functional.func @f(%x: i64) -> i64 {
  %y = functional.prim "add"(%x) : (i64) -> i64
  functional.return %y : i64
}

// CHECK:      abir-opt: error: {{.*}}verify-location.mlir:[[# @LINE - 4]]:3
// CHECK-NEXT:   %y = functional.prim "add"(%x) : (i64) -> i64
// CHECK-NEXT: {{^}}  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^{{$}}
// CHECK-NEXT:   builtin prim "add" takes 2 operand(s), got 1
// CHECK-NEXT:   in: @f

// RUNNER:      abir-run: error: {{.*}}verify-location.mlir:[[# @LINE - 10]]:3
// RUNNER-NEXT:   %y = functional.prim "add"(%x) : (i64) -> i64
// RUNNER-NEXT:   ^^^^
// RUNNER-NEXT:   the module does not verify: builtin prim "add" takes 2 operand(s), got 1
// RUNNER-NEXT:   in: @f

// MARKED:      %y = "functional.prim"(%x) <{fn = "add"}> : (i64) -> i64
// MARKED-NEXT: ^^^^^^^^^^^^^^^^^^^^^^
// MARKED-NEXT: | Operation does not verify: builtin prim "add" takes 2 operand(s), got 1
