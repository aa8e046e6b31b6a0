// RUN: abir-opt %s | abir-opt | filecheck %s
// RUN: ABIR_ROUNDTRIP
// RUN: ABIR_GENERIC_ROUNDTRIP

// The builtin array prims: the operation's static parameters are the `params` dictionary, printed
// after the name (`"sum" <{axis = 0 : i64}>`) and a property in generic form.

functional.func @arrays(%x: tensor<3x4xf64>, %v: tensor<4xf64>, %i: i64, %f: f64) -> f64 {
  %row = functional.prim "getitem" <{index = ["?"]}>(%x, %i) : (tensor<3x4xf64>, i64) -> tensor<4xf64>
  %part = functional.prim "getitem" <{index = ["1:", "...", "newaxis", "::-1"]}>(%x) : (tensor<3x4xf64>) -> tensor<2x1x4xf64>
  %cols = functional.prim "getitem" <{index = [":", "[0, 2]"]}>(%x) : (tensor<3x4xf64>) -> tensor<3x2xf64>
  %set = functional.prim "setitem" <{index = ["?", "-1"]}>(%x, %f, %i) : (tensor<3x4xf64>, f64, i64) -> tensor<3x4xf64>
  %sums = functional.prim "sum" <{axis = 0 : i64, keepdims}>(%x) : (tensor<3x4xf64>) -> tensor<1x4xf64>
  %total = functional.prim "sum" <{axis = array<i64: 0, 1>}>(%x) : (tensor<3x4xf64>) -> f64
  %sd = functional.prim "std" <{ddof = 1 : i64}>(%v) : (tensor<4xf64>) -> f64
  %am = functional.prim "argmax"(%v) : (tensor<4xf64>) -> i64
  %cs = functional.prim "cumulative_sum" <{axis = 1 : i64}>(%x) : (tensor<3x4xf64>) -> tensor<3x4xf64>
  %mv = functional.prim "matmul"(%x, %v) : (tensor<3x4xf64>, tensor<4xf64>) -> tensor<3xf64>
  %dot = functional.prim "dot"(%v, %v) : (tensor<4xf64>, tensor<4xf64>) -> f64
  %nrm = functional.prim "vector_norm"(%v) : (tensor<4xf64>) -> f64
  %t = functional.prim "permute_dims" <{axes = array<i64: 1, 0>}>(%x) : (tensor<3x4xf64>) -> tensor<4x3xf64>
  %flat = functional.prim "reshape" <{shape = array<i64: -1>}>(%x) : (tensor<3x4xf64>) -> tensor<12xf64>
  %cat = functional.prim "concat"(%v, %row) : (tensor<4xf64>, tensor<4xf64>) -> tensor<8xf64>
  %st = functional.prim "stack" <{axis = 0 : i64}>(%v, %row) : (tensor<4xf64>, tensor<4xf64>) -> tensor<2x4xf64>
  %n = functional.prim "dim" <{axis = -1 : i64}>(%x) : (tensor<3x4xf64>) -> i64
  %k = functional.prim "size"(%x) : (tensor<3x4xf64>) -> i64
  %ok = functional.prim "check_scalar" <{message = "f must be a scalar"}>(%f) : (f64) -> f64
  functional.return %ok : f64
}

// CHECK-LABEL: functional.func @arrays
// CHECK-NEXT:    %row = functional.prim "getitem" <{index = ["?"]}>(%x, %i) : (tensor<3x4xf64>, i64) -> tensor<4xf64>
// CHECK-NEXT:    %part = functional.prim "getitem" <{index = ["1:", "...", "newaxis", "::-1"]}>(%x)
// CHECK-NEXT:    %cols = functional.prim "getitem" <{index = [":", "[0, 2]"]}>(%x)
// CHECK-NEXT:    %set = functional.prim "setitem" <{index = ["?", "-1"]}>(%x, %f, %i)
// CHECK-NEXT:    %sums = functional.prim "sum" <{axis = 0 : i64, keepdims}>(%x)
// CHECK-NEXT:    %total = functional.prim "sum" <{axis = array<i64: 0, 1>}>(%x)
// CHECK-NEXT:    %sd = functional.prim "std" <{ddof = 1 : i64}>(%v)
// CHECK-NEXT:    %am = functional.prim "argmax"(%v) : (tensor<4xf64>) -> i64
// CHECK-NEXT:    %cs = functional.prim "cumulative_sum" <{axis = 1 : i64}>(%x)
// CHECK-NEXT:    %mv = functional.prim "matmul"(%x, %v)
// CHECK-NEXT:    %dot = functional.prim "dot"(%v, %v)
// CHECK-NEXT:    %nrm = functional.prim "vector_norm"(%v)
// CHECK-NEXT:    %t = functional.prim "permute_dims" <{axes = array<i64: 1, 0>}>(%x)
// CHECK-NEXT:    %flat = functional.prim "reshape" <{shape = array<i64: -1>}>(%x)
// CHECK-NEXT:    %cat = functional.prim "concat"(%v, %row)
// CHECK-NEXT:    %st = functional.prim "stack" <{axis = 0 : i64}>(%v, %row)
// CHECK-NEXT:    %n = functional.prim "dim" <{axis = -1 : i64}>(%x)
// CHECK-NEXT:    %k = functional.prim "size"(%x)
// CHECK-NEXT:    %ok = functional.prim "check_scalar" <{message = "f must be a scalar"}>(%f)

// CHECK-GENERIC:      %row = "functional.prim"(%x, %i) <{fn = "getitem", params = {index = ["?"]}}> : (tensor<3x4xf64>, i64) -> tensor<4xf64>
// CHECK-GENERIC:      %sums = "functional.prim"(%x) <{fn = "sum", params = {axis = 0 : i64, keepdims}}> : (tensor<3x4xf64>) -> tensor<1x4xf64>
// CHECK-GENERIC:      %mv = "functional.prim"(%x, %v) <{fn = "matmul"}> : (tensor<3x4xf64>, tensor<4xf64>) -> tensor<3xf64>
// CHECK-GENERIC:      %t = "functional.prim"(%x) <{fn = "permute_dims", params = {axes = array<i64: 1, 0>}}> : (tensor<3x4xf64>) -> tensor<4x3xf64>
