// RUN: abir-opt %s -p infer-types --split-input-file | filecheck %s

// Recursive fibonacci: the recursion starts unknown, the base case `return 1` (a weak literal,
// i64 by default) gives the first fact. `n - 1` keeps n's i32 (NEP 50), `return 1` stays i64.
builtin.module {
  functional.func @fib(%n: i32) -> !functional.unknown {
    %c2 = functional.constant weak 2 : i64
    %cond = functional.prim "greater"(%n, %c2) : (i32, i64) -> !functional.unknown
    %b = functional.prim "astype"(%cond) : (!functional.unknown) -> i1
    cf.cond_br %b, ^recurse, ^base
  ^recurse:
    %c1 = functional.constant weak 1 : i64
    %a1 = functional.prim "subtract"(%n, %c1) : (i32, i64) -> !functional.unknown
    %f1 = functional.call @fib(%a1) : (!functional.unknown) -> !functional.unknown
    %a2 = functional.prim "subtract"(%n, %c2) : (i32, i64) -> !functional.unknown
    %f2 = functional.call @fib(%a2) : (!functional.unknown) -> !functional.unknown
    %s = functional.prim "add"(%f1, %f2) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %s : !functional.unknown
  ^base:
    %one = functional.constant weak 1 : i64
    functional.return %one : i64
  }
}

// CHECK-LABEL: functional.func @fib(%n: i32) -> i64 {
// CHECK-NEXT:   %c2 = functional.constant 2 : i32
// CHECK-NEXT:   %cond = functional.prim "greater"(%n, %c2) : (i32, i32) -> i1
// CHECK-NEXT:   %b = functional.prim "astype"(%cond) : (i1) -> i1
// CHECK-NEXT:   cf.cond_br %b, ^{{.*}}, ^{{.*}}
// CHECK:        %c1 = functional.constant 1 : i32
// CHECK-NEXT:   %a1 = functional.prim "subtract"(%n, %c1) : (i32, i32) -> i32
// CHECK-NEXT:   %f1 = functional.call @fib(%a1) : (i32) -> i64
// CHECK-NEXT:   %a2 = functional.prim "subtract"(%n, %c2) : (i32, i32) -> i32
// CHECK-NEXT:   %f2 = functional.call @fib(%a2) : (i32) -> i64
// CHECK-NEXT:   %s = functional.prim "add"(%f1, %f2) : (i64, i64) -> i64
// CHECK-NEXT:   functional.return %s : i64
// CHECK:        %one = functional.constant 1 : i64
// CHECK-NEXT:   functional.return %one : i64

// -----

// Mutual recursion: is_even's parameter type flows into is_odd through the call.
builtin.module {
  functional.func @is_even(%n: i16) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %z = functional.prim "equal"(%n, %c0) : (i16, i64) -> i1
    cf.cond_br %z, ^yes, ^no
  ^yes:
    %t = functional.constant weak true
    functional.return %t : i1
  ^no:
    %c1 = functional.constant weak 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (i16, i64) -> !functional.unknown
    %r = functional.call @is_odd(%m) : (!functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
  functional.func @is_odd(%n: !functional.unknown) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %z = functional.prim "equal"(%n, %c0) : (!functional.unknown, i64) -> i1
    cf.cond_br %z, ^yes, ^no
  ^yes:
    %f = functional.constant weak false
    functional.return %f : i1
  ^no:
    %c1 = functional.constant weak 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
    %r = functional.call @is_even(%m) : (!functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
}

// CHECK-LABEL: functional.func @is_even(%n: i16) -> i1 {
// CHECK:        %m = functional.prim "subtract"(%n, %c1) : (i16, i16) -> i16
// CHECK-NEXT:   %r = functional.call @is_odd(%m) : (i16) -> i1
// CHECK-LABEL: functional.func @is_odd(%n: i16) -> i1 {
// CHECK-NEXT:   %c0 = functional.constant 0 : i16
// CHECK:        %f = functional.constant false

// -----

// A while loop with a swap: the loop header's block arguments join the entry values and the
// back edge; `a % b` keeps the type.
builtin.module {
  functional.func @gcd(%a0: i32, %b0: i32) -> !functional.unknown {
    cf.br ^head(%a0, %b0 : i32, i32)
  ^head(%a: !functional.unknown, %b: !functional.unknown):
    %c0 = functional.constant weak 0 : i64
    %ne = functional.prim "not_equal"(%b, %c0) : (!functional.unknown, i64) -> !functional.unknown
    %cond = functional.prim "astype"(%ne) : (!functional.unknown) -> i1
    %r = functional.prim "remainder"(%a, %b) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    cf.cond_br %cond, ^head(%b, %r : !functional.unknown, !functional.unknown), ^done
  ^done:
    functional.return %a : !functional.unknown
  }
}

// CHECK-LABEL: functional.func @gcd(%a0: i32, %b0: i32) -> i32 {
// CHECK-NEXT:   cf.br ^[[HEAD:.*]](%a0, %b0 : i32, i32)
// CHECK-NEXT: ^[[HEAD]](%a: i32, %b: i32):
// CHECK-NEXT:   %c0 = functional.constant 0 : i32
// CHECK:        %r = functional.prim "remainder"(%a, %b) : (i32, i32) -> i32
// CHECK-NEXT:   cf.cond_br %cond, ^[[HEAD]](%b, %r : i32, i32), ^{{.*}}

// -----

// Early return from a loop: the loop counter starts as a weak literal and meets the strong
// result of `i + 1`; both returns agree on i64 (the weak -1 takes the other return's type).
builtin.module {
  functional.func @find(%n: i64, %k: i64) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    cf.br ^head(%c0 : i64)
  ^head(%i: !functional.unknown):
    %lt = functional.prim "less"(%i, %n) : (!functional.unknown, i64) -> i1
    cf.cond_br %lt, ^body, ^after
  ^body:
    %sq = functional.prim "multiply"(%i, %i) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    %hit = functional.prim "greater_equal"(%sq, %k) : (!functional.unknown, i64) -> i1
    cf.cond_br %hit, ^found, ^next
  ^found:
    functional.return %i : !functional.unknown
  ^next:
    %c1 = functional.constant weak 1 : i64
    %i1 = functional.prim "add"(%i, %c1) : (!functional.unknown, i64) -> !functional.unknown
    cf.br ^head(%i1 : !functional.unknown)
  ^after:
    %m1 = functional.constant weak -1 : i64
    functional.return %m1 : i64
  }
}

// CHECK-LABEL: functional.func @find(%n: i64, %k: i64) -> i64 {
// CHECK:      ^{{.*}}(%i: i64):
// CHECK:        %sq = functional.prim "multiply"(%i, %i) : (i64, i64) -> i64
// CHECK:        functional.return %i : i64
// CHECK:        %m1 = functional.constant -1 : i64

// -----

// Self-tail-recursive sum with float accumulator: `acc + n` promotes to f64.
builtin.module {
  functional.func @tsum(%n: i64, %acc: f64) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %p = functional.prim "greater"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %p, ^rec, ^base
  ^rec:
    %c1 = functional.constant weak 1 : i64
    %n1 = functional.prim "subtract"(%n, %c1) : (i64, i64) -> !functional.unknown
    %acc1 = functional.prim "add"(%acc, %n) : (f64, i64) -> !functional.unknown
    %r = functional.call @tsum(%n1, %acc1) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  ^base:
    functional.return %acc : f64
  }
}

// CHECK-LABEL: functional.func @tsum(%n: i64, %acc: f64) -> f64 {
// CHECK:        %acc1 = functional.prim "add"(%acc, %n) : (f64, i64) -> f64
// CHECK-NEXT:   %r = functional.call @tsum(%n1, %acc1) : (i64, f64) -> f64

// -----

// `n > 3 and f(n)`: a bool meets an i32 at the join (Python gives some members False, others a
// number; stacked, NumPy makes them numbers): the join is i32 and the bool is converted on its
// edge. A bool returned on one path and an i32 on another likewise.
builtin.module {
  functional.func @f(%n: i32) -> !functional.unknown {
    %c3 = functional.constant weak 3 : i64
    %p = functional.prim "greater"(%n, %c3) : (i32, i64) -> !functional.unknown
    %b = functional.prim "astype"(%p) : (!functional.unknown) -> i1
    cf.cond_br %b, ^call, ^join(%p : !functional.unknown)
  ^call:
    %twice = functional.prim "add"(%n, %n) : (i32, i32) -> !functional.unknown
    cf.br ^join(%twice : !functional.unknown)
  ^join(%r: !functional.unknown):
    cf.cond_br %b, ^number, ^flag
  ^number:
    functional.return %r : !functional.unknown
  ^flag:
    functional.return %p : !functional.unknown
  }
}

// CHECK-LABEL: functional.func @f(%n: i32) -> i32 {
// CHECK:        %p = functional.prim "greater"(%n, %c3) : (i32, i32) -> i1
// CHECK:        [[CAST:%.*]] = functional.prim "astype"(%p) : (i1) -> i32
// CHECK-NEXT:   cf.cond_br %b, ^{{.*}}, ^{{.*}}([[CAST]] : i32)
// CHECK:        cf.br ^{{.*}}(%twice : i32)
// CHECK:      ^join(%r: i32):
// CHECK:        functional.return %r : i32
// CHECK:        [[RET:%.*]] = functional.prim "astype"(%p) : (i1) -> i32
// CHECK-NEXT:   functional.return [[RET]] : i32

// -----

// A block no branch reaches (written by hand; the frontend emits none) is dropped, with its ops.
builtin.module {
  functional.func @pt(%c: i1, %x: i64, %y: i64) -> !functional.unknown {
    cf.cond_br %c, ^fwd, ^join(%y : i64)
  ^fwd:
    cf.br ^join(%x : i64)
  ^join(%v: i64):
    functional.return %v : i64
  ^dead:
    %u = functional.constant 5 : i64
    cf.br ^join(%u : i64)
  }
}

// CHECK-LABEL: functional.func @pt(%c: i1, %x: i64, %y: i64) -> i64 {
// CHECK:         functional.return %v : i64
// CHECK-NEXT:  }
