// RUN: abir-opt %s -p schedule-blocks --split-input-file | filecheck %s
// Entry stays block 0; then the blocks on a loop of their function, then the others; within each,
// bookkeeping blocks (only writes, pops, pushes, jumps) before blocks that compute (prims or
// constants), each group in program order.
// Recursive fibonacci.
builtin.module {
  stack.var @fib.n : i64 stack
  stack.var @fib.c2 : i64 temporary
  stack.var @fib.cond : i1 temporary
  stack.var @fib.c1 : i64 temporary
  stack.var @fib.a1 : i64 temporary
  stack.var @fib.f1 : i64 stack
  stack.var @fib.a2 : i64 temporary
  stack.var @fib.f2 : i64 temporary
  stack.var @fib.s : i64 temporary
  stack.var @fib.one : i64 temporary
  stack.var @fib.result0 : i64 register
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

// A while loop with a swap: gcd. The loop's blocks come first; its exit (the return) waits.
builtin.module {
  stack.var @gcd.a0 : i64 register
  stack.var @gcd.b0 : i64 register
  stack.var @gcd.a : i64 register
  stack.var @gcd.b : i64 register
  stack.var @gcd.c0 : i64 temporary
  stack.var @gcd.ne : i1 temporary
  stack.var @gcd.r : i64 register
  stack.var @gcd.result0 : i64 register
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
// CHECK-NEXT:     stack.push_goto ^bb3, ^bb4
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.write @gcd.a, @gcd.b = @gcd.b, @gcd.r
// CHECK-NEXT:     stack.goto ^bb2 {function = "gcd"}
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.constant @gcd.c0 = 0 : i64
// CHECK-NEXT:     stack.prim "not_equal"(@gcd.b, @gcd.c0) -> (@gcd.ne)
// CHECK-NEXT:     stack.prim "remainder"(@gcd.a, @gcd.b) -> (@gcd.r)
// CHECK-NEXT:     stack.branch @gcd.ne, ^bb1, ^bb5 {function = "gcd"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.write @gcd.a, @gcd.b = @gcd.a0, @gcd.b0
// CHECK-NEXT:     stack.goto ^bb2 {function = "gcd"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.write @gcd.result0 = @gcd.a
// CHECK-NEXT:     stack.indirect_goto {function = "gcd"}
// CHECK-NEXT:   }
// CHECK-NEXT: }
