// RUN: abir-opt %s -p inline-calls --split-input-file | filecheck %s
// RUN: abir-opt %s -p inline-calls,if-convert,simplify-functional --split-input-file | filecheck %s --check-prefix=PIPE
// Calls to non-recursive functions become copies of the callee's blocks; recursion stays calls; functions unreachable from abir.entry are erased.
// A helper with a loop and an early return, called twice: each call becomes a copy of the helper's blocks between the split halves of the caller's block; returns branch to the continuation, whose argument replaces the call's result. The helper is erased.
builtin.module attributes {abir.entry = "twice"} {
  functional.func @twice(%a: i64, %b: i64) -> i64 {
    %x = functional.call @count(%a) : (i64) -> i64
    %y = functional.call @count(%b) : (i64) -> i64
    %s = functional.prim "add"(%x, %y) : (i64, i64) -> i64
    functional.return %s : i64
  }
  functional.func @count(%n: i64) -> i64 {
    %c0 = functional.constant 0 : i64
    cf.br ^bb1(%n, %c0 : i64, i64)
  ^bb1(%k: i64, %steps: i64):
    %more = functional.prim "greater"(%k, %c0) : (i64, i64) -> i1
    cf.cond_br %more, ^bb2, ^bb4
  ^bb2:
    %c13 = functional.constant 13 : i64
    %hit = functional.prim "equal"(%k, %c13) : (i64, i64) -> i1
    cf.cond_br %hit, ^bb3, ^bb5
  ^bb3:
    %m1 = functional.constant -1 : i64
    functional.return %m1 : i64
  ^bb5:
    %c1 = functional.constant 1 : i64
    %k1 = functional.prim "subtract"(%k, %c1) : (i64, i64) -> i64
    %s1 = functional.prim "add"(%steps, %c1) : (i64, i64) -> i64
    cf.br ^bb1(%k1, %s1 : i64, i64)
  ^bb4:
    functional.return %steps : i64
  }
}

// CHECK:      builtin.module attributes {abir.entry = "twice"} {
// CHECK-LABEL: functional.func @twice(%a: i64, %b: i64) -> i64 {
// CHECK-NEXT:     cf.br ^bb1(%a : i64)
// CHECK-NEXT:   ^bb1(%n: i64):
// CHECK-NEXT:     %c0 = functional.constant 0 : i64
// CHECK-NEXT:     cf.br ^bb2(%n, %c0 : i64, i64)
// CHECK-NEXT:   ^bb2(%k: i64, %steps: i64):
// CHECK-NEXT:     %more = functional.prim "greater"(%k, %c0) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %more, ^bb3, ^bb6
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     %c13 = functional.constant 13 : i64
// CHECK-NEXT:     %hit = functional.prim "equal"(%k, %c13) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %hit, ^bb4, ^bb5
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     %m1 = functional.constant -1 : i64
// CHECK-NEXT:     cf.br ^bb7(%m1 : i64)
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     %c1 = functional.constant 1 : i64
// CHECK-NEXT:     %k1 = functional.prim "subtract"(%k, %c1) : (i64, i64) -> i64
// CHECK-NEXT:     %s1 = functional.prim "add"(%steps, %c1) : (i64, i64) -> i64
// CHECK-NEXT:     cf.br ^bb2(%k1, %s1 : i64, i64)
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     cf.br ^bb7(%steps : i64)
// CHECK-NEXT:   ^bb7(%x: i64):
// CHECK-NEXT:     cf.br ^bb8(%b : i64)
// CHECK-NEXT:   ^bb8(%n_1: i64):
// CHECK-NEXT:     %c0_1 = functional.constant 0 : i64
// CHECK-NEXT:     cf.br ^bb9(%n_1, %c0_1 : i64, i64)
// CHECK-NEXT:   ^bb9(%k_1: i64, %steps_1: i64):
// CHECK-NEXT:     %more_1 = functional.prim "greater"(%k_1, %c0_1) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %more_1, ^bb10, ^bb13
// CHECK-NEXT:   ^bb10:
// CHECK-NEXT:     %c13_1 = functional.constant 13 : i64
// CHECK-NEXT:     %hit_1 = functional.prim "equal"(%k_1, %c13_1) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %hit_1, ^bb11, ^bb12
// CHECK-NEXT:   ^bb11:
// CHECK-NEXT:     %m1_1 = functional.constant -1 : i64
// CHECK-NEXT:     cf.br ^bb14(%m1_1 : i64)
// CHECK-NEXT:   ^bb12:
// CHECK-NEXT:     %c1_1 = functional.constant 1 : i64
// CHECK-NEXT:     %k1_1 = functional.prim "subtract"(%k_1, %c1_1) : (i64, i64) -> i64
// CHECK-NEXT:     %s1_1 = functional.prim "add"(%steps_1, %c1_1) : (i64, i64) -> i64
// CHECK-NEXT:     cf.br ^bb9(%k1_1, %s1_1 : i64, i64)
// CHECK-NEXT:   ^bb13:
// CHECK-NEXT:     cf.br ^bb14(%steps_1 : i64)
// CHECK-NEXT:   ^bb14(%y: i64):
// CHECK-NEXT:     %s = functional.prim "add"(%x, %y) : (i64, i64) -> i64
// CHECK-NEXT:     functional.return %s : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----


// Recursion stays calls: @fib is recursive, so neither its own calls nor the call from @main are inlined; the non-recursive @twice_of inside @fib is inlined (callees first, so @main receives nothing to inline from it), and @twice_of is erased.
builtin.module attributes {abir.entry = "main"} {
  functional.func @main(%n: i64) -> i64 {
    %r = functional.call @fib(%n) : (i64) -> i64
    functional.return %r : i64
  }
  functional.func @fib(%n: i64) -> i64 {
    %c2 = functional.constant 2 : i64
    %cond = functional.prim "greater"(%n, %c2) : (i64, i64) -> i1
    cf.cond_br %cond, ^bb1, ^bb2
  ^bb1:
    %c1 = functional.constant 1 : i64
    %a1 = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
    %f1 = functional.call @fib(%a1) : (i64) -> i64
    %d = functional.call @twice_of(%f1) : (i64) -> i64
    functional.return %d : i64
  ^bb2:
    %one = functional.constant 1 : i64
    functional.return %one : i64
  }
  functional.func @twice_of(%v: i64) -> i64 {
    %w = functional.prim "add"(%v, %v) : (i64, i64) -> i64
    functional.return %w : i64
  }
}

// CHECK:      builtin.module attributes {abir.entry = "main"} {
// CHECK-LABEL: functional.func @main(%n: i64) -> i64 {
// CHECK-NEXT:     %r = functional.call @fib(%n) : (i64) -> i64
// CHECK-NEXT:     functional.return %r : i64
// CHECK-NEXT:   }
// CHECK-LABEL: functional.func @fib(%n: i64) -> i64 {
// CHECK-NEXT:     %c2 = functional.constant 2 : i64
// CHECK-NEXT:     %cond = functional.prim "greater"(%n, %c2) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %cond, ^bb1, ^bb4
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     %c1 = functional.constant 1 : i64
// CHECK-NEXT:     %a1 = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
// CHECK-NEXT:     %f1 = functional.call @fib(%a1) : (i64) -> i64
// CHECK-NEXT:     cf.br ^bb2(%f1 : i64)
// CHECK-NEXT:   ^bb2(%v: i64):
// CHECK-NEXT:     %w = functional.prim "add"(%v, %v) : (i64, i64) -> i64
// CHECK-NEXT:     cf.br ^bb3(%w : i64)
// CHECK-NEXT:   ^bb3(%d: i64):
// CHECK-NEXT:     functional.return %d : i64
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     %one = functional.constant 1 : i64
// CHECK-NEXT:     functional.return %one : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----


// Mutual recursion stays calls; a chain of helpers (@outer -> @mid -> @leaf) inlines fully, bottom-up; @unused is not reachable from the entry and is erased.
builtin.module attributes {abir.entry = "outer"} {
  functional.func @outer(%x: f64) -> f64 {
    %m = functional.call @mid(%x) : (f64) -> f64
    %e = functional.call @even(%m) : (f64) -> f64
    functional.return %e : f64
  }
  functional.func @mid(%x: f64) -> f64 {
    %a = functional.call @leaf(%x) : (f64) -> f64
    %b = functional.call @leaf(%a) : (f64) -> f64
    functional.return %b : f64
  }
  functional.func @leaf(%x: f64) -> f64 {
    %y = functional.prim "multiply"(%x, %x) : (f64, f64) -> f64
    functional.return %y : f64
  }
  functional.func @even(%x: f64) -> f64 {
    %c1 = functional.constant 1.0 : f64
    %small = functional.prim "less"(%x, %c1) : (f64, f64) -> i1
    cf.cond_br %small, ^bb1, ^bb2
  ^bb1:
    functional.return %x : f64
  ^bb2:
    %h = functional.prim "subtract"(%x, %c1) : (f64, f64) -> f64
    %o = functional.call @odd(%h) : (f64) -> f64
    functional.return %o : f64
  }
  functional.func @odd(%x: f64) -> f64 {
    %c1 = functional.constant 1.0 : f64
    %h = functional.prim "subtract"(%x, %c1) : (f64, f64) -> f64
    %e = functional.call @even(%h) : (f64) -> f64
    functional.return %e : f64
  }
  functional.func @unused(%x: f64) -> f64 {
    functional.return %x : f64
  }
}

// CHECK:      builtin.module attributes {abir.entry = "outer"} {
// CHECK-LABEL: functional.func @outer(%x: f64) -> f64 {
// CHECK-NEXT:     cf.br ^bb1(%x : f64)
// CHECK-NEXT:   ^bb1(%x_1: f64):
// CHECK-NEXT:     cf.br ^bb2(%x_1 : f64)
// CHECK-NEXT:   ^bb2(%x_2: f64):
// CHECK-NEXT:     %y = functional.prim "multiply"(%x_2, %x_2) : (f64, f64) -> f64
// CHECK-NEXT:     cf.br ^bb3(%y : f64)
// CHECK-NEXT:   ^bb3(%a: f64):
// CHECK-NEXT:     cf.br ^bb4(%a : f64)
// CHECK-NEXT:   ^bb4(%x_3: f64):
// CHECK-NEXT:     %y_1 = functional.prim "multiply"(%x_3, %x_3) : (f64, f64) -> f64
// CHECK-NEXT:     cf.br ^bb5(%y_1 : f64)
// CHECK-NEXT:   ^bb5(%b: f64):
// CHECK-NEXT:     cf.br ^bb6(%b : f64)
// CHECK-NEXT:   ^bb6(%m: f64):
// CHECK-NEXT:     %e = functional.call @even(%m) : (f64) -> f64
// CHECK-NEXT:     functional.return %e : f64
// CHECK-NEXT:   }
// CHECK-LABEL: functional.func @even(%x: f64) -> f64 {
// CHECK-NEXT:     %c1 = functional.constant 1.000000e+00 : f64
// CHECK-NEXT:     %small = functional.prim "less"(%x, %c1) : (f64, f64) -> i1
// CHECK-NEXT:     cf.cond_br %small, ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     functional.return %x : f64
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     %h = functional.prim "subtract"(%x, %c1) : (f64, f64) -> f64
// CHECK-NEXT:     %o = functional.call @odd(%h) : (f64) -> f64
// CHECK-NEXT:     functional.return %o : f64
// CHECK-NEXT:   }
// CHECK-LABEL: functional.func @odd(%x: f64) -> f64 {
// CHECK-NEXT:     %c1 = functional.constant 1.000000e+00 : f64
// CHECK-NEXT:     %h = functional.prim "subtract"(%x, %c1) : (f64, f64) -> f64
// CHECK-NEXT:     %e = functional.call @even(%h) : (f64) -> f64
// CHECK-NEXT:     functional.return %e : f64
// CHECK-NEXT:   }
// CHECK-NEXT: }

// if-convert then merges the chains of blocks the inlining leaves: one straight-line block.
// PIPE:      builtin.module attributes {abir.entry = "outer"} {
// PIPE-LABEL: functional.func @outer(%x: f64) -> f64 {
// PIPE-NEXT:     %y = functional.prim "multiply"(%x, %x) : (f64, f64) -> f64
// PIPE-NEXT:     %y_1 = functional.prim "multiply"(%y, %y) : (f64, f64) -> f64
// PIPE-NEXT:     %e = functional.call @even(%y_1) : (f64) -> f64
// PIPE-NEXT:     functional.return %e : f64
// PIPE-NEXT:   }
// PIPE-LABEL: functional.func @even(%x: f64) -> f64 {
// PIPE-NEXT:     %c1 = functional.constant 1.000000e+00 : f64
// PIPE-NEXT:     %small = functional.prim "less"(%x, %c1) : (f64, f64) -> i1
// PIPE-NEXT:     cf.cond_br %small, ^bb1, ^bb2
// PIPE-NEXT:   ^bb1:
// PIPE-NEXT:     functional.return %x : f64
// PIPE-NEXT:   ^bb2:
// PIPE-NEXT:     %h = functional.prim "subtract"(%x, %c1) : (f64, f64) -> f64
// PIPE-NEXT:     %o = functional.call @odd(%h) : (f64) -> f64
// PIPE-NEXT:     functional.return %o : f64
// PIPE-NEXT:   }
// PIPE-LABEL: functional.func @odd(%x: f64) -> f64 {
// PIPE-NEXT:     %c1 = functional.constant 1.000000e+00 : f64
// PIPE-NEXT:     %h = functional.prim "subtract"(%x, %c1) : (f64, f64) -> f64
// PIPE-NEXT:     %e = functional.call @even(%h) : (f64) -> f64
// PIPE-NEXT:     functional.return %e : f64
// PIPE-NEXT:   }
// PIPE-NEXT: }
