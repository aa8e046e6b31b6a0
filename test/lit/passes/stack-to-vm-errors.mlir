// RUN: not abir-opt %s -p stack-to-vm 2>&1 | filecheck %s
// A temporary read in a block before that block writes it (a hand-written or hand-edited
// allocation) is an error at the op that reads it (its line in the input), not a Python traceback.

builtin.module {
  stack.var @n : i64 register
  stack.var @t : i64 temporary
  stack.program @walk(@n) -> (@n) {
    stack.write @t = @n
    stack.goto ^next
  ^next:
    stack.write @n = @t
    stack.halt
  }
}

// CHECK:      abir-opt: error: {{.*}}stack-to-vm-errors.mlir:[[# @LINE - 5]]:5
// CHECK-NEXT:     stack.write @n = @t
// CHECK-NEXT:     ^^^^^^^^^^^^^^^^^^^
// CHECK-NEXT:     temporary @t is read before it is written in its block; a temporary holds a value only within one block (declare it register or stack, or let allocate-storage choose)
// CHECK-NEXT:   in: @walk
