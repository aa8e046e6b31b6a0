// RUN: abir-opt %s -p coalesce-copies | filecheck %s
// A tail call is a jump into the callee's code, which then returns where its caller's call does:
// f calls g, g tail-calls r (a jump from ^bb4 to ^bb5), and r's returns go back to ^bb3, which
// reads f.x. So f.x is live through r and interferes with r.d, which r's loop overwrites: the
// copies f.x -> g.x -> r.d may not all become one variable (they did when a return's successors
// were only the return blocks of the calls of its own function, r: ^bb7).

builtin.module {
  stack.var @f.x : i64 register
  stack.var @f.result0 : i64 register
  stack.var @g.x : i64 register
  stack.var @g.result0 : i64 register
  stack.var @r.d : i64 register
  stack.var @r.ten : i64 temporary
  stack.var @r.less : i1 temporary
  stack.var @r.three : i64 temporary
  stack.var @r.d3 : i64 temporary
  stack.program @f(@f.x) -> (@f.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.write @g.x = @f.x
    stack.push_goto ^bb3, ^bb4 {function = "f"}
  ^bb3:
    stack.prim "add"(@g.result0, @f.x) -> (@f.result0)
    stack.indirect_goto {function = "f"}
  ^bb4:
    stack.write @r.d = @g.x
    stack.goto ^bb5 {function = "g"}
  ^bb5:
    stack.constant @r.ten = 10 : i64
    stack.prim "less"(@r.d, @r.ten) -> (@r.less)
    stack.branch @r.less, ^bb6, ^bb8 {function = "r"}
  ^bb6:
    stack.constant @r.three = 3 : i64
    stack.prim "add"(@r.d, @r.three) -> (@r.d3)
    stack.write @r.d = @r.d3
    stack.push_goto ^bb7, ^bb5 {function = "r"}
  ^bb7:
    stack.indirect_goto {function = "r"}
  ^bb8:
    stack.write @g.result0 = @r.d
    stack.indirect_goto {function = "r"}
  }
}

// CHECK-LABEL: stack.program @f(@f.x) -> (@f.result0) {
// CHECK:       ^bb3:
// CHECK-NEXT:    stack.prim "add"(@g.result0, @f.x) -> (@f.result0)
// CHECK:       ^bb4:
// CHECK-NEXT:    stack.write @g.result0 = @f.x
// CHECK:       ^bb6:
// CHECK-NEXT:    stack.constant @r.three = 3 : i64
// CHECK-NEXT:    stack.prim "add"(@g.result0, @r.three) -> (@g.result0)
