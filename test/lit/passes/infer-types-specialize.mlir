// RUN: abir-opt %s -p infer-types --split-input-file | filecheck %s

// A helper called with an int and a float: one specialization per signature, the first
// signature seen keeps the plain name. The weak literal `3` fits the i32 specialization (a
// literal takes the type of its own kind it meets, NEP 50), so it needs no third one.
builtin.module {
  functional.func @main(%i: i32, %x: f64) -> (!functional.unknown, !functional.unknown, !functional.unknown, !functional.unknown) {
    %a = functional.call @scale(%i) : (i32) -> !functional.unknown
    %b = functional.call @scale(%x) : (f64) -> !functional.unknown
    %c3 = functional.constant weak 3 : i64
    %c = functional.call @scale(%c3) : (i64) -> !functional.unknown
    %d = functional.call @scale(%i) : (i32) -> !functional.unknown
    functional.return %a, %b, %c, %d : !functional.unknown, !functional.unknown, !functional.unknown, !functional.unknown
  }
  functional.func @scale(%v: !functional.unknown) -> !functional.unknown {
    %c2 = functional.constant weak 2 : i64
    %r = functional.prim "multiply"(%v, %c2) : (!functional.unknown, i64) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
}

// CHECK-LABEL: functional.func @main(%i: i32, %x: f64) -> (i32, f64, i32, i32) {
// CHECK-NEXT:   %a = functional.call @scale(%i) : (i32) -> i32
// CHECK-NEXT:   %b = functional.call @scale.t1(%x) : (f64) -> f64
// CHECK-NEXT:   %c3 = functional.constant 3 : i32
// CHECK-NEXT:   %c = functional.call @scale(%c3) : (i32) -> i32
// CHECK-NEXT:   %d = functional.call @scale(%i) : (i32) -> i32
// CHECK-LABEL: functional.func @scale(%v: i32) -> i32 {
// CHECK-NEXT:   %c2 = functional.constant 2 : i32
// CHECK-NEXT:   %r = functional.prim "multiply"(%v, %c2) : (i32, i32) -> i32
// CHECK-LABEL: functional.func @scale.t1(%v: f64) -> f64 {
// CHECK-NEXT:   %c2 = functional.constant 2.000000e+00 : f64
// CHECK-NEXT:   %r = functional.prim "multiply"(%v, %c2) : (f64, f64) -> f64
// CHECK-NOT:  functional.func @scale

// -----

// A weak int literal where only a float specialization exists: its own (weak) specialization,
// so `scale(3)` computes with Python-int semantics, as plain Python would.
builtin.module {
  functional.func @lit(%x: f64) -> (!functional.unknown, !functional.unknown) {
    %b = functional.call @scale(%x) : (f64) -> !functional.unknown
    %c3 = functional.constant weak 3 : i64
    %c = functional.call @scale(%c3) : (i64) -> !functional.unknown
    functional.return %b, %c : !functional.unknown, !functional.unknown
  }
  functional.func @scale(%v: !functional.unknown) -> !functional.unknown {
    %c2 = functional.constant weak 2 : i64
    %r = functional.prim "multiply"(%v, %c2) : (!functional.unknown, i64) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
}

// CHECK-LABEL: functional.func @lit(%x: f64) -> (f64, i64) {
// CHECK-NEXT:   %b = functional.call @scale(%x) : (f64) -> f64
// CHECK-NEXT:   %c3 = functional.constant 3 : i64
// CHECK-NEXT:   %c = functional.call @scale.t1(%c3) : (i64) -> i64
// CHECK-LABEL: functional.func @scale(%v: f64) -> f64 {
// CHECK-LABEL: functional.func @scale.t1(%v: i64) -> i64 {
// CHECK-NEXT:   %c2 = functional.constant 2 : i64
// CHECK-NEXT:   %r = functional.prim "multiply"(%v, %c2) : (i64, i64) -> i64
// CHECK-NOT:  functional.func @scale

// -----

// A scalar and a vector argument: the vector specialization broadcasts the literal per member.
builtin.module {
  functional.func @sv(%s: f32, %v: tensor<3xf32>) -> (!functional.unknown, !functional.unknown) {
    %a = functional.call @scale(%s) : (f32) -> !functional.unknown
    %b = functional.call @scale(%v) : (tensor<3xf32>) -> !functional.unknown
    functional.return %a, %b : !functional.unknown, !functional.unknown
  }
  functional.func @scale(%v: !functional.unknown) -> !functional.unknown {
    %c2 = functional.constant weak 2 : i64
    %r = functional.prim "multiply"(%v, %c2) : (!functional.unknown, i64) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
}

// CHECK-LABEL: functional.func @sv(%s: f32, %v: tensor<3xf32>) -> (f32, tensor<3xf32>) {
// CHECK-NEXT:   %a = functional.call @scale(%s) : (f32) -> f32
// CHECK-NEXT:   %b = functional.call @scale.t1(%v) : (tensor<3xf32>) -> tensor<3xf32>
// CHECK-LABEL: functional.func @scale(%v: f32) -> f32 {
// CHECK-LABEL: functional.func @scale.t1(%v: tensor<3xf32>) -> tensor<3xf32> {
// CHECK-NEXT:   %c2 = functional.constant 2.000000e+00 : f32
// CHECK-NEXT:   %r = functional.prim "multiply"(%v, %c2) : (tensor<3xf32>, f32) -> tensor<3xf32>

// -----

// A recursion whose argument type changes once (`x / 2` makes a float of an int): the recursive
// call of the i64 version goes to the f64 version, which then calls itself.
builtin.module {
  functional.func @halvings(%x: i64, %n: i64) -> !functional.unknown {
    %c1 = functional.constant weak 1 : i64
    %small = functional.prim "less"(%x, %c1) : (i64, i64) -> i1
    cf.cond_br %small, ^done, ^rec
  ^done:
    functional.return %n : i64
  ^rec:
    %c2 = functional.constant weak 2 : i64
    %h = functional.prim "divide"(%x, %c2) : (i64, i64) -> !functional.unknown
    %n1 = functional.prim "add"(%n, %c1) : (i64, i64) -> !functional.unknown
    %r = functional.call @halvings(%h, %n1) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
}

// CHECK-LABEL: functional.func @halvings(%x: i64, %n: i64) -> i64 {
// CHECK:        %h = functional.prim "divide"(%x, %{{.*}}) : (i64, i64) -> f64
// CHECK:        %r = functional.call @halvings.t1(%h, %n1) : (f64, i64) -> i64
// CHECK-LABEL: functional.func @halvings.t1(%x: f64, %n: i64) -> i64 {
// CHECK:        %h = functional.prim "divide"(%x, %{{.*}}) : (f64, f64) -> f64
// CHECK:        %r = functional.call @halvings.t1(%h, %n1) : (f64, i64) -> i64

// -----

// Mutual recursion reaching a polymorphic leaf with an int (from @ping) and a float (from @pong).
builtin.module {
  functional.func @ping(%n: i64, %x: f64) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %stop = functional.prim "less_equal"(%n, %c0) : (i64, i64) -> i1
    cf.cond_br %stop, ^done, ^rec
  ^done:
    functional.return %x : f64
  ^rec:
    %c1 = functional.constant weak 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (i64, i64) -> !functional.unknown
    %l = functional.call @leaf(%n) : (i64) -> !functional.unknown
    %y = functional.prim "add"(%x, %l) : (f64, !functional.unknown) -> !functional.unknown
    %r = functional.call @pong(%m, %y) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
  functional.func @pong(%n: !functional.unknown, %x: !functional.unknown) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %stop = functional.prim "less_equal"(%n, %c0) : (!functional.unknown, i64) -> !functional.unknown
    %b = functional.prim "astype"(%stop) : (!functional.unknown) -> i1
    cf.cond_br %b, ^done, ^rec
  ^done:
    functional.return %x : !functional.unknown
  ^rec:
    %c1 = functional.constant weak 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
    %l = functional.call @leaf(%x) : (!functional.unknown) -> !functional.unknown
    %r = functional.call @ping(%m, %l) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
  functional.func @leaf(%v: !functional.unknown) -> !functional.unknown {
    %c2 = functional.constant weak 2 : i64
    %r = functional.prim "multiply"(%v, %c2) : (!functional.unknown, i64) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
}

// CHECK-LABEL: functional.func @ping(%n: i64, %x: f64) -> f64 {
// CHECK:        %l = functional.call @leaf(%n) : (i64) -> i64
// CHECK:        %r = functional.call @pong(%m, %y) : (i64, f64) -> f64
// CHECK-LABEL: functional.func @pong(%n: i64, %x: f64) -> f64 {
// CHECK:        %l = functional.call @leaf.t1(%x) : (f64) -> f64
// CHECK:        %r = functional.call @ping(%m, %l) : (i64, f64) -> f64
// CHECK-LABEL: functional.func @leaf(%v: i64) -> i64 {
// CHECK-LABEL: functional.func @leaf.t1(%v: f64) -> f64 {

// -----

// A tail recursion started with a literal accumulator: the weak `0` and the i32 `acc + n` share
// one specialization (the weak parameter widens to i32) instead of two.
builtin.module {
  functional.func @acc_entry(%n: i32) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %r = functional.call @acc_rec(%n, %c0) : (i32, i64) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
  functional.func @acc_rec(%n: !functional.unknown, %acc: !functional.unknown) -> !functional.unknown {
    %c0 = functional.constant weak 0 : i64
    %stop = functional.prim "less_equal"(%n, %c0) : (!functional.unknown, i64) -> i1
    cf.cond_br %stop, ^done, ^rec
  ^done:
    functional.return %acc : !functional.unknown
  ^rec:
    %c1 = functional.constant weak 1 : i64
    %m = functional.prim "subtract"(%n, %c1) : (!functional.unknown, i64) -> !functional.unknown
    %s = functional.prim "add"(%acc, %n) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    %r = functional.call @acc_rec(%m, %s) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %r : !functional.unknown
  }
}

// CHECK-LABEL: functional.func @acc_entry(%n: i32) -> i32 {
// CHECK-NEXT:   %c0 = functional.constant 0 : i32
// CHECK-NEXT:   %r = functional.call @acc_rec(%n, %c0) : (i32, i32) -> i32
// CHECK-LABEL: functional.func @acc_rec(%n: i32, %acc: i32) -> i32 {
// CHECK:        %r = functional.call @acc_rec(%m, %s) : (i32, i32) -> i32
// CHECK-NOT:  functional.func
