# RUN: python %s > %t.mlir && filecheck %s < %t.mlir
# RUN: abir-opt < %t.mlir | filecheck %s
# A while loop with per-member trip counts: the header takes one block argument per variable
# the loop assigns; if/else inside joins into a block argument; augmented assignment.
import abir.context

ctx = abir.context.Context()


@ctx.batch()
def collatz(x):
    count = 0
    while x != 1:
        if x % 2 == 0:
            x = x // 2
        else:
            x = 3 * x + 1
        count += 1
    return count


print(ctx.module())

# CHECK-LABEL: functional.func @collatz(%x: !functional.unknown) -> !functional.unknown {
# CHECK-NEXT:   %[[C0:[^ ,:)]+]] = functional.constant weak 0 : i64
# CHECK-NEXT:   cf.br ^bb1(%x, %[[C0]] : !functional.unknown, i64)
# CHECK-NEXT: ^bb1(%x_1: !functional.unknown, %count: !functional.unknown):
# CHECK-NEXT:   %[[C1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:   %[[NE:[^ ,:)]+]] = functional.prim "not_equal"(%x_1, %[[C1]]) : (!functional.unknown, i64) -> i1
# CHECK-NEXT:   %[[NE_T:[^ ,:)]+]] = functional.prim "astype"(%[[NE]]) {{.*}}abir.truth_value{{.*}} : (i1) -> i1
# CHECK-NEXT:   cf.cond_br %[[NE_T]], ^bb2, ^bb6
# CHECK:      ^bb3:
# CHECK-NEXT:   %[[C2:[^ ,:)]+]] = functional.constant weak 2 : i64
# CHECK-NEXT:   %x_2 = functional.prim "floor_divide"(%x_1, %[[C2]]) : (!functional.unknown, i64) -> !functional.unknown
# CHECK-NEXT:   cf.br ^bb5(%x_2 : !functional.unknown)
# CHECK:      ^bb4:
# CHECK:        cf.br ^bb5(%x_3 : !functional.unknown)
# CHECK-NEXT: ^bb5(%x_4: !functional.unknown):
# CHECK-NEXT:   %[[C1_1:[^ ,:)]+]] = functional.constant weak 1 : i64
# CHECK-NEXT:   %count_1 = functional.prim "add"(%count, %[[C1_1]]) : (!functional.unknown, i64) -> !functional.unknown
# CHECK-NEXT:   cf.br ^bb1(%x_4, %count_1 : !functional.unknown, !functional.unknown)
# CHECK-NEXT: ^bb6:
# CHECK-NEXT:   functional.return %count : !functional.unknown
