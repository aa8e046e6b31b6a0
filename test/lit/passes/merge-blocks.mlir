// RUN: abir-opt %s -p merge-blocks --split-input-file | filecheck %s
// A block whose only predecessor ends in a stack.goto to it is appended to that predecessor: the chain's two blocks become one (and @chain.a can then be a temporary); is_even's tail call merges into is_odd's entry; a loop header with two predecessors (gcd) stays.
// A straight-line block chain.
builtin.module {
  stack.var @chain.x : i64
  stack.var @chain.c1 : i64
  stack.var @chain.a : i64
  stack.var @chain.b : i64
  stack.var @chain.result0 : i64
  stack.program @chain(@chain.x) -> (@chain.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.constant @chain.c1 = 1 : i64
    stack.prim "add"(@chain.x, @chain.c1) -> (@chain.a)
    stack.goto ^bb3 {function = "chain"}
  ^bb3:
    stack.prim "multiply"(@chain.a, @chain.a) -> (@chain.b)
    stack.write @chain.result0 = @chain.b
    stack.indirect_goto {function = "chain"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @chain.x : i64
// CHECK-NEXT:   stack.var @chain.c1 : i64
// CHECK-NEXT:   stack.var @chain.a : i64
// CHECK-NEXT:   stack.var @chain.b : i64
// CHECK-NEXT:   stack.var @chain.result0 : i64
// CHECK-LABEL: stack.program @chain(@chain.x) -> (@chain.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.constant @chain.c1 = 1 : i64
// CHECK-NEXT:     stack.prim "add"(@chain.x, @chain.c1) -> (@chain.a)
// CHECK-NEXT:     stack.prim "multiply"(@chain.a, @chain.a) -> (@chain.b)
// CHECK-NEXT:     stack.write @chain.result0 = @chain.b
// CHECK-NEXT:     stack.indirect_goto {function = "chain"}
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
    stack.goto ^bb5 {function = "is_even"}
  ^bb5:
    stack.constant @is_odd.c0 = 0 : i64
    stack.prim "equal"(@is_odd.n, @is_odd.c0) -> (@is_odd.z)
    stack.branch @is_odd.z, ^bb6, ^bb7 {function = "is_odd"}
  ^bb6:
    stack.constant @is_odd.f = false
    stack.write @is_even.result0 = @is_odd.f
    stack.indirect_goto {function = "is_odd"}
  ^bb7:
    stack.constant @is_odd.c1 = 1 : i64
    stack.prim "subtract"(@is_odd.n, @is_odd.c1) -> (@is_odd.m)
    stack.write @is_even.n = @is_odd.m
    stack.push_goto ^bb8, ^bb2 {function = "is_odd"}
  ^bb8:
    stack.write @is_odd.r = @is_even.result0
    stack.prim "logical_not"(@is_odd.r) -> (@is_odd.nr)
    stack.prim "logical_not"(@is_odd.nr) -> (@is_odd.nnr)
    stack.write @is_even.result0 = @is_odd.nnr
    stack.indirect_goto {function = "is_odd"}
  }
}

// CHECK:      builtin.module {
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
