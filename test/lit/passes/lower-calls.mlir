// RUN: abir-opt %s -p lower-calls --split-input-file | filecheck %s
// SSA destruction into named variables, caller-save pushes around re-entrant calls, tail calls as jumps.
// Recursive fibonacci.
builtin.module attributes {abir.entry = "fib"} {
  functional.func @fib(%n: i64) -> i64 {
    %c2 = functional.constant 2 : i64
    %cond = functional.prim "greater"(%n, %c2) : (i64, i64) -> i1
    cf.cond_br %cond, ^bb1, ^bb2
  ^bb1:
    %c1 = functional.constant 1 : i64
    %a1 = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
    %f1 = functional.call @fib(%a1) : (i64) -> i64
    %a2 = functional.prim "subtract"(%n, %c2) : (i64, i64) -> i64
    %f2 = functional.call @fib(%a2) : (i64) -> i64
    %s = functional.prim "add"(%f1, %f2) : (i64, i64) -> i64
    functional.return %s : i64
  ^bb2:
    %one = functional.constant 1 : i64
    functional.return %one : i64
  }
}

// CHECK:      builtin.module attributes {abir.entry = "fib"} {
// CHECK-NEXT:   stack.var @fib.n : i64
// CHECK-NEXT:   stack.var @fib.c2 : i64
// CHECK-NEXT:   stack.var @fib.cond : i1
// CHECK-NEXT:   stack.var @fib.c1 : i64
// CHECK-NEXT:   stack.var @fib.a1 : i64
// CHECK-NEXT:   stack.var @fib.f1 : i64
// CHECK-NEXT:   stack.var @fib.a2 : i64
// CHECK-NEXT:   stack.var @fib.f2 : i64
// CHECK-NEXT:   stack.var @fib.s : i64
// CHECK-NEXT:   stack.var @fib.one : i64
// CHECK-NEXT:   stack.var @fib.result0 : i64
// CHECK-LABEL: stack.program @fib(@fib.n) -> (@fib.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.constant @fib.c2 = 2 : i64
// CHECK-NEXT:     stack.prim "greater"(@fib.n, @fib.c2) -> (@fib.cond)
// CHECK-NEXT:     stack.branch @fib.cond, ^bb3, ^bb6 {function = "fib"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.constant @fib.c1 = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@fib.n, @fib.c1) -> (@fib.a1)
// CHECK-NEXT:     stack.push @fib.n
// CHECK-NEXT:     stack.write @fib.n = @fib.a1
// CHECK-NEXT:     stack.push_goto ^bb4, ^bb2 {function = "fib"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.pop @fib.n
// CHECK-NEXT:     stack.constant @fib.c2 = 2 : i64
// CHECK-NEXT:     stack.write @fib.f1 = @fib.result0
// CHECK-NEXT:     stack.prim "subtract"(@fib.n, @fib.c2) -> (@fib.a2)
// CHECK-NEXT:     stack.push @fib.f1
// CHECK-NEXT:     stack.write @fib.n = @fib.a2
// CHECK-NEXT:     stack.push_goto ^bb5, ^bb2 {function = "fib"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.pop @fib.f1
// CHECK-NEXT:     stack.write @fib.f2 = @fib.result0
// CHECK-NEXT:     stack.prim "add"(@fib.f1, @fib.f2) -> (@fib.s)
// CHECK-NEXT:     stack.write @fib.result0 = @fib.s
// CHECK-NEXT:     stack.indirect_goto {function = "fib"}
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     stack.constant @fib.one = 1 : i64
// CHECK-NEXT:     stack.write @fib.result0 = @fib.one
// CHECK-NEXT:     stack.indirect_goto {function = "fib"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Mutual recursion is_even/is_odd (is_even tail-calls is_odd).
builtin.module attributes {abir.entry = "is_even"} {
  functional.func @is_even(%n: i64) -> i1 {
    %c0 = functional.constant 0 : i64
    %z = functional.prim "equal"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %z, ^bb1, ^bb2
  ^bb1:
    %t = functional.constant true
    functional.return %t : i1
  ^bb2:
    %c1 = functional.constant 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
    %r = functional.call @is_odd(%m) : (i64) -> i1
    functional.return %r : i1
  }
  functional.func @is_odd(%n: i64) -> i1 {
    %c0 = functional.constant 0 : i64
    %z = functional.prim "equal"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %z, ^bb1, ^bb2
  ^bb1:
    %f = functional.constant false
    functional.return %f : i1
  ^bb2:
    %c1 = functional.constant 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
    %r = functional.call @is_even(%m) : (i64) -> i1
    %nr = functional.prim "logical_not"(%r) : (i1) -> i1
    %nnr = functional.prim "logical_not"(%nr) : (i1) -> i1
    functional.return %nnr : i1
  }
}

// CHECK:      builtin.module attributes {abir.entry = "is_even"} {
// CHECK-NEXT:   stack.var @is_even.n : i64
// CHECK-NEXT:   stack.var @is_even.c0 : i64
// CHECK-NEXT:   stack.var @is_even.z : i1
// CHECK-NEXT:   stack.var @is_even.t : i1
// CHECK-NEXT:   stack.var @is_even.c1 : i64
// CHECK-NEXT:   stack.var @is_even.m : i64
// CHECK-NEXT:   stack.var @is_even.r : i1
// CHECK-NEXT:   stack.var @is_odd.n : i64
// CHECK-NEXT:   stack.var @is_odd.c0 : i64
// CHECK-NEXT:   stack.var @is_odd.z : i1
// CHECK-NEXT:   stack.var @is_odd.f : i1
// CHECK-NEXT:   stack.var @is_odd.c1 : i64
// CHECK-NEXT:   stack.var @is_odd.m : i64
// CHECK-NEXT:   stack.var @is_odd.r : i1
// CHECK-NEXT:   stack.var @is_odd.nr : i1
// CHECK-NEXT:   stack.var @is_odd.nnr : i1
// CHECK-NEXT:   stack.var @is_even.result0 : i1
// CHECK-LABEL: stack.program @is_even(@is_even.n) -> (@is_even.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.constant @is_even.c0 = 0 : i64
// CHECK-NEXT:     stack.prim "equal"(@is_even.n, @is_even.c0) -> (@is_even.z)
// CHECK-NEXT:     stack.branch @is_even.z, ^bb3, ^bb4 {function = "is_even"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.constant @is_even.t = true
// CHECK-NEXT:     stack.write @is_even.result0 = @is_even.t
// CHECK-NEXT:     stack.indirect_goto {function = "is_even"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.constant @is_even.c1 = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@is_even.n, @is_even.c1) -> (@is_even.m)
// CHECK-NEXT:     stack.write @is_odd.n = @is_even.m
// CHECK-NEXT:     stack.goto ^bb5 {function = "is_even"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.constant @is_odd.c0 = 0 : i64
// CHECK-NEXT:     stack.prim "equal"(@is_odd.n, @is_odd.c0) -> (@is_odd.z)
// CHECK-NEXT:     stack.branch @is_odd.z, ^bb6, ^bb7 {function = "is_odd"}
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     stack.constant @is_odd.f = false
// CHECK-NEXT:     stack.write @is_even.result0 = @is_odd.f
// CHECK-NEXT:     stack.indirect_goto {function = "is_odd"}
// CHECK-NEXT:   ^bb7:
// CHECK-NEXT:     stack.constant @is_odd.c1 = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@is_odd.n, @is_odd.c1) -> (@is_odd.m)
// CHECK-NEXT:     stack.write @is_even.n = @is_odd.m
// CHECK-NEXT:     stack.push_goto ^bb8, ^bb2 {function = "is_odd"}
// CHECK-NEXT:   ^bb8:
// CHECK-NEXT:     stack.write @is_odd.r = @is_even.result0
// CHECK-NEXT:     stack.prim "logical_not"(@is_odd.r) -> (@is_odd.nr)
// CHECK-NEXT:     stack.prim "logical_not"(@is_odd.nr) -> (@is_odd.nnr)
// CHECK-NEXT:     stack.write @is_even.result0 = @is_odd.nnr
// CHECK-NEXT:     stack.indirect_goto {function = "is_odd"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A while loop with a swap: gcd.
builtin.module attributes {abir.entry = "gcd"} {
  functional.func @gcd(%a0: i64, %b0: i64) -> i64 {
    cf.br ^bb1(%a0, %b0 : i64, i64)
  ^bb1(%a: i64, %b: i64):
    %c0 = functional.constant 0 : i64
    %ne = functional.prim "not_equal"(%b, %c0) : (i64, i64) -> i1
    %r = functional.prim "remainder"(%a, %b) : (i64, i64) -> i64
    cf.cond_br %ne, ^bb1(%b, %r : i64, i64), ^bb2
  ^bb2:
    functional.return %a : i64
  }
}

// CHECK:      builtin.module attributes {abir.entry = "gcd"} {
// CHECK-NEXT:   stack.var @gcd.a0 : i64
// CHECK-NEXT:   stack.var @gcd.b0 : i64
// CHECK-NEXT:   stack.var @gcd.a : i64
// CHECK-NEXT:   stack.var @gcd.b : i64
// CHECK-NEXT:   stack.var @gcd.c0 : i64
// CHECK-NEXT:   stack.var @gcd.ne : i1
// CHECK-NEXT:   stack.var @gcd.r : i64
// CHECK-NEXT:   stack.var @gcd.result0 : i64
// CHECK-LABEL: stack.program @gcd(@gcd.a0, @gcd.b0) -> (@gcd.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.write @gcd.a, @gcd.b = @gcd.a0, @gcd.b0
// CHECK-NEXT:     stack.goto ^bb3 {function = "gcd"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.constant @gcd.c0 = 0 : i64
// CHECK-NEXT:     stack.prim "not_equal"(@gcd.b, @gcd.c0) -> (@gcd.ne)
// CHECK-NEXT:     stack.prim "remainder"(@gcd.a, @gcd.b) -> (@gcd.r)
// CHECK-NEXT:     stack.branch @gcd.ne, ^bb4, ^bb5 {function = "gcd"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.write @gcd.a, @gcd.b = @gcd.b, @gcd.r
// CHECK-NEXT:     stack.goto ^bb3 {function = "gcd"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.write @gcd.result0 = @gcd.a
// CHECK-NEXT:     stack.indirect_goto {function = "gcd"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Early return from a loop.
builtin.module attributes {abir.entry = "find"} {
  functional.func @find(%n: i64, %k: i64) -> i64 {
    %c0 = functional.constant 0 : i64
    cf.br ^bb1(%c0 : i64)
  ^bb1(%i: i64):
    %lt = functional.prim "less"(%i, %n) : (i64, i64) -> i1
    cf.cond_br %lt, ^bb2, ^bb5
  ^bb2:
    %sq = functional.prim "multiply"(%i, %i) : (i64, i64) -> i64
    %hit = functional.prim "greater_equal"(%sq, %k) : (i64, i64) -> i1
    cf.cond_br %hit, ^bb3, ^bb4
  ^bb3:
    functional.return %i : i64
  ^bb4:
    %c1 = functional.constant 1 : i64
    %i1 = functional.prim "add"(%i, %c1) : (i64, i64) -> i64
    cf.br ^bb1(%i1 : i64)
  ^bb5:
    %m1 = functional.constant -1 : i64
    functional.return %m1 : i64
  }
}

// CHECK:      builtin.module attributes {abir.entry = "find"} {
// CHECK-NEXT:   stack.var @find.n : i64
// CHECK-NEXT:   stack.var @find.k : i64
// CHECK-NEXT:   stack.var @find.c0 : i64
// CHECK-NEXT:   stack.var @find.i : i64
// CHECK-NEXT:   stack.var @find.lt : i1
// CHECK-NEXT:   stack.var @find.sq : i64
// CHECK-NEXT:   stack.var @find.hit : i1
// CHECK-NEXT:   stack.var @find.c1 : i64
// CHECK-NEXT:   stack.var @find.i1 : i64
// CHECK-NEXT:   stack.var @find.m1 : i64
// CHECK-NEXT:   stack.var @find.result0 : i64
// CHECK-LABEL: stack.program @find(@find.n, @find.k) -> (@find.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.constant @find.c0 = 0 : i64
// CHECK-NEXT:     stack.write @find.i = @find.c0
// CHECK-NEXT:     stack.goto ^bb3 {function = "find"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.prim "less"(@find.i, @find.n) -> (@find.lt)
// CHECK-NEXT:     stack.branch @find.lt, ^bb4, ^bb7 {function = "find"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.prim "multiply"(@find.i, @find.i) -> (@find.sq)
// CHECK-NEXT:     stack.prim "greater_equal"(@find.sq, @find.k) -> (@find.hit)
// CHECK-NEXT:     stack.branch @find.hit, ^bb5, ^bb6 {function = "find"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.write @find.result0 = @find.i
// CHECK-NEXT:     stack.indirect_goto {function = "find"}
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     stack.constant @find.c1 = 1 : i64
// CHECK-NEXT:     stack.prim "add"(@find.i, @find.c1) -> (@find.i1)
// CHECK-NEXT:     stack.write @find.i = @find.i1
// CHECK-NEXT:     stack.goto ^bb3 {function = "find"}
// CHECK-NEXT:   ^bb7:
// CHECK-NEXT:     stack.constant @find.m1 = -1 : i64
// CHECK-NEXT:     stack.write @find.result0 = @find.m1
// CHECK-NEXT:     stack.indirect_goto {function = "find"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A self-tail-recursive sum.
builtin.module attributes {abir.entry = "tsum"} {
  functional.func @tsum(%n: i64, %acc: i64) -> i64 {
    %c0 = functional.constant 0 : i64
    %p = functional.prim "greater"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %p, ^bb1, ^bb2
  ^bb1:
    %c1 = functional.constant 1 : i64
    %n1 = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
    %acc1 = functional.prim "add"(%acc, %n) : (i64, i64) -> i64
    %r = functional.call @tsum(%n1, %acc1) : (i64, i64) -> i64
    functional.return %r : i64
  ^bb2:
    functional.return %acc : i64
  }
}

// CHECK:      builtin.module attributes {abir.entry = "tsum"} {
// CHECK-NEXT:   stack.var @tsum.n : i64
// CHECK-NEXT:   stack.var @tsum.acc : i64
// CHECK-NEXT:   stack.var @tsum.c0 : i64
// CHECK-NEXT:   stack.var @tsum.p : i1
// CHECK-NEXT:   stack.var @tsum.c1 : i64
// CHECK-NEXT:   stack.var @tsum.n1 : i64
// CHECK-NEXT:   stack.var @tsum.acc1 : i64
// CHECK-NEXT:   stack.var @tsum.r : i64
// CHECK-NEXT:   stack.var @tsum.result0 : i64
// CHECK-LABEL: stack.program @tsum(@tsum.n, @tsum.acc) -> (@tsum.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.constant @tsum.c0 = 0 : i64
// CHECK-NEXT:     stack.prim "greater"(@tsum.n, @tsum.c0) -> (@tsum.p)
// CHECK-NEXT:     stack.branch @tsum.p, ^bb3, ^bb4 {function = "tsum"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.constant @tsum.c1 = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@tsum.n, @tsum.c1) -> (@tsum.n1)
// CHECK-NEXT:     stack.prim "add"(@tsum.acc, @tsum.n) -> (@tsum.acc1)
// CHECK-NEXT:     stack.write @tsum.n, @tsum.acc = @tsum.n1, @tsum.acc1
// CHECK-NEXT:     stack.goto ^bb2 {function = "tsum"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.write @tsum.result0 = @tsum.acc
// CHECK-NEXT:     stack.indirect_goto {function = "tsum"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----
// Locations: a call's `abir.loc` (its own line) locates the block that ends in the call and marks
// the call's pushes (`abir.call_loc`); the continuation keeps the functional block's.
builtin.module attributes {abir.entry = "down"} {
  functional.func @down(%n: i64) -> i64 {
    %c0 = functional.constant 0 : i64
    %done = functional.prim "less_equal"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %done, ^bb1, ^bb2 {abir.loc = "down.py:2"}
  ^bb1:
    functional.return %n : i64 {abir.loc = "down.py:3"}
  ^bb2:
    %c1 = functional.constant 1 : i64
    %k = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
    %r = functional.call @down(%k) {abir.loc = "down.py:5"} : (i64) -> i64
    %s = functional.prim "add"(%r, %n) : (i64, i64) -> i64
    functional.return %s : i64 {abir.loc = "down.py:6"}
  }
}

// CHECK-LABEL: stack.program @down(@down.n) -> (@down.result0) {
// CHECK:          stack.branch @down.done, ^{{.*}}, ^{{.*}} {function = "down", abir.loc = "down.py:2"}
// CHECK:          stack.indirect_goto {function = "down", abir.loc = "down.py:3"}
// CHECK:          stack.push @down.n {abir.call_loc = "down.py:5"}
// CHECK-NEXT:     stack.write @down.n = @down.k
// CHECK-NEXT:     stack.push_goto ^{{.*}}, ^{{.*}} {abir.call_loc = "down.py:5", function = "down", abir.loc = "down.py:5"}
// CHECK:          stack.pop @down.n
// CHECK:          stack.indirect_goto {function = "down", abir.loc = "down.py:6"}
