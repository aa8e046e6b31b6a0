// RUN: abir-opt %s | abir-opt | filecheck %s
// RUN: ABIR_ROUNDTRIP
// RUN: ABIR_GENERIC_ROUNDTRIP

// Recursive fibonacci by hand, as the frontend would emit it for
//
//   def fib(n):
//       if n > 2:
//           return fib(n - 1) + fib(n - 2)
//       return 1
//
// once with inferred types (@fib) and once before type inference (@fib_untyped: unknown
// value types, weak literals; comparisons already give i1 for the branch).

functional.func @fib(%n: i64) -> i64 {
  %c2 = functional.constant 2 : i64
  %cond = functional.prim "greater"(%n, %c2) : (i64, i64) -> i1
  cf.cond_br %cond, ^recurse, ^base
^recurse:
  %c1 = functional.constant 1 : i64
  %a1 = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
  %f1 = functional.call @fib(%a1) : (i64) -> i64
  %a2 = functional.prim "subtract"(%n, %c2) : (i64, i64) -> i64
  %f2 = functional.call @fib(%a2) : (i64) -> i64
  %s = functional.prim "add"(%f1, %f2) : (i64, i64) -> i64
  functional.return %s : i64
^base:
  %one = functional.constant 1 : i64
  functional.return %one : i64
}

functional.func @fib_untyped(%n: !functional.unknown) -> !functional.unknown {
  %c2 = functional.constant weak 2 : i64
  %cond = functional.prim "greater"(%n, %c2) : (!functional.unknown, i64) -> i1
  cf.cond_br %cond, ^recurse, ^base
^recurse:
  %c1 = functional.constant weak 1 : i64
  %a1 = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
  %f1 = functional.call @fib_untyped(%a1) : (!functional.unknown) -> !functional.unknown
  %a2 = functional.prim "subtract"(%n, %c2) : (!functional.unknown, i64) -> !functional.unknown
  %f2 = functional.call @fib_untyped(%a2) : (!functional.unknown) -> !functional.unknown
  %s = functional.prim "add"(%f1, %f2) : (!functional.unknown, !functional.unknown) -> !functional.unknown
  functional.return %s : !functional.unknown
^base:
  %one = functional.constant weak 1 : i64
  functional.return %one : i64
}

// CHECK: builtin.module {
// CHECK-LABEL: functional.func @fib(%n: i64) -> i64 {
// CHECK-NEXT:     %c2 = functional.constant 2 : i64
// CHECK-NEXT:     %cond = functional.prim "greater"(%n, %c2) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %cond, ^recurse, ^base
// CHECK-NEXT:   ^recurse:
// CHECK-NEXT:     %c1 = functional.constant 1 : i64
// CHECK-NEXT:     %a1 = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
// CHECK-NEXT:     %f1 = functional.call @fib(%a1) : (i64) -> i64
// CHECK-NEXT:     %a2 = functional.prim "subtract"(%n, %c2) : (i64, i64) -> i64
// CHECK-NEXT:     %f2 = functional.call @fib(%a2) : (i64) -> i64
// CHECK-NEXT:     %s = functional.prim "add"(%f1, %f2) : (i64, i64) -> i64
// CHECK-NEXT:     functional.return %s : i64
// CHECK-NEXT:   ^base:
// CHECK-NEXT:     %one = functional.constant 1 : i64
// CHECK-NEXT:     functional.return %one : i64
// CHECK-NEXT:   }
// CHECK-LABEL: functional.func @fib_untyped(%n: !functional.unknown) -> !functional.unknown {
// CHECK-NEXT:     %c2 = functional.constant weak 2 : i64
// CHECK-NEXT:     %cond = functional.prim "greater"(%n, %c2) : (!functional.unknown, i64) -> i1
// CHECK-NEXT:     cf.cond_br %cond, ^recurse, ^base
// CHECK-NEXT:   ^recurse:
// CHECK-NEXT:     %c1 = functional.constant weak 1 : i64
// CHECK-NEXT:     %a1 = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
// CHECK-NEXT:     %f1 = functional.call @fib_untyped(%a1) : (!functional.unknown) -> !functional.unknown
// CHECK-NEXT:     %a2 = functional.prim "subtract"(%n, %c2) : (!functional.unknown, i64) -> !functional.unknown
// CHECK-NEXT:     %f2 = functional.call @fib_untyped(%a2) : (!functional.unknown) -> !functional.unknown
// CHECK-NEXT:     %s = functional.prim "add"(%f1, %f2) : (!functional.unknown, !functional.unknown) -> !functional.unknown
// CHECK-NEXT:     functional.return %s : !functional.unknown
// CHECK-NEXT:   ^base:
// CHECK-NEXT:     %one = functional.constant weak 1 : i64
// CHECK-NEXT:     functional.return %one : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }

// CHECK-GENERIC: "builtin.module"() ({
// CHECK-GENERIC-LABEL: "functional.func"() <{sym_name = "fib", function_type = (i64) -> i64}> ({
// CHECK-GENERIC-NEXT:   ^bb0(%n: i64):
// CHECK-GENERIC-NEXT:     %c2 = "functional.constant"() <{value = 2 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     %cond = "functional.prim"(%n, %c2) <{fn = "greater"}> : (i64, i64) -> i1
// CHECK-GENERIC-NEXT:     "cf.cond_br"(%cond) [^recurse, ^base] <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (i1) -> ()
// CHECK-GENERIC-NEXT:   ^recurse:
// CHECK-GENERIC-NEXT:     %c1 = "functional.constant"() <{value = 1 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     %a1 = "functional.prim"(%n, %c1) <{fn = "subtract"}> : (i64, i64) -> i64
// CHECK-GENERIC-NEXT:     %f1 = "functional.call"(%a1) <{callee = @fib}> : (i64) -> i64
// CHECK-GENERIC-NEXT:     %a2 = "functional.prim"(%n, %c2) <{fn = "subtract"}> : (i64, i64) -> i64
// CHECK-GENERIC-NEXT:     %f2 = "functional.call"(%a2) <{callee = @fib}> : (i64) -> i64
// CHECK-GENERIC-NEXT:     %s = "functional.prim"(%f1, %f2) <{fn = "add"}> : (i64, i64) -> i64
// CHECK-GENERIC-NEXT:     "functional.return"(%s) : (i64) -> ()
// CHECK-GENERIC-NEXT:   ^base:
// CHECK-GENERIC-NEXT:     %one = "functional.constant"() <{value = 1 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     "functional.return"(%one) : (i64) -> ()
// CHECK-GENERIC-NEXT:   }) : () -> ()
// CHECK-GENERIC-LABEL: "functional.func"() <{sym_name = "fib_untyped", function_type = (!functional.unknown) -> !functional.unknown}> ({
// CHECK-GENERIC-NEXT:   ^bb0(%n: !functional.unknown):
// CHECK-GENERIC-NEXT:     %c2 = "functional.constant"() <{weak, value = 2 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     %cond = "functional.prim"(%n, %c2) <{fn = "greater"}> : (!functional.unknown, i64) -> i1
// CHECK-GENERIC-NEXT:     "cf.cond_br"(%cond) [^recurse, ^base] <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (i1) -> ()
// CHECK-GENERIC-NEXT:   ^recurse:
// CHECK-GENERIC-NEXT:     %c1 = "functional.constant"() <{weak, value = 1 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     %a1 = "functional.prim"(%n, %c1) <{fn = "subtract"}> : (!functional.unknown, i64) -> !functional.unknown
// CHECK-GENERIC-NEXT:     %f1 = "functional.call"(%a1) <{callee = @fib_untyped}> : (!functional.unknown) -> !functional.unknown
// CHECK-GENERIC-NEXT:     %a2 = "functional.prim"(%n, %c2) <{fn = "subtract"}> : (!functional.unknown, i64) -> !functional.unknown
// CHECK-GENERIC-NEXT:     %f2 = "functional.call"(%a2) <{callee = @fib_untyped}> : (!functional.unknown) -> !functional.unknown
// CHECK-GENERIC-NEXT:     %s = "functional.prim"(%f1, %f2) <{fn = "add"}> : (!functional.unknown, !functional.unknown) -> !functional.unknown
// CHECK-GENERIC-NEXT:     "functional.return"(%s) : (!functional.unknown) -> ()
// CHECK-GENERIC-NEXT:   ^base:
// CHECK-GENERIC-NEXT:     %one = "functional.constant"() <{weak, value = 1 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     "functional.return"(%one) : (i64) -> ()
// CHECK-GENERIC-NEXT:   }) : () -> ()
// CHECK-GENERIC-NEXT: }) : () -> ()
