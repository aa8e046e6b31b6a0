// RUN: abir-opt %s | abir-opt | filecheck %s
// RUN: ABIR_ROUNDTRIP
// RUN: ABIR_GENERIC_ROUNDTRIP

// Every op of the functional dialect, in custom form, with each syntax variant.

functional.opaque @helper "def helper(x):\n    return x, x * 2"
functional.opaque @scale "lambda x: 2.0 * x"

functional.func @all_ops(%x: i64, %y: f64, %u: !functional.unknown, %t: tensor<3xf64>) -> (i64, f64) {
  %c2 = functional.constant 2 : i64
  %w = functional.constant weak 1 : i64
  %wf = functional.constant weak 1.5 : f64
  %f32 = functional.constant -2.5 : f32
  %i32 = functional.constant -7 : i32
  %ui8 = functional.constant 255 : ui8
  %b = functional.constant true
  %bf = functional.constant false
  %wb = functional.constant weak true
  %d = functional.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf64>
  %di = functional.constant dense<7> : tensor<2x2xi32>
  %db = functional.constant dense<[true, false]> : tensor<2xi1>
  %s = functional.prim "add"(%x, %c2) : (i64, i64) -> i64
  %n = functional.prim "negative"(%y) : (f64) -> f64
  %sel = functional.prim "where"(%b, %x, %w) : (i1, i64, i64) -> i64
  %cv = functional.prim "astype"(%x) : (i64) -> f64
  %h:2 = functional.prim @helper(%t) : (tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
  %sc = functional.prim @scale(%y) {note = "opaque"} : (f64) -> f64
  functional.prim @scale() : () -> ()
  %uu = functional.prim "multiply"(%u, %u) : (!functional.unknown, !functional.unknown) -> !functional.unknown
  %r:2 = functional.call @all_ops(%s, %n, %uu, %d) {tag = "x"} : (i64, f64, !functional.unknown, tensor<3xf64>) -> (i64, f64)
  %ru:2 = functional.call @all_ops(%u, %u, %u, %u) : (!functional.unknown, !functional.unknown, !functional.unknown, !functional.unknown) -> (!functional.unknown, !functional.unknown)
  functional.call @no_results() : () -> ()
  %cond = functional.prim "less"(%x, %c2) : (i64, i64) -> i1
  cf.cond_br %cond, ^a(%sel : i64), ^b
^a(%v: i64):
  functional.return %v, %cv : i64, f64
^b:
  cf.br ^a(%s : i64)
}

functional.func @no_results() {
  functional.return
}

functional.func @with_attrs(%a: i1) -> i1 attributes {note = 1 : i64} {
  functional.return %a : i1 {tag}
}

functional.func @unknown_result(%a: !functional.unknown) -> !functional.unknown {
  functional.return %a : !functional.unknown
}

// CHECK: builtin.module {
// CHECK-NEXT:   functional.opaque @helper "def helper(x):\0A    return x, x * 2"
// CHECK-NEXT:   functional.opaque @scale "lambda x: 2.0 * x"
// CHECK-LABEL: functional.func @all_ops(%x: i64, %y: f64, %u: !functional.unknown, %t: tensor<3xf64>) -> (i64, f64) {
// CHECK-NEXT:     %c2 = functional.constant 2 : i64
// CHECK-NEXT:     %w = functional.constant weak 1 : i64
// CHECK-NEXT:     %wf = functional.constant weak 1.500000e+00 : f64
// CHECK-NEXT:     %f32 = functional.constant -2.500000e+00 : f32
// CHECK-NEXT:     %i32 = functional.constant -7 : i32
// CHECK-NEXT:     %ui8 = functional.constant 255 : ui8
// CHECK-NEXT:     %b = functional.constant true
// CHECK-NEXT:     %bf = functional.constant false
// CHECK-NEXT:     %wb = functional.constant weak true
// CHECK-NEXT:     %d = functional.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf64>
// CHECK-NEXT:     %di = functional.constant dense<7> : tensor<2x2xi32>
// CHECK-NEXT:     %db = functional.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT:     %s = functional.prim "add"(%x, %c2) : (i64, i64) -> i64
// CHECK-NEXT:     %n = functional.prim "negative"(%y) : (f64) -> f64
// CHECK-NEXT:     %sel = functional.prim "where"(%b, %x, %w) : (i1, i64, i64) -> i64
// CHECK-NEXT:     %cv = functional.prim "astype"(%x) : (i64) -> f64
// CHECK-NEXT:     %h, %h_1 = functional.prim @helper(%t) : (tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
// CHECK-NEXT:     %sc = functional.prim @scale(%y) {note = "opaque"} : (f64) -> f64
// CHECK-NEXT:     functional.prim @scale() : () -> ()
// CHECK-NEXT:     %uu = functional.prim "multiply"(%u, %u) : (!functional.unknown, !functional.unknown) -> !functional.unknown
// CHECK-NEXT:     %r, %r_1 = functional.call @all_ops(%s, %n, %uu, %d) {tag = "x"} : (i64, f64, !functional.unknown, tensor<3xf64>) -> (i64, f64)
// CHECK-NEXT:     %ru, %ru_1 = functional.call @all_ops(%u, %u, %u, %u) : (!functional.unknown, !functional.unknown, !functional.unknown, !functional.unknown) -> (!functional.unknown, !functional.unknown)
// CHECK-NEXT:     functional.call @no_results() : () -> ()
// CHECK-NEXT:     %cond = functional.prim "less"(%x, %c2) : (i64, i64) -> i1
// CHECK-NEXT:     cf.cond_br %cond, ^a(%sel : i64), ^b
// CHECK-NEXT:   ^a(%v: i64):
// CHECK-NEXT:     functional.return %v, %cv : i64, f64
// CHECK-NEXT:   ^b:
// CHECK-NEXT:     cf.br ^a(%s : i64)
// CHECK-NEXT:   }
// CHECK-LABEL: functional.func @no_results() {
// CHECK-NEXT:     functional.return
// CHECK-NEXT:   }
// CHECK-LABEL: functional.func @with_attrs(%a: i1) -> i1 attributes {note = 1 : i64} {
// CHECK-NEXT:     functional.return %a : i1 {tag}
// CHECK-NEXT:   }
// CHECK-LABEL: functional.func @unknown_result(%a: !functional.unknown) -> !functional.unknown {
// CHECK-NEXT:     functional.return %a : !functional.unknown
// CHECK-NEXT:   }
// CHECK-NEXT: }

// CHECK-GENERIC: "builtin.module"() ({
// CHECK-GENERIC-NEXT:   "functional.opaque"() <{sym_name = "helper", source = "def helper(x):\0A    return x, x * 2"}> : () -> ()
// CHECK-GENERIC-NEXT:   "functional.opaque"() <{sym_name = "scale", source = "lambda x: 2.0 * x"}> : () -> ()
// CHECK-GENERIC-LABEL: "functional.func"() <{sym_name = "all_ops", function_type = (i64, f64, !functional.unknown, tensor<3xf64>) -> (i64, f64)}> ({
// CHECK-GENERIC-NEXT:   ^bb0(%x: i64, %y: f64, %u: !functional.unknown, %t: tensor<3xf64>):
// CHECK-GENERIC-NEXT:     %c2 = "functional.constant"() <{value = 2 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     %w = "functional.constant"() <{weak, value = 1 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:     %wf = "functional.constant"() <{weak, value = 1.500000e+00 : f64}> : () -> f64
// CHECK-GENERIC-NEXT:     %f32 = "functional.constant"() <{value = -2.500000e+00 : f32}> : () -> f32
// CHECK-GENERIC-NEXT:     %i32 = "functional.constant"() <{value = -7 : i32}> : () -> i32
// CHECK-GENERIC-NEXT:     %ui8 = "functional.constant"() <{value = 255 : ui8}> : () -> ui8
// CHECK-GENERIC-NEXT:     %b = "functional.constant"() <{value = true}> : () -> i1
// CHECK-GENERIC-NEXT:     %bf = "functional.constant"() <{value = false}> : () -> i1
// CHECK-GENERIC-NEXT:     %wb = "functional.constant"() <{weak, value = true}> : () -> i1
// CHECK-GENERIC-NEXT:     %d = "functional.constant"() <{value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf64>}> : () -> tensor<3xf64>
// CHECK-GENERIC-NEXT:     %di = "functional.constant"() <{value = dense<7> : tensor<2x2xi32>}> : () -> tensor<2x2xi32>
// CHECK-GENERIC-NEXT:     %db = "functional.constant"() <{value = dense<[true, false]> : tensor<2xi1>}> : () -> tensor<2xi1>
// CHECK-GENERIC-NEXT:     %s = "functional.prim"(%x, %c2) <{fn = "add"}> : (i64, i64) -> i64
// CHECK-GENERIC-NEXT:     %n = "functional.prim"(%y) <{fn = "negative"}> : (f64) -> f64
// CHECK-GENERIC-NEXT:     %sel = "functional.prim"(%b, %x, %w) <{fn = "where"}> : (i1, i64, i64) -> i64
// CHECK-GENERIC-NEXT:     %cv = "functional.prim"(%x) <{fn = "astype"}> : (i64) -> f64
// CHECK-GENERIC-NEXT:     %h, %h_1 = "functional.prim"(%t) <{callee = @helper}> : (tensor<3xf64>) -> (tensor<3xf64>, tensor<3xf64>)
// CHECK-GENERIC-NEXT:     %sc = "functional.prim"(%y) <{callee = @scale}> {note = "opaque"} : (f64) -> f64
// CHECK-GENERIC-NEXT:     "functional.prim"() <{callee = @scale}> : () -> ()
// CHECK-GENERIC-NEXT:     %uu = "functional.prim"(%u, %u) <{fn = "multiply"}> : (!functional.unknown, !functional.unknown) -> !functional.unknown
// CHECK-GENERIC-NEXT:     %r, %r_1 = "functional.call"(%s, %n, %uu, %d) <{callee = @all_ops}> {tag = "x"} : (i64, f64, !functional.unknown, tensor<3xf64>) -> (i64, f64)
// CHECK-GENERIC-NEXT:     %ru, %ru_1 = "functional.call"(%u, %u, %u, %u) <{callee = @all_ops}> : (!functional.unknown, !functional.unknown, !functional.unknown, !functional.unknown) -> (!functional.unknown, !functional.unknown)
// CHECK-GENERIC-NEXT:     "functional.call"() <{callee = @no_results}> : () -> ()
// CHECK-GENERIC-NEXT:     %cond = "functional.prim"(%x, %c2) <{fn = "less"}> : (i64, i64) -> i1
// CHECK-GENERIC-NEXT:     "cf.cond_br"(%cond, %sel) [^a, ^b] <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (i1, i64) -> ()
// CHECK-GENERIC-NEXT:   ^a(%v: i64):
// CHECK-GENERIC-NEXT:     "functional.return"(%v, %cv) : (i64, f64) -> ()
// CHECK-GENERIC-NEXT:   ^b:
// CHECK-GENERIC-NEXT:     "cf.br"(%s) [^a] : (i64) -> ()
// CHECK-GENERIC-NEXT:   }) : () -> ()
// CHECK-GENERIC-LABEL: "functional.func"() <{sym_name = "no_results", function_type = () -> ()}> ({
// CHECK-GENERIC-NEXT:     "functional.return"() : () -> ()
// CHECK-GENERIC-NEXT:   }) : () -> ()
// CHECK-GENERIC-LABEL: "functional.func"() <{sym_name = "with_attrs", function_type = (i1) -> i1}> ({
// CHECK-GENERIC-NEXT:   ^bb0(%a: i1):
// CHECK-GENERIC-NEXT:     "functional.return"(%a) {tag} : (i1) -> ()
// CHECK-GENERIC-NEXT:   }) {note = 1 : i64} : () -> ()
// CHECK-GENERIC-LABEL: "functional.func"() <{sym_name = "unknown_result", function_type = (!functional.unknown) -> !functional.unknown}> ({
// CHECK-GENERIC-NEXT:   ^bb0(%a: !functional.unknown):
// CHECK-GENERIC-NEXT:     "functional.return"(%a) : (!functional.unknown) -> ()
// CHECK-GENERIC-NEXT:   }) : () -> ()
// CHECK-GENERIC-NEXT: }) : () -> ()
