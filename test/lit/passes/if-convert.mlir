// RUN: abir-opt %s -p if-convert --split-input-file | filecheck %s
// Small pure if/else diamonds and triangles become where selects; arms with calls or opaque prims stay branches.
// A value-only diamond (collatz step): both arms are speculated, the join argument is selected with where, and the join merges into the head.
builtin.module {
  functional.func @step(%n: i64) -> i64 {
    %c2 = functional.constant 2 : i64
    %r = functional.prim "remainder"(%n, %c2) : (i64, i64) -> i64
    %c0 = functional.constant 0 : i64
    %even = functional.prim "equal"(%r, %c0) : (i64, i64) -> i1
    cf.cond_br %even, ^bb1, ^bb2
  ^bb1:
    %half = functional.prim "floor_divide"(%n, %c2) : (i64, i64) -> i64
    cf.br ^bb3(%half : i64)
  ^bb2:
    %c3 = functional.constant 3 : i64
    %m = functional.prim "multiply"(%c3, %n) : (i64, i64) -> i64
    %c1 = functional.constant 1 : i64
    %odd = functional.prim "add"(%m, %c1) : (i64, i64) -> i64
    cf.br ^bb3(%odd : i64)
  ^bb3(%next: i64):
    functional.return %next : i64
  }
}

// CHECK:      builtin.module {
// CHECK-LABEL: functional.func @step(%n: i64) -> i64 {
// CHECK-NEXT:     %c2 = functional.constant 2 : i64
// CHECK-NEXT:     %r = functional.prim "remainder"(%n, %c2) : (i64, i64) -> i64
// CHECK-NEXT:     %c0 = functional.constant 0 : i64
// CHECK-NEXT:     %even = functional.prim "equal"(%r, %c0) : (i64, i64) -> i1
// CHECK-NEXT:     %half = functional.prim "floor_divide"(%n, %c2) : (i64, i64) -> i64
// CHECK-NEXT:     %c3 = functional.constant 3 : i64
// CHECK-NEXT:     %m = functional.prim "multiply"(%c3, %n) : (i64, i64) -> i64
// CHECK-NEXT:     %c1 = functional.constant 1 : i64
// CHECK-NEXT:     %odd = functional.prim "add"(%m, %c1) : (i64, i64) -> i64
// CHECK-NEXT:     %next = functional.prim "where"(%even, %half, %odd) : (i1, i64, i64) -> i64
// CHECK-NEXT:     functional.return %next : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A triangle (if without else) with edge arguments: the value passed on the direct edge meets the arm's value in a where; an argument both paths pass unchanged needs no where.
builtin.module {
  functional.func @clamp(%x: i64, %k: i64) -> i64 {
    %c0 = functional.constant 0 : i64
    %neg = functional.prim "less"(%x, %c0) : (i64, i64) -> i1
    cf.cond_br %neg, ^bb1(%x : i64), ^bb2(%x, %k : i64, i64)
  ^bb1(%v: i64):
    %p = functional.prim "negative"(%v) : (i64) -> i64
    cf.br ^bb2(%p, %k : i64, i64)
  ^bb2(%y: i64, %z: i64):
    %s = functional.prim "add"(%y, %z) : (i64, i64) -> i64
    functional.return %s : i64
  }
}

// CHECK:      builtin.module {
// CHECK-LABEL: functional.func @clamp(%x: i64, %k: i64) -> i64 {
// CHECK-NEXT:     %c0 = functional.constant 0 : i64
// CHECK-NEXT:     %neg = functional.prim "less"(%x, %c0) : (i64, i64) -> i1
// CHECK-NEXT:     %p = functional.prim "negative"(%x) : (i64) -> i64
// CHECK-NEXT:     %y = functional.prim "where"(%neg, %p, %x) : (i1, i64, i64) -> i64
// CHECK-NEXT:     %s = functional.prim "add"(%y, %k) : (i64, i64) -> i64
// CHECK-NEXT:     functional.return %s : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Not converted: an arm with a call, and an arm with an opaque prim (both may be costly or impure).
builtin.module {
  functional.opaque @noisy "def noisy(x): return x"
  functional.func @rec(%n: i64) -> i64 {
    %c0 = functional.constant 0 : i64
    %pos = functional.prim "greater"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %pos, ^bb1, ^bb2
  ^bb1:
    %c1 = functional.constant 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
    %r = functional.call @rec(%m) : (i64) -> i64
    cf.br ^bb3(%r : i64)
  ^bb2:
    %o = functional.prim @noisy(%n) : (i64) -> i64
    cf.br ^bb3(%o : i64)
  ^bb3(%out: i64):
    functional.return %out : i64
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   functional.opaque @noisy "def noisy(x): return x"
// CHECK-LABEL: functional.func @rec(%n: i64) -> i64 {
// CHECK-NEXT:     %c0 = functional.constant 0 : i64
// CHECK-NEXT:     %pos = functional.prim "greater"(%n, %c0) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %pos, ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     %c1 = functional.constant 1 : i64
// CHECK-NEXT:     %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
// CHECK-NEXT:     %r = functional.call @rec(%m) : (i64) -> i64
// CHECK-NEXT:     cf.br ^bb3(%r : i64)
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     %o = functional.prim @noisy(%n) : (i64) -> i64
// CHECK-NEXT:     cf.br ^bb3(%o : i64)
// CHECK-NEXT:   ^bb3(%out: i64):
// CHECK-NEXT:     functional.return %out : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----
// Arms that both return (an evaluator's `if op == ADD: return a + b` cases): both are speculated and one return gives the selected value, the inner pair first.
builtin.module {
  functional.func @combine(%op: i64, %a: i64, %b: i64) -> i64 {
    %c1 = functional.constant 1 : i64
    %add = functional.prim "equal"(%op, %c1) : (i64, i64) -> i1
    cf.cond_br %add, ^bb1, ^bb2
  ^bb1:
    %s = functional.prim "add"(%a, %b) : (i64, i64) -> i64
    functional.return %s : i64
  ^bb2:
    %c2 = functional.constant 2 : i64
    %mul = functional.prim "equal"(%op, %c2) : (i64, i64) -> i1
    cf.cond_br %mul, ^bb3, ^bb4
  ^bb3:
    %p = functional.prim "multiply"(%a, %b) : (i64, i64) -> i64
    functional.return %p : i64
  ^bb4:
    %d = functional.prim "subtract"(%a, %b) : (i64, i64) -> i64
    functional.return %d : i64
  }
}

// CHECK:      builtin.module {
// CHECK-LABEL: functional.func @combine(%op: i64, %a: i64, %b: i64) -> i64 {
// CHECK-NEXT:     %c1 = functional.constant 1 : i64
// CHECK-NEXT:     %add = functional.prim "equal"(%op, %c1) : (i64, i64) -> i1
// CHECK-NEXT:     %s = functional.prim "add"(%a, %b) : (i64, i64) -> i64
// CHECK-NEXT:     %c2 = functional.constant 2 : i64
// CHECK-NEXT:     %mul = functional.prim "equal"(%op, %c2) : (i64, i64) -> i1
// CHECK-NEXT:     %p = functional.prim "multiply"(%a, %b) : (i64, i64) -> i64
// CHECK-NEXT:     %d = functional.prim "subtract"(%a, %b) : (i64, i64) -> i64
// CHECK-NEXT:     %0 = functional.prim "where"(%mul, %p, %d) : (i1, i64, i64) -> i64
// CHECK-NEXT:     %1 = functional.prim "where"(%add, %s, %0) : (i1, i64, i64) -> i64
// CHECK-NEXT:     functional.return %1 : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----
// A returning arm beside an arm with a call (a recursive case) stays a branch.
builtin.module {
  functional.func @down(%n: i64) -> i64 {
    %c0 = functional.constant 0 : i64
    %done = functional.prim "equal"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %done, ^bb1, ^bb2
  ^bb1:
    functional.return %n : i64
  ^bb2:
    %c1 = functional.constant 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
    %r = functional.call @down(%m) : (i64) -> i64
    functional.return %r : i64
  }
}

// CHECK:      builtin.module {
// CHECK-LABEL: functional.func @down(%n: i64) -> i64 {
// CHECK-NEXT:     %c0 = functional.constant 0 : i64
// CHECK-NEXT:     %done = functional.prim "equal"(%n, %c0) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %done, ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     functional.return %n : i64
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     %c1 = functional.constant 1 : i64
// CHECK-NEXT:     %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
// CHECK-NEXT:     %r = functional.call @down(%m) : (i64) -> i64
// CHECK-NEXT:     functional.return %r : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }
