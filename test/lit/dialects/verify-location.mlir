// RUN: not abir-opt %s 2>&1 | filecheck %s
// RUN: not abir-run %s --entry f --arg '[1, 2]' 2>&1 | filecheck %s --check-prefix=RUNNER
// RUN: abir-opt %s --verify-diagnostics | filecheck %s --check-prefix=MARKED
// A verifier's diagnostic says what is wrong, then where: the op (in generic form, as xDSL's
// verifier marks it under --verify-diagnostics) and the function or program around it.

functional.func @f(%x: i64) -> i64 {
  %y = functional.prim "add"(%x) : (i64) -> i64
  functional.return %y : i64
}

// CHECK:      abir-opt: error: builtin prim "add" takes 2 operand(s), got 1
// CHECK-NEXT:   at: %y = "functional.prim"(%x) <{fn = "add"}> : (i64) -> i64
// CHECK-NEXT:   in: @f

// RUNNER:      abir-run: error: {{.*}}verify-location.mlir: the module does not verify: builtin prim "add" takes 2 operand(s), got 1
// RUNNER-NEXT:   at: %y = "functional.prim"(%x) <{fn = "add"}> : (i64) -> i64
// RUNNER-NEXT:   in: @f

// MARKED:      %y = "functional.prim"(%x) <{fn = "add"}> : (i64) -> i64
// MARKED-NEXT: ^^^^^^^^^^^^^^^^^^^^^^
// MARKED-NEXT: | Operation does not verify: builtin prim "add" takes 2 operand(s), got 1
