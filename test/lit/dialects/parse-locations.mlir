// RUN: abir-opt %s --split-input-file --parsing-diagnostics | filecheck %s

// Parse errors that xDSL finds only after an op's text point at the op, not at the next line:
// a type list with too few or too many types (at the type list), an unknown op (at its name,
// listing the dialect's ops).

functional.func @f(%a: i64) -> i64 {
  %b = functional.prim "add"(%a, %a) : (i64) -> i64
  functional.return %b : i64
}

// CHECK:      parse-locations.mlir:[[# @LINE - 4]]:40
// CHECK-NEXT:   %b = functional.prim "add"(%a, %a) : (i64) -> i64
// CHECK-NEXT:                                        ^^^^^^^^^^^^
// CHECK-NEXT: functional.prim has 2 operands (%a, %a) but 1 operand type (i64); write one type per operand, in order

// -----

functional.func @f(%a: i64) -> i64 {
  %b = functional.call @f(%a) : (i64, i64) -> i64
  functional.return %b : i64
}

// CHECK: parse-locations.mlir:[[# @LINE - 4]]:33
// CHECK: functional.call has 1 operand (%a) but 2 operand types (i64, i64); write one type per operand, in order

// -----

functional.func @f(%a: i64) -> i64 {
  functional.return %a, %a : i64
}

// CHECK: parse-locations.mlir:[[# @LINE - 3]]:30
// CHECK: functional.return has 2 operands (%a, %a) but 1 operand type (i64); write one type per operand, in order

// -----

functional.func @f(%a: i64) -> i64 {
  %b = functional.prim @helper(%a) : () -> i64
  functional.return %b : i64
}

// CHECK: parse-locations.mlir:[[# @LINE - 4]]:38
// CHECK: functional.prim has 1 operand (%a) but no operand types; write one type per operand, in order

// -----

// An op of another dialect (xDSL's cf) is pointed at as a whole.
functional.func @f(%a: i64) -> i64 {
  cf.br ^next(%a, %a : i64)
^next(%x: i64, %y: i64):
  functional.return %x : i64
}

// CHECK: parse-locations.mlir:[[# @LINE - 5]]:3
// CHECK: cf.br has 2 operands (%a, %a) but 1 operand type (i64); write one type per operand, in order

// -----

vm.var @x : i64 register
vm.program @main(@x) -> (@x) {
  vm.block 0 {
    %0 = vm.read @x : i64
    %1 = vm.prim "add"(%0, %0) : (i64) -> i64
    vm.halt
  }
}

// CHECK: parse-locations.mlir:[[# @LINE - 5]]:34
// CHECK: vm.prim has 2 operands (%0, %0) but 1 operand type (i64); write one type per operand, in order

// -----

functional.func @f(%a: i64) -> i64 {
  %b = functional.frobnicate %a : i64
  functional.return %b : i64
}

// CHECK:      parse-locations.mlir:[[# @LINE - 4]]:8
// CHECK-NEXT:   %b = functional.frobnicate %a : i64
// CHECK-NEXT:        ^^^^^^^^^^^^^^^^^^^^^
// CHECK-NEXT: unknown op 'functional.frobnicate': the functional dialect has no op 'frobnicate'; its ops are call, constant, func, opaque, prim, return

// -----

functional.func @f(%a: i64) -> i64 {
  %b = functional.add %a, %a : i64
  functional.return %b : i64
}

// CHECK: parse-locations.mlir:[[# @LINE - 4]]:8
// CHECK: unknown op 'functional.add': the functional dialect has no op 'add'; its ops are call, constant, func, opaque, prim, return; elementwise and array operations are prims: functional.prim "add"(...)

// -----

functional.func @f(%a: i64) -> i64 {
  %b = functional.cal @f(%a) : (i64) -> i64
  functional.return %b : i64
}

// CHECK: parse-locations.mlir:[[# @LINE - 4]]:8
// CHECK: unknown op 'functional.cal': {{.*}} (did you mean functional.call?)

// -----

%0 = "functional.frobnicate"() : () -> i64

// CHECK: parse-locations.mlir:[[# @LINE - 2]]:6
// CHECK: unknown op 'functional.frobnicate': the functional dialect has no op 'frobnicate'

// -----

vm.var @x : i64 register
vm.nope

// CHECK: parse-locations.mlir:[[# @LINE - 2]]:1
// CHECK: unknown op 'vm.nope': the vm dialect has no op 'nope'; its ops are block, branch, call, constant, descend, exit_if, halt, jump, peek, pop, prim, program, push, read, return, var, write{{$}}

// -----

stack.halts

// CHECK: parse-locations.mlir:[[# @LINE - 2]]:1
// CHECK: unknown op 'stack.halts': the stack dialect has no op 'halts'; its ops are {{.*}} (did you mean stack.halt?)

// -----

functinal.prim

// CHECK: parse-locations.mlir:[[# @LINE - 2]]:1
// CHECK: unknown op 'functinal.prim': there is no dialect 'functinal'; the dialects are arith, builtin, cf, func, functional, stack, vm (did you mean functional.prim?){{$}}

// -----

frobnicate

// CHECK: parse-locations.mlir:[[# @LINE - 2]]:1
// CHECK: unknown op 'frobnicate': an op's name starts with its dialect (arith, builtin, cf, func, functional, stack, vm), such as functional.prim

// -----

// An attribute of the wrong kind where the declarative format wants a symbol: at the op.
vm.var @k : i64 register
vm.program @main(@k) -> (@k) {
  vm.block 0 {
    %k = vm.read i64 : i64
    vm.halt
  }
}

// CHECK: parse-locations.mlir:[[# @LINE - 5]]:5
// CHECK: vm.read: expected a symbol, such as @x, not i64

// -----

stack.var @k : i64 register
stack.program @main(@k) -> (@k) {
  stack.constant "k" = 3 : i64
  stack.halt
}

// CHECK: parse-locations.mlir:[[# @LINE - 4]]:3
// CHECK: stack.constant: expected a symbol, such as @x, not "k"

// -----

// A branch to a block the region never defines: at the region's closing brace, not after it.
functional.func @f(%a: i64) -> i64 {
  cf.br ^missing
}

// CHECK:      parse-locations.mlir:[[# @LINE - 2]]:1
// CHECK-NEXT: }
// CHECK-NEXT: ^
// CHECK-NEXT: region ends with missing block declarations for block(s) missing

// -----

// A block defined twice, the first definition after a branch to it (xDSL kept no span for it).
functional.func @f(%a: i64) -> i64 {
  cf.br ^next
^next:
  cf.br ^next
^next:
  functional.return %a : i64
}

// CHECK:      parse-locations.mlir:[[# @LINE - 4]]:1
// CHECK-NEXT: ^next:
// CHECK-NEXT: ^^^^^
// CHECK-NEXT: re-declaration of block 'next'
// CHECK-NEXT: originally declared here:
// CHECK-NEXT: parse-locations.mlir:{{[0-9]+}}:1
// CHECK-NEXT: ^next:
