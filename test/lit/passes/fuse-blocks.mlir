// RUN: abir-opt %s -p fuse-blocks --split-input-file | filecheck %s
// Small blocks are tail-duplicated into predecessors ending in stack.goto or a call of a known block (loop rotation, callee entry tests moved into call sites, leaf returns jumping straight to the continuation); the program entry block stays as it is.
// gcd: the loop header (condition + branch) is duplicated into the body's back jump, so the body branches to itself (loop rotation); the program entry absorbs the function entry and the header; the exit arm, which returns, is copied with a jump to the return block (which absorbs the halt), the loop arm gets a trampoline call.
builtin.module {
  stack.var @gcd.a : i64
  stack.var @gcd.b : i64
  stack.var @gcd.a_1 : i64
  stack.var @gcd.b_1 : i64
  stack.var @gcd.v0 : i64
  stack.var @gcd.v0_1 : i1
  stack.var @gcd.b_2 : i64
  stack.var @gcd.result0 : i64
  stack.program @gcd(@gcd.a, @gcd.b) -> (@gcd.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.write @gcd.a_1, @gcd.b_1 = @gcd.a, @gcd.b
    stack.goto ^bb3 {function = "gcd"}
  ^bb3:
    stack.constant @gcd.v0 = 0 : i64
    stack.prim "not_equal"(@gcd.b_1, @gcd.v0) -> (@gcd.v0_1)
    stack.branch @gcd.v0_1, ^bb4, ^bb5 {function = "gcd"}
  ^bb4:
    stack.prim "remainder"(@gcd.a_1, @gcd.b_1) -> (@gcd.b_2)
    stack.write @gcd.a_1, @gcd.b_1 = @gcd.b_1, @gcd.b_2
    stack.goto ^bb3 {function = "gcd"}
  ^bb5:
    stack.write @gcd.result0 = @gcd.a_1
    stack.indirect_goto {function = "gcd"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @gcd.a : i64
// CHECK-NEXT:   stack.var @gcd.b : i64
// CHECK-NEXT:   stack.var @gcd.a_1 : i64
// CHECK-NEXT:   stack.var @gcd.b_1 : i64
// CHECK-NEXT:   stack.var @gcd.v0 : i64
// CHECK-NEXT:   stack.var @gcd.v0_1 : i1
// CHECK-NEXT:   stack.var @gcd.b_2 : i64
// CHECK-NEXT:   stack.var @gcd.result0 : i64
// CHECK-LABEL: stack.program @gcd(@gcd.a, @gcd.b) -> (@gcd.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.write @gcd.a_1, @gcd.b_1 = @gcd.a, @gcd.b
// CHECK-NEXT:     stack.constant @gcd.v0 = 0 : i64
// CHECK-NEXT:     stack.prim "not_equal"(@gcd.b_1, @gcd.v0) -> (@gcd.v0_1)
// CHECK-NEXT:     stack.branch @gcd.v0_1, ^bb3, ^bb4 {function = "gcd"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.prim "remainder"(@gcd.a_1, @gcd.b_1) -> (@gcd.b_2)
// CHECK-NEXT:     stack.write @gcd.a_1, @gcd.b_1 = @gcd.b_1, @gcd.b_2
// CHECK-NEXT:     stack.constant @gcd.v0 = 0 : i64
// CHECK-NEXT:     stack.prim "not_equal"(@gcd.b_1, @gcd.v0) -> (@gcd.v0_1)
// CHECK-NEXT:     stack.branch @gcd.v0_1, ^bb3, ^bb4 {function = "gcd"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.write @gcd.result0 = @gcd.a_1
// CHECK-NEXT:     stack.indirect_goto {function = "gcd"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// fib: each call absorbs the callee's entry test; the leaf arm (small, returns) becomes a copy jumping straight to the call's continuation, the recursive arm a trampoline (push_goto ^continuation, ^recurse). The leaf copies absorb the continuations once those no longer end in a call.
builtin.module {
  stack.var @fib.n : i64
  stack.var @fib.v0 : i64
  stack.var @fib.v0_1 : i1
  stack.var @fib.v0_2 : i64
  stack.var @fib.v0_3 : i64
  stack.var @fib.v0_4 : i64
  stack.var @fib.v0_5 : i64
  stack.var @fib.v0_6 : i64
  stack.var @fib.v0_7 : i64
  stack.var @fib.v0_8 : i64
  stack.var @fib.v0_9 : i64
  stack.var @fib.result0 : i64
  stack.program @fib(@fib.n) -> (@fib.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.constant @fib.v0 = 1 : i64
    stack.prim "greater"(@fib.n, @fib.v0) -> (@fib.v0_1)
    stack.branch @fib.v0_1, ^bb3, ^bb6 {function = "fib"}
  ^bb3:
    stack.constant @fib.v0_2 = 1 : i64
    stack.prim "subtract"(@fib.n, @fib.v0_2) -> (@fib.v0_3)
    stack.push @fib.n
    stack.write @fib.n = @fib.v0_3
    stack.push_goto ^bb4, ^bb2 {function = "fib"}
  ^bb4:
    stack.pop @fib.n
    stack.write @fib.v0_4 = @fib.result0
    stack.constant @fib.v0_5 = 2 : i64
    stack.prim "subtract"(@fib.n, @fib.v0_5) -> (@fib.v0_6)
    stack.push @fib.v0_4
    stack.write @fib.n = @fib.v0_6
    stack.push_goto ^bb5, ^bb2 {function = "fib"}
  ^bb5:
    stack.pop @fib.v0_4
    stack.write @fib.v0_7 = @fib.result0
    stack.prim "add"(@fib.v0_4, @fib.v0_7) -> (@fib.v0_8)
    stack.write @fib.result0 = @fib.v0_8
    stack.indirect_goto {function = "fib"}
  ^bb6:
    stack.constant @fib.v0_9 = 1 : i64
    stack.write @fib.result0 = @fib.v0_9
    stack.indirect_goto {function = "fib"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @fib.n : i64
// CHECK-NEXT:   stack.var @fib.v0 : i64
// CHECK-NEXT:   stack.var @fib.v0_1 : i1
// CHECK-NEXT:   stack.var @fib.v0_2 : i64
// CHECK-NEXT:   stack.var @fib.v0_3 : i64
// CHECK-NEXT:   stack.var @fib.v0_4 : i64
// CHECK-NEXT:   stack.var @fib.v0_5 : i64
// CHECK-NEXT:   stack.var @fib.v0_6 : i64
// CHECK-NEXT:   stack.var @fib.v0_7 : i64
// CHECK-NEXT:   stack.var @fib.v0_8 : i64
// CHECK-NEXT:   stack.var @fib.v0_9 : i64
// CHECK-NEXT:   stack.var @fib.result0 : i64
// CHECK-LABEL: stack.program @fib(@fib.n) -> (@fib.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.constant @fib.v0 = 1 : i64
// CHECK-NEXT:     stack.prim "greater"(@fib.n, @fib.v0) -> (@fib.v0_1)
// CHECK-NEXT:     stack.branch @fib.v0_1, ^bb3, ^bb10 {function = "fib"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.constant @fib.v0_2 = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@fib.n, @fib.v0_2) -> (@fib.v0_3)
// CHECK-NEXT:     stack.push @fib.n
// CHECK-NEXT:     stack.write @fib.n = @fib.v0_3
// CHECK-NEXT:     stack.constant @fib.v0 = 1 : i64
// CHECK-NEXT:     stack.prim "greater"(@fib.n, @fib.v0) -> (@fib.v0_1)
// CHECK-NEXT:     stack.branch @fib.v0_1, ^bb4, ^bb5 {function = "fib"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.push_goto ^bb6, ^bb3 {function = "fib"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.constant @fib.v0_9 = 1 : i64
// CHECK-NEXT:     stack.write @fib.result0 = @fib.v0_9
// CHECK-NEXT:     stack.pop @fib.n
// CHECK-NEXT:     stack.write @fib.v0_4 = @fib.result0
// CHECK-NEXT:     stack.constant @fib.v0_5 = 2 : i64
// CHECK-NEXT:     stack.prim "subtract"(@fib.n, @fib.v0_5) -> (@fib.v0_6)
// CHECK-NEXT:     stack.push @fib.v0_4
// CHECK-NEXT:     stack.write @fib.n = @fib.v0_6
// CHECK-NEXT:     stack.constant @fib.v0 = 1 : i64
// CHECK-NEXT:     stack.prim "greater"(@fib.n, @fib.v0) -> (@fib.v0_1)
// CHECK-NEXT:     stack.branch @fib.v0_1, ^bb7, ^bb8 {function = "fib"}
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     stack.pop @fib.n
// CHECK-NEXT:     stack.write @fib.v0_4 = @fib.result0
// CHECK-NEXT:     stack.constant @fib.v0_5 = 2 : i64
// CHECK-NEXT:     stack.prim "subtract"(@fib.n, @fib.v0_5) -> (@fib.v0_6)
// CHECK-NEXT:     stack.push @fib.v0_4
// CHECK-NEXT:     stack.write @fib.n = @fib.v0_6
// CHECK-NEXT:     stack.constant @fib.v0 = 1 : i64
// CHECK-NEXT:     stack.prim "greater"(@fib.n, @fib.v0) -> (@fib.v0_1)
// CHECK-NEXT:     stack.branch @fib.v0_1, ^bb7, ^bb8 {function = "fib"}
// CHECK-NEXT:   ^bb7:
// CHECK-NEXT:     stack.push_goto ^bb9, ^bb3 {function = "fib"}
// CHECK-NEXT:   ^bb8:
// CHECK-NEXT:     stack.constant @fib.v0_9 = 1 : i64
// CHECK-NEXT:     stack.write @fib.result0 = @fib.v0_9
// CHECK-NEXT:     stack.pop @fib.v0_4
// CHECK-NEXT:     stack.write @fib.v0_7 = @fib.result0
// CHECK-NEXT:     stack.prim "add"(@fib.v0_4, @fib.v0_7) -> (@fib.v0_8)
// CHECK-NEXT:     stack.write @fib.result0 = @fib.v0_8
// CHECK-NEXT:     stack.indirect_goto {function = "fib"}
// CHECK-NEXT:   ^bb9:
// CHECK-NEXT:     stack.pop @fib.v0_4
// CHECK-NEXT:     stack.write @fib.v0_7 = @fib.result0
// CHECK-NEXT:     stack.prim "add"(@fib.v0_4, @fib.v0_7) -> (@fib.v0_8)
// CHECK-NEXT:     stack.write @fib.result0 = @fib.v0_8
// CHECK-NEXT:     stack.indirect_goto {function = "fib"}
// CHECK-NEXT:   ^bb10:
// CHECK-NEXT:     stack.constant @fib.v0_9 = 1 : i64
// CHECK-NEXT:     stack.write @fib.result0 = @fib.v0_9
// CHECK-NEXT:     stack.indirect_goto {function = "fib"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Not duplicated: a jump target with an opaque prim, a jump target ending in a call, and a jump target with more than 8 ops.
builtin.module {
  functional.opaque @noisy "def noisy(x): return x"
  stack.var @f.x : i64
  stack.var @f.y : i64
  stack.var @f.result0 : i64
  stack.program @f(@f.x) -> (@f.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.goto ^bb3 {function = "f"}
  ^bb3:
    stack.prim @noisy(@f.x) -> (@f.y)
    stack.goto ^bb4 {function = "f"}
  ^bb4:
    stack.push @f.y
    stack.push_goto ^bb5, ^bb6 {function = "f"}
  ^bb5:
    stack.pop @f.y
    stack.goto ^bb6 {function = "f"}
  ^bb6:
    stack.prim "add"(@f.y, @f.y) -> (@f.y)
    stack.prim "add"(@f.y, @f.y) -> (@f.y)
    stack.prim "add"(@f.y, @f.y) -> (@f.y)
    stack.prim "add"(@f.y, @f.y) -> (@f.y)
    stack.prim "add"(@f.y, @f.y) -> (@f.y)
    stack.prim "add"(@f.y, @f.y) -> (@f.y)
    stack.prim "add"(@f.y, @f.y) -> (@f.y)
    stack.prim "add"(@f.y, @f.y) -> (@f.y)
    stack.prim "add"(@f.y, @f.y) -> (@f.y)
    stack.write @f.result0 = @f.y
    stack.indirect_goto {function = "f"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   functional.opaque @noisy "def noisy(x): return x"
// CHECK-NEXT:   stack.var @f.x : i64
// CHECK-NEXT:   stack.var @f.y : i64
// CHECK-NEXT:   stack.var @f.result0 : i64
// CHECK-LABEL: stack.program @f(@f.x) -> (@f.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.goto ^bb3 {function = "f"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.prim @noisy(@f.x) -> (@f.y)
// CHECK-NEXT:     stack.goto ^bb4 {function = "f"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.push @f.y
// CHECK-NEXT:     stack.push_goto ^bb5, ^bb6 {function = "f"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.pop @f.y
// CHECK-NEXT:     stack.goto ^bb6 {function = "f"}
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     stack.prim "add"(@f.y, @f.y) -> (@f.y)
// CHECK-NEXT:     stack.prim "add"(@f.y, @f.y) -> (@f.y)
// CHECK-NEXT:     stack.prim "add"(@f.y, @f.y) -> (@f.y)
// CHECK-NEXT:     stack.prim "add"(@f.y, @f.y) -> (@f.y)
// CHECK-NEXT:     stack.prim "add"(@f.y, @f.y) -> (@f.y)
// CHECK-NEXT:     stack.prim "add"(@f.y, @f.y) -> (@f.y)
// CHECK-NEXT:     stack.prim "add"(@f.y, @f.y) -> (@f.y)
// CHECK-NEXT:     stack.prim "add"(@f.y, @f.y) -> (@f.y)
// CHECK-NEXT:     stack.prim "add"(@f.y, @f.y) -> (@f.y)
// CHECK-NEXT:     stack.write @f.result0 = @f.y
// CHECK-NEXT:     stack.indirect_goto {function = "f"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----
// A call site absorbing its callee's entry keeps the call's attributes: its function (the caller's
// blocks' return sites depend on it), its line and, on the trampoline that still calls, the
// call's own line (abir.call_loc) for a stack overflow there.
builtin.module {
  stack.var @f.n : i64
  stack.var @f.result0 : i64
  stack.var @g.n : i64
  stack.var @g.c0 : i64
  stack.var @g.p : i1
  stack.var @g.result0 : i64
  stack.program @f(@f.n) -> (@f.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.write @g.n = @f.n
    stack.push_goto ^bb3, ^bb4 {abir.call_loc = "f.py:3", function = "f", abir.loc = "f.py:3"}
  ^bb3:
    stack.write @f.result0 = @g.result0
    stack.indirect_goto {function = "f", abir.loc = "f.py:4"}
  ^bb4:
    stack.constant @g.c0 = 0 : i64
    stack.prim "greater"(@g.n, @g.c0) -> (@g.p)
    stack.branch @g.p, ^bb5, ^bb6 {function = "g", abir.loc = "f.py:8"}
  ^bb5:
    stack.write @g.result0 = @g.n
    stack.indirect_goto {function = "g", abir.loc = "f.py:9"}
  ^bb6:
    stack.prim "negative"(@g.n) -> (@g.n)
    stack.push_goto ^bb7, ^bb4 {abir.call_loc = "f.py:10", function = "g", abir.loc = "f.py:10"}
  ^bb7:
    stack.indirect_goto {function = "g", abir.loc = "f.py:11"}
  }
}

// CHECK-LABEL: stack.program @f(@f.n) -> (@f.result0) {
// CHECK:         stack.write @g.n = @f.n
// CHECK-NEXT:    stack.constant @g.c0 = 0 : i64
// CHECK-NEXT:    stack.prim "greater"(@g.n, @g.c0) -> (@g.p)
// CHECK-NEXT:    stack.branch @g.p, ^{{.*}}, ^{{.*}} {function = "f", abir.loc = "f.py:3"}
// CHECK:         stack.push_goto ^{{.*}}, ^{{.*}} {abir.call_loc = "f.py:3", function = "f", abir.loc = "f.py:3"}
// CHECK:         stack.push_goto ^{{.*}}, ^{{.*}} {abir.call_loc = "f.py:10", function = "g", abir.loc = "f.py:10"}
