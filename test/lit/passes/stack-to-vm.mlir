// RUN: abir-opt %s -p stack-to-vm --split-input-file | filecheck %s
// Temporaries become SSA values, registers/stacks vm.read/vm.write, terminators vm.jump/branch/call/return/halt; vm.block keeps the function attribute.
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
// CHECK-NEXT:   vm.var @fib.n : i64 stack
// CHECK-NEXT:   vm.var @fib.f1 : i64 stack
// CHECK-NEXT:   vm.var @fib.result0 : i64 register
// CHECK-LABEL: vm.program @fib(@fib.n) -> (@fib.result0) {
// CHECK-NEXT:     vm.block 0 {
// CHECK-NEXT:       vm.call 2, return 1
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 1 {
// CHECK-NEXT:       vm.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 2 attributes {function = "fib"} {
// CHECK-NEXT:       %[[C2:[^ ,:)]+]] = vm.constant 2 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @fib.n : i64
// CHECK-NEXT:       %[[GT:[^ ,:)]+]] = vm.prim "greater"(%[[N]], %[[C2]]) : (i64, i64) -> i1
// CHECK-NEXT:       vm.branch %[[GT]], 3, 6
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 attributes {function = "fib"} {
// CHECK-NEXT:       %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @fib.n : i64
// CHECK-NEXT:       %[[SUB:[^ ,:)]+]] = vm.prim "subtract"(%[[N]], %[[C1]]) : (i64, i64) -> i64
// CHECK-NEXT:       vm.push @fib.n
// CHECK-NEXT:       vm.write @fib.n, %[[SUB]] : i64
// CHECK-NEXT:       vm.call 2, return 4
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 attributes {function = "fib"} {
// CHECK-NEXT:       vm.pop @fib.n
// CHECK-NEXT:       %[[C2:[^ ,:)]+]] = vm.constant 2 : i64
// CHECK-NEXT:       %[[RESULT0:[^ ,:)]+]] = vm.read @fib.result0 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @fib.n : i64
// CHECK-NEXT:       %[[SUB:[^ ,:)]+]] = vm.prim "subtract"(%[[N]], %[[C2]]) : (i64, i64) -> i64
// CHECK-NEXT:       vm.write @fib.f1, %[[RESULT0]] : i64
// CHECK-NEXT:       vm.push @fib.f1
// CHECK-NEXT:       vm.write @fib.n, %[[SUB]] : i64
// CHECK-NEXT:       vm.call 2, return 5
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 5 attributes {function = "fib"} {
// CHECK-NEXT:       vm.pop @fib.f1
// CHECK-NEXT:       %[[RESULT0:[^ ,:)]+]] = vm.read @fib.result0 : i64
// CHECK-NEXT:       %[[F1:[^ ,:)]+]] = vm.read @fib.f1 : i64
// CHECK-NEXT:       %[[ADD:[^ ,:)]+]] = vm.prim "add"(%[[F1]], %[[RESULT0]]) : (i64, i64) -> i64
// CHECK-NEXT:       vm.write @fib.result0, %[[ADD]] : i64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 6 attributes {function = "fib"} {
// CHECK-NEXT:       %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:       vm.write @fib.result0, %[[C1]] : i64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Mutual recursion is_even/is_odd (is_even tail-calls is_odd).
builtin.module {
  stack.var @is_even.n : i64 register
  stack.var @is_even.c0 : i64 temporary
  stack.var @is_even.z : i1 temporary
  stack.var @is_even.t : i1 temporary
  stack.var @is_even.c1 : i64 temporary
  stack.var @is_even.m : i64 temporary
  stack.var @is_even.r : i1 dead
  stack.var @is_odd.n : i64 register
  stack.var @is_odd.c0 : i64 temporary
  stack.var @is_odd.z : i1 temporary
  stack.var @is_odd.f : i1 temporary
  stack.var @is_odd.c1 : i64 temporary
  stack.var @is_odd.m : i64 temporary
  stack.var @is_odd.r : i1 temporary
  stack.var @is_odd.nr : i1 temporary
  stack.var @is_odd.nnr : i1 temporary
  stack.var @is_even.result0 : i1 register
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
// CHECK-NEXT:   vm.var @is_even.n : i64 register
// CHECK-NEXT:   vm.var @is_odd.n : i64 register
// CHECK-NEXT:   vm.var @is_even.result0 : i1 register
// CHECK-LABEL: vm.program @is_even(@is_even.n) -> (@is_even.result0) {
// CHECK-NEXT:     vm.block 0 {
// CHECK-NEXT:       vm.call 2, return 1
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 1 {
// CHECK-NEXT:       vm.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 2 attributes {function = "is_even"} {
// CHECK-NEXT:       %[[C0:[^ ,:)]+]] = vm.constant 0 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @is_even.n : i64
// CHECK-NEXT:       %[[EQ:[^ ,:)]+]] = vm.prim "equal"(%[[N]], %[[C0]]) : (i64, i64) -> i1
// CHECK-NEXT:       vm.branch %[[EQ]], 3, 4
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 attributes {function = "is_even"} {
// CHECK-NEXT:       %[[TRUE:[^ ,:)]+]] = vm.constant true
// CHECK-NEXT:       vm.write @is_even.result0, %[[TRUE]] : i1
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 attributes {function = "is_odd"} {
// CHECK-NEXT:       %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @is_even.n : i64
// CHECK-NEXT:       %[[SUB:[^ ,:)]+]] = vm.prim "subtract"(%[[N]], %[[C1]]) : (i64, i64) -> i64
// CHECK-NEXT:       %[[C0:[^ ,:)]+]] = vm.constant 0 : i64
// CHECK-NEXT:       %[[EQ:[^ ,:)]+]] = vm.prim "equal"(%[[SUB]], %[[C0]]) : (i64, i64) -> i1
// CHECK-NEXT:       vm.write @is_odd.n, %[[SUB]] : i64
// CHECK-NEXT:       vm.branch %[[EQ]], 5, 6
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 5 attributes {function = "is_odd"} {
// CHECK-NEXT:       %[[FALSE:[^ ,:)]+]] = vm.constant false
// CHECK-NEXT:       vm.write @is_even.result0, %[[FALSE]] : i1
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 6 attributes {function = "is_odd"} {
// CHECK-NEXT:       %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @is_odd.n : i64
// CHECK-NEXT:       %[[SUB:[^ ,:)]+]] = vm.prim "subtract"(%[[N]], %[[C1]]) : (i64, i64) -> i64
// CHECK-NEXT:       vm.write @is_even.n, %[[SUB]] : i64
// CHECK-NEXT:       vm.call 2, return 7
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 7 attributes {function = "is_odd"} {
// CHECK-NEXT:       %[[RESULT0:[^ ,:)]+]] = vm.read @is_even.result0 : i1
// CHECK-NEXT:       %[[NOT:[^ ,:)]+]] = vm.prim "logical_not"(%[[RESULT0]]) : (i1) -> i1
// CHECK-NEXT:       %[[NOT1:[^ ,:)]+]] = vm.prim "logical_not"(%[[NOT]]) : (i1) -> i1
// CHECK-NEXT:       vm.write @is_even.result0, %[[NOT1]] : i1
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A while loop with a swap: gcd.
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
    stack.goto ^bb5 {function = "gcd"}
  ^bb3:
    stack.write @gcd.a, @gcd.b = @gcd.b, @gcd.r
    stack.goto ^bb5 {function = "gcd"}
  ^bb4:
    stack.write @gcd.result0 = @gcd.a
    stack.indirect_goto {function = "gcd"}
  ^bb5:
    stack.constant @gcd.c0 = 0 : i64
    stack.prim "not_equal"(@gcd.b, @gcd.c0) -> (@gcd.ne)
    stack.prim "remainder"(@gcd.a, @gcd.b) -> (@gcd.r)
    stack.branch @gcd.ne, ^bb3, ^bb4 {function = "gcd"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   vm.var @gcd.a0 : i64 register
// CHECK-NEXT:   vm.var @gcd.b0 : i64 register
// CHECK-NEXT:   vm.var @gcd.a : i64 register
// CHECK-NEXT:   vm.var @gcd.b : i64 register
// CHECK-NEXT:   vm.var @gcd.r : i64 register
// CHECK-NEXT:   vm.var @gcd.result0 : i64 register
// CHECK-LABEL: vm.program @gcd(@gcd.a0, @gcd.b0) -> (@gcd.result0) {
// CHECK-NEXT:     vm.block 0 {
// CHECK-NEXT:       vm.call 2, return 1
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 1 {
// CHECK-NEXT:       vm.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 2 attributes {function = "gcd"} {
// CHECK-NEXT:       %[[A0:[^ ,:)]+]] = vm.read @gcd.a0 : i64
// CHECK-NEXT:       %[[B0:[^ ,:)]+]] = vm.read @gcd.b0 : i64
// CHECK-NEXT:       vm.write @gcd.a, %[[A0]] : i64
// CHECK-NEXT:       vm.write @gcd.b, %[[B0]] : i64
// CHECK-NEXT:       vm.jump 5
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 attributes {function = "gcd"} {
// CHECK-NEXT:       %[[B:[^ ,:)]+]] = vm.read @gcd.b : i64
// CHECK-NEXT:       %[[R:[^ ,:)]+]] = vm.read @gcd.r : i64
// CHECK-NEXT:       vm.write @gcd.a, %[[B]] : i64
// CHECK-NEXT:       vm.write @gcd.b, %[[R]] : i64
// CHECK-NEXT:       vm.jump 5
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 attributes {function = "gcd"} {
// CHECK-NEXT:       %[[A:[^ ,:)]+]] = vm.read @gcd.a : i64
// CHECK-NEXT:       vm.write @gcd.result0, %[[A]] : i64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 5 attributes {function = "gcd"} {
// CHECK-NEXT:       %[[C0:[^ ,:)]+]] = vm.constant 0 : i64
// CHECK-NEXT:       %[[B:[^ ,:)]+]] = vm.read @gcd.b : i64
// CHECK-NEXT:       %[[NE:[^ ,:)]+]] = vm.prim "not_equal"(%[[B]], %[[C0]]) : (i64, i64) -> i1
// CHECK-NEXT:       %[[A:[^ ,:)]+]] = vm.read @gcd.a : i64
// CHECK-NEXT:       %[[REM:[^ ,:)]+]] = vm.prim "remainder"(%[[A]], %[[B]]) : (i64, i64) -> i64
// CHECK-NEXT:       vm.write @gcd.r, %[[REM]] : i64
// CHECK-NEXT:       vm.branch %[[NE]], 3, 4
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A self-tail-recursive sum.
builtin.module {
  stack.var @tsum.n : i64 register
  stack.var @tsum.acc : i64 register
  stack.var @tsum.c0 : i64 temporary
  stack.var @tsum.p : i1 temporary
  stack.var @tsum.c1 : i64 temporary
  stack.var @tsum.n1 : i64 temporary
  stack.var @tsum.acc1 : i64 temporary
  stack.var @tsum.r : i64 dead
  stack.var @tsum.result0 : i64 register
  stack.program @tsum(@tsum.n, @tsum.acc) -> (@tsum.result0) {
    stack.push_goto ^bb1, ^bb3
  ^bb1:
    stack.halt
  ^bb2:
    stack.write @tsum.result0 = @tsum.acc
    stack.indirect_goto {function = "tsum"}
  ^bb3:
    stack.constant @tsum.c0 = 0 : i64
    stack.prim "greater"(@tsum.n, @tsum.c0) -> (@tsum.p)
    stack.branch @tsum.p, ^bb4, ^bb2 {function = "tsum"}
  ^bb4:
    stack.constant @tsum.c1 = 1 : i64
    stack.prim "subtract"(@tsum.n, @tsum.c1) -> (@tsum.n1)
    stack.prim "add"(@tsum.acc, @tsum.n) -> (@tsum.acc1)
    stack.write @tsum.n, @tsum.acc = @tsum.n1, @tsum.acc1
    stack.goto ^bb3 {function = "tsum"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   vm.var @tsum.n : i64 register
// CHECK-NEXT:   vm.var @tsum.acc : i64 register
// CHECK-NEXT:   vm.var @tsum.result0 : i64 register
// CHECK-LABEL: vm.program @tsum(@tsum.n, @tsum.acc) -> (@tsum.result0) {
// CHECK-NEXT:     vm.block 0 {
// CHECK-NEXT:       vm.call 3, return 1
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 1 {
// CHECK-NEXT:       vm.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 2 attributes {function = "tsum"} {
// CHECK-NEXT:       %[[ACC:[^ ,:)]+]] = vm.read @tsum.acc : i64
// CHECK-NEXT:       vm.write @tsum.result0, %[[ACC]] : i64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 attributes {function = "tsum"} {
// CHECK-NEXT:       %[[C0:[^ ,:)]+]] = vm.constant 0 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @tsum.n : i64
// CHECK-NEXT:       %[[GT:[^ ,:)]+]] = vm.prim "greater"(%[[N]], %[[C0]]) : (i64, i64) -> i1
// CHECK-NEXT:       vm.branch %[[GT]], 4, 2
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 attributes {function = "tsum"} {
// CHECK-NEXT:       %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @tsum.n : i64
// CHECK-NEXT:       %[[SUB:[^ ,:)]+]] = vm.prim "subtract"(%[[N]], %[[C1]]) : (i64, i64) -> i64
// CHECK-NEXT:       %[[ACC:[^ ,:)]+]] = vm.read @tsum.acc : i64
// CHECK-NEXT:       %[[ADD:[^ ,:)]+]] = vm.prim "add"(%[[ACC]], %[[N]]) : (i64, i64) -> i64
// CHECK-NEXT:       vm.write @tsum.n, %[[SUB]] : i64
// CHECK-NEXT:       vm.write @tsum.acc, %[[ADD]] : i64
// CHECK-NEXT:       vm.jump 3
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// A write of the value the register already holds vanishes (a recursive call passing an
// argument on unchanged, @walk.n = @walk.n, and a round trip through another register), also
// after a push (which leaves the register as it is); after a pop the register holds the restored
// value, so writing back what was read before the pop stays.
builtin.module {
  stack.var @walk.n : i64 stack
  stack.var @walk.k : i64 register
  stack.var @walk.t : i64 temporary
  stack.program @walk(@walk.n, @walk.k) -> (@walk.k) {
    stack.push @walk.n
    stack.write @walk.n, @walk.k = @walk.n, @walk.k
    stack.write @walk.t = @walk.k
    stack.write @walk.k = @walk.t
    stack.pop @walk.n
    stack.goto ^bb1
  ^bb1:
    stack.write @walk.t = @walk.n
    stack.pop @walk.n
    stack.write @walk.n = @walk.t
    stack.halt
  }
}

// CHECK:      vm.block 0 {
// CHECK-NEXT:   vm.push @walk.n
// CHECK-NEXT:   %[[N:[^ ,:)]+]] = vm.read @walk.n : i64
// CHECK-NEXT:   %[[K:[^ ,:)]+]] = vm.read @walk.k : i64
// CHECK-NEXT:   vm.pop @walk.n
// CHECK-NEXT:   vm.jump 1
// CHECK-NEXT: }
// CHECK-NEXT: vm.block 1 {
// CHECK-NEXT:   %[[N:[^ ,:)]+]] = vm.read @walk.n : i64
// CHECK-NEXT:   vm.pop @walk.n
// CHECK-NEXT:   vm.write @walk.n, %[[N]] : i64
// CHECK-NEXT:   vm.halt
// CHECK-NEXT: }
