// RUN: abir-opt %s -p merge-identical-blocks | filecheck %s
// RUN: abir-opt %s -p merge-identical-blocks | abir-opt -p merge-identical-blocks | filecheck %s
// Blocks 3 and 4 are the same code (a copy fuse-blocks made for each way out of a loop): 4 goes,
// and block 2, which jumped to 4, is then the same as block 1, which jumped to 3: it goes too.
// Block 5 has the same ops as 3 but belongs to another function: it stays. Running the pass
// again changes nothing.
builtin.module {
  vm.var @k : i64 register
  vm.var @c : i1 register
  vm.program @main(@k, @c) -> (@k) {
    vm.block 0 {
      vm.call 6, return 8
    }
    vm.block 1 attributes {function = "main"} {
      %k = vm.read @k : i64
      vm.write @k, %k : i64
      vm.jump 3
    }
    vm.block 2 attributes {function = "main"} {
      %k = vm.read @k : i64
      vm.write @k, %k : i64
      vm.jump 4
    }
    vm.block 3 attributes {function = "main"} {
      %k = vm.read @k : i64
      %one = vm.constant 1 : i64
      %next = vm.prim "add"(%k, %one) : (i64, i64) -> i64
      vm.write @k, %next : i64
      vm.return
    }
    vm.block 4 attributes {function = "main"} {
      %x = vm.read @k : i64
      %c1 = vm.constant 1 : i64
      %y = vm.prim "add"(%x, %c1) : (i64, i64) -> i64
      vm.write @k, %y : i64
      vm.return
    }
    vm.block 5 attributes {function = "other"} {
      %k = vm.read @k : i64
      %one = vm.constant 1 : i64
      %next = vm.prim "add"(%k, %one) : (i64, i64) -> i64
      vm.write @k, %next : i64
      vm.return
    }
    vm.block 6 attributes {function = "main"} {
      %c = vm.read @c : i1
      vm.exit_if %c, 5
      vm.branch %c, 1, 7
    }
    vm.block 7 attributes {function = "main"} {
      %c = vm.read @c : i1
      vm.branch %c, 2, 4
    }
    vm.block 8 {
      vm.halt
    }
  }
}

// CHECK-LABEL: vm.program @main(@k, @c) -> (@k) {
// CHECK-NEXT:   vm.block 0 {
// CHECK-NEXT:     vm.call 4, return 6
// CHECK-NEXT:   }
// CHECK-NEXT:   vm.block 1 attributes {function = "main"} {
// CHECK:          vm.jump 2
// CHECK-NEXT:   }
// CHECK-NEXT:   vm.block 2 attributes {function = "main"} {
// CHECK:          vm.prim "add"
// CHECK:          vm.return
// CHECK-NEXT:   }
// CHECK-NEXT:   vm.block 3 attributes {function = "other"} {
// CHECK:          vm.return
// CHECK-NEXT:   }
// CHECK-NEXT:   vm.block 4 attributes {function = "main"} {
// CHECK:          vm.exit_if %{{.*}}, 3
// CHECK-NEXT:     vm.branch %{{.*}}, 1, 5
// CHECK-NEXT:   }
// CHECK-NEXT:   vm.block 5 attributes {function = "main"} {
// CHECK:          vm.branch %{{.*}}, 1, 2
// CHECK-NEXT:   }
// CHECK-NEXT:   vm.block 6 {
// CHECK-NEXT:     vm.halt
// CHECK-NEXT:   }
// CHECK-NEXT: }
