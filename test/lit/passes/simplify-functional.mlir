// RUN: abir-opt %s -p 'simplify-functional' --split-input-file | filecheck %s
// Constant folding (2 * 3 = 6), CSE of equal constants and prims within a block, DCE of unused pure ops, identity astype dropped; xDSL's canonicalize forwards pass-through blocks, turns value-only diamonds into arith.select (then functional where), propagates a branch condition's truth, and drops unreachable blocks.

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

// CHECK:      builtin.module {
// CHECK-NEXT:   functional.func @s(%x: i64) -> i64 {
// CHECK-NEXT:     %c2 = functional.constant 2 : i64
// CHECK-NEXT:     %six = functional.constant 6 : i64
// CHECK-NEXT:     %y = functional.prim "add"(%x, %six) : (i64, i64) -> i64
// CHECK-NEXT:     %p = functional.prim "greater"(%y, %c2) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %p, ^t, ^f
// CHECK-NEXT:   ^t:
// CHECK-NEXT:     %w = functional.prim "multiply"(%y, %y) : (i64, i64) -> i64
// CHECK-NEXT:     functional.return %w : i64
// CHECK-NEXT:   ^f:
// CHECK-NEXT:     functional.return %c2 : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }

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

// CHECK:      builtin.module {
// CHECK-NEXT:   functional.func @pt(%c: i1, %x: i64, %y: i64) -> i64 {
// CHECK-NEXT:     %v = functional.prim "where"(%c, %x, %y) : (i1, i64, i64) -> i64
// CHECK-NEXT:     functional.return %v : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }

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

// CHECK:      builtin.module {
// CHECK-NEXT:   functional.func @tp(%c: i1, %x: i64) -> i64 {
// CHECK-NEXT:     cf.cond_br %c, ^t, ^f
// CHECK-NEXT:   ^t:
// CHECK-NEXT:     %y = functional.constant 1 : i64
// CHECK-NEXT:     %z = functional.prim "add"(%x, %y) : (i64, i64) -> i64
// CHECK-NEXT:     functional.return %z : i64
// CHECK-NEXT:   ^f:
// CHECK-NEXT:     functional.return %x : i64
// CHECK-NEXT:   }
// CHECK-NEXT: }
