# REQUIRES: full
# RUN: python %S/numpy_calls.py > %t.numpy_calls.mlir
# RUN: abir-opt < %t.numpy_calls.mlir | abir-run - --entry smooth --arg '[[3.0, 1.0, 2.0, 5.0], [0.0, 4.0, 4.0, 1.0]]' --backend jax | filecheck %S/numpy_calls.py --check-prefix=SMOOTH
# RUN: abir-opt < %t.numpy_calls.mlir | abir-run - --entry smooth --arg '[[3.0, 1.0, 2.0, 5.0], [0.0, 4.0, 4.0, 1.0]]' --backend tf | filecheck %S/numpy_calls.py --check-prefix=SMOOTH
# RUN: python %S/arrays_tuples_loops.py > %t.arrays.mlir
# RUN: abir-opt < %t.arrays.mlir | abir-run - --entry histogram --arg '[[3, 30, 55, 99, 80], [0, 0, 26, 51, 76]]' --backend tf | filecheck %S/arrays_tuples_loops.py --check-prefix=HIST
# RUN: python %S/recursion.py > %t.recursion.mlir
# RUN: abir-opt < %t.recursion.mlir | abir-run - --entry is_even --arg '[0, 7, 10]' --backend jax | filecheck %S/recursion.py --check-prefix=EVEN
# RUN: abir-run %S/tail-call-returns.mlir --arg '[1, 2, 102]' --backend jax | filecheck %S/tail-call-returns.mlir
# The run tests of this directory on JAX and TensorFlow, the backends whose start-up (and XLA
# compilation) cost most of a lit run: `make test` runs these programs on NumPy here and the text
# route on every backend in pytest (test_abir_run.py); `make test-full` runs this file with
# `lit --param full=1`.
