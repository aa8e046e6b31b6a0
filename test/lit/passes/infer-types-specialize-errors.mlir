// RUN: not abir-opt %s -p infer-types 2>&1 | filecheck %s

// One function called with nine different argument types: beyond the limit of eight
// specializations, the error names the function, every signature so far and the ninth call.
builtin.module {
  functional.func @many(%a: i8, %b: i16, %c: i32, %d: i64, %e: ui8, %f: f16, %g: f32, %h: f64, %i: i1) -> !functional.unknown {
    %ra = functional.call @ident(%a) : (i8) -> !functional.unknown
    %rb = functional.call @ident(%b) : (i16) -> !functional.unknown
    %rc = functional.call @ident(%c) : (i32) -> !functional.unknown
    %rd = functional.call @ident(%d) : (i64) -> !functional.unknown
    %re = functional.call @ident(%e) : (ui8) -> !functional.unknown
    %rf = functional.call @ident(%f) : (f16) -> !functional.unknown
    %rg = functional.call @ident(%g) : (f32) -> !functional.unknown
    %rh = functional.call @ident(%h) : (f64) -> !functional.unknown
    %ri = functional.call @ident(%i) : (i1) -> !functional.unknown
    functional.return %ra : !functional.unknown
  }
  functional.func @ident(%v: !functional.unknown) -> !functional.unknown {
    functional.return %v : !functional.unknown
  }
}

// CHECK-NOT: Traceback
// CHECK: abir-opt: error: @ident is called with more than 8 different argument type signatures, the most abir specializes one function for; signatures so far: @ident(i8); @ident.t1(i16); @ident.t2(i32); @ident.t3(i64); @ident.t4(ui8); @ident.t5(f16); @ident.t6(f32); @ident.t7(f64); a call in @many now passes (i1). Convert the arguments to fewer distinct types before the calls
