// RUN: abir-opt %s -p form-superblocks | filecheck %s
// RUN: abir-opt %s -p form-superblocks --print-op-generic | abir-opt | filecheck %s
// A block that is only a call (a trampoline) shared by two branches gets a copy for the first
// branch (the last keeps the original), and each is absorbed behind a side exit: no block of
// the result is a bare call but the program entry's. Block 3, which three blocks lead to,
// stays a block of its own (renumbered 2).
builtin.module {
  vm.var @n : i64 stack
  vm.var @out : i64 register
  vm.program @f(@n) -> (@out) {
    vm.block 0 {
      vm.call 1, return 5
    }
    vm.block 1 attributes {function = "f"} {
      %n = vm.read @n : i64
      %c1 = vm.constant 1 : i64
      %more = vm.prim "greater"(%n, %c1) : (i64, i64) -> i1
      vm.branch %more, 2, 3
    }
    vm.block 2 attributes {function = "f"} {
      %n = vm.read @n : i64
      %c1 = vm.constant 1 : i64
      %m = vm.prim "subtract"(%n, %c1) : (i64, i64) -> i64
      vm.push @n
      vm.write @n, %m : i64
      %again = vm.prim "greater"(%m, %c1) : (i64, i64) -> i1
      vm.branch %again, 4, 3
    }
    vm.block 3 attributes {function = "f"} {
      %n = vm.read @n : i64
      vm.write @out, %n : i64
      vm.return
    }
    vm.block 4 attributes {function = "f"} {
      vm.call 1, return 6
    }
    vm.block 5 {
      vm.halt
    }
    vm.block 6 attributes {function = "f"} {
      vm.pop @n
      %n = vm.read @n : i64
      %c2 = vm.constant 2 : i64
      %m = vm.prim "subtract"(%n, %c2) : (i64, i64) -> i64
      vm.write @n, %m : i64
      %again = vm.prim "greater"(%m, %c2) : (i64, i64) -> i1
      vm.branch %again, 4, 3
    }
  }
}

// CHECK-LABEL: vm.program @f
// CHECK:         vm.block 0 {
// CHECK-NEXT:      vm.call 1, return 3
// CHECK-NEXT:    }
// CHECK-NEXT:    vm.block 1 attributes {function = "f"} {
// CHECK:           vm.exit_if %{{.*}}, 2
// CHECK:           vm.push @n
// CHECK:           vm.exit_if %{{.*}}, 2
// CHECK-NEXT:      vm.call 1, return 4
// CHECK-NEXT:    }
// CHECK-NEXT:    vm.block 2 attributes {function = "f"} {
// CHECK:           vm.return
// CHECK-NEXT:    }
// CHECK-NEXT:    vm.block 3 {
// CHECK-NEXT:      vm.halt
// CHECK-NEXT:    }
// CHECK-NEXT:    vm.block 4 attributes {function = "f"} {
// CHECK-NEXT:      vm.pop @n
// CHECK:           vm.exit_if %{{.*}}, 2
// CHECK-NEXT:      vm.call 1, return 4
// CHECK-NEXT:    }
// CHECK-NOT:     vm.block
