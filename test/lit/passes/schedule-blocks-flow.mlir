// RUN: abir-opt %s -p 'schedule-blocks{order=flow}' | filecheck %s
// RUN: not abir-opt %s -p 'schedule-blocks{order=fastest}' 2>&1 | filecheck %s --check-prefix=BAD
// order=flow: the entry stays block 0; then an order with few backward transitions (jumps,
// branches, calls to the callee's entry, returns to every return block of the function's calls),
// by the greedy feedback-arc-set heuristic: sinks to the back (the halt), sources to the front,
// else the block with the largest out- minus in-degree. Recursive fibonacci: the return blocks
// come first (each has in-degree 1 and out-degree 3: the three return sites), then the
// continuations, the function entry and the first call.
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

// CHECK-LABEL: stack.program @fib(@fib.n) -> (@fib.result0) {
// CHECK-NEXT:   stack.push_goto ^bb6, ^bb4
// CHECK-NEXT: ^bb1:
// CHECK-NEXT:   stack.constant @fib.one = 1 : i64
// CHECK-NEXT:   stack.write @fib.result0 = @fib.one
// CHECK-NEXT:   stack.indirect_goto {function = "fib"}
// CHECK-NEXT: ^bb2:
// CHECK-NEXT:   stack.pop @fib.f1
// CHECK:        stack.indirect_goto {function = "fib"}
// CHECK-NEXT: ^bb3:
// CHECK-NEXT:   stack.pop @fib.n
// CHECK:        stack.push_goto ^bb2, ^bb4 {function = "fib"}
// CHECK-NEXT: ^bb4:
// CHECK-NEXT:   stack.constant @fib.c2 = 2 : i64
// CHECK-NEXT:   stack.prim "greater"(@fib.n, @fib.c2) -> (@fib.cond)
// CHECK-NEXT:   stack.branch @fib.cond, ^bb5, ^bb1 {function = "fib"}
// CHECK-NEXT: ^bb5:
// CHECK:        stack.push_goto ^bb3, ^bb4 {function = "fib"}
// CHECK-NEXT: ^bb6:
// CHECK-NEXT:   stack.halt
// CHECK-NEXT: }

// BAD: abir-opt: error: schedule-blocks order must be one of priority, flow, got 'fastest'
