// RUN: abir-opt %s -p 'inline-calls{simplify=true}' --split-input-file | filecheck %s
// RUN: abir-opt %s -p inline-calls --split-input-file | filecheck %s --check-prefix=PLAIN
// inline-calls{simplify=true} (the default pipeline's) runs simplify-functional after inlining a call; without the option the inlined constants stay as they were copied.
// Two calls of a helper adding a constant: after inlining, simplify-functional shares the copied constants (CSE) and merges the pass-through blocks.
builtin.module attributes {abir.entry = "twice"} {
  functional.func @twice(%a: i64) -> i64 {
    %x = functional.call @inc(%a) : (i64) -> i64
    %y = functional.call @inc(%x) : (i64) -> i64
    functional.return %y : i64
  }
  functional.func @inc(%n: i64) -> i64 {
    %c1 = functional.constant 1 : i64
    %r = functional.prim "add"(%n, %c1) : (i64, i64) -> i64
    functional.return %r : i64
  }
}
// CHECK:      functional.func @twice(%a: i64) -> i64 {
// CHECK-NEXT:   %{{.*}} = functional.constant 1 : i64
// CHECK-NEXT:   %[[X:.*]] = functional.prim "add"(%a, %{{.*}}) : (i64, i64) -> i64
// CHECK-NEXT:   %[[Y:.*]] = functional.prim "add"(%[[X]], %{{.*}}) : (i64, i64) -> i64
// CHECK-NEXT:   functional.return %[[Y]] : i64
// CHECK-NEXT: }
// CHECK-NOT:  functional.func @inc
// PLAIN-COUNT-2: functional.constant 1 : i64
// PLAIN-NOT:     functional.func @inc

// -----

// Nothing to inline (a recursive function stays a call): the module is left as it is, simplify-functional does not run (the duplicate constant stays).
builtin.module attributes {abir.entry = "down"} {
  functional.func @down(%n: i64) -> i64 {
    %c1 = functional.constant 1 : i64
    %c1b = functional.constant 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> i64
    %r = functional.call @down(%m) : (i64) -> i64
    %s = functional.prim "add"(%r, %c1b) : (i64, i64) -> i64
    functional.return %s : i64
  }
}
// CHECK-COUNT-2: functional.constant 1 : i64
// CHECK:         functional.call @down
