"""Per-example programs the interop tests (JAX, TensorFlow, sharding) batch: a recursion and a
loop whose trip count differs per member."""


def fib(n):
    if n > 2:
        return fib(n - 1) + fib(n - 2)
    return 1


def halving_steps(x, tolerance):
    steps = 0
    while x > tolerance:
        x = x * 0.5
        steps += 1
    return x, steps
