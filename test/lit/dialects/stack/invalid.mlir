// RUN: abir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One chunk per verifier check of the stack dialect.

stack.var @x : !functional.unknown

// CHECK: variable @x has type !functional.unknown; variables need a concrete per-member type (run type inference first)

// -----

stack.var @x : i64 stack
stack.program @main(@x) -> (@y) {
  stack.halt
}

// CHECK: variable @y is used but never declared

// -----

stack.var @x : i64 register
stack.program @main(@x) -> (@x) {
  stack.prim "negative"(@x) -> (@nowhere)
  stack.halt
}

// CHECK: variable @nowhere is used but never declared

// -----

"stack.program"() <{sym_name = "main", inputs = [], outputs = []}> ({
}) : () -> ()

// CHECK: program @main has no blocks

// -----

stack.var @x : i64 register
"stack.program"() <{sym_name = "main", inputs = [], outputs = []}> ({
^bb0(%a: i64):
  "stack.halt"() : () -> ()
}) : () -> ()

// CHECK: stack blocks take no arguments; move values with stack.write

// -----

stack.var @c : i1 register
stack.program @main() -> () {
^entry:
  stack.branch @c, ^entry, ^done
^done:
  stack.halt
}

// CHECK: program @main: the entry block is the target of a jump; the entry block cannot be a jump target (jump to a separate block instead)

// -----

stack.var @x : i64 register
stack.program @main() -> () {
  stack.write @x = @x
}

// CHECK: Operation stack.write terminates block in single-block region but is not a terminator

// -----

stack.var @x : f64 register
stack.program @main() -> () {
  stack.constant @x = 1 : i64
  stack.halt
}

// CHECK: constant of type i64 written to @x of type f64

// -----

stack.var @x : i64 register
stack.program @main() -> () {
  stack.prim "frobnicate"(@x) -> (@x)
  stack.halt
}

// CHECK: unknown builtin prim "frobnicate"; use an Array-API name such as "add" or "less"

// -----

stack.var @x : i64 register
stack.program @main() -> () {
  stack.prim "add"(@x) -> (@x)
  stack.halt
}

// CHECK: builtin prim "add" takes 2 operand(s), got 1

// -----

stack.var @x : i64 register
stack.program @main() -> () {
  stack.prim "negative"(@x) -> (@x, @x)
  stack.halt
}

// CHECK: builtin prim "negative" has exactly one result, got 2

// -----

stack.var @x : i64 register
stack.program @main() -> () {
  stack.prim @helper(@x) -> (@x)
  stack.halt
}

// CHECK: prim @helper has no `functional.opaque @helper` declaration in this module

// -----

stack.var @x : i64 register
stack.program @main() -> () {
  stack.prim @x(@x) -> (@x)
  stack.halt
}

// CHECK: prim @x names a stack.var; an opaque prim must name a `functional.opaque` declaration

// -----

stack.var @x : i64 register
stack.program @main() -> () {
  "stack.prim"() <{inputs = [@x], outputs = [@x]}> : () -> ()
  stack.halt
}

// CHECK: a prim names exactly one of a builtin operation or an opaque callable

// -----

stack.var @x : i64 register
stack.var @d : i64 dead
stack.program @main() -> () {
  stack.prim "add"(@x, @d) -> (@x)
  stack.halt
}

// CHECK: variable @d is read but its storage class is dead

// -----

stack.var @x : i64 register
stack.var @d : i64 dead
stack.program @main() -> () {
  stack.write @x = @d
  stack.halt
}

// CHECK: variable @d is read but its storage class is dead

// -----

stack.var @c : i1 dead
stack.program @main() -> () {
^entry:
  stack.branch @c, ^a, ^a
^a:
  stack.halt
}

// CHECK: variable @c is read but its storage class is dead

// -----

stack.var @x : i64 register
stack.var @y : i64 register
stack.program @main() -> () {
  stack.write @x, @y = @y
  stack.halt
}

// CHECK: stack.write needs as many sources as targets (and at least one); got 2 target(s) and 1 source(s)

// -----

stack.program @main() -> () {
  "stack.write"() <{targets = [], sources = []}> : () -> ()
  stack.halt
}

// CHECK: stack.write needs as many sources as targets (and at least one); got 0 target(s) and 0 source(s)

// -----

stack.var @x : i64 register
stack.var @y : i64 register
stack.program @main() -> () {
  stack.write @x, @x = @x, @y
  stack.halt
}

// CHECK: stack.write writes @x twice; each target may appear only once

// -----

stack.var @x : i64 register
stack.var @y : f32 register
stack.program @main() -> () {
  stack.write @x = @y
  stack.halt
}

// CHECK: cannot write @x (i64) from @y (f32)

// -----

stack.var @x : i64 register
stack.program @main() -> () {
  stack.write @x = @ghost
  stack.halt
}

// CHECK: variable @ghost is used but never declared

// -----

stack.var @x : i64 register
stack.program @main() -> () {
  stack.push @x
  stack.halt
}

// CHECK: variable @x is pushed but its storage class is register; only `stack` variables keep saved values

// -----

stack.var @s : i64 stack
stack.var @x : i64 temporary
stack.program @main() -> () {
  stack.pop @s, @x
  stack.halt
}

// CHECK: variable @x is popped but its storage class is temporary; only `stack` variables keep saved values

// -----

stack.var @x : i64 dead
stack.program @main() -> () {
  stack.peek @x
  stack.halt
}

// CHECK: variable @x is peeked but its storage class is dead; only `stack` variables keep saved values

// -----

stack.program @main() -> () {
  stack.push @ghost
  stack.halt
}

// CHECK: variable @ghost is used but never declared

// -----

stack.program @main() -> () {
  "stack.pop"() <{vars = []}> : () -> ()
  stack.halt
}

// CHECK: stack.pop needs at least one variable

// -----

stack.var @c : i64 register
stack.program @main() -> () {
^entry:
  stack.branch @c, ^a, ^a
^a:
  stack.halt
}

// CHECK: branch condition @c has type i64; a per-member i1 is needed

// -----

stack.program @main() -> () {
^entry:
  stack.branch @c, ^a, ^a
^a:
  stack.halt
}

// CHECK: variable @c is used but never declared

// -----

stack.var @x : i64 register
func.func @f() {
  stack.push @x
  func.return
}

// CHECK: 'stack.push' expects parent op 'stack.program'

// -----

stack.program @main() -> () {
  "stack.var"() <{sym_name = "x", type = i64}> : () -> ()
  stack.halt
}

// CHECK: 'stack.var' expects parent op 'builtin.module'

// -----

"stack.var"() <{sym_name = "x", type = i64, storage = #stack<storage heap>}> : () -> ()

// CHECK: Expected `dead`, `temporary`, `register`, or `stack`.

// -----

stack.var @x : i64 heap

// CHECK: unknown storage class 'heap'; expected dead, temporary, register, stack

// -----

stack.var @x : i64 register
stack.program @main(@x) -> (@x) {
  stack.constant @x = two
  stack.halt
}

// CHECK: invalid.mlir:[[# @LINE - 4]]:23
// CHECK: expected a constant value: an integer or float with its type

// -----

stack.var @x : i64 register
stack.var @y : i64 register
stack.program @main(@x) -> (@y) {
  stack.write y = @x
  stack.halt
}

// CHECK: invalid.mlir:[[# @LINE - 4]]:15
// CHECK: expected a variable, written as a symbol: @y

// -----

stack.var @x : i64 register
stack.program @main(@x) -> (@x) {
  stack.push @x,
  stack.halt
}

// CHECK: invalid.mlir:[[# @LINE - 4]]:3
// CHECK: expected a variable after ',': a symbol such as @x

// -----

stack.var @x : i64 register
stack.program @main(x) -> (@x) {
  stack.halt
}

// CHECK: invalid.mlir:[[# @LINE - 4]]:21
// CHECK: expected a variable, written as a symbol: @x

// -----

stack.var @x : register

// CHECK: invalid.mlir:[[# @LINE - 2]]:16
// CHECK: expected the variable's per-member type, such as i64, f32 or tensor<3xf64>
