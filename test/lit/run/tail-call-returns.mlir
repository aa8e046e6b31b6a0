// RUN: abir-run %s --arg '[1, 2, 102]' | filecheck %s
// A tail call is a jump into the callee's code, which then returns where its caller's call does:
// f (called by block 0, returning to block 4) tail-calls r (block 1 jumps to block 2), and r
// calls itself once (block 3, returning to block 6). r's returns (blocks 5 and 6) go back to
// block 4 or 6, so the machine keeps the program-counter stack; it took block 6 for their one
// return block (the one call of r) and restored values no member had saved there.

// CHECK: result 0: int64 [1, 2, 100]

vm.var @d : i64 stack
vm.var @result : i64 register
vm.program @f(@d) -> (@result) {
  vm.block 0 {
    vm.call 1, return 4
  }
  vm.block 1 attributes {function = "f"} {
    vm.jump 2
  }
  vm.block 2 attributes {function = "r"} {
    %d = vm.read @d : i64
    %c100 = vm.constant 100 : i64
    %big = vm.prim "greater"(%d, %c100) : (i64, i64) -> i1
    vm.branch %big, 3, 5
  }
  vm.block 3 attributes {function = "r"} {
    %d = vm.read @d : i64
    %c1 = vm.constant 1 : i64
    %e = vm.prim "subtract"(%d, %c1) : (i64, i64) -> i64
    vm.push @d
    vm.write @d, %e : i64
    vm.call 2, return 6
  }
  vm.block 4 {
    vm.halt
  }
  vm.block 5 attributes {function = "r"} {
    %d = vm.read @d : i64
    vm.write @result, %d : i64
    vm.return
  }
  vm.block 6 attributes {function = "r"} {
    vm.pop @d
    vm.return
  }
}
