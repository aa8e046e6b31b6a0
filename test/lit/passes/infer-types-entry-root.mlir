// RUN: abir-opt %s -p 'infer-types{arg-types=i32}' | filecheck %s
// Without `entry=` and an `abir.entry` attribute, and with no function typed, infer-types takes
// the only function no other function calls: @main (its helper @twice is called), whichever
// comes first in the module.

builtin.module {
  functional.func @twice(%x: !functional.unknown) -> !functional.unknown {
    %y = functional.prim "add"(%x, %x) : (!functional.unknown, !functional.unknown) -> !functional.unknown
    functional.return %y : !functional.unknown
  }
  functional.func @main(%x: !functional.unknown) -> !functional.unknown {
    %y = functional.call @twice(%x) : (!functional.unknown) -> !functional.unknown
    functional.return %y : !functional.unknown
  }
}

// CHECK:       builtin.module attributes {abir.entry = "main"} {
// CHECK-LABEL:   functional.func @twice(%x: i32) -> i32 {
// CHECK-NEXT:      %[[Y:[^ ,:)]+]] = functional.prim "add"(%x, %x) : (i32, i32) -> i32
// CHECK-NEXT:      functional.return %[[Y]] : i32
// CHECK-LABEL:   functional.func @main(%x: i32) -> i32 {
// CHECK-NEXT:      %[[Y:[^ ,:)]+]] = functional.call @twice(%x) : (i32) -> i32
// CHECK-NEXT:      functional.return %[[Y]] : i32
