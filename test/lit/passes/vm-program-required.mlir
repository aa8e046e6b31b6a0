// RUN: abir-opt %s -p merge-identical-blocks --verify-diagnostics | filecheck %s --check-prefix=MERGE
// RUN: abir-opt %s -p order-sweeps --verify-diagnostics | filecheck %s --check-prefix=ORDER
// RUN: abir-opt %s -p form-superblocks --verify-diagnostics | filecheck %s --check-prefix=SUPER
// The passes on vm programs fail with a diagnostic naming the pass on a module without one.
builtin.module {
  vm.var @k : i64 register
}

// MERGE: merge-identical-blocks needs a module with one vm.program, found 0
// ORDER: order-sweeps needs a module with one vm.program, found 0
// SUPER: form-superblocks needs a module with one vm.program, found 0
