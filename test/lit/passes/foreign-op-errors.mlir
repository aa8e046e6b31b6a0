// RUN: not abir-opt %s -p infer-types 2>&1 | filecheck %s --check-prefix=INFER
// RUN: not abir-opt %s -p lower-calls 2>&1 | filecheck %s --check-prefix=LOWER
// An op of another dialect in a function (arith.addi where functional.prim "add" belongs) is an
// error at the op's line naming the op and what to write instead, not a missing type or a Python traceback.

functional.func @f(%a: i64) -> i64 {
  %b = arith.addi %a, %a : i64
  functional.return %b : i64
}

// INFER:      abir-opt: error: {{.*}}foreign-op-errors.mlir:[[# @LINE - 4]]:3
// INFER-NEXT:   %b = arith.addi %a, %a : i64
// INFER-NEXT:   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^
// INFER-NEXT:   @f: infer-types cannot type arith.addi (%b), not an op of the functional dialect; compute with functional.prim (such as functional.prim "add"), functional.constant and functional.call
// INFER-NEXT:   in: @f

// LOWER:      abir-opt: error: {{.*}}foreign-op-errors.mlir:[[# @LINE - 10]]:3
// LOWER-NEXT:   %b = arith.addi %a, %a : i64
// LOWER-NEXT:   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^
// LOWER-NEXT:   lower-calls cannot lower arith.addi in @f; a function holds functional and cf ops only
// LOWER-NEXT:   in: @f
