// RUN: abir-opt %s -p if-convert --split-input-file | filecheck %s
// Edges into a block that only branches (the join of a short-circuit `or`/`and` whose arm cannot be speculated) are threaded past it.

// `if a or g(n)` with a call in the second operand: the test of `a` goes straight to the then-block (a is true there),
// the call's block branches on its own value, and the join block is erased.
builtin.module {
  functional.opaque @g "def g(n): return n > 3"
  functional.opaque @h "def h(n): return -n"
  functional.func @f(%n: i64) -> i64 {
    %c0 = functional.constant 0 : i64
    %a = functional.prim "less"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %a, ^bb2(%a : i1), ^bb1
  ^bb1:
    %b = functional.prim @g(%n) : (i64) -> i1
    cf.br ^bb2(%b : i1)
  ^bb2(%t: i1):
    cf.cond_br %t, ^bb3, ^bb4
  ^bb3:
    %h = functional.prim @h(%n) : (i64) -> i64
    functional.return %h : i64
  ^bb4:
    functional.return %n : i64
  }
}

// CHECK-LABEL: functional.func @f(%n: i64) -> i64 {
// CHECK-NEXT:     %c0 = functional.constant 0 : i64
// CHECK-NEXT:     %a = functional.prim "less"(%n, %c0) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %a, ^bb2, ^bb1
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     %b = functional.prim @g(%n) : (i64) -> i1
// CHECK-NEXT:     cf.cond_br %b, ^bb2, ^bb3
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     %h = functional.prim @h(%n) : (i64) -> i64
// CHECK-NEXT:     functional.return %h : i64
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     functional.return %n : i64
// CHECK-NEXT:   }

// -----

// `if a and g(n)`: a is false on the else-arm of its test, which goes straight to the else-block; the join's other
// arguments are passed on, in the values of each edge.
builtin.module {
  functional.opaque @g "def g(n): return n > 3"
  functional.func @f(%n: i64, %m: i64) -> i64 {
    %c0 = functional.constant 0 : i64
    %a = functional.prim "less"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %a, ^bb1, ^bb2(%a, %n : i1, i64)
  ^bb1:
    %b = functional.prim @g(%n) : (i64) -> i1
    cf.br ^bb2(%b, %m : i1, i64)
  ^bb2(%t: i1, %v: i64):
    cf.cond_br %t, ^bb3(%v : i64), ^bb3(%c0 : i64)
  ^bb3(%r: i64):
    functional.return %r : i64
  }
}

// CHECK-LABEL: functional.func @f(%n: i64, %m: i64) -> i64 {
// CHECK-NEXT:     %c0 = functional.constant 0 : i64
// CHECK-NEXT:     %a = functional.prim "less"(%n, %c0) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %a, ^bb1, ^bb2(%c0 : i64)
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     %b = functional.prim @g(%n) : (i64) -> i1
// CHECK-NEXT:     cf.cond_br %b, ^bb2(%m : i64), ^bb2(%c0 : i64)
// CHECK-NEXT:   ^bb2(%r: i64):
// CHECK-NEXT:     functional.return %r : i64
// CHECK-NEXT:   }

// -----

// A constant passed to the join picks its arm; an unknown value on a conditional edge is not threaded (the
// join stays for that edge, while the jump into it takes a copy of its branch).
builtin.module {
  functional.opaque @g "def g(n): return n > 3"
  functional.opaque @h "def h(n): return -n"
  functional.func @f(%n: i64, %u: i1) -> i64 {
    %true = functional.constant true
    %c0 = functional.constant 0 : i64
    %a = functional.prim "less"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %a, ^bb2(%true : i1), ^bb1
  ^bb1:
    %b = functional.prim @g(%n) : (i64) -> i1
    cf.cond_br %b, ^bb2(%u : i1), ^bb3
  ^bb2(%t: i1):
    cf.cond_br %t, ^bb3, ^bb4
  ^bb3:
    %h = functional.prim @h(%n) : (i64) -> i64
    functional.return %h : i64
  ^bb4:
    functional.return %n : i64
  }
}

// CHECK-LABEL: functional.func @f(%n: i64, %u: i1) -> i64 {
// CHECK:          cf.cond_br %a, ^bb3, ^bb1
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     %b = functional.prim @g(%n) : (i64) -> i1
// CHECK-NEXT:     cf.cond_br %b, ^bb2(%u : i1), ^bb3
// CHECK-NEXT:   ^bb2(%t: i1):
// CHECK-NEXT:     cf.cond_br %t, ^bb3, ^bb4
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     %h = functional.prim @h(%n) : (i64) -> i64

// -----

// A join with ops of its own is not threaded; a branch-only block that would lead an edge back to itself (a
// loop that runs no op while its value holds) keeps that edge.
builtin.module {
  functional.opaque @g "def g(n): return n > 3"
  functional.func @f(%n: i64) -> i64 {
    %c0 = functional.constant 0 : i64
    %a = functional.prim "less"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %a, ^bb2(%a : i1), ^bb1
  ^bb1:
    %b = functional.prim @g(%n) : (i64) -> i1
    cf.br ^bb2(%b : i1)
  ^bb2(%t: i1):
    %k = functional.prim @g(%n) : (i64) -> i1
    cf.cond_br %t, ^bb3(%k : i1), ^bb4
  ^bb3(%s: i1):
    cf.cond_br %s, ^bb3(%s : i1), ^bb4
  ^bb4:
    functional.return %n : i64
  }
}

// CHECK-LABEL: functional.func @f(%n: i64) -> i64 {
// CHECK:          cf.cond_br %a, ^bb2(%a : i1), ^bb1
// CHECK:          cf.br ^bb2(%b : i1)
// CHECK-NEXT:   ^bb2(%t: i1):
// CHECK-NEXT:     %k = functional.prim @g(%n) : (i64) -> i1
// CHECK-NEXT:     cf.cond_br %t, ^bb3(%k : i1), ^bb4
// CHECK-NEXT:   ^bb3(%s: i1):
// CHECK-NEXT:     cf.cond_br %s, ^bb3(%s : i1), ^bb4
