// RUN: abir-opt %s | abir-opt | filecheck %s
// RUN: ABIR_ROUNDTRIP
// RUN: ABIR_GENERIC_ROUNDTRIP

// Every op of the vm dialect, in custom form, with each syntax variant: both storage
// classes, multi-variable push/pop/peek, bool/float/dense constants, builtin and opaque prims
// (several results, none), block attributes, a side exit and all five terminators.

functional.opaque @split "lambda x: (x, -x)"
functional.opaque @log "print"

vm.var @n : i64 stack
vm.var @acc : f64 register
vm.var @v : tensor<3xf32> stack {note = "x"}
vm.var @flag : i1 register

vm.program @main(@n, @v) -> (@acc, @flag) {
  vm.block 0 {
    vm.call 1, return 4
  }
  vm.block 1 attributes {kind = "entry"} {
    %n = vm.read @n : i64
    %c2 = vm.constant 2 : i64
    %t = vm.constant true
    %d = vm.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
    %f = vm.constant -1.5 : f64 {tag}
    %cond = vm.prim "greater"(%n, %c2) : (i64, i64) -> i1
    %a, %b = vm.prim @split(%f) : (f64) -> (f64, f64)
    vm.prim @log() : () -> ()
    %s = vm.prim "add"(%a, %b) {fast} : (f64, f64) -> f64
    vm.write @acc, %s : f64
    vm.write @v, %d {tag} : tensor<3xf32>
    vm.write @flag, %t : i1
    vm.push @n, @v
    vm.pop @n
    vm.peek @n, @v {tag}
    vm.exit_if %t, 4 {tag}
    vm.branch %cond, 2, 3
  }
  vm.block 2 {
    vm.jump 3 {tag}
  }
  vm.block 3 {
    vm.return
  }
  vm.block 4 {
    vm.halt
  }
}

vm.program @tiny() -> () attributes {note = "attrs"} {
  vm.block 0 {
    vm.jump 0
  }
}

// CHECK: builtin.module {
// CHECK-NEXT:   functional.opaque @split "lambda x: (x, -x)"
// CHECK-NEXT:   functional.opaque @log "print"
// CHECK-NEXT:   vm.var @n : i64 stack
// CHECK-NEXT:   vm.var @acc : f64 register
// CHECK-NEXT:   vm.var @v : tensor<3xf32> stack {note = "x"}
// CHECK-NEXT:   vm.var @flag : i1 register
// CHECK-LABEL: vm.program @main(@n, @v) -> (@acc, @flag) {
// CHECK-NEXT:     vm.block 0 {
// CHECK-NEXT:       vm.call 1, return 4
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 1 attributes {kind = "entry"} {
// CHECK-NEXT:       %n = vm.read @n : i64
// CHECK-NEXT:       %c2 = vm.constant 2 : i64
// CHECK-NEXT:       %t = vm.constant true
// CHECK-NEXT:       %d = vm.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT:       %f = vm.constant -1.500000e+00 : f64 {tag}
// CHECK-NEXT:       %cond = vm.prim "greater"(%n, %c2) : (i64, i64) -> i1
// CHECK-NEXT:       %a, %b = vm.prim @split(%f) : (f64) -> (f64, f64)
// CHECK-NEXT:       vm.prim @log() : () -> ()
// CHECK-NEXT:       %s = vm.prim "add"(%a, %b) {fast} : (f64, f64) -> f64
// CHECK-NEXT:       vm.write @acc, %s : f64
// CHECK-NEXT:       vm.write @v, %d {tag} : tensor<3xf32>
// CHECK-NEXT:       vm.write @flag, %t : i1
// CHECK-NEXT:       vm.push @n, @v
// CHECK-NEXT:       vm.pop @n
// CHECK-NEXT:       vm.peek @n, @v {tag}
// CHECK-NEXT:       vm.exit_if %t, 4 {tag}
// CHECK-NEXT:       vm.branch %cond, 2, 3
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 2 {
// CHECK-NEXT:       vm.jump 3 {tag}
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 3 {
// CHECK-NEXT:       vm.return
// CHECK-NEXT:     }
// CHECK-NEXT:     vm.block 4 {
// CHECK-NEXT:       vm.halt
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-LABEL: vm.program @tiny() -> () attributes {note = "attrs"} {
// CHECK-NEXT:     vm.block 0 {
// CHECK-NEXT:       vm.jump 0
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }

// CHECK-GENERIC: "builtin.module"() ({
// CHECK-GENERIC-NEXT:   "functional.opaque"() <{sym_name = "split", source = "lambda x: (x, -x)"}> : () -> ()
// CHECK-GENERIC-NEXT:   "functional.opaque"() <{sym_name = "log", source = "print"}> : () -> ()
// CHECK-GENERIC-NEXT:   "vm.var"() <{sym_name = "n", type = i64, storage = #stack<storage stack>}> : () -> ()
// CHECK-GENERIC-NEXT:   "vm.var"() <{sym_name = "acc", type = f64, storage = #stack<storage register>}> : () -> ()
// CHECK-GENERIC-NEXT:   "vm.var"() <{sym_name = "v", type = tensor<3xf32>, storage = #stack<storage stack>}> {note = "x"} : () -> ()
// CHECK-GENERIC-NEXT:   "vm.var"() <{sym_name = "flag", type = i1, storage = #stack<storage register>}> : () -> ()
// CHECK-GENERIC-LABEL: "vm.program"() <{sym_name = "main", inputs = [@n, @v], outputs = [@acc, @flag]}> ({
// CHECK-GENERIC-NEXT:     "vm.block"() <{index = 0 : i64}> ({
// CHECK-GENERIC-NEXT:       "vm.call"() <{target = 1 : i64, return_target = 4 : i64}> : () -> ()
// CHECK-GENERIC-NEXT:     }) : () -> ()
// CHECK-GENERIC-NEXT:     "vm.block"() <{index = 1 : i64}> ({
// CHECK-GENERIC-NEXT:       %n = "vm.read"() <{var = @n}> : () -> i64
// CHECK-GENERIC-NEXT:       %c2 = "vm.constant"() <{value = 2 : i64}> : () -> i64
// CHECK-GENERIC-NEXT:       %t = "vm.constant"() <{value = true}> : () -> i1
// CHECK-GENERIC-NEXT:       %d = "vm.constant"() <{value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>}> : () -> tensor<3xf32>
// CHECK-GENERIC-NEXT:       %f = "vm.constant"() <{value = -1.500000e+00 : f64}> {tag} : () -> f64
// CHECK-GENERIC-NEXT:       %cond = "vm.prim"(%n, %c2) <{fn = "greater"}> : (i64, i64) -> i1
// CHECK-GENERIC-NEXT:       %a, %b = "vm.prim"(%f) <{callee = @split}> : (f64) -> (f64, f64)
// CHECK-GENERIC-NEXT:       "vm.prim"() <{callee = @log}> : () -> ()
// CHECK-GENERIC-NEXT:       %s = "vm.prim"(%a, %b) <{fn = "add"}> {fast} : (f64, f64) -> f64
// CHECK-GENERIC-NEXT:       "vm.write"(%s) <{var = @acc}> : (f64) -> ()
// CHECK-GENERIC-NEXT:       "vm.write"(%d) <{var = @v}> {tag} : (tensor<3xf32>) -> ()
// CHECK-GENERIC-NEXT:       "vm.write"(%t) <{var = @flag}> : (i1) -> ()
// CHECK-GENERIC-NEXT:       "vm.push"() <{vars = [@n, @v]}> : () -> ()
// CHECK-GENERIC-NEXT:       "vm.pop"() <{vars = [@n]}> : () -> ()
// CHECK-GENERIC-NEXT:       "vm.peek"() <{vars = [@n, @v]}> {tag} : () -> ()
// CHECK-GENERIC-NEXT:       "vm.exit_if"(%t) <{target = 4 : i64}> {tag} : (i1) -> ()
// CHECK-GENERIC-NEXT:       "vm.branch"(%cond) <{then_target = 2 : i64, else_target = 3 : i64}> : (i1) -> ()
// CHECK-GENERIC-NEXT:     }) {kind = "entry"} : () -> ()
// CHECK-GENERIC-NEXT:     "vm.block"() <{index = 2 : i64}> ({
// CHECK-GENERIC-NEXT:       "vm.jump"() <{target = 3 : i64}> {tag} : () -> ()
// CHECK-GENERIC-NEXT:     }) : () -> ()
// CHECK-GENERIC-NEXT:     "vm.block"() <{index = 3 : i64}> ({
// CHECK-GENERIC-NEXT:       "vm.return"() : () -> ()
// CHECK-GENERIC-NEXT:     }) : () -> ()
// CHECK-GENERIC-NEXT:     "vm.block"() <{index = 4 : i64}> ({
// CHECK-GENERIC-NEXT:       "vm.halt"() : () -> ()
// CHECK-GENERIC-NEXT:     }) : () -> ()
// CHECK-GENERIC-NEXT:   }) : () -> ()
// CHECK-GENERIC-LABEL: "vm.program"() <{sym_name = "tiny", inputs = [], outputs = []}> ({
// CHECK-GENERIC-NEXT:     "vm.block"() <{index = 0 : i64}> ({
// CHECK-GENERIC-NEXT:       "vm.jump"() <{target = 0 : i64}> : () -> ()
// CHECK-GENERIC-NEXT:     }) : () -> ()
// CHECK-GENERIC-NEXT:   }) {note = "attrs"} : () -> ()
// CHECK-GENERIC-NEXT: }) : () -> ()
