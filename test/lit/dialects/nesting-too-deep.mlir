// RUN: python -c "print('functional.opaque @f \"\" {deep = ' + '[' * 5000 + ']' * 5000 + '}')" > %t.mlir
// RUN: not abir-opt %t.mlir 2>&1 | filecheck %s
// RUN: not abir-run %t.mlir --arg '[1]' 2>&1 | filecheck %s --check-prefix=RUNNER
// Text nested deeper than Python's recursion limit is a diagnostic naming the file, not a
// RecursionError traceback.

// CHECK-NOT: Traceback
// CHECK: abir-opt: error: {{.*}}.mlir: the text nests too deeply to read or transform; flatten it
// RUNNER: abir-run: error: {{.*}}.mlir: the text nests too deeply to parse; flatten it
