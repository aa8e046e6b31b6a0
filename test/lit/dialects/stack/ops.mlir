// RUN: abir-opt %s | abir-opt | filecheck %s
// RUN: ABIR_ROUNDTRIP
// RUN: ABIR_GENERIC_ROUNDTRIP

// Every op of the stack dialect, in custom form, with each syntax variant: every storage
// class and none, multi-variable write/push/pop/peek, weak/bool/dense constants, builtin and
// opaque prims (several results, none), and all five terminators.

functional.opaque @pair "lambda x: (x, x)"
functional.opaque @log "print"

stack.var @n : i64 stack
stack.var @a : i64 register
stack.var @b : i64
stack.var @t : i64 temporary
stack.var @d : f64 dead
stack.var @cond : i1 register
stack.var @v : tensor<3xf32> stack
stack.var @m : tensor<2x2xi32> register
stack.var @res : i64 register {note = "x"}

stack.program @fib(@n, @v) -> (@res, @a) {
^entry:
  stack.push_goto ^exit, ^body
^exit:
  stack.halt
^body:
  stack.constant @a = 2 : i64
  stack.constant @b = weak 1 : i64
  stack.constant @cond = true
  stack.constant @cond = weak false
  stack.constant @v = dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  stack.constant @m = dense<0> : tensor<2x2xi32> {tag}
  stack.prim "greater"(@n, @a) -> (@cond)
  stack.prim "where"(@cond, @n, @a) -> (@b) {note = 1 : i64}
  stack.prim @pair(@n) -> (@a, @b)
  stack.prim @log() -> ()
  stack.write @a, @b = @b, @a
  stack.write @t = @n {tag}
  stack.push @n, @v
  stack.pop @n
  stack.peek @n, @v {tag}
  stack.branch @cond, ^then, ^else
^then:
  stack.goto ^else {tag}
^else:
  stack.indirect_goto
}

stack.program @empty_io() -> () attributes {note = "attrs"} {
  stack.halt
}

// CHECK: builtin.module {
// CHECK-NEXT:   functional.opaque @pair "lambda x: (x, x)"
// CHECK-NEXT:   functional.opaque @log "print"
// CHECK-NEXT:   stack.var @n : i64 stack
// CHECK-NEXT:   stack.var @a : i64 register
// CHECK-NEXT:   stack.var @b : i64
// CHECK-NEXT:   stack.var @t : i64 temporary
// CHECK-NEXT:   stack.var @d : f64 dead
// CHECK-NEXT:   stack.var @cond : i1 register
// CHECK-NEXT:   stack.var @v : tensor<3xf32> stack
// CHECK-NEXT:   stack.var @m : tensor<2x2xi32> register
// CHECK-NEXT:   stack.var @res : i64 register {note = "x"}
// CHECK-LABEL: stack.program @fib(@n, @v) -> (@res, @a) {
// CHECK-NEXT:     stack.push_goto ^exit, ^body
// CHECK-NEXT:   ^exit:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^body:
// CHECK-NEXT:     stack.constant @a = 2 : i64
// CHECK-NEXT:     stack.constant @b = weak 1 : i64
// CHECK-NEXT:     stack.constant @cond = true
// CHECK-NEXT:     stack.constant @cond = weak false
// CHECK-NEXT:     stack.constant @v = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
// CHECK-NEXT:     stack.constant @m = dense<0> : tensor<2x2xi32> {tag}
// CHECK-NEXT:     stack.prim "greater"(@n, @a) -> (@cond)
// CHECK-NEXT:     stack.prim "where"(@cond, @n, @a) -> (@b) {note = 1 : i64}
// CHECK-NEXT:     stack.prim @pair(@n) -> (@a, @b)
// CHECK-NEXT:     stack.prim @log() -> ()
// CHECK-NEXT:     stack.write @a, @b = @b, @a
// CHECK-NEXT:     stack.write @t = @n {tag}
// CHECK-NEXT:     stack.push @n, @v
// CHECK-NEXT:     stack.pop @n
// CHECK-NEXT:     stack.peek @n, @v {tag}
// CHECK-NEXT:     stack.branch @cond, ^then, ^else
// CHECK-NEXT:   ^then:
// CHECK-NEXT:     stack.goto ^else {tag}
// CHECK-NEXT:   ^else:
// CHECK-NEXT:     stack.indirect_goto
// CHECK-NEXT:   }
// CHECK-LABEL: stack.program @empty_io() -> () attributes {note = "attrs"} {
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   }
// CHECK-NEXT: }

// CHECK-GENERIC: "builtin.module"() ({
// CHECK-GENERIC-NEXT:   "functional.opaque"() <{sym_name = "pair", source = "lambda x: (x, x)"}> : () -> ()
// CHECK-GENERIC-NEXT:   "functional.opaque"() <{sym_name = "log", source = "print"}> : () -> ()
// CHECK-GENERIC-NEXT:   "stack.var"() <{sym_name = "n", type = i64, storage = #stack<storage stack>}> : () -> ()
// CHECK-GENERIC-NEXT:   "stack.var"() <{sym_name = "a", type = i64, storage = #stack<storage register>}> : () -> ()
// CHECK-GENERIC-NEXT:   "stack.var"() <{sym_name = "b", type = i64}> : () -> ()
// CHECK-GENERIC-NEXT:   "stack.var"() <{sym_name = "t", type = i64, storage = #stack<storage temporary>}> : () -> ()
// CHECK-GENERIC-NEXT:   "stack.var"() <{sym_name = "d", type = f64, storage = #stack<storage dead>}> : () -> ()
// CHECK-GENERIC-NEXT:   "stack.var"() <{sym_name = "cond", type = i1, storage = #stack<storage register>}> : () -> ()
// CHECK-GENERIC-NEXT:   "stack.var"() <{sym_name = "v", type = tensor<3xf32>, storage = #stack<storage stack>}> : () -> ()
// CHECK-GENERIC-NEXT:   "stack.var"() <{sym_name = "m", type = tensor<2x2xi32>, storage = #stack<storage register>}> : () -> ()
// CHECK-GENERIC-NEXT:   "stack.var"() <{sym_name = "res", type = i64, storage = #stack<storage register>}> {note = "x"} : () -> ()
// CHECK-GENERIC-LABEL: "stack.program"() <{sym_name = "fib", inputs = [@n, @v], outputs = [@res, @a]}> ({
// CHECK-GENERIC-NEXT:     "stack.push_goto"() [^exit, ^body] : () -> ()
// CHECK-GENERIC-NEXT:   ^exit:
// CHECK-GENERIC-NEXT:     "stack.halt"() : () -> ()
// CHECK-GENERIC-NEXT:   ^body:
// CHECK-GENERIC-NEXT:     "stack.constant"() <{var = @a, value = 2 : i64}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.constant"() <{var = @b, weak, value = 1 : i64}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.constant"() <{var = @cond, value = true}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.constant"() <{var = @cond, weak, value = false}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.constant"() <{var = @v, value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.constant"() <{var = @m, value = dense<0> : tensor<2x2xi32>}> {tag} : () -> ()
// CHECK-GENERIC-NEXT:     "stack.prim"() <{fn = "greater", inputs = [@n, @a], outputs = [@cond]}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.prim"() <{fn = "where", inputs = [@cond, @n, @a], outputs = [@b]}> {note = 1 : i64} : () -> ()
// CHECK-GENERIC-NEXT:     "stack.prim"() <{callee = @pair, inputs = [@n], outputs = [@a, @b]}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.prim"() <{callee = @log, inputs = [], outputs = []}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.write"() <{targets = [@a, @b], sources = [@b, @a]}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.write"() <{targets = [@t], sources = [@n]}> {tag} : () -> ()
// CHECK-GENERIC-NEXT:     "stack.push"() <{vars = [@n, @v]}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.pop"() <{vars = [@n]}> : () -> ()
// CHECK-GENERIC-NEXT:     "stack.peek"() <{vars = [@n, @v]}> {tag} : () -> ()
// CHECK-GENERIC-NEXT:     "stack.branch"() [^then, ^else] <{cond = @cond}> : () -> ()
// CHECK-GENERIC-NEXT:   ^then:
// CHECK-GENERIC-NEXT:     "stack.goto"() [^else] {tag} : () -> ()
// CHECK-GENERIC-NEXT:   ^else:
// CHECK-GENERIC-NEXT:     "stack.indirect_goto"() : () -> ()
// CHECK-GENERIC-NEXT:   }) : () -> ()
// CHECK-GENERIC-LABEL: "stack.program"() <{sym_name = "empty_io", inputs = [], outputs = []}> ({
// CHECK-GENERIC-NEXT:     "stack.halt"() : () -> ()
// CHECK-GENERIC-NEXT:   }) {note = "attrs"} : () -> ()
// CHECK-GENERIC-NEXT: }) : () -> ()
