// RUN: abir-opt %s -p summarize-descents --split-input-file | filecheck %s
// RUN: abir-opt %s -p summarize-descents --split-input-file | abir-opt --print-op-generic --split-input-file | abir-opt --split-input-file | filecheck %s
// Block 1 is build_tree's descent (NUTS): exit when depth == 0, else push depth, depth - 1, call
// itself. Block 2 is fib's: push n, n - 1, exit when n - 1 <= 1 (after the push and the update),
// else call itself. Block 3 calls itself but also writes a second variable: it stays. Block 4
// pushes a variable it does not write (an invariant) and the updated counter, stepping by +3
// until the counter passes 100 (`100 < k`: the comparison is turned around).
builtin.module {
  vm.var @depth : i64 stack
  vm.var @n : i64 stack
  vm.var @k : i64 stack
  vm.var @x : f64 stack
  vm.var @y : i64 register
  vm.program @main(@depth, @n, @k, @x) -> (@y) {
    vm.block 0 {
      vm.call 1, return 5
    }
    vm.block 1 attributes {function = "tree"} {
      %zero = vm.constant 0 : i64
      %d = vm.read @depth : i64
      %base = vm.prim "equal"(%d, %zero) : (i64, i64) -> i1
      vm.exit_if %base, 5
      %one = vm.constant 1 : i64
      %d2 = vm.read @depth : i64
      %less = vm.prim "subtract"(%d2, %one) : (i64, i64) -> i64
      vm.push @depth
      vm.write @depth, %less : i64
      vm.call 1, return 5
    }
    vm.block 2 attributes {function = "fib"} {
      %one = vm.constant 1 : i64
      %n = vm.read @n : i64
      %m = vm.prim "subtract"(%n, %one) : (i64, i64) -> i64
      vm.push @n
      %more = vm.prim "greater"(%m, %one) : (i64, i64) -> i1
      vm.write @n, %m : i64
      %leaf = vm.prim "logical_not"(%more) : (i1) -> i1
      vm.exit_if %leaf, 5
      vm.call 2, return 5
    }
    vm.block 3 attributes {function = "other"} {
      %zero = vm.constant 0 : i64
      %k = vm.read @k : i64
      %base = vm.prim "equal"(%k, %zero) : (i64, i64) -> i1
      vm.exit_if %base, 5
      %one = vm.constant 1 : i64
      %less = vm.prim "subtract"(%k, %one) : (i64, i64) -> i64
      vm.write @k, %less : i64
      vm.write @y, %less : i64
      vm.call 3, return 5
    }
    vm.block 4 attributes {function = "up"} {
      %three = vm.constant 3 : i64
      %k = vm.read @k : i64
      %top = vm.constant 100 : i64
      %done = vm.prim "less"(%top, %k) : (i64, i64) -> i1
      vm.exit_if %done, 5
      vm.push @x
      %next = vm.prim "add"(%three, %k) : (i64, i64) -> i64
      vm.write @k, %next : i64
      vm.push @k
      vm.call 4, return 5
    }
    vm.block 5 {
      vm.halt
    }
  }
}

// CHECK-LABEL: vm.block 1
// CHECK-NEXT:    vm.descend @depth step -1 until "equal" 0, 0 exit 5 return 5 update_first 0 pushes [@depth] updated [0 : i64] early [0 : i64]
// CHECK-NEXT:  }
// CHECK-LABEL: vm.block 2
// CHECK-NEXT:    vm.descend @n step -1 until "less_equal" -1, 1 exit 5 return 5 update_first 1 pushes [@n] updated [0 : i64] early [1 : i64]
// CHECK-NEXT:  }
// CHECK-LABEL: vm.block 3
// CHECK:         vm.write @y
// CHECK:         vm.call 3, return 5
// CHECK-LABEL: vm.block 4
// CHECK-NEXT:    vm.descend @k step 3 until "greater" 0, 100 exit 5 return 5 update_first 0 pushes [@x, @k] updated [0 : i64, 1 : i64] early [0 : i64, 0 : i64]
// CHECK-NEXT:  }

// -----

// The recursive call's line (`abir.call_loc`, which a stack overflow names) moves to the descend.
builtin.module {
  vm.var @d : i64 stack
  vm.program @main(@d) -> (@d) {
    vm.block 0 {
      vm.call 1, return 2
    }
    vm.block 1 attributes {function = "tree"} {
      %zero = vm.constant 0 : i64
      %d = vm.read @d : i64
      %base = vm.prim "equal"(%d, %zero) : (i64, i64) -> i1
      vm.exit_if %base, 2
      %one = vm.constant 1 : i64
      %less = vm.prim "subtract"(%d, %one) : (i64, i64) -> i64
      vm.push @d {abir.call_loc = "tree.py:7"}
      vm.write @d, %less : i64
      vm.call 1, return 2 {abir.call_loc = "tree.py:7"}
    }
    vm.block 2 {
      vm.halt
    }
  }
}

// CHECK-LABEL: vm.block 1
// CHECK-NEXT:    vm.descend @d step -1 until "equal" 0, 0 exit 2 return 2 update_first 0 pushes [@d] updated [0 : i64] early [0 : i64] {abir.call_loc = "tree.py:7"}

// -----

// A vector pushed at every level: vm.descend pushes per-member scalars only, so the block stays.
builtin.module {
  vm.var @d : i64 stack
  vm.var @v : tensor<3xf64> stack
  vm.program @main(@d, @v) -> (@d) {
    vm.block 0 {
      vm.call 1, return 2
    }
    vm.block 1 attributes {function = "scaled"} {
      %zero = vm.constant 0 : i64
      %d = vm.read @d : i64
      %base = vm.prim "equal"(%d, %zero) : (i64, i64) -> i1
      vm.exit_if %base, 2
      %one = vm.constant 1 : i64
      %less = vm.prim "subtract"(%d, %one) : (i64, i64) -> i64
      vm.push @d, @v
      vm.write @d, %less : i64
      vm.call 1, return 2
    }
    vm.block 2 {
      vm.halt
    }
  }
}

// CHECK-LABEL: vm.block 1
// CHECK:         vm.push @d, @v
// CHECK:         vm.call 1, return 2
