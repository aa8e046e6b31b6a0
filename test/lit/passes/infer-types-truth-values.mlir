// RUN: not abir-opt %s -p 'infer-types{entry=several}' 2>&1 | filecheck %s --check-prefix=SEVERAL
// RUN: abir-opt %s -p 'infer-types{entry=one},simplify-functional' | filecheck %s --check-prefix=ONE
// RUN: abir-opt %s -p 'infer-types{entry=scalar},simplify-functional' | filecheck %s --check-prefix=SCALAR
// A value the frontend uses as a truth value (`abir.truth_value` on its `astype` to i1) must have
// one element per member, as Python's `bool()` of a NumPy array: several raise NumPy's ValueError
// at the Python line (`abir.loc`), one is reduced with `any`, a scalar is converted as before.

functional.func @several(%x: tensor<3xf64>) -> !functional.unknown {
  %c = functional.prim "astype"(%x) {abir.truth_value = "the condition of this `if`", abir.loc = "prog.py:3", abir.source = "x > 0"} : (tensor<3xf64>) -> i1
  functional.return %c : i1
}

// SEVERAL:      abir-opt: error: prog.py:3: in batched function 'several'
// SEVERAL-NEXT: `x > 0` is used as the condition of this `if`, but each member's value is a float64 array of shape (3,), and Python's `bool()` of it raises ValueError: The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()
// SEVERAL-NEXT: Instead: reduce it to one truth value, e.g. `np.any(x > 0)` or `np.all(x > 0)`

functional.func @one(%x: tensor<1x1xi1>) -> !functional.unknown {
  %c = functional.prim "astype"(%x) {abir.truth_value = "the operand of `not`", abir.loc = "prog.py:7", abir.source = "x"} : (tensor<1x1xi1>) -> i1
  functional.return %c : i1
}

// ONE:      functional.func @one(%x: tensor<1x1xi1>) -> i1 {
// ONE-NEXT:   %c = functional.prim "any"(%x) : (tensor<1x1xi1>) -> i1
// ONE-NEXT:   functional.return %c : i1

functional.func @scalar(%x: f64) -> !functional.unknown {
  %c = functional.prim "astype"(%x) {abir.truth_value = "the condition of this `while` loop", abir.loc = "prog.py:9", abir.source = "x"} : (f64) -> i1
  functional.return %c : i1
}

// SCALAR:      functional.func @scalar(%x: f64) -> i1 {
// SCALAR-NEXT:   %c = functional.prim "astype"(%x) : (f64) -> i1
// SCALAR-NEXT:   functional.return %c : i1
