// RUN: abir-opt %s -p stack-optimize --split-input-file | filecheck %s
// pop followed by push of the same variable becomes peek (g: n is live across both calls); saves whose restored value is dead are dropped.
// A value (n) live across two recursive calls.
builtin.module {
  stack.var @g.n : i64
  stack.var @g.c : i64
  stack.var @g.p : i1
  stack.var @g.one : i64
  stack.var @g.m : i64
  stack.var @g.a : i64
  stack.var @g.b : i64
  stack.var @g.s : i64
  stack.var @g.t : i64
  stack.var @g.result0 : i64
  stack.program @g(@g.n) -> (@g.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.constant @g.c = 0 : i64
    stack.prim "greater"(@g.n, @g.c) -> (@g.p)
    stack.branch @g.p, ^bb3, ^bb6 {function = "g"}
  ^bb3:
    stack.constant @g.one = 1 : i64
    stack.prim "subtract"(@g.n, @g.one) -> (@g.m)
    stack.push @g.m, @g.n
    stack.write @g.n = @g.m
    stack.push_goto ^bb4, ^bb2 {function = "g"}
  ^bb4:
    stack.pop @g.m, @g.n
    stack.write @g.a = @g.result0
    stack.push @g.a, @g.n
    stack.write @g.n = @g.m
    stack.push_goto ^bb5, ^bb2 {function = "g"}
  ^bb5:
    stack.pop @g.a, @g.n
    stack.write @g.b = @g.result0
    stack.prim "add"(@g.a, @g.b) -> (@g.s)
    stack.prim "add"(@g.s, @g.n) -> (@g.t)
    stack.write @g.result0 = @g.t
    stack.indirect_goto {function = "g"}
  ^bb6:
    stack.write @g.result0 = @g.n
    stack.indirect_goto {function = "g"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @g.n : i64
// CHECK-NEXT:   stack.var @g.c : i64
// CHECK-NEXT:   stack.var @g.p : i1
// CHECK-NEXT:   stack.var @g.one : i64
// CHECK-NEXT:   stack.var @g.m : i64
// CHECK-NEXT:   stack.var @g.a : i64
// CHECK-NEXT:   stack.var @g.b : i64
// CHECK-NEXT:   stack.var @g.s : i64
// CHECK-NEXT:   stack.var @g.t : i64
// CHECK-NEXT:   stack.var @g.result0 : i64
// CHECK-LABEL: stack.program @g(@g.n) -> (@g.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.constant @g.c = 0 : i64
// CHECK-NEXT:     stack.prim "greater"(@g.n, @g.c) -> (@g.p)
// CHECK-NEXT:     stack.branch @g.p, ^bb3, ^bb6 {function = "g"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.constant @g.one = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@g.n, @g.one) -> (@g.m)
// CHECK-NEXT:     stack.push @g.m, @g.n
// CHECK-NEXT:     stack.write @g.n = @g.m
// CHECK-NEXT:     stack.push_goto ^bb4, ^bb2 {function = "g"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.peek @g.n
// CHECK-NEXT:     stack.pop @g.m
// CHECK-NEXT:     stack.write @g.a = @g.result0
// CHECK-NEXT:     stack.push @g.a
// CHECK-NEXT:     stack.write @g.n = @g.m
// CHECK-NEXT:     stack.push_goto ^bb5, ^bb2 {function = "g"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.pop @g.a, @g.n
// CHECK-NEXT:     stack.write @g.b = @g.result0
// CHECK-NEXT:     stack.prim "add"(@g.a, @g.b) -> (@g.s)
// CHECK-NEXT:     stack.prim "add"(@g.s, @g.n) -> (@g.t)
// CHECK-NEXT:     stack.write @g.result0 = @g.t
// CHECK-NEXT:     stack.indirect_goto {function = "g"}
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     stack.write @g.result0 = @g.n
// CHECK-NEXT:     stack.indirect_goto {function = "g"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Recursive fibonacci.
builtin.module {
  stack.var @fib.n : i64
  stack.var @fib.c2 : i64
  stack.var @fib.cond : i1
  stack.var @fib.c1 : i64
  stack.var @fib.a1 : i64
  stack.var @fib.f1 : i64
  stack.var @fib.a2 : i64
  stack.var @fib.f2 : i64
  stack.var @fib.s : i64
  stack.var @fib.one : i64
  stack.var @fib.result0 : i64
  stack.program @fib(@fib.n) -> (@fib.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.constant @fib.c2 = 2 : i64
    stack.prim "greater"(@fib.n, @fib.c2) -> (@fib.cond)
    stack.branch @fib.cond, ^bb3, ^bb6 {function = "fib"}
  ^bb3:
    stack.constant @fib.c1 = 1 : i64
    stack.prim "subtract"(@fib.n, @fib.c1) -> (@fib.a1)
    stack.push @fib.n
    stack.write @fib.n = @fib.a1
    stack.push_goto ^bb4, ^bb2 {function = "fib"}
  ^bb4:
    stack.pop @fib.n
    stack.constant @fib.c2 = 2 : i64
    stack.write @fib.f1 = @fib.result0
    stack.prim "subtract"(@fib.n, @fib.c2) -> (@fib.a2)
    stack.push @fib.f1
    stack.write @fib.n = @fib.a2
    stack.push_goto ^bb5, ^bb2 {function = "fib"}
  ^bb5:
    stack.pop @fib.f1
    stack.write @fib.f2 = @fib.result0
    stack.prim "add"(@fib.f1, @fib.f2) -> (@fib.s)
    stack.write @fib.result0 = @fib.s
    stack.indirect_goto {function = "fib"}
  ^bb6:
    stack.constant @fib.one = 1 : i64
    stack.write @fib.result0 = @fib.one
    stack.indirect_goto {function = "fib"}
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @fib.n : i64
// CHECK-NEXT:   stack.var @fib.c2 : i64
// CHECK-NEXT:   stack.var @fib.cond : i1
// CHECK-NEXT:   stack.var @fib.c1 : i64
// CHECK-NEXT:   stack.var @fib.a1 : i64
// CHECK-NEXT:   stack.var @fib.f1 : i64
// CHECK-NEXT:   stack.var @fib.a2 : i64
// CHECK-NEXT:   stack.var @fib.f2 : i64
// CHECK-NEXT:   stack.var @fib.s : i64
// CHECK-NEXT:   stack.var @fib.one : i64
// CHECK-NEXT:   stack.var @fib.result0 : i64
// CHECK-LABEL: stack.program @fib(@fib.n) -> (@fib.result0) {
// CHECK-NEXT:     stack.push_goto ^bb1, ^bb2
// CHECK-NEXT:   ^bb1:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^bb2:
// CHECK-NEXT:     stack.constant @fib.c2 = 2 : i64
// CHECK-NEXT:     stack.prim "greater"(@fib.n, @fib.c2) -> (@fib.cond)
// CHECK-NEXT:     stack.branch @fib.cond, ^bb3, ^bb6 {function = "fib"}
// CHECK-NEXT:   ^bb3:
// CHECK-NEXT:     stack.constant @fib.c1 = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@fib.n, @fib.c1) -> (@fib.a1)
// CHECK-NEXT:     stack.push @fib.n
// CHECK-NEXT:     stack.write @fib.n = @fib.a1
// CHECK-NEXT:     stack.push_goto ^bb4, ^bb2 {function = "fib"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.pop @fib.n
// CHECK-NEXT:     stack.constant @fib.c2 = 2 : i64
// CHECK-NEXT:     stack.write @fib.f1 = @fib.result0
// CHECK-NEXT:     stack.prim "subtract"(@fib.n, @fib.c2) -> (@fib.a2)
// CHECK-NEXT:     stack.push @fib.f1
// CHECK-NEXT:     stack.write @fib.n = @fib.a2
// CHECK-NEXT:     stack.push_goto ^bb5, ^bb2 {function = "fib"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.pop @fib.f1
// CHECK-NEXT:     stack.write @fib.f2 = @fib.result0
// CHECK-NEXT:     stack.prim "add"(@fib.f1, @fib.f2) -> (@fib.s)
// CHECK-NEXT:     stack.write @fib.result0 = @fib.s
// CHECK-NEXT:     stack.indirect_goto {function = "fib"}
// CHECK-NEXT:   ^bb6:
// CHECK-NEXT:     stack.constant @fib.one = 1 : i64
// CHECK-NEXT:     stack.write @fib.result0 = @fib.one
// CHECK-NEXT:     stack.indirect_goto {function = "fib"}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Hand-written: @f.t is saved around the call but never read after its pop: push and pop lose it.
builtin.module {
  stack.var @f.n : i1
  stack.var @f.t : i1
  stack.var @f.result0 : i1
  stack.program @f(@f.n) -> (@f.result0) {
    stack.push_goto ^exit, ^entry
  ^exit:
    stack.halt
  ^entry:
    stack.branch @f.n, ^rec, ^base
  ^rec:
    stack.push @f.n, @f.t
    stack.write @f.n = @f.t
    stack.push_goto ^cont, ^entry
  ^cont:
    stack.pop @f.n, @f.t
    stack.write @f.result0 = @f.n
    stack.indirect_goto
  ^base:
    stack.write @f.result0 = @f.n
    stack.indirect_goto
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   stack.var @f.n : i1
// CHECK-NEXT:   stack.var @f.t : i1
// CHECK-NEXT:   stack.var @f.result0 : i1
// CHECK-LABEL: stack.program @f(@f.n) -> (@f.result0) {
// CHECK-NEXT:     stack.push_goto ^exit, ^entry
// CHECK-NEXT:   ^exit:
// CHECK-NEXT:     stack.halt
// CHECK-NEXT:   ^entry:
// CHECK-NEXT:     stack.branch @f.n, ^rec, ^base
// CHECK-NEXT:   ^rec:
// CHECK-NEXT:     stack.push @f.n
// CHECK-NEXT:     stack.write @f.n = @f.t
// CHECK-NEXT:     stack.push_goto ^cont, ^entry
// CHECK-NEXT:   ^cont:
// CHECK-NEXT:     stack.pop @f.n
// CHECK-NEXT:     stack.write @f.result0 = @f.n
// CHECK-NEXT:     stack.indirect_goto
// CHECK-NEXT:   ^base:
// CHECK-NEXT:     stack.write @f.result0 = @f.n
// CHECK-NEXT:     stack.indirect_goto
// CHECK-NEXT:   }
// CHECK-NEXT: }

// -----

// Hand-written: @h.eps is saved around the recursive call, but no run of @h writes it (each call
// passes it on unchanged), so its push and pop go; @h.n is written by the callee and stays saved.
builtin.module {
  stack.var @h.n : i64
  stack.var @h.eps : i64
  stack.var @h.one : i64
  stack.var @h.m : i64
  stack.var @h.p : i1
  stack.var @h.s : i64
  stack.var @h.result0 : i64
  stack.program @h(@h.n, @h.eps) -> (@h.result0) {
    stack.push_goto ^exit, ^entry
  ^exit:
    stack.halt
  ^entry:
    stack.prim "greater"(@h.n, @h.eps) -> (@h.p)
    stack.branch @h.p, ^rec, ^base
  ^rec:
    stack.constant @h.one = 1 : i64
    stack.prim "subtract"(@h.n, @h.one) -> (@h.m)
    stack.push @h.n, @h.eps
    stack.write @h.n = @h.m
    stack.push_goto ^cont, ^entry
  ^cont:
    stack.pop @h.n, @h.eps
    stack.prim "add"(@h.result0, @h.eps) -> (@h.s)
    stack.prim "add"(@h.s, @h.n) -> (@h.result0)
    stack.indirect_goto
  ^base:
    stack.write @h.result0 = @h.eps
    stack.indirect_goto
  }
}

// CHECK-LABEL: stack.program @h(@h.n, @h.eps) -> (@h.result0) {
// CHECK:        ^rec:
// CHECK-NEXT:     stack.constant @h.one = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@h.n, @h.one) -> (@h.m)
// CHECK-NEXT:     stack.push @h.n
// CHECK-NEXT:     stack.write @h.n = @h.m
// CHECK-NEXT:     stack.push_goto ^cont, ^entry
// CHECK-NEXT:   ^cont:
// CHECK-NEXT:     stack.pop @h.n
// CHECK-NEXT:     stack.prim "add"(@h.result0, @h.eps) -> (@h.s)

// -----

// Hand-written: @k.eps is saved around a call of @j, which never writes it, but the caller
// writes it between the push and the call: the save stays.
builtin.module {
  stack.var @k.n : i1
  stack.var @k.eps : i1
  stack.var @j.result0 : i1
  stack.var @k.result0 : i1
  stack.program @k(@k.n, @k.eps) -> (@k.result0) {
    stack.push_goto ^exit, ^entry
  ^exit:
    stack.halt
  ^entry:
    stack.push @k.eps
    stack.write @k.eps = @k.n
    stack.push_goto ^cont, ^j
  ^cont:
    stack.pop @k.eps
    stack.prim "logical_and"(@k.eps, @j.result0) -> (@k.result0)
    stack.indirect_goto
  ^j:
    stack.write @j.result0 = @k.eps
    stack.indirect_goto
  }
}

// CHECK-LABEL: stack.program @k(@k.n, @k.eps) -> (@k.result0) {
// CHECK:        ^entry:
// CHECK-NEXT:     stack.push @k.eps
// CHECK-NEXT:     stack.write @k.eps = @k.n
// CHECK-NEXT:     stack.push_goto ^cont, ^j
// CHECK-NEXT:   ^cont:
// CHECK-NEXT:     stack.pop @k.eps

// -----

// A parameter passed on unchanged (@h.t, copied to itself in each call's parallel write) and live
// after both recursive calls: no call changes it, so neither call saves it; @h.n is still saved.
builtin.module {
  stack.var @h.t : tensor<4xi64>
  stack.var @h.n : i64
  stack.var @h.c : i64
  stack.var @h.p : i1
  stack.var @h.m : i64
  stack.var @h.x : i64
  stack.var @h.result0 : i64
  stack.program @h(@h.t, @h.n) -> (@h.result0) {
    stack.push_goto ^bb1, ^bb2
  ^bb1:
    stack.halt
  ^bb2:
    stack.constant @h.c = 0 : i64
    stack.prim "greater"(@h.n, @h.c) -> (@h.p)
    stack.branch @h.p, ^bb3, ^bb6 {function = "h"}
  ^bb3:
    stack.constant @h.c = 1 : i64
    stack.prim "subtract"(@h.n, @h.c) -> (@h.m)
    stack.push @h.t, @h.n
    stack.write @h.t, @h.n = @h.t, @h.m
    stack.push_goto ^bb4, ^bb2 {function = "h"}
  ^bb4:
    stack.pop @h.t, @h.n
    stack.constant @h.c = 1 : i64
    stack.prim "subtract"(@h.n, @h.c) -> (@h.m)
    stack.push @h.t, @h.n
    stack.write @h.t, @h.n = @h.t, @h.m
    stack.push_goto ^bb5, ^bb2 {function = "h"}
  ^bb5:
    stack.pop @h.t, @h.n
    stack.prim "getitem" <{index = ["?"]}>(@h.t, @h.n) -> (@h.x)
    stack.prim "add"(@h.x, @h.result0) -> (@h.result0)
    stack.indirect_goto {function = "h"}
  ^bb6:
    stack.prim "getitem" <{index = ["?"]}>(@h.t, @h.n) -> (@h.result0)
    stack.indirect_goto {function = "h"}
  }
}

// CHECK-LABEL: stack.program @h(@h.t, @h.n) -> (@h.result0) {
// CHECK:        ^bb3:
// CHECK-NEXT:     stack.constant @h.c = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@h.n, @h.c) -> (@h.m)
// CHECK-NEXT:     stack.push @h.n{{$}}
// CHECK-NEXT:     stack.write @h.t, @h.n = @h.t, @h.m
// CHECK-NEXT:     stack.push_goto ^bb4, ^bb2 {function = "h"}
// CHECK-NEXT:   ^bb4:
// CHECK-NEXT:     stack.peek @h.n{{$}}
// CHECK-NEXT:     stack.constant @h.c = 1 : i64
// CHECK-NEXT:     stack.prim "subtract"(@h.n, @h.c) -> (@h.m)
// CHECK-NEXT:     stack.write @h.t, @h.n = @h.t, @h.m
// CHECK-NEXT:     stack.push_goto ^bb5, ^bb2 {function = "h"}
// CHECK-NEXT:   ^bb5:
// CHECK-NEXT:     stack.pop @h.n{{$}}
