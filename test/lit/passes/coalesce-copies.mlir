// RUN: abir-opt %s -p coalesce-copies | filecheck %s
// RUN: abir-opt %s -p coalesce-copies --print-op-generic | abir-opt | filecheck %s
// RUN: abir-opt %s -p "coalesce-copies{drop-saves=true}" | filecheck %s
// The two sides of a copy become one variable where they never hold different needed values.
// With drop-saves=true the pass also drops saves no call changes and coalesces again until nothing
// merges; fib has no such saves, so the result is the same.
// Recursive fibonacci (call lowering's output): the second call's result copy f2 = result0, the
// sum s and the base case's constant all become result0 (the program output keeps its name); the
// second argument a2 becomes n (n is dead when a2 is computed); f1 = result0 stays (the pop of f1
// after the second call overwrites f1 while that call's result0 is still needed), and so does
// n = a1 (n is pushed after a1 is computed: both needed).
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



// CHECK:      stack.var @fib.n : i64 stack
// CHECK-NEXT: stack.var @fib.c2 : i64 temporary
// CHECK-NEXT: stack.var @fib.cond : i1 temporary
// CHECK-NEXT: stack.var @fib.c1 : i64 temporary
// CHECK-NEXT: stack.var @fib.a1 : i64 temporary
// CHECK-NEXT: stack.var @fib.f1 : i64 stack
// CHECK-NEXT: stack.var @fib.result0 : i64 register
// CHECK-LABEL: stack.program @fib(@fib.n) -> (@fib.result0) {
// CHECK:        stack.push @fib.n
// CHECK-NEXT:   stack.write @fib.n = @fib.a1
// CHECK:        stack.pop @fib.n
// CHECK-NEXT:   stack.constant @fib.c2 = 2 : i64
// CHECK-NEXT:   stack.write @fib.f1 = @fib.result0
// CHECK-NEXT:   stack.prim "subtract"(@fib.n, @fib.c2) -> (@fib.n)
// CHECK-NEXT:   stack.push @fib.f1
// CHECK-NEXT:   stack.push_goto ^bb5, ^bb2 {function = "fib"}
// CHECK-NEXT: ^bb5:
// CHECK-NEXT:   stack.pop @fib.f1
// CHECK-NEXT:   stack.prim "add"(@fib.f1, @fib.result0) -> (@fib.result0)
// CHECK-NEXT:   stack.indirect_goto {function = "fib"}
// CHECK-NEXT: ^bb6:
// CHECK-NEXT:   stack.constant @fib.result0 = 1 : i64
// CHECK-NEXT:   stack.indirect_goto {function = "fib"}
