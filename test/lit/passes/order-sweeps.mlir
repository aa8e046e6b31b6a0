// RUN: abir-opt %s -p order-sweeps | filecheck %s
// RUN: abir-opt %s -p order-sweeps | abir-opt -p order-sweeps | filecheck %s
// A loop whose blocks are numbered against its flow (header 3 -> body 2 -> body 1 -> header 3)
// makes every iteration take two backward transitions; the pass renumbers the body 1 and 2 in
// its flow and the header 3 (one backward transition per iteration, header -> body). The entry
// stays block 0, the tail (the return, then the halt) stays last. Running the pass again
// changes nothing.
builtin.module {
  vm.var @k : i64 register
  vm.program @main(@k) -> (@k) {
    vm.block 0 {
      vm.call 3, return 5
    }
    vm.block 1 attributes {function = "main"} {
      %k = vm.read @k : i64
      %c1 = vm.constant 1 : i64
      %next = vm.prim "add"(%k, %c1) : (i64, i64) -> i64
      vm.write @k, %next : i64
      vm.jump 3
    }
    vm.block 2 attributes {function = "main"} {
      %k = vm.read @k : i64
      %c2 = vm.constant 2 : i64
      %twice = vm.prim "multiply"(%k, %c2) : (i64, i64) -> i64
      vm.write @k, %twice : i64
      vm.jump 1
    }
    vm.block 3 attributes {function = "main"} {
      %k = vm.read @k : i64
      %c100 = vm.constant 100 : i64
      %more = vm.prim "less"(%k, %c100) : (i64, i64) -> i1
      vm.branch %more, 2, 4
    }
    vm.block 4 attributes {function = "main"} {
      vm.return
    }
    vm.block 5 {
      vm.halt
    }
  }
}

// CHECK-LABEL: vm.program @main(@k) -> (@k) {
// CHECK:      vm.block 0 {
// CHECK-NEXT:   vm.call 3, return 5
// CHECK:      vm.block 1 attributes {function = "main"} {
// CHECK:        vm.prim "multiply"
// CHECK:        vm.jump 2
// CHECK:      vm.block 2 attributes {function = "main"} {
// CHECK:        vm.prim "add"
// CHECK:        vm.jump 3
// CHECK:      vm.block 3 attributes {function = "main"} {
// CHECK:        vm.prim "less"
// CHECK-NEXT:   vm.branch %{{.*}}, 1, 4
// CHECK:      vm.block 4 attributes {function = "main"} {
// CHECK-NEXT:   vm.return
// CHECK:      vm.block 5 {
// CHECK-NEXT:   vm.halt
