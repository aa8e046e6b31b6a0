// RUN: abir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One chunk per verifier check of the vm dialect.

vm.var @x : !functional.unknown register

// CHECK: variable @x has type !functional.unknown, not a per-member type

// -----

"vm.var"() <{sym_name = "x", type = i64, storage = #stack<storage temporary>}> : () -> ()

// CHECK: variable @x has storage class temporary; the machine only holds register and stack variables (temporaries are SSA values inside a block)

// -----

vm.var @x : i64 temporary

// CHECK: invalid.mlir:[[# @LINE - 2]]:17
// CHECK: expected the variable's storage class: register or stack, not temporary (temporaries are SSA values inside a block, dead ones vanish)

// -----

"vm.var"() <{sym_name = "x", type = i64, storage = #stack<storage dead>}> : () -> ()

// CHECK: variable @x has storage class dead; the machine only holds register and stack variables (temporaries are SSA values inside a block)

// -----

vm.var @x : i64

// CHECK: invalid.mlir:[[# @LINE - 2]]:1
// CHECK: expected the variable's storage class: register or stack

// -----

vm.var @x : i64 heap

// CHECK: invalid.mlir:[[# @LINE - 2]]:17
// CHECK: expected the variable's storage class: register or stack

// -----

vm.program @main() -> () {}

// CHECK: Region 'body' at position 0 expected a single block, but got 0 blocks

// -----

vm.program @main() -> () {
  vm.block 1 {
    vm.halt
  }
}

// CHECK: vm.block 1 is the block at position 0; blocks must be numbered 0, 1, 2, ... in order

// -----

vm.program @main() -> () {
  vm.block 0 {
    vm.halt
  }
  vm.block 0 {
    vm.halt
  }
}

// CHECK: vm.block 0 is the block at position 1; blocks must be numbered 0, 1, 2, ... in order

// -----

vm.program @main() -> () {
  vm.block 0 {
    vm.halt
  }
  "functional.opaque"() <{sym_name = "f", source = ""}> : () -> ()
}

// CHECK: 'functional.opaque' expects parent op 'builtin.module'

// -----

vm.program @main() -> () {
  vm.block 0 {
    vm.halt
  }
  %c = "functional.constant"() <{value = 1 : i64}> : () -> i64
}

// CHECK: program @main contains a functional.constant; a vm.program holds only vm.block ops

// -----

vm.var @x : i64 register
vm.program @main(@x) -> (@y) {
  vm.block 0 {
    vm.halt
  }
}

// CHECK: variable @y is used but never declared

// -----

vm.program @main() -> () {
  vm.block 0 {
  }
}

// CHECK: Region 'body' at position 0 expected a single block, but got 0 blocks

// -----

vm.program @main() -> () {
  "vm.block"() <{index = 0 : i64}> ({
  ^bb0:
  }) : () -> ()
}

// CHECK: vm.block 0 is empty; a kernel must end in a program-counter terminator (vm.jump, vm.branch, vm.call, vm.return or vm.halt)

// -----

vm.var @x : i64 register
vm.program @main() -> () {
  vm.block 0 {
    %x = vm.read @x : i64
    vm.write @x, %x : i64
  }
}

// CHECK: vm.block 0 ends in vm.write; a kernel must end in a program-counter terminator (vm.jump, vm.branch, vm.call, vm.return or vm.halt)

// -----

vm.program @main() -> () {
  "vm.block"() <{index = 0 : i64}> ({
  ^bb0(%a: i64):
    "vm.halt"() : () -> ()
  }) : () -> ()
}

// CHECK: vm.block kernels take no arguments; read the machine state with vm.read

// -----

vm.program @main() -> () {
  vm.block 0 {
    vm.halt
    vm.halt
  }
}

// CHECK: 'vm.halt' must be the last operation in its parent block

// -----

vm.var @x : i64 register
func.func @f() {
  %x = vm.read @x : i64
  func.return
}

// CHECK: 'vm.read' expects parent op 'vm.block'

// -----

vm.program @main() -> () {
  vm.block 0 {
    %x = vm.read @ghost : i64
    vm.halt
  }
}

// CHECK: variable @ghost is used but never declared

// -----

vm.var @x : i64 register
vm.program @main() -> () {
  vm.block 0 {
    %x = vm.read @x : f64
    vm.halt
  }
}

// CHECK: read of @x (i64) as f64

// -----

vm.var @x : i64 register
vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1.0 : f32
    vm.write @x, %c : f32
    vm.halt
  }
}

// CHECK: cannot write a f32 into @x (i64)

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1 : i64
    vm.write @ghost, %c : i64
    vm.halt
  }
}

// CHECK: variable @ghost is used but never declared

// -----

vm.var @x : i64 register
vm.program @main() -> () {
  vm.block 0 {
    vm.push @x
    vm.halt
  }
}

// CHECK: variable @x is pushed but its storage class is register; only stack variables keep saved values

// -----

vm.var @s : i64 stack
vm.var @x : i64 register
vm.program @main() -> () {
  vm.block 0 {
    vm.pop @s, @x
    vm.halt
  }
}

// CHECK: variable @x is popped but its storage class is register; only stack variables keep saved values

// -----

vm.var @x : i64 register
vm.program @main() -> () {
  vm.block 0 {
    vm.peek @x
    vm.halt
  }
}

// CHECK: variable @x is peeked but its storage class is register; only stack variables keep saved values

// -----

vm.program @main() -> () {
  vm.block 0 {
    vm.push @ghost
    vm.halt
  }
}

// CHECK: variable @ghost is used but never declared

// -----

vm.program @main() -> () {
  vm.block 0 {
    "vm.peek"() <{vars = []}> : () -> ()
    vm.halt
  }
}

// CHECK: vm.peek needs at least one variable

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = "vm.constant"() <{value = 1 : i64}> : () -> i32
    vm.halt
  }
}

// CHECK: attribute i32 expected from variable 'T', but got i64

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1 : index
    vm.halt
  }
}

// CHECK: constant of type index is not a per-member value; use a bool, integer or float scalar type (i1, i32, i64, f32, f64, ...) or a static tensor of one

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant weak 1 : i64
    vm.halt
  }
}

// CHECK: invalid.mlir:[[# @LINE - 5]]:22
// CHECK: expected a constant value: an integer or float with its type (`2 : i64`, `0.5 : f64`), `true`, `false`, or `dense<[1, 2]> : tensor<2xi64>`

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1 : i64
    %r = vm.prim "frobnicate"(%c) : (i64) -> i64
    vm.halt
  }
}

// CHECK: unknown builtin prim "frobnicate"; use an Array-API name such as "add" or "less"

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1 : i64
    %r = vm.prim "where"(%c, %c) : (i64, i64) -> i64
    vm.halt
  }
}

// CHECK: builtin prim "where" takes 3 operand(s), got 2

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1 : i64
    "vm.prim"(%c) <{fn = "negative"}> : (i64) -> ()
    vm.halt
  }
}

// CHECK: builtin prim "negative" has exactly one result, got 0

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1 : i64
    %r = vm.prim @helper(%c) : (i64) -> i64
    vm.halt
  }
}

// CHECK: prim @helper has no `functional.opaque @helper` declaration in this module

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1 : i64
    %r = vm.prim @main(%c) : (i64) -> i64
    vm.halt
  }
}

// CHECK: prim @main names a vm.program; an opaque prim must name a `functional.opaque` declaration

// -----

functional.opaque @helper "lambda x: x"
vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1 : i64
    %r = "vm.prim"(%c) <{fn = "negative", callee = @helper}> : (i64) -> i64
    vm.halt
  }
}

// CHECK: a prim names exactly one of a builtin operation or an opaque callable

// -----

vm.program @main() -> () {
  vm.block 0 {
    vm.jump 1
  }
}

// CHECK: jump to block 1, but the program has blocks 0..0

// -----

vm.program @main() -> () {
  vm.block 0 {
    %t = vm.constant true
    vm.branch %t, 0, 7
  }
}

// CHECK: jump to block 7, but the program has blocks 0..0

// -----

vm.program @main() -> () {
  vm.block 0 {
    %t = vm.constant true
    vm.exit_if %t, 3
    vm.halt
  }
}

// CHECK: jump to block 3, but the program has blocks 0..0

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1 : i64
    vm.exit_if %c, 0
    vm.halt
  }
}

// CHECK: vm.exit_if %c, 0
// CHECK: operand is used with type i1, but has been previously used or defined with type i64

// -----

vm.program @main() -> () {
  vm.block 0 {
    vm.call 0, return 2
  }
  vm.block 1 {
    vm.halt
  }
}

// CHECK: jump to block 2, but the program has blocks 0..1

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant 1 : i64
    "vm.branch"(%c) <{then_target = 0 : i64, else_target = 0 : i64}> : (i64) -> ()
  }
}

// CHECK: operand 'cond' at position 0 does not verify:
// CHECK-NEXT: Expected attribute i1 but got i64

// -----

vm.program @main() -> () {
  vm.block 0 {
    %c = vm.constant "one"
    vm.halt
  }
}

// CHECK: invalid.mlir:[[# @LINE - 5]]:22
// CHECK: "one" is not a constant value; expected an integer or float with its type

// -----

vm.var @x : int register

// CHECK: invalid.mlir:[[# @LINE - 2]]:13
// CHECK: expected the variable's per-member type, such as i64, f32 or tensor<3xf64>

// -----

vm.var @d : i64 stack
vm.program @f(@d) -> (@d) {
  vm.block 0 {
    vm.descend @d step 0 until "equal" 0, 0 exit 1 return 1 update_first 0 pushes [@d] updated [0] early [0]
  }
  vm.block 1 {
    vm.halt
  }
}

// CHECK: vm.descend needs a non-zero step: a counter that does not move never reaches its base case

// -----

vm.var @d : i64 stack
vm.program @f(@d) -> (@d) {
  vm.block 0 {
    vm.descend @d step -1 until "around" 0, 0 exit 1 return 1 update_first 0 pushes [@d] updated [0] early [0]
  }
  vm.block 1 {
    vm.halt
  }
}

// CHECK: vm.descend ends on one of equal, not_equal, less, less_equal, greater, greater_equal, got 'around'

// -----

vm.var @d : i64 stack
vm.var @r : i64 register
vm.program @f(@d) -> (@d) {
  vm.block 0 {
    vm.descend @d step -1 until "equal" 0, 0 exit 1 return 1 update_first 0 pushes [@r] updated [0] early [0]
  }
  vm.block 1 {
    vm.halt
  }
}

// CHECK: vm.descend pushes @r, whose storage class is register; only stack variables keep saved values

// -----

vm.var @d : f64 stack
vm.program @f(@d) -> (@d) {
  vm.block 0 {
    vm.descend @d step -1 until "equal" 0, 0 exit 1 return 1 update_first 0 pushes [@d] updated [0] early [0]
  }
  vm.block 1 {
    vm.halt
  }
}

// CHECK: the counter of vm.descend must be an integer variable, @d is f64

// -----

vm.var @d : i64 stack
vm.program @f(@d) -> (@d) {
  vm.block 0 {
    vm.descend @d step -1 until "equal" 0, 0 exit 7 return 1 update_first 0 pushes [@d] updated [0] early [0]
  }
  vm.block 1 {
    vm.halt
  }
}

// CHECK: jump to block 7, but the program has blocks 0..1
