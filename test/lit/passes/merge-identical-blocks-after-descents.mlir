// RUN: abir-opt %s -p summarize-descents,merge-identical-blocks | filecheck %s
// merge-identical-blocks after summarize-descents: block 1 becomes a `vm.descend` whose exit is
// block 3, the same code as block 2. Block 3 goes, so the descent's exit must follow it to
// block 2, and its return block (4, the halt) is renumbered 3 like the call's.
builtin.module {
  vm.var @depth : i64 stack
  vm.program @main(@depth) -> (@depth) {
    vm.block 0 {
      vm.call 1, return 4
    }
    vm.block 1 attributes {function = "tree"} {
      %zero = vm.constant 0 : i64
      %d = vm.read @depth : i64
      %base = vm.prim "equal"(%d, %zero) : (i64, i64) -> i1
      vm.exit_if %base, 3
      %one = vm.constant 1 : i64
      %d2 = vm.read @depth : i64
      %less = vm.prim "subtract"(%d2, %one) : (i64, i64) -> i64
      vm.push @depth
      vm.write @depth, %less : i64
      vm.call 1, return 4
    }
    vm.block 2 attributes {function = "tree"} {
      %d = vm.read @depth : i64
      %one = vm.constant 1 : i64
      %up = vm.prim "add"(%d, %one) : (i64, i64) -> i64
      vm.write @depth, %up : i64
      vm.return
    }
    vm.block 3 attributes {function = "tree"} {
      %d = vm.read @depth : i64
      %one = vm.constant 1 : i64
      %up = vm.prim "add"(%d, %one) : (i64, i64) -> i64
      vm.write @depth, %up : i64
      vm.return
    }
    vm.block 4 {
      vm.halt
    }
  }
}

// CHECK:      vm.block 0 {
// CHECK-NEXT:   vm.call 1, return 3
// CHECK:      vm.block 1 attributes {function = "tree"} {
// CHECK-NEXT:   vm.descend @depth step -1 until "equal" 0, 0 exit 2 return 3
// CHECK:      vm.block 2 attributes {function = "tree"} {
// CHECK-NEXT:   %{{.*}} = vm.read @depth : i64
// CHECK-NEXT:   %{{.*}} = vm.constant 1 : i64
// CHECK-NEXT:   %{{.*}} = vm.prim "add"
// CHECK-NEXT:   vm.write @depth
// CHECK-NEXT:   vm.return
// CHECK:      vm.block 3 {
// CHECK-NEXT:   vm.halt
// CHECK-NOT:  vm.block
