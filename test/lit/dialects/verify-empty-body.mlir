// RUN: not abir-opt %s 2>&1 | filecheck %s
// A function whose body is an empty block fails xDSL's structural check of the block, which
// comes without an op: abir-opt names the function.

functional.func @a(%x: i64) -> i64 {
  functional.return %x : i64
}
functional.func @c(%x: i64) -> i64 {
}

// CHECK:      abir-opt: error: Operation functional.func contains empty block in single-block region that expects at least a terminator
// CHECK-NEXT:   at: "functional.func"() <{sym_name = "c", function_type = (i64) -> i64}> ({
