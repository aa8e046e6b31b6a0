// RUN: abir-opt %s -p 'abir-lower' --split-input-file | filecheck %s
// The whole pipeline from functional IR whose entry parameters are typed to vm kernels.

// Recursive fibonacci on i32: stacks for n and the first call's result only; the two blocks
// that are only a call (one per recursive call) are copied into the blocks that branch to them,
// and the descent to a leaf (block 3, which called itself) is one vm.descend.
builtin.module {
  functional.func @fib(%n: i32) -> !functional.unknown {
    %c2 = functional.constant weak 2 : i64
    %cond = functional.prim "greater"(%n, %c2) : (i32, i64) -> !functional.unknown
    %b = functional.prim "astype"(%cond) : (!functional.unknown) -> i1
    cf.cond_br %b, ^recurse, ^base
  ^recurse:
    %c1 = functional.constant weak 1 : i64
    %a1 = functional.prim "subtract"(%n, %c1) : (i32, i64) -> !functional.unknown
    %f1 = functional.call @fib(%a1) : (!functional.unknown) -> !functional.unknown
    %a2 = functional.prim "subtract"(%n, %c2) : (i32, i64) -> !functional.unknown
    %f2 = functional.call @fib(%a2) : (!functional.unknown) -> !functional.unknown
    %s = functional.prim "add"(%f1, %f2) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %s : !functional.unknown
  ^base:
    %one = functional.constant weak 1 : i64
    functional.return %one : i64
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   vm.var @fib.n : i32 stack
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
// CHECK-NEXT:       %[[C2:[^ ,:)]+]] = vm.constant 2 : i32
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @fib.n : i32
// CHECK-NEXT:       %[[GT:[^ ,:)]+]] = vm.prim "greater"(%[[N]], %[[C2]]) : (i32, i32) -> i1
// CHECK-NEXT:       vm.exit_if %[[GT]], 3
// CHECK-NEXT:       %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:       vm.write @fib.result0, %[[C1]] : i64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 attributes {function = "fib"} {
// CHECK-NEXT:       vm.descend @fib.n step -1 until "less_equal" -1, 2 exit 4 return 5 update_first 1 pushes [@fib.n] updated [0 : i64] early [1 : i64]
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 attributes {function = "fib"} {
// CHECK-NEXT:       %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:       vm.pop @fib.n
// CHECK-NEXT:       %[[C2:[^ ,:)]+]] = vm.constant 2 : i32
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @fib.n : i32
// CHECK-NEXT:       %[[SUB:[^ ,:)]+]] = vm.prim "subtract"(%[[N]], %[[C2]]) : (i32, i32) -> i32
// CHECK-NEXT:       vm.write @fib.f1, %[[C1]] : i64
// CHECK-NEXT:       vm.push @fib.f1
// CHECK-NEXT:       %[[C2_1:[^ ,:)]+]] = vm.constant 2 : i32
// CHECK-NEXT:       %[[GT:[^ ,:)]+]] = vm.prim "greater"(%[[SUB]], %[[C2_1]]) : (i32, i32) -> i1
// CHECK-NEXT:       vm.write @fib.result0, %[[C1]] : i64
// CHECK-NEXT:       vm.write @fib.n, %[[SUB]] : i32
// CHECK-NEXT:       %[[NOT:[^ ,:)]+]] = vm.prim "logical_not"(%[[GT]]) : (i1) -> i1
// CHECK-NEXT:       vm.exit_if %[[NOT]], 6
// CHECK-NEXT:       vm.call 3, return 7
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 5 attributes {function = "fib"} {
// CHECK-NEXT:       vm.pop @fib.n
// CHECK-NEXT:       %[[C2:[^ ,:)]+]] = vm.constant 2 : i32
// CHECK-NEXT:       %[[RESULT0:[^ ,:)]+]] = vm.read @fib.result0 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @fib.n : i32
// CHECK-NEXT:       %[[SUB:[^ ,:)]+]] = vm.prim "subtract"(%[[N]], %[[C2]]) : (i32, i32) -> i32
// CHECK-NEXT:       vm.write @fib.f1, %[[RESULT0]] : i64
// CHECK-NEXT:       vm.push @fib.f1
// CHECK-NEXT:       %[[C2_1:[^ ,:)]+]] = vm.constant 2 : i32
// CHECK-NEXT:       %[[GT:[^ ,:)]+]] = vm.prim "greater"(%[[SUB]], %[[C2_1]]) : (i32, i32) -> i1
// CHECK-NEXT:       vm.write @fib.n, %[[SUB]] : i32
// CHECK-NEXT:       %[[NOT:[^ ,:)]+]] = vm.prim "logical_not"(%[[GT]]) : (i1) -> i1
// CHECK-NEXT:       vm.exit_if %[[NOT]], 6
// CHECK-NEXT:       vm.call 3, return 7
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 6 attributes {function = "fib"} {
// CHECK-NEXT:       %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:       vm.pop @fib.f1
// CHECK-NEXT:       %[[F1:[^ ,:)]+]] = vm.read @fib.f1 : i64
// CHECK-NEXT:       %[[ADD:[^ ,:)]+]] = vm.prim "add"(%[[F1]], %[[C1]]) : (i64, i64) -> i64
// CHECK-NEXT:       vm.write @fib.result0, %[[ADD]] : i64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 7 attributes {function = "fib"} {
// CHECK-NEXT:       vm.pop @fib.f1
// CHECK-NEXT:       %[[F1:[^ ,:)]+]] = vm.read @fib.f1 : i64
// CHECK-NEXT:       %[[RESULT0:[^ ,:)]+]] = vm.read @fib.result0 : i64
// CHECK-NEXT:       %[[ADD:[^ ,:)]+]] = vm.prim "add"(%[[F1]], %[[RESULT0]]) : (i64, i64) -> i64
// CHECK-NEXT:       vm.write @fib.result0, %[[ADD]] : i64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Self-tail-recursive sum: a loop in registers, no stack, no call but the program entry's.
builtin.module {
  functional.func @tsum(%n: i64, %acc: f64) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %p = functional.prim "greater"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %p, ^rec, ^base
  ^rec:
    %c1 = functional.constant weak 1 : i64
    %n1 = functional.prim "subtract"(%n, %c1) : (i64, i64) -> !functional.unknown
    %acc1 = functional.prim "add"(%acc, %n) : (f64, i64) -> !functional.unknown
    %r = functional.call @tsum(%n1, %acc1) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  ^base:
    functional.return %acc : f64
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   vm.var @tsum.n : i64 register
// CHECK-NEXT:   vm.var @tsum.acc : f64 register
// CHECK-NEXT:   vm.var @tsum.result0 : f64 register
// CHECK-LABEL: vm.program @tsum(@tsum.n, @tsum.acc) -> (@tsum.result0) {
// CHECK-NEXT:     vm.block 0 {
// CHECK-NEXT:       vm.call 4, return 2
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 1 attributes {function = "tsum"} {
// CHECK-NEXT:       %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @tsum.n : i64
// CHECK-NEXT:       %[[SUB:[^ ,:)]+]] = vm.prim "subtract"(%[[N]], %[[C1]]) : (i64, i64) -> i64
// CHECK-NEXT:       %[[ACC:[^ ,:)]+]] = vm.read @tsum.acc : f64
// CHECK-NEXT:       %[[ADD:[^ ,:)]+]] = vm.prim "add"(%[[ACC]], %[[N]]) : (f64, i64) -> f64
// CHECK-NEXT:       %[[C0:[^ ,:)]+]] = vm.constant 0 : i64
// CHECK-NEXT:       %[[GT:[^ ,:)]+]] = vm.prim "greater"(%[[SUB]], %[[C0]]) : (i64, i64) -> i1
// CHECK-NEXT:       vm.write @tsum.acc, %[[ADD]] : f64
// CHECK-NEXT:       vm.write @tsum.n, %[[SUB]] : i64
// CHECK-NEXT:       vm.branch %[[GT]], 1, 3
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 2 {
// CHECK-NEXT:       vm.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 attributes {function = "tsum"} {
// CHECK-NEXT:       %[[ACC:[^ ,:)]+]] = vm.read @tsum.acc : f64
// CHECK-NEXT:       vm.write @tsum.result0, %[[ACC]] : f64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 attributes {function = "tsum"} {
// CHECK-NEXT:       %[[C0:[^ ,:)]+]] = vm.constant 0 : i64
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @tsum.n : i64
// CHECK-NEXT:       %[[GT:[^ ,:)]+]] = vm.prim "greater"(%[[N]], %[[C0]]) : (i64, i64) -> i1
// CHECK-NEXT:       vm.branch %[[GT]], 1, 3
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// is_even/is_odd through tail calls: shared result variable, no pc stack growth.
builtin.module {
  functional.func @is_even(%n: i16) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %z = functional.prim "equal"(%n, %c0) : (i16, i64) -> i1
    cf.cond_br %z, ^yes, ^no
  ^yes:
    %t = functional.constant weak true
    functional.return %t : i1
  ^no:
    %c1 = functional.constant weak 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (i16, i64) -> !functional.unknown
    %r = functional.call @is_odd(%m) : (!functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
  functional.func @is_odd(%n: !functional.unknown) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %z = functional.prim "equal"(%n, %c0) : (!functional.unknown, i64) -> i1
    cf.cond_br %z, ^yes, ^no
  ^yes:
    %f = functional.constant weak false
    functional.return %f : i1
  ^no:
    %c1 = functional.constant weak 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
    %r = functional.call @is_even(%m) : (!functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   vm.var @is_even.n : i16 register
// CHECK-NEXT:   vm.var @is_odd.n : i16 register
// CHECK-NEXT:   vm.var @is_even.result0 : i1 register
// CHECK-LABEL: vm.program @is_even(@is_even.n) -> (@is_even.result0) {
// CHECK-NEXT:     vm.block 0 {
// CHECK-NEXT:       vm.call 3, return 2
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 1 attributes {function = "is_odd"} {
// CHECK-NEXT:       %[[C1:[^ ,:)]+]] = vm.constant 1 : i16
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @is_even.n : i16
// CHECK-NEXT:       %[[SUB:[^ ,:)]+]] = vm.prim "subtract"(%[[N]], %[[C1]]) : (i16, i16) -> i16
// CHECK-NEXT:       %[[C0:[^ ,:)]+]] = vm.constant 0 : i16
// CHECK-NEXT:       %[[EQ:[^ ,:)]+]] = vm.prim "equal"(%[[SUB]], %[[C0]]) : (i16, i16) -> i1
// CHECK-NEXT:       vm.write @is_odd.n, %[[SUB]] : i16
// CHECK-NEXT:       vm.exit_if %[[EQ]], 5
// CHECK-NEXT:       %[[C1_1:[^ ,:)]+]] = vm.constant 1 : i16
// CHECK-NEXT:       %[[N1:[^ ,:)]+]] = vm.read @is_odd.n : i16
// CHECK-NEXT:       %[[SUB1:[^ ,:)]+]] = vm.prim "subtract"(%[[N1]], %[[C1_1]]) : (i16, i16) -> i16
// CHECK-NEXT:       %[[C0_1:[^ ,:)]+]] = vm.constant 0 : i16
// CHECK-NEXT:       %[[EQ1:[^ ,:)]+]] = vm.prim "equal"(%[[SUB1]], %[[C0_1]]) : (i16, i16) -> i1
// CHECK-NEXT:       vm.write @is_even.n, %[[SUB1]] : i16
// CHECK-NEXT:       vm.branch %[[EQ1]], 4, 1
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 2 {
// CHECK-NEXT:       vm.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 attributes {function = "is_even"} {
// CHECK-NEXT:       %[[C0:[^ ,:)]+]] = vm.constant 0 : i16
// CHECK-NEXT:       %[[N:[^ ,:)]+]] = vm.read @is_even.n : i16
// CHECK-NEXT:       %[[EQ:[^ ,:)]+]] = vm.prim "equal"(%[[N]], %[[C0]]) : (i16, i16) -> i1
// CHECK-NEXT:       vm.branch %[[EQ]], 4, 1
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 attributes {function = "is_even"} {
// CHECK-NEXT:       %[[TRUE:[^ ,:)]+]] = vm.constant true
// CHECK-NEXT:       vm.write @is_even.result0, %[[TRUE]] : i1
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 5 attributes {function = "is_odd"} {
// CHECK-NEXT:       %[[FALSE:[^ ,:)]+]] = vm.constant false
// CHECK-NEXT:       vm.write @is_even.result0, %[[FALSE]] : i1
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
