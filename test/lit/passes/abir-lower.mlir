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
// CHECK-NEXT:       %0 = vm.constant 2 : i32
// CHECK-NEXT:       %1 = vm.read @fib.n : i32
// CHECK-NEXT:       %2 = vm.prim "greater"(%1, %0) : (i32, i32) -> i1
// CHECK-NEXT:       vm.exit_if %2, 3
// CHECK-NEXT:       %3 = vm.constant 1 : i64
// CHECK-NEXT:       vm.write @fib.result0, %3 : i64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 attributes {function = "fib"} {
// CHECK-NEXT:       vm.descend @fib.n step -1 until "less_equal" -1, 2 exit 4 return 5 update_first 1 pushes [@fib.n] updated [0 : i64] early [1 : i64]
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 attributes {function = "fib"} {
// CHECK-NEXT:       %4 = vm.constant 1 : i64
// CHECK-NEXT:       vm.pop @fib.n
// CHECK-NEXT:       %5 = vm.constant 2 : i32
// CHECK-NEXT:       %6 = vm.read @fib.n : i32
// CHECK-NEXT:       %7 = vm.prim "subtract"(%6, %5) : (i32, i32) -> i32
// CHECK-NEXT:       vm.write @fib.f1, %4 : i64
// CHECK-NEXT:       vm.push @fib.f1
// CHECK-NEXT:       %8 = vm.constant 2 : i32
// CHECK-NEXT:       %9 = vm.prim "greater"(%7, %8) : (i32, i32) -> i1
// CHECK-NEXT:       vm.write @fib.result0, %4 : i64
// CHECK-NEXT:       vm.write @fib.n, %7 : i32
// CHECK-NEXT:       %10 = vm.prim "logical_not"(%9) : (i1) -> i1
// CHECK-NEXT:       vm.exit_if %10, 6
// CHECK-NEXT:       vm.call 3, return 7
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 5 attributes {function = "fib"} {
// CHECK-NEXT:       vm.pop @fib.n
// CHECK-NEXT:       %11 = vm.constant 2 : i32
// CHECK-NEXT:       %12 = vm.read @fib.result0 : i64
// CHECK-NEXT:       %13 = vm.read @fib.n : i32
// CHECK-NEXT:       %14 = vm.prim "subtract"(%13, %11) : (i32, i32) -> i32
// CHECK-NEXT:       vm.write @fib.f1, %12 : i64
// CHECK-NEXT:       vm.push @fib.f1
// CHECK-NEXT:       %15 = vm.constant 2 : i32
// CHECK-NEXT:       %16 = vm.prim "greater"(%14, %15) : (i32, i32) -> i1
// CHECK-NEXT:       vm.write @fib.n, %14 : i32
// CHECK-NEXT:       %17 = vm.prim "logical_not"(%16) : (i1) -> i1
// CHECK-NEXT:       vm.exit_if %17, 6
// CHECK-NEXT:       vm.call 3, return 7
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 6 attributes {function = "fib"} {
// CHECK-NEXT:       %18 = vm.constant 1 : i64
// CHECK-NEXT:       vm.pop @fib.f1
// CHECK-NEXT:       %19 = vm.read @fib.f1 : i64
// CHECK-NEXT:       %20 = vm.prim "add"(%19, %18) : (i64, i64) -> i64
// CHECK-NEXT:       vm.write @fib.result0, %20 : i64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 7 attributes {function = "fib"} {
// CHECK-NEXT:       vm.pop @fib.f1
// CHECK-NEXT:       %21 = vm.read @fib.f1 : i64
// CHECK-NEXT:       %22 = vm.read @fib.result0 : i64
// CHECK-NEXT:       %23 = vm.prim "add"(%21, %22) : (i64, i64) -> i64
// CHECK-NEXT:       vm.write @fib.result0, %23 : i64
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
// CHECK-NEXT:       %0 = vm.constant 1 : i64
// CHECK-NEXT:       %1 = vm.read @tsum.n : i64
// CHECK-NEXT:       %2 = vm.prim "subtract"(%1, %0) : (i64, i64) -> i64
// CHECK-NEXT:       %3 = vm.read @tsum.acc : f64
// CHECK-NEXT:       %4 = vm.prim "add"(%3, %1) : (f64, i64) -> f64
// CHECK-NEXT:       %5 = vm.constant 0 : i64
// CHECK-NEXT:       %6 = vm.prim "greater"(%2, %5) : (i64, i64) -> i1
// CHECK-NEXT:       vm.write @tsum.acc, %4 : f64
// CHECK-NEXT:       vm.write @tsum.n, %2 : i64
// CHECK-NEXT:       vm.branch %6, 1, 3
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 2 {
// CHECK-NEXT:       vm.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 attributes {function = "tsum"} {
// CHECK-NEXT:       %7 = vm.read @tsum.acc : f64
// CHECK-NEXT:       vm.write @tsum.result0, %7 : f64
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 attributes {function = "tsum"} {
// CHECK-NEXT:       %8 = vm.constant 0 : i64
// CHECK-NEXT:       %9 = vm.read @tsum.n : i64
// CHECK-NEXT:       %10 = vm.prim "greater"(%9, %8) : (i64, i64) -> i1
// CHECK-NEXT:       vm.branch %10, 1, 3
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
// CHECK-NEXT:       %0 = vm.constant 1 : i16
// CHECK-NEXT:       %1 = vm.read @is_even.n : i16
// CHECK-NEXT:       %2 = vm.prim "subtract"(%1, %0) : (i16, i16) -> i16
// CHECK-NEXT:       %3 = vm.constant 0 : i16
// CHECK-NEXT:       %4 = vm.prim "equal"(%2, %3) : (i16, i16) -> i1
// CHECK-NEXT:       vm.write @is_odd.n, %2 : i16
// CHECK-NEXT:       vm.exit_if %4, 5
// CHECK-NEXT:       %5 = vm.constant 1 : i16
// CHECK-NEXT:       %6 = vm.read @is_odd.n : i16
// CHECK-NEXT:       %7 = vm.prim "subtract"(%6, %5) : (i16, i16) -> i16
// CHECK-NEXT:       %8 = vm.constant 0 : i16
// CHECK-NEXT:       %9 = vm.prim "equal"(%7, %8) : (i16, i16) -> i1
// CHECK-NEXT:       vm.write @is_even.n, %7 : i16
// CHECK-NEXT:       vm.branch %9, 4, 1
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 2 {
// CHECK-NEXT:       vm.halt
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 attributes {function = "is_even"} {
// CHECK-NEXT:       %10 = vm.constant 0 : i16
// CHECK-NEXT:       %11 = vm.read @is_even.n : i16
// CHECK-NEXT:       %12 = vm.prim "equal"(%11, %10) : (i16, i16) -> i1
// CHECK-NEXT:       vm.branch %12, 4, 1
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 attributes {function = "is_even"} {
// CHECK-NEXT:       %13 = vm.constant true
// CHECK-NEXT:       vm.write @is_even.result0, %13 : i1
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 5 attributes {function = "is_odd"} {
// CHECK-NEXT:       %14 = vm.constant false
// CHECK-NEXT:       vm.write @is_even.result0, %14 : i1
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
