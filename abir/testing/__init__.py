"""Testing tools for abir itself.

`abir.testing.fuzz` is a differential fuzzer: it generates random programs over abir's Python
subset (`abir.testing.generate`), runs each batched on NumPy, JAX and TensorFlow and checks every
member against the plain Python function (`abir.testing.differential`), and shrinks each failure
to a minimal reproducible program (`abir.testing.shrink`). Run it as

    python -m abir.testing.fuzz --count 1000 --seed 0 --backends numpy,jax,tf
"""
