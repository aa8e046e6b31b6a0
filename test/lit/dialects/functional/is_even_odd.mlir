// RUN: abir-opt %s | abir-opt | filecheck %s
// RUN: ABIR_ROUNDTRIP
// RUN: ABIR_GENERIC_ROUNDTRIP

// Mutually recursive is_even / is_odd by hand, as the frontend would emit it for
//
//   def is_even(n):
//       if n == 0:
//           return True
//       return is_odd(n - 1)
//
//   def is_odd(n):
//       if n == 0:
//           return False
//       return is_even(n - 1)

functional.func @is_even(%n: i64) -> i1 {
  %c0 = functional.constant weak 0 : i64
  %zero = functional.prim "equal"(%n, %c0) : (i64, i64) -> i1
  cf.cond_br %zero, ^base, ^recurse
^base:
  %t = functional.constant true
  functional.return %t : i1
^recurse:
  %c1 = functional.constant weak 1 : i64
  %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
  %r = functional.call @is_odd(%m) : (i64) -> i1
  functional.return %r : i1
}

functional.func @is_odd(%n: i64) -> i1 {
  %c0 = functional.constant weak 0 : i64
  %zero = functional.prim "equal"(%n, %c0) : (i64, i64) -> i1
  cf.cond_br %zero, ^base, ^recurse
^base:
  %f = functional.constant false
  functional.return %f : i1
^recurse:
  %c1 = functional.constant weak 1 : i64
  %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
  %r = functional.call @is_even(%m) : (i64) -> i1
  functional.return %r : i1
}

// CHECK: builtin.module {
// CHECK-LABEL: functional.func @is_even(%n: i64) -> i1 {
// CHECK-NEXT:     %c0 = functional.constant weak 0 : i64
// CHECK-NEXT:     %zero = functional.prim "equal"(%n, %c0) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %zero, ^base, ^recurse
// CHECK-NEXT:   ^base:
// CHECK-NEXT:     %t = functional.constant true
// CHECK-NEXT:     functional.return %t : i1
// CHECK-NEXT:   ^recurse:
// CHECK-NEXT:     %c1 = functional.constant weak 1 : i64
// CHECK-NEXT:     %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
// CHECK-NEXT:     %r = functional.call @is_odd(%m) : (i64) -> i1
// CHECK-NEXT:     functional.return %r : i1
// CHECK-NEXT:   }
// CHECK-LABEL: functional.func @is_odd(%n: i64) -> i1 {
// CHECK-NEXT:     %c0 = functional.constant weak 0 : i64
// CHECK-NEXT:     %zero = functional.prim "equal"(%n, %c0) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %zero, ^base, ^recurse
// CHECK-NEXT:   ^base:
// CHECK-NEXT:     %f = functional.constant false
// CHECK-NEXT:     functional.return %f : i1
// CHECK-NEXT:   ^recurse:
// CHECK-NEXT:     %c1 = functional.constant weak 1 : i64
// CHECK-NEXT:     %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
// CHECK-NEXT:     %r = functional.call @is_even(%m) : (i64) -> i1
// CHECK-NEXT:     functional.return %r : i1
// CHECK-NEXT:   }
// CHECK-NEXT: }

// CHECK-GENERIC: "builtin.module"() ({
// CHECK-GENERIC-LABEL: "functional.func"() <{sym_name = "is_even", function_type = (i64) -> i1}> ({
// CHECK-GENERIC-NEXT:   ^bb0(%n: i64):
// CHECK-GENERIC-NEXT:     %c0 = "functional.constant"() <{weak, value = 0 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     %zero = "functional.prim"(%n, %c0) <{fn = "equal"}> : (i64, i64) -> i1
// CHECK-GENERIC-NEXT:     "cf.cond_br"(%zero) [^base, ^recurse] <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (i1) -> ()
// CHECK-GENERIC-NEXT:   ^base:
// CHECK-GENERIC-NEXT:     %t = "functional.constant"() <{value = true}> : () -> i1
// CHECK-GENERIC-NEXT:     "functional.return"(%t) : (i1) -> ()
// CHECK-GENERIC-NEXT:   ^recurse:
// CHECK-GENERIC-NEXT:     %c1 = "functional.constant"() <{weak, value = 1 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     %m = "functional.prim"(%n, %c1) <{fn = "subtract"}> : (i64, i64) -> i64
// CHECK-GENERIC-NEXT:     %r = "functional.call"(%m) <{callee = @is_odd}> : (i64) -> i1
// CHECK-GENERIC-NEXT:     "functional.return"(%r) : (i1) -> ()
// CHECK-GENERIC-NEXT:   }) : () -> ()
// CHECK-GENERIC-LABEL: "functional.func"() <{sym_name = "is_odd", function_type = (i64) -> i1}> ({
// CHECK-GENERIC-NEXT:   ^bb0(%n: i64):
// CHECK-GENERIC-NEXT:     %c0 = "functional.constant"() <{weak, value = 0 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     %zero = "functional.prim"(%n, %c0) <{fn = "equal"}> : (i64, i64) -> i1
// CHECK-GENERIC-NEXT:     "cf.cond_br"(%zero) [^base, ^recurse] <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (i1) -> ()
// CHECK-GENERIC-NEXT:   ^base:
// CHECK-GENERIC-NEXT:     %f = "functional.constant"() <{value = false}> : () -> i1
// CHECK-GENERIC-NEXT:     "functional.return"(%f) : (i1) -> ()
// CHECK-GENERIC-NEXT:   ^recurse:
// CHECK-GENERIC-NEXT:     %c1 = "functional.constant"() <{weak, value = 1 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     %m = "functional.prim"(%n, %c1) <{fn = "subtract"}> : (i64, i64) -> i64
// CHECK-GENERIC-NEXT:     %r = "functional.call"(%m) <{callee = @is_even}> : (i64) -> i1
// CHECK-GENERIC-NEXT:     "functional.return"(%r) : (i1) -> ()
// CHECK-GENERIC-NEXT:   }) : () -> ()
// CHECK-GENERIC-NEXT: }) : () -> ()
