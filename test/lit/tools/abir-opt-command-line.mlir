// A command line abir-opt cannot act on is one diagnostic naming the pass, option or file and a
// fix, with exit status 1 (`not`), never a traceback.
// RUN: not abir-opt %s -p infer-type 2>&1 | filecheck %s --check-prefix=PASS
// RUN: not abir-opt %s -p 'infer-types{entyr=rpow}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: not abir-opt %s -p 'infer-types{entry=rpow arg-types=}' 2>&1 | filecheck %s --check-prefix=SYNTAX
// RUN: not abir-opt %s -p infer-types 2>&1 | filecheck %s --check-prefix=HINT
// RUN: abir-opt %s -p 'infer-types{entry=rpow arg-types=f64,i64}' | filecheck %s --check-prefix=TYPED
// RUN: not abir-opt %s.missing 2>&1 | filecheck %s --check-prefix=FILE

// PASS-NOT: Traceback
// PASS: abir-opt: error: unknown pass 'infer-type'; did you mean infer-types? abir-opt --list-abir-passes lists abir's passes
// OPTION-NOT: Traceback
// OPTION: abir-opt: error: pass infer-types has no option 'entyr'; did you mean entry? its options: entry, arg-types.
// SYNTAX-NOT: Traceback
// SYNTAX: abir-opt: error: Error parsing pass pipeline specification:
// SYNTAX: Pass options: {{.*}} the values of a list option (arg-types: one type per parameter) separated by commas
// HINT-NOT: Traceback
// HINT: abir-opt: error: @rpow has untyped parameters {{.*}} -p 'infer-types{entry=rpow arg-types=i64,i64}' (one type per parameter, separated by commas)
// TYPED: functional.func @rpow(%x: f64, %n: i64) -> f64
// FILE-NOT: Traceback
// FILE: abir-opt: error: cannot read the input file {{.*}}abir-opt-command-line.mlir.missing: No such file or directory

functional.func @rpow(%x: !functional.unknown, %n: !functional.unknown) -> !functional.unknown {
  %y = functional.prim "pow"(%x, %n) : (!functional.unknown, !functional.unknown) -> !functional.unknown
  functional.return %y : !functional.unknown
}
