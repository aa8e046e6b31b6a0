// abir-run asks only for the opaque callables the entry reaches, and calls each as the prim's
// text records the call: `shape=(3,)` reaches abir.random.uniform (three draws per member).
// RUN: abir-run %s --entry walk --arg 'uint32:[1, 2]' --arg 'uint32:[0, 5]' --opaque key_0=abir.random:key --opaque uniform_1=abir.random:uniform | filecheck %s
// RUN: abir-run %s --entry other --arg '[0.0, 1.0]' | filecheck %s --check-prefix=OTHER
// RUN: not abir-run %s --entry walk --arg 'uint32:[1]' --arg 'uint32:[0]' 2>&1 | filecheck %s --check-prefix=MISSING

// CHECK: result 0: float64 [1.140461548768761, 2.1268088472846944]
// OTHER: result 0: float64 [1.0, 2.718281828459045]
// MISSING-NOT: Traceback
// MISSING: abir-run: error: the module declares the opaque prim(s) @key_0, @uniform_1, whose Python callables text cannot carry
// MISSING-NOT: helper_2

functional.opaque @key_0 "abir.random.key(seed)"
functional.opaque @uniform_1 "abir.random.uniform(key, n, shape=(3,))"
functional.opaque @helper_2 "helper(x)"
functional.func @walk(%seed: !functional.unknown, %n: !functional.unknown) -> !functional.unknown {
  %key = functional.prim @key_0(%seed) : (!functional.unknown) -> !functional.unknown
  %x = functional.prim @uniform_1(%key, %n) : (!functional.unknown, !functional.unknown) -> !functional.unknown
  %s = functional.prim "sum"(%x) : (!functional.unknown) -> !functional.unknown
  functional.return %s : !functional.unknown
}
functional.func @other(%x: !functional.unknown) -> !functional.unknown {
  %y = functional.prim "exp"(%x) : (!functional.unknown) -> !functional.unknown
  functional.return %y : !functional.unknown
}
functional.func @unused(%x: !functional.unknown) -> !functional.unknown {
  %y = functional.prim @helper_2(%x) : (!functional.unknown) -> !functional.unknown
  functional.return %y : !functional.unknown
}
