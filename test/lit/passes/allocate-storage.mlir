// RUN: abir-opt %s -p allocate-storage --split-input-file | filecheck %s
// Yardsticks: fibonacci gets stacks only for @fib.n and the first call's result @fib.f1; the self-tail-recursive sum needs no stack at all; values that never leave their block are temporaries; never-read values are dead.
// Recursive fibonacci.
builtin.module {
  stack.var @fib.n : i64
  stack.var @fib.c2 : i64
  stack.var @fib.cond : i1
  stack.var @fib.c1 : i64
  stack.var @fib.a1 : i64
  stack.var @fib.f1 : i64
  stack.var @fib.a2 : i64
  stack.var @fib.f2 : i64
  stack.var @fib.s : i64
  stack.var @fib.one : i64
  stack.var @fib.result0 : i64
  stack.program @fib(@fib.n) -> (@fib.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.constant @fib.c2 = 2 : i64
    stack.prim "greater"(@fib.n, @fib.c2) -> (@fib.cond)
    stack.branch @fib.cond, ^bb3, ^bb6 {function = "fib"}
  ^bb3:
    stack.constant @fib.c1 = 1 : i64
    stack.prim "subtract"(@fib.n, @fib.c1) -> (@fib.a1)
    stack.push @fib.n
    stack.write @fib.n = @fib.a1
    stack.push_goto ^bb4, ^bb2 {function = "fib"}
  ^bb4:
    stack.pop @fib.n
    stack.constant @fib.c2 = 2 : i64
    stack.write @fib.f1 = @fib.result0
    stack.prim "subtract"(@fib.n, @fib.c2) -> (@fib.a2)
    stack.push @fib.f1
    stack.write @fib.n = @fib.a2
    stack.push_goto ^bb5, ^bb2 {function = "fib"}
  ^bb5:
    stack.pop @fib.f1
    stack.write @fib.f2 = @fib.result0
    stack.prim "add"(@fib.f1, @fib.f2) -> (@fib.s)
    stack.write @fib.result0 = @fib.s
    stack.indirect_goto {function = "fib"}
  ^bb6:
    stack.constant @fib.one = 1 : i64
    stack.write @fib.result0 = @fib.one
    stack.indirect_goto {function = "fib"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @fib.n : i64 stack
// CHECK-NEXT:   stack.var @fib.c2 : i64 temporary
// CHECK-NEXT:   stack.var @fib.cond : i1 temporary
// CHECK-NEXT:   stack.var @fib.c1 : i64 temporary
// CHECK-NEXT:   stack.var @fib.a1 : i64 temporary
// CHECK-NEXT:   stack.var @fib.f1 : i64 stack
// CHECK-NEXT:   stack.var @fib.a2 : i64 temporary
// CHECK-NEXT:   stack.var @fib.f2 : i64 temporary
// CHECK-NEXT:   stack.var @fib.s : i64 temporary
// CHECK-NEXT:   stack.var @fib.one : i64 temporary
// CHECK-NEXT:   stack.var @fib.result0 : i64 register
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

// A self-tail-recursive sum.
builtin.module {
  stack.var @tsum.n : i64
  stack.var @tsum.acc : i64
  stack.var @tsum.c0 : i64
  stack.var @tsum.p : i1
  stack.var @tsum.c1 : i64
  stack.var @tsum.n1 : i64
  stack.var @tsum.acc1 : i64
  stack.var @tsum.r : i64
  stack.var @tsum.result0 : i64
  stack.program @tsum(@tsum.n, @tsum.acc) -> (@tsum.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.constant @tsum.c0 = 0 : i64
    stack.prim "greater"(@tsum.n, @tsum.c0) -> (@tsum.p)
    stack.branch @tsum.p, ^bb3, ^bb4 {function = "tsum"}
  ^bb3:
    stack.constant @tsum.c1 = 1 : i64
    stack.prim "subtract"(@tsum.n, @tsum.c1) -> (@tsum.n1)
    stack.prim "add"(@tsum.acc, @tsum.n) -> (@tsum.acc1)
    stack.write @tsum.n, @tsum.acc = @tsum.n1, @tsum.acc1
    stack.goto ^bb2 {function = "tsum"}
  ^bb4:
    stack.write @tsum.result0 = @tsum.acc
    stack.indirect_goto {function = "tsum"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @tsum.n : i64 register
// CHECK-NEXT:   stack.var @tsum.acc : i64 register
// CHECK-NEXT:   stack.var @tsum.c0 : i64 temporary
// CHECK-NEXT:   stack.var @tsum.p : i1 temporary
// CHECK-NEXT:   stack.var @tsum.c1 : i64 temporary
// CHECK-NEXT:   stack.var @tsum.n1 : i64 temporary
// CHECK-NEXT:   stack.var @tsum.acc1 : i64 temporary
// CHECK-NEXT:   stack.var @tsum.r : i64 dead
// CHECK-NEXT:   stack.var @tsum.result0 : i64 register
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

// Mutual recursion is_even/is_odd (is_even tail-calls is_odd).
builtin.module {
  stack.var @is_even.n : i64
  stack.var @is_even.c0 : i64
  stack.var @is_even.z : i1
  stack.var @is_even.t : i1
  stack.var @is_even.c1 : i64
  stack.var @is_even.m : i64
  stack.var @is_even.r : i1
  stack.var @is_odd.n : i64
  stack.var @is_odd.c0 : i64
  stack.var @is_odd.z : i1
  stack.var @is_odd.f : i1
  stack.var @is_odd.c1 : i64
  stack.var @is_odd.m : i64
  stack.var @is_odd.r : i1
  stack.var @is_odd.nr : i1
  stack.var @is_odd.nnr : i1
  stack.var @is_even.result0 : i1
  stack.program @is_even(@is_even.n) -> (@is_even.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.constant @is_even.c0 = 0 : i64
    stack.prim "equal"(@is_even.n, @is_even.c0) -> (@is_even.z)
    stack.branch @is_even.z, ^bb3, ^bb4 {function = "is_even"}
  ^bb3:
    stack.constant @is_even.t = true
    stack.write @is_even.result0 = @is_even.t
    stack.indirect_goto {function = "is_even"}
  ^bb4:
    stack.constant @is_even.c1 = 1 : i64
    stack.prim "subtract"(@is_even.n, @is_even.c1) -> (@is_even.m)
    stack.write @is_odd.n = @is_even.m
    stack.constant @is_odd.c0 = 0 : i64
    stack.prim "equal"(@is_odd.n, @is_odd.c0) -> (@is_odd.z)
    stack.branch @is_odd.z, ^bb5, ^bb6 {function = "is_odd"}
  ^bb5:
    stack.constant @is_odd.f = false
    stack.write @is_even.result0 = @is_odd.f
    stack.indirect_goto {function = "is_odd"}
  ^bb6:
    stack.constant @is_odd.c1 = 1 : i64
    stack.prim "subtract"(@is_odd.n, @is_odd.c1) -> (@is_odd.m)
    stack.write @is_even.n = @is_odd.m
    stack.push_goto ^bb7, ^bb2 {function = "is_odd"}
  ^bb7:
    stack.write @is_odd.r = @is_even.result0
    stack.prim "logical_not"(@is_odd.r) -> (@is_odd.nr)
    stack.prim "logical_not"(@is_odd.nr) -> (@is_odd.nnr)
    stack.write @is_even.result0 = @is_odd.nnr
    stack.indirect_goto {function = "is_odd"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @is_even.n : i64 register
// CHECK-NEXT:   stack.var @is_even.c0 : i64 temporary
// CHECK-NEXT:   stack.var @is_even.z : i1 temporary
// CHECK-NEXT:   stack.var @is_even.t : i1 temporary
// CHECK-NEXT:   stack.var @is_even.c1 : i64 temporary
// CHECK-NEXT:   stack.var @is_even.m : i64 temporary
// CHECK-NEXT:   stack.var @is_even.r : i1 dead
// CHECK-NEXT:   stack.var @is_odd.n : i64 register
// CHECK-NEXT:   stack.var @is_odd.c0 : i64 temporary
// CHECK-NEXT:   stack.var @is_odd.z : i1 temporary
// CHECK-NEXT:   stack.var @is_odd.f : i1 temporary
// CHECK-NEXT:   stack.var @is_odd.c1 : i64 temporary
// CHECK-NEXT:   stack.var @is_odd.m : i64 temporary
// CHECK-NEXT:   stack.var @is_odd.r : i1 temporary
// CHECK-NEXT:   stack.var @is_odd.nr : i1 temporary
// CHECK-NEXT:   stack.var @is_odd.nnr : i1 temporary
// CHECK-NEXT:   stack.var @is_even.result0 : i1 register
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
// CHECK-NEXT:     stack.constant @is_odd.c0 = 0 : i64
// CHECK-NEXT:     stack.prim "equal"(@is_odd.n, @is_odd.c0) -> (@is_odd.z)
// CHECK-NEXT:     stack.branch @is_odd.z, ^bb5, ^bb6 {function = "is_odd"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.constant @is_odd.f = false
// CHECK-NEXT:     stack.write @is_even.result0 = @is_odd.f
// CHECK-NEXT:     stack.indirect_goto {function = "is_odd"}
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     stack.constant @is_odd.c1 = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@is_odd.n, @is_odd.c1) -> (@is_odd.m)
// CHECK-NEXT:     stack.write @is_even.n = @is_odd.m
// CHECK-NEXT:     stack.push_goto ^bb7, ^bb2 {function = "is_odd"}
// CHECK-NEXT:   ^bb7:
// CHECK-NEXT:     stack.write @is_odd.r = @is_even.result0
// CHECK-NEXT:     stack.prim "logical_not"(@is_odd.r) -> (@is_odd.nr)
// CHECK-NEXT:     stack.prim "logical_not"(@is_odd.nr) -> (@is_odd.nnr)
// CHECK-NEXT:     stack.write @is_even.result0 = @is_odd.nnr
// CHECK-NEXT:     stack.indirect_goto {function = "is_odd"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A while loop with a swap: gcd.
builtin.module {
  stack.var @gcd.a0 : i64
  stack.var @gcd.b0 : i64
  stack.var @gcd.a : i64
  stack.var @gcd.b : i64
  stack.var @gcd.c0 : i64
  stack.var @gcd.ne : i1
  stack.var @gcd.r : i64
  stack.var @gcd.result0 : i64
  stack.program @gcd(@gcd.a0, @gcd.b0) -> (@gcd.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.write @gcd.a, @gcd.b = @gcd.a0, @gcd.b0
    stack.goto ^bb3 {function = "gcd"}
  ^bb3:
    stack.constant @gcd.c0 = 0 : i64
    stack.prim "not_equal"(@gcd.b, @gcd.c0) -> (@gcd.ne)
    stack.prim "remainder"(@gcd.a, @gcd.b) -> (@gcd.r)
    stack.branch @gcd.ne, ^bb4, ^bb5 {function = "gcd"}
  ^bb4:
    stack.write @gcd.a, @gcd.b = @gcd.b, @gcd.r
    stack.goto ^bb3 {function = "gcd"}
  ^bb5:
    stack.write @gcd.result0 = @gcd.a
    stack.indirect_goto {function = "gcd"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @gcd.a0 : i64 register
// CHECK-NEXT:   stack.var @gcd.b0 : i64 register
// CHECK-NEXT:   stack.var @gcd.a : i64 register
// CHECK-NEXT:   stack.var @gcd.b : i64 register
// CHECK-NEXT:   stack.var @gcd.c0 : i64 temporary
// CHECK-NEXT:   stack.var @gcd.ne : i1 temporary
// CHECK-NEXT:   stack.var @gcd.r : i64 register
// CHECK-NEXT:   stack.var @gcd.result0 : i64 register
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
builtin.module {
  stack.var @find.n : i64
  stack.var @find.k : i64
  stack.var @find.c0 : i64
  stack.var @find.i : i64
  stack.var @find.lt : i1
  stack.var @find.sq : i64
  stack.var @find.hit : i1
  stack.var @find.c1 : i64
  stack.var @find.i1 : i64
  stack.var @find.m1 : i64
  stack.var @find.result0 : i64
  stack.program @find(@find.n, @find.k) -> (@find.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.constant @find.c0 = 0 : i64
    stack.write @find.i = @find.c0
    stack.goto ^bb3 {function = "find"}
  ^bb3:
    stack.prim "less"(@find.i, @find.n) -> (@find.lt)
    stack.branch @find.lt, ^bb4, ^bb7 {function = "find"}
  ^bb4:
    stack.prim "multiply"(@find.i, @find.i) -> (@find.sq)
    stack.prim "greater_equal"(@find.sq, @find.k) -> (@find.hit)
    stack.branch @find.hit, ^bb5, ^bb6 {function = "find"}
  ^bb5:
    stack.write @find.result0 = @find.i
    stack.indirect_goto {function = "find"}
  ^bb6:
    stack.constant @find.c1 = 1 : i64
    stack.prim "add"(@find.i, @find.c1) -> (@find.i1)
    stack.write @find.i = @find.i1
    stack.goto ^bb3 {function = "find"}
  ^bb7:
    stack.constant @find.m1 = -1 : i64
    stack.write @find.result0 = @find.m1
    stack.indirect_goto {function = "find"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @find.n : i64 register
// CHECK-NEXT:   stack.var @find.k : i64 register
// CHECK-NEXT:   stack.var @find.c0 : i64 temporary
// CHECK-NEXT:   stack.var @find.i : i64 register
// CHECK-NEXT:   stack.var @find.lt : i1 temporary
// CHECK-NEXT:   stack.var @find.sq : i64 temporary
// CHECK-NEXT:   stack.var @find.hit : i1 temporary
// CHECK-NEXT:   stack.var @find.c1 : i64 temporary
// CHECK-NEXT:   stack.var @find.i1 : i64 temporary
// CHECK-NEXT:   stack.var @find.m1 : i64 temporary
// CHECK-NEXT:   stack.var @find.result0 : i64 register
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
