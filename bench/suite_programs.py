"""The suite's program shapes, each written for ONE example as plain Python.

Every `SuiteProgram` pairs a per-member function (called member by member for the plain-Python
reference, and batched by abir in a fresh `abir.Context`) with its seeded inputs at a batch size,
the `max_stack_depth` abir needs, and a `jax.jit(jax.vmap(...))` version written with
`lax.while_loop`/`lax.cond` as a JAX user would (None where the program has no such form without
hand-managed stacks). `python_run` and `abir_run` return the same structure: a tuple of NumPy
arrays with the batch on axis 0.

NUTS lives in `bench/nuts.py` and `examples/nuts.py` (the Gaussian targets) and `abir.samplers`
(the Bayesian logistic regression, whose data and log density are here); `bench/suite.py` drives
it separately.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import programs  # noqa: E402

import abir  # noqa: E402
import abir.samplers  # noqa: E402

# -- adaptive-step ODE: Bogacki-Shampine 3(2) embedded Runge-Kutta with error control ----------


def ode_steps(rate, t_end):
    """Integrate y' = rate * y * (1 - y) from y(0) = 0.01 to t_end with error control; returns
    (y(t_end), accepted steps). The member's rate sets its step count."""
    t = 0.0
    y = 0.01
    h = 0.01
    accepted = 0
    while t < t_end:
        if t + h > t_end:
            h = t_end - t
        k1 = rate * y * (1.0 - y)
        y2 = y + 0.5 * h * k1
        k2 = rate * y2 * (1.0 - y2)
        y3 = y + 0.75 * h * k2
        k3 = rate * y3 * (1.0 - y3)
        y_new = y + h * (2.0 * k1 + 3.0 * k2 + 4.0 * k3) / 9.0
        k4 = rate * y_new * (1.0 - y_new)
        error = abs(h * (-5.0 * k1 / 72.0 + k2 / 12.0 + k3 / 9.0 - k4 / 8.0))
        if error <= 1e-8:
            t = t + h
            y = y_new
            accepted = accepted + 1
        h = h * min(4.0, max(0.2, 0.9 * (1e-8 / (error + 1e-30)) ** (1.0 / 3.0)))
    return y, accepted


# -- Newton's method for the cube root --------------------------------------------------------


def newton_cbrt(a):
    """The cube root of a > 0 by Newton's iteration from x = a (+1); returns (root, iterations)."""
    x = a + 1.0
    iterations = 0
    step = 1.0
    while abs(step) > 1e-12 * x:
        step = (x * x * x - a) / (3.0 * x * x)
        x = x - step
        iterations = iterations + 1
    return x, iterations


# -- Marsaglia-Tsang gamma rejection sampler --------------------------------------------------


def gamma_draw(shape, key):
    """One Gamma(shape, 1) draw for shape >= 1 by Marsaglia and Tsang's rejection; returns
    (draw, proposals). Each proposal uses its own counter of the member's key."""
    d = shape - 1.0 / 3.0
    c = 1.0 / np.sqrt(9.0 * d)
    counter = 0
    proposals = 0
    draw = -1.0
    while draw < 0.0:
        z = abir.random.normal(key, counter)
        u = abir.random.uniform(key, counter + 1)
        counter = counter + 2
        proposals = proposals + 1
        v = (1.0 + c * z) ** 3
        if v > 0.0:  # noqa: SIM102 (np.log(v) is only evaluated where v > 0)
            if np.log(u) < 0.5 * z * z + d - d * v + d * np.log(v):
                draw = d * v
    return draw, proposals


# -- a loop of wide elementwise work ----------------------------------------------------------


def wide_relax(x, iterations):
    """`iterations` rounds of an elementwise contraction on the member's vector (128 numbers)."""
    i = 0
    while i < iterations:
        x = 0.5 * x + 1.0 / (1.0 + x * x)
        i = i + 1
    return x


# -- edit distance (dynamic program over per-member sequences) -------------------------------

SEQUENCE_LENGTH = 24  # the padded length of both sequences


def edit_distance(a, a_len, b, b_len):
    """Levenshtein distance between a[:a_len] and b[:b_len] (padded int arrays), one DP row at a time."""
    row = np.arange(SEQUENCE_LENGTH + 1)
    for i in range(1, a_len + 1):
        previous_diagonal = row[0]
        row[0] = i
        for j in range(1, b_len + 1):
            above = row[j]
            cost = 1
            if a[i - 1] == b[j - 1]:
                cost = 0
            row[j] = min(min(row[j] + 1, row[j - 1] + 1), previous_diagonal + cost)
            previous_diagonal = above
    return row[b_len]


# -- recursive evaluation of expression trees encoded as arrays ------------------------------

LEAF, ADD, MUL, SUB = 0, 1, 2, 3


def eval_tree(op, left, right, value, node):
    """The value of node `node` of the tree (op/left/right/value arrays, children by index)."""
    if op[node] == LEAF:
        return value[node]
    a = eval_tree(op, left, right, value, left[node])
    b = eval_tree(op, left, right, value, right[node])
    if op[node] == ADD:
        return a + b
    if op[node] == MUL:
        return a * b
    return a - b


# -- recursion: fib (both base cases), a deep non-tail recursion -----------------------------


def fib_lt(n):
    """fib(0) = 0, fib(1) = 1: the `if n < 2` base case."""
    if n < 2:
        return n
    return fib_lt(n - 1) + fib_lt(n - 2)


def fib_gt(n):
    """fib(1) = fib(2) = 1: the `if n > 2` recursive case."""
    if n > 2:
        return fib_gt(n - 1) + fib_gt(n - 2)
    return 1


def deep_sum(n):
    """sum of i*i % 7 for i in 1..n by non-tail recursion (stack depth n)."""
    if n == 0:
        return 0
    return deep_sum(n - 1) + n * n % 7


def ackermann(m, n):
    """Ackermann's function, a nested non-tail recursion: the result of one call is an argument
    of the next, so the stack climbs and falls many times (A(2, n) = 2n + 3 reaches depth 2n + 4
    in about 2n**2 calls)."""
    if m == 0:
        return n + 1
    if n == 0:
        return ackermann(m - 1, 1)
    return ackermann(m - 1, ackermann(m, n - 1))


# -- Bayesian logistic regression: the data and log density NUTS samples ---------------------

LOGREG_ROWS, LOGREG_FEATURES = 1000, 25


def _logreg_data() -> tuple[np.ndarray, np.ndarray]:
    """A fixed synthetic design matrix (features ~ N(0, 1/25)) and 0/1 labels drawn from the
    logistic model with seeded true coefficients ~ N(0, 1)."""
    rng = np.random.default_rng(9)
    x = rng.normal(size=(LOGREG_ROWS, LOGREG_FEATURES)) / np.sqrt(LOGREG_FEATURES)
    coefficients = rng.normal(size=LOGREG_FEATURES)
    y = (rng.uniform(size=LOGREG_ROWS) < 1.0 / (1.0 + np.exp(-(x @ coefficients)))).astype(np.float64)
    return x, y


LOGREG_X, LOGREG_Y = _logreg_data()


def logreg_value_and_grad(q):
    """(log posterior, gradient) of the coefficients q under a N(0, 1) prior, written with NumPy
    for whole batches (q [chains, 25] gives [chains] and [chains, 25]; one chain's q [25] works
    too): log p = sum(y * z - log(1 + e^z)) - q.q/2 with z = X q, gradient X^T (y - sigmoid(z)) - q."""
    logits = q @ LOGREG_X.T
    logp = (LOGREG_Y * logits - np.logaddexp(0.0, logits)).sum(axis=-1) - 0.5 * (q * q).sum(axis=-1)
    grad = (LOGREG_Y - 1.0 / (1.0 + np.exp(-logits))) @ LOGREG_X - q
    return logp, grad


def logreg_logdensity_jax(q):
    """The same log posterior for ONE chain in `jax.numpy` (JAX users' form; autodiff gives the
    gradient), for abir's JAX backend and BlackJAX."""
    import jax.numpy as jnp

    logits = jnp.asarray(LOGREG_X) @ q
    return jnp.sum(LOGREG_Y * logits - jnp.logaddexp(0.0, logits)) - 0.5 * jnp.sum(q * q)


def logreg_nuts(backend: Any, q0: np.ndarray, steps: int, step_size: float, max_depth: int,
                dry_run: bool = False) -> Any:  # fmt: skip
    """`abir.samplers.nuts` on the logistic regression as its user would call it: on JAX the
    `jax.numpy` log density (autodiff), elsewhere the NumPy `value_and_grad`; a fixed step size,
    no warm-up, one call of `steps` transitions, chain c drawing from key fold_in(key(1), c)."""
    options = {"num_warmup": 0, "num_draws": steps, "step_size": step_size, "max_tree_depth": max_depth,
               "chunk_size": steps, "seed": 1, "backend": backend, "dry_run": dry_run}  # fmt: skip
    if getattr(backend, "name", backend) == "jax":
        return abir.samplers.nuts(logreg_logdensity_jax, q0, **options)
    return abir.samplers.nuts(None, q0, value_and_grad=logreg_value_and_grad, **options)


def logreg_initial_positions(size: int) -> np.ndarray:
    return np.random.default_rng(11).normal(scale=0.5, size=(size, LOGREG_FEATURES))


# -- inputs ------------------------------------------------------------------------------------


def random_tree(rng: np.random.Generator, depth: int, capacity: int) -> tuple[np.ndarray, ...]:
    """A random expression tree of depth at most `depth` in arrays of `capacity` nodes (root 0)."""
    op = np.zeros(capacity, np.int64)
    left = np.zeros(capacity, np.int64)
    right = np.zeros(capacity, np.int64)
    value = np.zeros(capacity, np.int64)
    count = 1

    def grow(node: int, remaining: int) -> None:
        nonlocal count
        if remaining == 0 or rng.random() < 0.25:
            value[node] = rng.integers(-3, 4)
            return
        op[node] = rng.integers(1, 4)
        left[node], right[node] = count, count + 1
        count += 2
        grow(int(left[node]), remaining - 1)
        grow(int(right[node]), remaining - 1)

    grow(0, depth)
    return op, left, right, value


@dataclasses.dataclass(frozen=True)
class SuiteProgram:
    """One program shape: `functions[0]` is the entry; all are batched in one Context."""

    name: str
    functions: tuple[Callable[..., Any], ...]
    make_inputs: Callable[[int, bool], tuple[np.ndarray, ...]]
    max_stack_depth: int
    jax_vmap: Callable[[], Callable[..., Any]] | None = None


def _ode_inputs(size: int, small: bool) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(1)
    return rng.uniform(0.5, 8.0, size), np.full(size, 2.0 if small else 10.0)


def _newton_inputs(size: int, small: bool) -> tuple[np.ndarray, ...]:
    return (np.random.default_rng(2).uniform(0.1, 1e6, size),)


def _gamma_inputs(size: int, small: bool) -> tuple[np.ndarray, ...]:
    shapes = np.random.default_rng(3).uniform(1.0, 10.0, size)
    return shapes, abir.random.fold_in(abir.random.key(3), np.arange(size))


def _wide_inputs(size: int, small: bool) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(4)
    high = 20 if small else 200
    return rng.normal(size=(size, 128)), rng.integers(high // 2, high, size)


def _edit_inputs(size: int, small: bool) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(5)
    longest = 6 if small else SEQUENCE_LENGTH
    a = rng.integers(0, 4, (size, SEQUENCE_LENGTH))
    b = rng.integers(0, 4, (size, SEQUENCE_LENGTH))
    return a, rng.integers(1, longest + 1, size), b, rng.integers(1, longest + 1, size)


TREE_DEPTH = 8


def _tree_inputs(size: int, small: bool) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(6)
    depth = 4 if small else TREE_DEPTH
    capacity = 2 ** (depth + 1)
    trees = [random_tree(rng, int(rng.integers(1, depth + 1)), capacity) for _ in range(size)]
    op, left, right, value = (np.stack(parts) for parts in zip(*trees, strict=True))
    return op, left, right, value, np.zeros(size, np.int64)


def _fib_inputs(size: int, small: bool) -> tuple[np.ndarray, ...]:
    high = 10 if small else 18
    return (np.random.default_rng(7).integers(3, high, size),)


def _deep_inputs(size: int, small: bool) -> tuple[np.ndarray, ...]:
    low, high = (5, 30) if small else (100, 400)
    return (np.random.default_rng(8).integers(low, high, size),)


def _ackermann_inputs(size: int, small: bool) -> tuple[np.ndarray, ...]:
    low, high = (3, 12) if small else (50, 120)  # stack depth 2n + 4: 104 to 242 at full size
    return np.full(size, 2, np.int64), np.random.default_rng(10).integers(low, high, size)


def _collatz_inputs(size: int, small: bool) -> tuple[np.ndarray, ...]:
    return (programs.inputs("collatz", size),)


def _jax_ode() -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def one(rate, t_end):
        def body(s):
            t, y, h, accepted = s
            h = jnp.minimum(h, t_end - t)
            k1 = rate * y * (1.0 - y)
            y2 = y + 0.5 * h * k1
            k2 = rate * y2 * (1.0 - y2)
            y3 = y + 0.75 * h * k2
            k3 = rate * y3 * (1.0 - y3)
            y_new = y + h * (2.0 * k1 + 3.0 * k2 + 4.0 * k3) / 9.0
            k4 = rate * y_new * (1.0 - y_new)
            error = jnp.abs(h * (-5.0 * k1 / 72.0 + k2 / 12.0 + k3 / 9.0 - k4 / 8.0))
            ok = error <= 1e-8
            factor = jnp.minimum(4.0, jnp.maximum(0.2, 0.9 * (1e-8 / (error + 1e-30)) ** (1.0 / 3.0)))
            return (jnp.where(ok, t + h, t), jnp.where(ok, y_new, y), h * factor, accepted + ok)

        s = lax.while_loop(lambda s: s[0] < t_end, body, (0.0, 0.01, 0.01, jnp.int64(0)))
        return s[1], s[3]

    return jax.jit(jax.vmap(one))


def _jax_newton() -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def one(a):
        def body(s):
            x, iterations, _ = s
            step = (x * x * x - a) / (3.0 * x * x)
            return x - step, iterations + 1, step

        s = lax.while_loop(lambda s: jnp.abs(s[2]) > 1e-12 * s[0], body, (a + 1.0, jnp.int64(0), 1.0))
        return s[0], s[1]

    return jax.jit(jax.vmap(one))


def _jax_gamma() -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def one(shape, key):
        d = shape - 1.0 / 3.0
        c = 1.0 / jnp.sqrt(9.0 * d)

        def body(s):
            counter, proposals, _ = s
            z = abir.random.normal(key, counter)
            u = abir.random.uniform(key, counter + 1)
            v = (1.0 + c * z) ** 3
            accept = (v > 0.0) & (jnp.log(u) < 0.5 * z * z + d - d * v + d * jnp.log(jnp.where(v > 0, v, 1.0)))
            return counter + 2, proposals + 1, jnp.where(accept, d * v, -1.0)

        s = lax.while_loop(lambda s: s[2] < 0.0, body, (jnp.int64(0), jnp.int64(0), -1.0))
        return s[2], s[1]

    return jax.jit(jax.vmap(one))


def _jax_wide() -> Callable[..., Any]:
    import jax
    from jax import lax

    def one(x, iterations):
        return lax.fori_loop(0, iterations, lambda _, x: 0.5 * x + 1.0 / (1.0 + x * x), x)

    return jax.jit(jax.vmap(one))


def _jax_edit() -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def one(a, a_len, b, b_len):
        def outer(i, row):
            def inner(j, s):
                row, diagonal = s
                cost = jnp.where(a[i - 1] == b[j - 1], 0, 1)
                value = jnp.minimum(jnp.minimum(row[j] + 1, row[j - 1] + 1), diagonal + cost)
                return row.at[j].set(value), row[j]

            row, _ = lax.fori_loop(1, b_len + 1, inner, (row.at[0].set(i), row[0]))
            return row

        row = lax.fori_loop(1, a_len + 1, outer, jnp.arange(b.shape[0] + 1))
        return row[b_len]

    return jax.jit(jax.vmap(one))


def _jax_collatz() -> Callable[..., Any]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    def one(n):
        def body(s):
            n, steps = s
            return jnp.where(n % 2 == 0, n // 2, 3 * n + 1), steps + 1

        return lax.while_loop(lambda s: s[0] > 1, body, (n, jnp.int64(0)))[1]

    return jax.jit(jax.vmap(one))


SUITE: dict[str, SuiteProgram] = {
    p.name: p
    for p in (
        SuiteProgram("ode-rk23", (ode_steps,), _ode_inputs, 4, _jax_ode),
        SuiteProgram("newton-cbrt", (newton_cbrt,), _newton_inputs, 4, _jax_newton),
        SuiteProgram("gamma-mt", (gamma_draw,), _gamma_inputs, 4, _jax_gamma),
        SuiteProgram("wide-128", (wide_relax,), _wide_inputs, 4, _jax_wide),
        SuiteProgram("edit-distance", (edit_distance,), _edit_inputs, 4, _jax_edit),
        SuiteProgram("tree-eval", (eval_tree,), _tree_inputs, TREE_DEPTH + 4),
        SuiteProgram("fib-lt", (fib_lt,), _fib_inputs, 24),
        SuiteProgram("fib-gt", (fib_gt,), _fib_inputs, 24),
        SuiteProgram("deep-sum", (deep_sum,), _deep_inputs, 410),
        SuiteProgram("ackermann", (ackermann,), _ackermann_inputs, 250),
        SuiteProgram("collatz", (programs.collatz,), _collatz_inputs, 4, _jax_collatz),
    )
}


def as_tuple(result: Any) -> tuple[np.ndarray, ...]:
    """A result (one value or a tuple of them) as a tuple of NumPy arrays."""
    values = result if isinstance(result, tuple) else (result,)
    return tuple(np.asarray(v.numpy() if hasattr(v, "numpy") else v) for v in values)


def python_run(program: SuiteProgram, inputs: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The reference: the per-member function called on every member in a Python loop."""
    rows = [as_tuple(program.functions[0](*(x[b] for x in inputs))) for b in range(len(inputs[0]))]
    return tuple(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0])))


def abir_function(program: SuiteProgram) -> Any:
    """The batched entry function, compiled in a fresh `abir.Context` (fresh caches)."""
    context = abir.Context()
    batched = [context.batch_uncurried(f) for f in program.functions]
    return batched[0]


def assert_equal(got: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...], label: str) -> None:
    """Integers exactly, floats to 1e-9 relative; raises AssertionError naming `label`."""
    assert len(got) == len(want), f"{label}: {len(got)} results, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if np.issubdtype(w.dtype, np.integer) or w.dtype == bool:
            np.testing.assert_array_equal(g, w, err_msg=f"{label} result {k}")
        else:
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=f"{label} result {k}")
