// RUN: not abir-opt %s --split-input-file 2>&1 | filecheck %s
// With --split-input-file, a verifier's error counts lines from the start of the file, as a
// parse error does; an op in generic form, nested in another on the same line, is pointed at
// by its own column.

functional.func @ok(%x: i64) -> i64 {
  functional.return %x : i64
}

// -----

"functional.func"() <{sym_name = "g", function_type = (i64) -> i64}> ({ ^bb0(%x: i64): %y = "functional.prim"(%x, %x) <{fn = "sum"}> : (i64, i64) -> i64  "functional.return"(%y) : (i64) -> () }) : () -> ()

// CHECK:      abir-opt: error: {{.*}}verify-split-input.mlir:[[# @LINE - 2]]:88
// CHECK-NEXT: "functional.func"() <{sym_name = "g"
// CHECK-NEXT: {{^ +}}^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^{{$}}
// CHECK-NEXT: array prim "sum" takes 1 operand(s) here, got 2
// CHECK-NEXT:   in: @g
