// RUN: not abir-opt %s -p infer-types 2>&1 | filecheck %s

// Two returns of different types: strict join, the message names the function and both types.
builtin.module {
  functional.func @j(%c: i1, %x: i32, %y: f64) -> !functional.unknown {
    cf.cond_br %c, ^a, ^b
  ^a:
    functional.return %x : i32
  ^b:
    functional.return %y : f64
  }
}

// CHECK-NOT: Traceback
// CHECK: abir-opt: error: in @j, result #0: values of types i32 and f64 meet; they must agree

