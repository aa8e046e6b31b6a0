// RUN: abir-opt %s -p form-superblocks --split-input-file | filecheck %s
// RUN: abir-opt %s -p form-superblocks --split-input-file | abir-opt -p form-superblocks --split-input-file | filecheck %s
// A block inside two loops or more does not absorb an arm that leads back to it: it would jump
// to itself, and a sweep repeats such a block until no member stands there, so the members that
// leave the inner loop early would wait for the longest trip. An outermost loop still becomes
// one block that jumps to itself.

// @walk is NUTS's leapfrog loop (blocks 2-4) after if-convert's threading, inside an outer loop
// (blocks 1-5): the step (block 2) absorbs the checks (block 3), which only it leads to; the
// loop's test (block 4) would lead the result back to block 2, so it stays a block of its own
// and the inner loop is two blocks.
builtin.module {
  vm.var @x : f64 register
  vm.var @n : i64 register
  vm.var @rounds : i64 register
  vm.program @walk(@x, @rounds) -> (@x) {
    vm.block 0 {
      vm.call 1, return 7
    }
    vm.block 1 attributes {function = "walk"} {
      %c4 = vm.constant 4 : i64
      vm.write @n, %c4 : i64
      vm.jump 2
    }
    vm.block 2 attributes {function = "walk"} {
      %x = vm.read @x : f64
      %half = vm.constant 0.5 : f64
      %y = vm.prim "multiply"(%x, %half) : (f64, f64) -> f64
      vm.write @x, %y : f64
      %big = vm.constant 1000.0 : f64
      %divergent = vm.prim "greater"(%y, %big) : (f64, f64) -> i1
      vm.branch %divergent, 5, 3
    }
    vm.block 3 attributes {function = "walk"} {
      %x = vm.read @x : f64
      %zero = vm.constant 0.0 : f64
      %turned = vm.prim "less"(%x, %zero) : (f64, f64) -> i1
      vm.branch %turned, 5, 4
    }
    vm.block 4 attributes {function = "walk"} {
      %n = vm.read @n : i64
      %c1 = vm.constant 1 : i64
      %m = vm.prim "subtract"(%n, %c1) : (i64, i64) -> i64
      vm.write @n, %m : i64
      %more = vm.prim "greater"(%m, %c1) : (i64, i64) -> i1
      vm.branch %more, 2, 5
    }
    vm.block 5 attributes {function = "walk"} {
      %r = vm.read @rounds : i64
      %c1 = vm.constant 1 : i64
      %s = vm.prim "subtract"(%r, %c1) : (i64, i64) -> i64
      vm.write @rounds, %s : i64
      %again = vm.prim "greater"(%s, %c1) : (i64, i64) -> i1
      vm.branch %again, 1, 6
    }
    vm.block 6 attributes {function = "walk"} {
      vm.return
    }
    vm.block 7 {
      vm.halt
    }
  }
}

// CHECK-LABEL: vm.program @walk
// CHECK:         vm.block 2 attributes {function = "walk"} {
// CHECK:           %[[DIVERGENT:[^ ,:)]+]] = vm.prim "greater"
// CHECK-NEXT:      vm.exit_if %[[DIVERGENT]], 4
// CHECK:           %[[TURNED:[^ ,:)]+]] = vm.prim "less"
// CHECK-NEXT:      vm.branch %[[TURNED]], 4, 3
// CHECK-NEXT:    }
// CHECK-NEXT:    vm.block 3 attributes {function = "walk"} {
// CHECK:           vm.branch %{{.*}}, 2, 4
// CHECK-NEXT:    }
// CHECK-NEXT:    vm.block 4 attributes {function = "walk"} {
// CHECK:           vm.exit_if %{{.*}}, 1
// CHECK-NEXT:      vm.return
// CHECK-NEXT:    }
// CHECK-NEXT:    vm.block 5 {
// CHECK-NEXT:      vm.halt
// CHECK-NEXT:    }
// CHECK-NEXT:  }

// -----

// @count's loop is outermost: its test (block 1) absorbs the body (block 2), which jumps back
// to it, and the result is one block that jumps to itself.
builtin.module {
  vm.var @n : i64 register
  vm.program @count(@n) -> (@n) {
    vm.block 0 {
      vm.call 1, return 4
    }
    vm.block 1 attributes {function = "count"} {
      %n = vm.read @n : i64
      %c0 = vm.constant 0 : i64
      %more = vm.prim "greater"(%n, %c0) : (i64, i64) -> i1
      vm.branch %more, 2, 3
    }
    vm.block 2 attributes {function = "count"} {
      %n = vm.read @n : i64
      %c1 = vm.constant 1 : i64
      %m = vm.prim "subtract"(%n, %c1) : (i64, i64) -> i64
      vm.write @n, %m : i64
      vm.jump 1
    }
    vm.block 3 attributes {function = "count"} {
      vm.return
    }
    vm.block 4 {
      vm.halt
    }
  }
}

// CHECK-LABEL: vm.program @count
// CHECK:         vm.block 1 attributes {function = "count"} {
// CHECK:           vm.exit_if %{{.*}}, 2
// CHECK:           vm.prim "subtract"
// CHECK:           vm.jump 1
// CHECK-NEXT:    }
// CHECK-NEXT:    vm.block 2 attributes {function = "count"} {
// CHECK-NEXT:      vm.return
// CHECK-NEXT:    }
