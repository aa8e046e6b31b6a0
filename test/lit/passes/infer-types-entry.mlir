// RUN: not abir-opt %s -p 'infer-types{arg-types=i32}' 2>&1 | filecheck %s
// RUN: abir-opt %s -p 'infer-types{entry=c arg-types=i32}' | filecheck %s --check-prefix=NAMED
// Without `entry=` and an `abir.entry` attribute, infer-types takes the module's only function,
// or the only one no other function calls. Here @b and @c both qualify (@a is called by @b):
// the diagnostic names them and says how to choose.

builtin.module {
  functional.func @a(%x: !functional.unknown) -> !functional.unknown {
    functional.return %x : !functional.unknown
  }
  functional.func @b(%x: !functional.unknown) -> !functional.unknown {
    %y = functional.call @a(%x) : (!functional.unknown) -> !functional.unknown
    functional.return %y : !functional.unknown
  }
  functional.func @c(%x: !functional.unknown) -> !functional.unknown {
    functional.return %x : !functional.unknown
  }
}

// CHECK: abir-opt: error: cannot choose the entry function among @b, @c (the module has no `abir.entry` attribute); name it with the pass option entry, e.g. infer-types{entry=b}

// NAMED-LABEL: builtin.module attributes {abir.entry = "c"} {
// NAMED:         functional.func @c(%x: i32) -> i32 {
// NAMED-NEXT:      functional.return %x : i32
