// RUN: abir-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// One chunk per verifier check of the functional dialect.

functional.func @f(%x: i64) -> i64 {
  %r = functional.call @missing(%x) : (i64) -> i64
  functional.return %r : i64
}

// CHECK: call to @missing, but no function @missing is defined in this module

// -----

functional.opaque @helper "lambda x: x"
functional.func @f(%x: i64) -> i64 {
  %r = functional.call @helper(%x) : (i64) -> i64
  functional.return %r : i64
}

// CHECK: call to @helper, which is a functional.opaque, not a functional.func

// -----

functional.func @f(%x: i64) -> i64 {
  %r = functional.call @f(%x, %x) : (i64, i64) -> i64
  functional.return %r : i64
}

// CHECK: call to @f passes 2 argument(s), but @f takes 1

// -----

functional.func @f(%x: i64, %y: f64) -> i64 {
  %r = functional.call @f(%y, %x) : (f64, i64) -> i64
  functional.return %r : i64
}

// CHECK: arguments of call to @f: value 0 has type f64, but i64 is expected

// -----

functional.func @f(%x: i64) -> i64 {
  %r:2 = functional.call @f(%x) : (i64) -> (i64, i64)
  functional.return %r#0 : i64
}

// CHECK: call to @f expects 2 result(s), but @f returns 1

// -----

functional.func @f(%x: i64) -> i64 {
  %r = functional.call @f(%x) : (i64) -> f32
  functional.return %x : i64
}

// CHECK: results of call to @f: value 0 has type f32, but i64 is expected

// -----

functional.func @f(%x: i64) -> f64 {
  functional.return %x : i64
}

// CHECK: return from @f does not match its result types: value 0 has type i64, but f64 is expected

// -----

functional.func @f(%x: i64) -> (i64, i64) {
  functional.return %x : i64
}

// CHECK: return from @f does not match its result types: expected 2 value(s), got 1

// -----

func.func @f(%x: i64) -> i64 {
  "functional.return"(%x) : (i64) -> ()
}

// CHECK: 'functional.return' expects parent op 'functional.func'

// -----

functional.func @f(%x: i64) -> i64 {
  %r = functional.prim "frobnicate"(%x) : (i64) -> i64
  functional.return %r : i64
}

// CHECK: unknown builtin prim "frobnicate"; use an Array-API name such as "add" or "less"

// -----

functional.func @f(%x: i64) -> i64 {
  %r = functional.prim "add"(%x) : (i64) -> i64
  functional.return %r : i64
}

// CHECK: builtin prim "add" takes 2 operand(s), got 1

// -----

functional.func @f(%x: i64) -> i64 {
  %r:2 = functional.prim "negative"(%x) : (i64) -> (i64, i64)
  functional.return %r#0 : i64
}

// CHECK: builtin prim "negative" has exactly one result, got 2

// -----

functional.func @f(%x: i64) -> i64 {
  %r = functional.prim @helper(%x) : (i64) -> i64
  functional.return %r : i64
}

// CHECK: prim @helper has no `functional.opaque @helper` declaration in this module

// -----

functional.func @f(%x: i64) -> i64 {
  %r = functional.prim @f(%x) : (i64) -> i64
  functional.return %r : i64
}

// CHECK: prim @f names a functional.func; an opaque prim must name a `functional.opaque` declaration

// -----

functional.opaque @helper "lambda x: x"
functional.func @f(%x: i64) -> i64 {
  %r = "functional.prim"(%x) <{fn = "negative", callee = @helper}> : (i64) -> i64
  functional.return %r : i64
}

// CHECK: a prim names exactly one of a builtin operation or an opaque callable

// -----

functional.func @f(%x: i64) -> i64 {
  %r = "functional.prim"(%x) : (i64) -> i64
  functional.return %r : i64
}

// CHECK: a prim names exactly one of a builtin operation or an opaque callable

// -----

functional.func @f(%x: i64) -> i64 {
  %r = functional.prim add(%x, %x) : (i64, i64) -> i64
  functional.return %r : i64
}

// CHECK: string literal expected for the prim: a builtin name such as "add", or @callee

// -----

functional.func @f() -> i64 {
  %c = "functional.constant"() <{value = 1 : i32}> : () -> i64
  functional.return %c : i64
}

// CHECK: attribute i64 expected from variable 'T', but got i32

// -----

functional.func @f() -> index {
  %c = functional.constant 1 : index
  functional.return %c : index
}

// CHECK: constant of type index is not a per-member value; use a bool, integer or float scalar type (i1, i32, i64, f32, f64, ...) or a static tensor of one

// -----

functional.func @f() -> i64 {
  %c = functional.constant "one"
  functional.return %c : i64
}

// CHECK: invalid.mlir:[[# @LINE - 4]]:28
// CHECK-NEXT: functional.constant "one"
// CHECK: "one" is not a constant value; expected an integer or float with its type (`2 : i64`, `0.5 : f64`), `true`, `false`, or `dense<[1, 2]> : tensor<2xi64>`

// -----

functional.func @f(%x: i64) -> i64

// CHECK: function @f has no body

// -----

"functional.func"() <{sym_name = "f", function_type = (i64) -> f64}> ({
^bb0(%x: f64):
  "functional.return"(%x) : (f64) -> ()
}) : () -> ()

// CHECK: function @f: entry block arguments ['f64'] differ from the parameter types ['i64']

// -----

"functional.func"() <{sym_name = "f", function_type = (i1) -> ()}> ({
^bb0(%x: i1):
  "cf.cond_br"(%x) [^bb0, ^bb1] <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (i1) -> ()
^bb1:
  "functional.return"() : () -> ()
}) : () -> ()

// CHECK: function @f: the entry block is the target of a branch; the entry block cannot be a branch target (branch to a separate loop-header block instead)

// -----

functional.func @f() -> i64 {
  %c = functional.constant weak two : i64
  functional.return %c : i64
}

// CHECK: invalid.mlir:[[# @LINE - 4]]:33
// CHECK: expected a constant value: an integer or float with its type

// -----

functional.func @f(%x: i64) -> i64 {
  %r = functional.call f(%x) : (i64) -> i64
  functional.return %r : i64
}

// CHECK: invalid.mlir:[[# @LINE - 4]]:24
// CHECK: expected the called function's symbol, such as @fib

// -----

functional.opaque @helper 42

// CHECK: invalid.mlir:[[# @LINE - 2]]:27
// CHECK: expected the callable's source text as a string literal, such as "lambda x: x"
