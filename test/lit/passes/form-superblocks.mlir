// RUN: abir-opt %s -p form-superblocks | filecheck %s
// RUN: abir-opt %s -p form-superblocks | abir-opt -p form-superblocks | filecheck %s
// A branch arm entered from its block alone moves into the block behind a side exit
// (vm.exit_if), and the blocks are renumbered in their order. In @main's loop the arm that
// calls (inside the loop) is absorbed, not the one that returns (it leaves the loop, and the
// break leads there too); in the recursive @tree the arm that recurses is absorbed, not the
// base case that returns. Block 9's continuation of the loop (only block 9 leads there) is
// absorbed too. Running the pass again changes nothing.
builtin.module {
  vm.var @n : i64 stack
  vm.var @out : i64 register
  vm.var @k : i64 register
  vm.program @main(@n) -> (@out) {
    vm.block 0 {
      vm.call 1, return 5
    }
    vm.block 1 attributes {function = "main"} {
      %z = vm.constant 0 : i64
      vm.write @k, %z : i64
      vm.jump 2
    }
    vm.block 2 attributes {function = "main"} {
      %k = vm.read @k : i64
      %c3 = vm.constant 3 : i64
      %more = vm.prim "less"(%k, %c3) : (i64, i64) -> i1
      vm.branch %more, 3, 4
    }
    vm.block 3 attributes {function = "main"} {
      vm.call 6, return 9
    }
    vm.block 4 attributes {function = "main"} {
      vm.return
    }
    vm.block 5 {
      vm.halt
    }
    vm.block 6 attributes {function = "tree"} {
      %n = vm.read @n : i64
      %c1 = vm.constant 1 : i64
      %leaf = vm.prim "less"(%n, %c1) : (i64, i64) -> i1
      vm.branch %leaf, 7, 8
    }
    vm.block 7 attributes {function = "tree"} {
      %n = vm.read @n : i64
      vm.write @out, %n : i64
      vm.return
    }
    vm.block 8 attributes {function = "tree"} {
      %n = vm.read @n : i64
      %c1 = vm.constant 1 : i64
      %m = vm.prim "subtract"(%n, %c1) : (i64, i64) -> i64
      vm.push @n
      vm.write @n, %m : i64
      vm.call 6, return 10
    }
    vm.block 9 attributes {function = "main"} {
      %out = vm.read @out : i64
      %c9 = vm.constant 9 : i64
      %stop = vm.prim "greater"(%out, %c9) : (i64, i64) -> i1
      vm.branch %stop, 4, 11
    }
    vm.block 10 attributes {function = "tree"} {
      vm.pop @n
      %out = vm.read @out : i64
      %c1 = vm.constant 1 : i64
      %s = vm.prim "add"(%out, %c1) : (i64, i64) -> i64
      vm.write @out, %s : i64
      vm.return
    }
    vm.block 11 attributes {function = "main"} {
      %k = vm.read @k : i64
      %c1 = vm.constant 1 : i64
      %k1 = vm.prim "add"(%k, %c1) : (i64, i64) -> i64
      vm.write @k, %k1 : i64
      vm.jump 2
    }
  }
}

// CHECK:       builtin.module {
// CHECK-NEXT:    vm.var @n : i64 stack
// CHECK-NEXT:    vm.var @out : i64 register
// CHECK-NEXT:    vm.var @k : i64 register
// CHECK-LABEL:   vm.program @main(@n) -> (@out) {
// CHECK-NEXT:      vm.block 0 {
// CHECK-NEXT:        vm.call 1, return 4
// CHECK-NEXT:      }
// CHECK-LABEL:     vm.block 1 attributes {function = "main"} {
// CHECK-NEXT:        %[[Z:[^ ,:)]+]] = vm.constant 0 : i64
// CHECK-NEXT:        vm.write @k, %[[Z]] : i64
// CHECK-NEXT:        vm.jump 2
// CHECK-NEXT:      }
// CHECK-LABEL:     vm.block 2 attributes {function = "main"} {
// CHECK-NEXT:        %[[K:[^ ,:)]+]] = vm.read @k : i64
// CHECK-NEXT:        %[[C3:[^ ,:)]+]] = vm.constant 3 : i64
// CHECK-NEXT:        %[[MORE:[^ ,:)]+]] = vm.prim "less"(%[[K]], %[[C3]]) : (i64, i64) -> i1
// CHECK-NEXT:        %[[DONE:[^ ,:)]+]] = vm.prim "logical_not"(%[[MORE]]) : (i1) -> i1
// CHECK-NEXT:        vm.exit_if %[[DONE]], 3
// CHECK-NEXT:        vm.call 5, return 7
// CHECK-NEXT:      }
// CHECK-LABEL:     vm.block 3 attributes {function = "main"} {
// CHECK-NEXT:        vm.return
// CHECK-NEXT:      }
// CHECK-LABEL:     vm.block 4 {
// CHECK-NEXT:        vm.halt
// CHECK-NEXT:      }
// CHECK-LABEL:     vm.block 5 attributes {function = "tree"} {
// CHECK-NEXT:        %[[N:[^ ,:)]+]] = vm.read @n : i64
// CHECK-NEXT:        %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:        %[[LEAF:[^ ,:)]+]] = vm.prim "less"(%[[N]], %[[C1]]) : (i64, i64) -> i1
// CHECK-NEXT:        vm.exit_if %[[LEAF]], 6
// CHECK-NEXT:        %[[N_ARM:[^ ,:)]+]] = vm.read @n : i64
// CHECK-NEXT:        %[[C1_ARM:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:        %[[M:[^ ,:)]+]] = vm.prim "subtract"(%[[N_ARM]], %[[C1_ARM]]) : (i64, i64) -> i64
// CHECK-NEXT:        vm.push @n
// CHECK-NEXT:        vm.write @n, %[[M]] : i64
// CHECK-NEXT:        vm.call 5, return 8
// CHECK-NEXT:      }
// CHECK-LABEL:     vm.block 6 attributes {function = "tree"} {
// CHECK-NEXT:        %[[N:[^ ,:)]+]] = vm.read @n : i64
// CHECK-NEXT:        vm.write @out, %[[N]] : i64
// CHECK-NEXT:        vm.return
// CHECK-NEXT:      }
// CHECK-LABEL:     vm.block 7 attributes {function = "main"} {
// CHECK-NEXT:        %[[OUT:[^ ,:)]+]] = vm.read @out : i64
// CHECK-NEXT:        %[[C9:[^ ,:)]+]] = vm.constant 9 : i64
// CHECK-NEXT:        %[[STOP:[^ ,:)]+]] = vm.prim "greater"(%[[OUT]], %[[C9]]) : (i64, i64) -> i1
// CHECK-NEXT:        vm.exit_if %[[STOP]], 3
// CHECK-NEXT:        %[[K:[^ ,:)]+]] = vm.read @k : i64
// CHECK-NEXT:        %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:        %[[K1:[^ ,:)]+]] = vm.prim "add"(%[[K]], %[[C1]]) : (i64, i64) -> i64
// CHECK-NEXT:        vm.write @k, %[[K1]] : i64
// CHECK-NEXT:        vm.jump 2
// CHECK-NEXT:      }
// CHECK-LABEL:     vm.block 8 attributes {function = "tree"} {
// CHECK-NEXT:        vm.pop @n
// CHECK-NEXT:        %[[OUT:[^ ,:)]+]] = vm.read @out : i64
// CHECK-NEXT:        %[[C1:[^ ,:)]+]] = vm.constant 1 : i64
// CHECK-NEXT:        %[[S:[^ ,:)]+]] = vm.prim "add"(%[[OUT]], %[[C1]]) : (i64, i64) -> i64
// CHECK-NEXT:        vm.write @out, %[[S]] : i64
// CHECK-NEXT:        vm.return
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  }
