// RUN: not abir-opt %s 2>&1 | filecheck %s
// A function whose body is an empty block fails xDSL's structural check of the block, which
// comes without an op: abir-opt points at the function, on its first line only.

functional.func @a(%x: i64) -> i64 {
  functional.return %x : i64
}
functional.func @c(%x: i64) -> i64 {  // a comment after the op's first token is not marked
}

// CHECK:      abir-opt: error: {{.*}}verify-empty-body.mlir:[[# @LINE - 3]]:1
// CHECK-NEXT: functional.func @c(%x: i64) -> i64 {  // a comment
// CHECK-NEXT: {{^}}^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^{{$}}
// CHECK-NEXT: Operation functional.func contains empty block in single-block region that expects at least a terminator
// CHECK-NOT:  in: @
