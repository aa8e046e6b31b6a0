// RUN: not abir-opt %s -p stack-optimize 2>&1 | filecheck %s --check-prefix=OPTIMIZE
// RUN: not abir-opt %s -p schedule-blocks 2>&1 | filecheck %s --check-prefix=SCHEDULE
// RUN: not abir-opt %s -p stack-to-vm 2>&1 | filecheck %s --check-prefix=TO-VM
// RUN: not abir-opt %s -p 'lower-calls{entry=g}' 2>&1 | filecheck %s --check-prefix=ENTRY
// The passes on stack programs fail with a diagnostic, not a traceback, on a module without one
// (here a functional one: lower-calls makes the stack program), and lower-calls names the
// functions an unknown entry could be.
builtin.module {
  functional.func @f(%x: i64) -> i64 {
    functional.return %x : i64
  }
}

// OPTIMIZE: abir-opt: error: expected one stack.program in the module, found 0; the stack passes run on what lower-calls makes of a typed functional module
// OPTIMIZE-NOT: Traceback
// SCHEDULE: abir-opt: error: expected one stack.program in the module, found 0
// TO-VM: abir-opt: error: expected one stack.program in the module, found 0
// ENTRY: abir-opt: error: no function @g in the module; name one of f
