// RUN: abir-opt %s -p fuse-blocks --split-input-file | filecheck %s
// fuse-blocks threads the branches its duplication exposes: a branch whose condition holds the same value on every path into its block becomes a jump to the arm taken (KnownBooleans), and a block that only one jump then enters is merged into it.

// A loop with two exits into the test `if not ok` after it: one sets ok = false, the other leaves ok as it was set before the loop (true; the loop does not write it). Each exit absorbs the test and jumps to the arm it takes; the test's block is erased, the big arm only one exit reaches is merged into it.
builtin.module {
  stack.var @f.n : i64
  stack.var @f.i : i64
  stack.var @f.one : i64
  stack.var @f.ok : i1
  stack.var @f.c : i1
  stack.var @f.nok : i1
  stack.var @f.result0 : i64
  stack.program @f(@f.n) -> (@f.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.constant @f.ok = true
    stack.constant @f.i = 0 : i64
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.goto ^bb3 {function = "f"}
  ^bb3:
    stack.prim "add"(@f.i, @f.i) -> (@f.i)
    stack.prim "add"(@f.i, @f.i) -> (@f.i)
    stack.prim "add"(@f.i, @f.i) -> (@f.i)
    stack.prim "add"(@f.i, @f.i) -> (@f.i)
    stack.prim "add"(@f.i, @f.i) -> (@f.i)
    stack.prim "add"(@f.i, @f.i) -> (@f.i)
    stack.prim "add"(@f.i, @f.i) -> (@f.i)
    stack.prim "add"(@f.i, @f.i) -> (@f.i)
    stack.prim "greater"(@f.i, @f.n) -> (@f.c)
    stack.branch @f.c, ^bb4, ^bb5 {function = "f"}
  ^bb4:
    stack.constant @f.ok = false
    stack.goto ^bb7 {function = "f"}
  ^bb5:
    stack.prim "equal"(@f.i, @f.n) -> (@f.c)
    stack.branch @f.c, ^bb6, ^bb3 {function = "f"}
  ^bb6:
    stack.goto ^bb7 {function = "f"}
  ^bb7:
    stack.prim "logical_not"(@f.ok) -> (@f.nok)
    stack.branch @f.nok, ^bb8, ^bb9 {function = "f"}
  ^bb8:
    stack.write @f.result0 = @f.n
    stack.indirect_goto {function = "f"}
  ^bb9:
    stack.prim "multiply"(@f.i, @f.i) -> (@f.i)
    stack.prim "multiply"(@f.i, @f.i) -> (@f.i)
    stack.prim "multiply"(@f.i, @f.i) -> (@f.i)
    stack.prim "multiply"(@f.i, @f.i) -> (@f.i)
    stack.prim "multiply"(@f.i, @f.i) -> (@f.i)
    stack.prim "multiply"(@f.i, @f.i) -> (@f.i)
    stack.prim "multiply"(@f.i, @f.i) -> (@f.i)
    stack.prim "multiply"(@f.i, @f.i) -> (@f.i)
    stack.prim "multiply"(@f.i, @f.i) -> (@f.result0)
    stack.indirect_goto {function = "f"}
  }
}

// CHECK-LABEL: stack.program @f(@f.n) -> (@f.result0) {
// CHECK:         stack.branch @f.c, ^[[EXIT1:.*]], ^[[NEXT:.*]] {function = "f"}
// CHECK-NEXT:  ^[[EXIT1]]:
// CHECK-NEXT:    stack.constant @f.ok = false
// CHECK-NEXT:    stack.prim "logical_not"(@f.ok) -> (@f.nok)
// CHECK-NEXT:    stack.write @f.result0 = @f.n
// CHECK-NEXT:    stack.indirect_goto {function = "f"}
// CHECK-NEXT:  ^[[NEXT]]:
// CHECK-NEXT:    stack.prim "equal"(@f.i, @f.n) -> (@f.c)
// CHECK-NEXT:    stack.branch @f.c, ^[[EXIT2:.*]], ^{{.*}} {function = "f"}
// CHECK-NEXT:  ^[[EXIT2]]:
// CHECK-NEXT:    stack.prim "logical_not"(@f.ok) -> (@f.nok)
// CHECK-NEXT:    stack.prim "multiply"(@f.i, @f.i) -> (@f.i)
// CHECK-COUNT-7: stack.prim "multiply"(@f.i, @f.i) -> (@f.i)
// CHECK-NEXT:    stack.prim "multiply"(@f.i, @f.i) -> (@f.result0)
// CHECK-NEXT:    stack.indirect_goto {function = "f"}
// CHECK-NEXT:  }

// -----

// Not threaded: a join whose paths set the condition differently, and a value set before a call and tested at the call's return block (the callee's code is not followed).
builtin.module {
  stack.var @f.n : i64
  stack.var @f.ok : i1
  stack.var @f.c : i1
  stack.var @f.result0 : i64
  stack.program @f(@f.n) -> (@f.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.prim "greater"(@f.n, @f.n) -> (@f.c)
    stack.branch @f.c, ^bb3, ^bb4 {function = "f"}
  ^bb3:
    stack.constant @f.ok = false
    stack.goto ^bb5 {function = "f"}
  ^bb4:
    stack.constant @f.ok = true
    stack.goto ^bb5 {function = "f"}
  ^bb5:
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.branch @f.ok, ^bb6, ^bb7 {function = "f"}
  ^bb6:
    stack.constant @f.ok = true
    stack.push_goto ^bb7, ^bb2 {function = "f"}
  ^bb7:
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.prim "sin"(@f.n) -> (@f.n)
    stack.branch @f.ok, ^bb8, ^bb9 {function = "f"}
  ^bb8:
    stack.write @f.result0 = @f.n
    stack.indirect_goto {function = "f"}
  ^bb9:
    stack.prim "cos"(@f.n) -> (@f.result0)
    stack.indirect_goto {function = "f"}
  }
}

// CHECK-LABEL: stack.program @f(@f.n) -> (@f.result0) {
// CHECK:         stack.constant @f.ok = false
// CHECK-NEXT:    stack.goto ^[[JOIN:.*]] {function = "f"}
// CHECK:         stack.constant @f.ok = true
// CHECK-NEXT:    stack.goto ^[[JOIN]] {function = "f"}
// CHECK-NEXT:  ^[[JOIN]]:
// CHECK:         stack.branch @f.ok, ^[[CALL:.*]], ^[[RET:.*]] {function = "f"}
// CHECK-NEXT:  ^[[CALL]]:
// CHECK-NEXT:    stack.constant @f.ok = true
// CHECK-NEXT:    stack.push_goto ^[[RET]], ^{{.*}} {function = "f"}
// CHECK-NEXT:  ^[[RET]]:
// CHECK:         stack.branch @f.ok, ^{{.*}}, ^{{.*}} {function = "f"}
