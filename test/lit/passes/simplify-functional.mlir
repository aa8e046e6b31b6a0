// RUN: abir-opt %s -p 'simplify-functional' --split-input-file | filecheck %s
// Constant folding (2 * 3 = 6), CSE of equal constants and prims within a block, DCE of unused ops without effects, identity astype dropped; xDSL's canonicalize forwards pass-through blocks, turns value-only diamonds into arith.select (then functional where), propagates a branch condition's truth, and drops unreachable blocks.

// Folding, CSE, DCE.
builtin.module {
  functional.func @s(%x: i64) -> i64 {
    %c2 = functional.constant 2 : i64
    %c3 = functional.constant 3 : i64
    %six = functional.prim "multiply"(%c2, %c3) : (i64, i64) -> i64
    %again = functional.constant 2 : i64
    %y = functional.prim "add"(%x, %six) : (i64, i64) -> i64
    %z = functional.prim "add"(%x, %six) : (i64, i64) -> i64
    %unused = functional.prim "negative"(%x) : (i64) -> i64
    %p = functional.prim "greater"(%y, %again) : (i64, i64) -> i1
    %b = functional.prim "astype"(%p) : (i1) -> i1
    cf.cond_br %b, ^t, ^f
  ^t:
    %w = functional.prim "multiply"(%y, %z) : (i64, i64) -> i64
    functional.return %w : i64
  ^f:
    functional.return %c2 : i64
  }
}

// CHECK-LABEL: functional.func @s(%x: i64) -> i64 {
// CHECK-NEXT:    %[[C2:.*]] = functional.constant 2 : i64
// CHECK-NEXT:    %[[SIX:.*]] = functional.constant 6 : i64
// CHECK-NEXT:    %[[Y:.*]] = functional.prim "add"(%x, %[[SIX]]) : (i64, i64) -> i64
// CHECK-NOT:     "negative"
// CHECK-NOT:     "astype"
// CHECK-NEXT:    %[[P:.*]] = functional.prim "greater"(%[[Y]], %[[C2]]) : (i64, i64) -> i1
// CHECK-NEXT:    cf.cond_br %[[P]], ^[[T:.*]], ^[[F:.*]]
// CHECK-NEXT:  ^[[T]]:
// CHECK-NEXT:    %[[W:.*]] = functional.prim "multiply"(%[[Y]], %[[Y]]) : (i64, i64) -> i64
// CHECK-NEXT:    functional.return %[[W]] : i64
// CHECK-NEXT:  ^[[F]]:
// CHECK-NEXT:    functional.return %[[C2]] : i64

// -----

// Array prims have no effects either: equal ones are merged, unused ones dropped. An opaque
// prim's effects are unknown: it stays, used or not, and equal ones are not merged.
builtin.module {
  functional.opaque @helper "helper(x)"
  functional.func @a(%x: tensor<3xf64>, %i: i64) -> f64 {
    %r1 = functional.prim "getitem" <{index = ["?"]}>(%x, %i) : (tensor<3xf64>, i64) -> f64
    %r2 = functional.prim "getitem" <{index = ["?"]}>(%x, %i) : (tensor<3xf64>, i64) -> f64
    %unused = functional.prim "sum"(%x) : (tensor<3xf64>) -> f64
    %h1 = functional.prim @helper(%x) : (tensor<3xf64>) -> f64
    %h2 = functional.prim @helper(%x) : (tensor<3xf64>) -> f64
    %s = functional.prim "add"(%r1, %r2) : (f64, f64) -> f64
    %t = functional.prim "add"(%s, %h1) : (f64, f64) -> f64
    functional.return %t : f64
  }
}

// CHECK-LABEL: functional.func @a(%x: tensor<3xf64>, %i: i64) -> f64 {
// CHECK-NEXT:    %[[R:.*]] = functional.prim "getitem" <{index = ["?"]}>(%x, %i)
// CHECK-NOT:     "getitem"
// CHECK-NOT:     "sum"
// CHECK-NEXT:    %[[H1:.*]] = functional.prim @helper(%x)
// CHECK-NEXT:    functional.prim @helper(%x)
// CHECK-NEXT:    %[[S:.*]] = functional.prim "add"(%[[R]], %[[R]])
// CHECK-NEXT:    functional.prim "add"(%[[S]], %[[H1]])

// -----

// A value-only diamond becomes where; an unreachable block is removed.
builtin.module {
  functional.func @pt(%c: i1, %x: i64, %y: i64) -> i64 {
    cf.cond_br %c, ^fwd, ^join(%y : i64)
  ^fwd:
    cf.br ^join(%x : i64)
  ^join(%v: i64):
    functional.return %v : i64
  ^dead:
    %u = functional.constant 5 : i64
    functional.return %u : i64
  }
}

// CHECK-LABEL: functional.func @pt(%c: i1, %x: i64, %y: i64) -> i64 {
// CHECK-NEXT:    %[[V:.*]] = functional.prim "where"(%c, %x, %y) : (i1, i64, i64) -> i64
// CHECK-NEXT:    functional.return %[[V]] : i64
// CHECK-NEXT:  }

// -----

// The branch condition is known true in its then-block: astype(true) folds to 1.
builtin.module {
  functional.func @tp(%c: i1, %x: i64) -> i64 {
    cf.cond_br %c, ^t, ^f
  ^t:
    %y = functional.prim "astype"(%c) : (i1) -> i64
    %z = functional.prim "add"(%x, %y) : (i64, i64) -> i64
    functional.return %z : i64
  ^f:
    functional.return %x : i64
  }
}

// CHECK-LABEL: functional.func @tp(%c: i1, %x: i64) -> i64 {
// CHECK-NEXT:    cf.cond_br %c, ^[[T:.*]], ^[[F:.*]]
// CHECK-NEXT:  ^[[T]]:
// CHECK-NEXT:    %[[ONE:.*]] = functional.constant 1 : i64
// CHECK-NEXT:    %[[Z:.*]] = functional.prim "add"(%x, %[[ONE]]) : (i64, i64) -> i64
// CHECK-NEXT:    functional.return %[[Z]] : i64
// CHECK-NEXT:  ^[[F]]:
// CHECK-NEXT:    functional.return %x : i64
