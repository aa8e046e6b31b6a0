// RUN: not abir-opt %s -p infer-types 2>&1 | filecheck %s --check-prefix=INFER
// RUN: not abir-opt %s -p lower-calls 2>&1 | filecheck %s --check-prefix=LOWER
// An op of another dialect in a function (arith.addi where functional.prim "add" belongs) is an
// error naming the op and what to write instead, not a missing type or a Python traceback.

functional.func @f(%a: i64) -> i64 {
  %b = arith.addi %a, %a : i64
  functional.return %b : i64
}

// INFER: abir-opt: error: @f: infer-types cannot type arith.addi (%b), not an op of the functional dialect; compute with functional.prim (such as functional.prim "add"), functional.constant and functional.call

// LOWER:      abir-opt: error: lower-calls cannot lower arith.addi in @f; a function holds functional and cf ops only
// LOWER-NEXT:   at: %b = "arith.addi"(%a, %a) <{overflowFlags = #arith.overflow<none>}> : (i64, i64) -> i64
// LOWER-NEXT:   in: @f
