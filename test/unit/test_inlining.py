"""inline-calls end to end: batched functions calling non-recursive helpers give the same results
as plain Python per member, the helpers disappear from the compiled program (recursion stays
calls), and the machine takes fewer steps.

Programs are module-level Python functions batched with `Context.batch_uncurried`; "before"
step counts are measured in the same test with the pipeline's inlining switched off.
"""

from __future__ import annotations

import collections
import importlib.util
import pathlib
import types

import numpy as np
import pytest

import abir
from abir.passes import inline_calls as inline_calls_pass
from abir.passes.infer_types import infer_types
from abir.passes.inline_calls import MAX_INLINE_OPS, inline_calls

# ----- programs -------------------------------------------------------------------------------


def count_down(n):
    """A helper with a loop and an early return."""
    steps = 0
    while n > 0:
        if n == 13:
            return -1
        n = n - 2
        steps += 1
    return steps


def two_counts(a, b):
    """The same helper called twice in one function."""
    return count_down(a) * 100 + count_down(b)


def square(x):
    return x * x


def norm2(x, y):
    return square(x) + square(y)


def chained(x, y):
    """A chain of helpers: chained -> norm2 -> square."""
    return norm2(x, y) + square(x - y)


def is_even(n):
    if n <= 0:
        return True
    return is_odd(n - 1)


def is_odd(n):
    if n <= 0:
        return False
    return is_even(n - 1)


def parity(n):
    """Mutual recursion (stays calls) behind a non-recursive wrapper."""
    if is_even(square(n) % 7):
        return 1
    return 0


def mixed(i, x):
    """`square` with an int and with a float: two specializations."""
    return square(i) + 1, square(x)


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def clamped_sum(n):
    """A recursive function calling a non-recursive helper."""
    if n <= 0:
        return 0
    return clamp((n * 3) % 7, 1, 5) + clamped_sum(n - 1)


Point = collections.namedtuple("Point", ["x", "y"])


def rotate(p, dt):
    return Point(p.x - dt * p.y, p.y + dt * p.x)


def radius2(p):
    return p.x * p.x + p.y * p.y


def orbit(p, n):
    """Namedtuples into and out of helpers, inside a loop."""
    i = 0
    while i < n:
        p = rotate(p, 0.125)
        i += 1
    return p, radius2(p)


def bounce(x, v):
    if x + v > 10.0:
        return 10.0, -v
    if x + v < 0.0:
        return 0.0, -v
    return x + v, v


def walk(x, v, n):
    """A loop whose body is small helpers: the program with the most to gain from inlining."""
    total = 0.0
    for _ in range(n):
        x, v = bounce(x, v)
        total += clamp(x, 2.0, 8.0)
    return total


CASES = {
    "two_counts": ((two_counts, count_down), [np.array([0, 5, 13, 26, 14]), np.array([7, 15, 2, 0, 40])]),
    "chained": ((chained, norm2, square), [np.array([1.0, -2.0, 3.5]), np.array([0.5, 4.0, -1.0])]),
    "parity": ((parity, is_even, is_odd, square), [np.array([0, 1, 2, 3, 4, 5, 6])]),
    "clamped_sum": ((clamped_sum, clamp), [np.array([0, 1, 4, 9, 12])]),
    "walk": (
        (walk, bounce, clamp),
        [np.array([0.0, 3.0, 9.5]), np.array([1.5, -2.0, 0.75]), np.array([0, 7, 20])],
    ),
}


def batched(functions):
    ctx = abir.Context()
    fns = [ctx.batch_uncurried(fn) for fn in functions]
    return ctx, fns[0]


def python_per_member(fn, args):
    return [fn(*[a[i].item() for a in args]) for i in range(len(args[0]))]


def symbols(module) -> list[str]:
    return [op.sym_name.data for op in module.ops if op.name == "functional.func"]


def calls(module) -> list[str]:
    return [op.callee.string_value() for op in module.walk() if op.name == "functional.call"]


def signature(args):
    return [abir.TensorType(np.asarray(a).dtype, np.asarray(a).shape[1:]) for a in args]


def no_inlining(monkeypatch):
    monkeypatch.setattr(inline_calls_pass, "inline_calls", lambda module, *options: 0)


# ----- results --------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", [abir.NumpyBackend, abir.JaxBackend], ids=["numpy", "jax"])
@pytest.mark.parametrize("name", list(CASES))
def test_results_match_plain_python(name, backend):
    functions, args = CASES[name]
    _, fn = batched(functions)
    out = fn(*args, backend=backend())
    np.testing.assert_allclose(np.asarray(out), python_per_member(functions[0], args), rtol=1e-12)


def test_stackless_matches_plain_python():
    functions, args = CASES["clamped_sum"]
    _, fn = batched(functions)
    np.testing.assert_array_equal(fn(*args, stackless=True), python_per_member(clamped_sum, args))


def test_namedtuples_through_helpers():
    ctx, fn = batched([orbit, rotate, radius2])
    p = Point(np.array([1.0, 0.0, -2.0]), np.array([0.0, 3.0, 0.5]))
    n = np.array([0, 5, 16])
    got_p, got_r = fn(p, n)
    for i in range(3):
        want_p, want_r = orbit(Point(p.x[i].item(), p.y[i].item()), n[i].item())
        np.testing.assert_allclose(
            [got_p.x[i], got_p.y[i], got_r[i]], [want_p.x, want_p.y, want_r], rtol=1e-12
        )
    assert isinstance(got_p, Point)
    typed = ctx.lowered_for_args("orbit", [p, n])
    assert "rotate" not in str(typed) and "radius2" not in str(typed)


# ----- what is inlined ------------------------------------------------------------------------


def test_non_recursive_helpers_are_inlined_and_erased():
    for name in ("two_counts", "chained", "walk"):
        functions, args = CASES[name]
        ctx, _ = batched(functions)
        typed = ctx.program_compiled(name, signature(args))
        assert symbols(typed) == [name]
        assert calls(typed) == []


def test_recursion_stays_calls():
    functions, args = CASES["parity"]
    ctx, _ = batched(functions)
    typed = ctx.program_compiled("parity", signature(args))
    # square is inlined into parity; the mutual recursion is kept, and so is the call into it
    # (is_even is recursive: copying one level of it would remove no call of the recursion)
    assert sorted(symbols(typed)) == ["is_even", "is_odd", "parity"]
    assert sorted(calls(typed)) == ["is_even", "is_even", "is_odd"]


def test_recursive_function_calling_a_helper():
    functions, args = CASES["clamped_sum"]
    ctx, _ = batched(functions)
    typed = ctx.program_compiled("clamped_sum", signature(args))
    assert symbols(typed) == ["clamped_sum"]
    assert calls(typed) == ["clamped_sum"]


def test_specializations_are_inlined_with_their_own_types():
    """`square` called with an int and a float: two specializations after infer-types, both
    inlined, each copy with its own types."""
    ctx = abir.Context()
    fn = ctx.batch_uncurried(mixed)
    ctx.batch_uncurried(square)
    i, x = np.array([2, -3]), np.array([0.5, 1.5])
    out = fn(i, x)
    assert np.asarray(out[0]).dtype == np.int64 and np.asarray(out[1]).dtype == np.float64
    np.testing.assert_array_equal(out[0], i * i + 1)
    np.testing.assert_array_equal(out[1], x * x)
    module = ctx.program("mixed").clone()
    infer_types(module, "mixed", [abir.types.ir_type(np.int64), abir.types.ir_type(np.float64)])
    assert symbols(module) == ["mixed", "square", "square.t1"]
    assert inline_calls(module) == 2
    assert symbols(module) == ["mixed"]
    text = str(module)
    assert text.count('"multiply"') == 2
    assert ": (i64, i64) -> i64" in text and ": (f64, f64) -> f64" in text
    module.verify()


def test_big_helper_called_twice_stays_a_call():
    """Above MAX_INLINE_OPS a helper with two call sites stays a shared function; with one call
    site it is inlined whatever its size."""
    functions, args = CASES["two_counts"]
    module = batched(functions)[0].program("two_counts").clone()
    infer_types(module, "two_counts", [abir.types.ir_type(np.int64)] * 2)
    once = module.clone()
    assert inline_calls(module, max_ops=5) == 0
    assert calls(module) == ["count_down", "count_down"]
    assert inline_calls(once) == 2 and calls(once) == []
    assert MAX_INLINE_OPS >= 100


# ----- machine steps --------------------------------------------------------------------------


# (steps before, steps after) on the NumPy backend, measured with this file's inputs. Straight-line
# helpers and helpers outside loops cost nothing even as calls (fuse-blocks copies a callee's
# entry into the call block and a return into its continuation), nor do small branches that both
# return (if-convert merges them in the callee); inlining pays where the call sits in a loop.
STEPS = {
    "two_counts": (76, 76),
    "chained": (3, 3),
    "clamped_sum": (43, 43),
    "walk": (68, 24),
}


@pytest.mark.parametrize("name", list(STEPS))
def test_fewer_machine_steps(name, monkeypatch):
    functions, args = CASES[name]
    after_backend = abir.NumpyBackend()
    after = batched(functions)[1](*args, backend=after_backend)
    with monkeypatch.context() as m:
        no_inlining(m)
        before_backend = abir.NumpyBackend()
        before = batched(functions)[1](*args, backend=before_backend)
    np.testing.assert_allclose(np.asarray(after), np.asarray(before), rtol=1e-12)
    before_steps, after_steps = STEPS[name]
    assert before_backend.last_stats.steps == before_steps
    assert after_backend.last_stats.steps == after_steps
    assert after_backend.last_stats.ideal_steps <= before_backend.last_stats.ideal_steps


# ----- NUTS with helper functions -------------------------------------------------------------

_PATH = pathlib.Path(__file__).resolve().parents[2] / "examples" / "nuts.py"
_SPEC = importlib.util.spec_from_file_location("abir_example_nuts_inlining", _PATH)
nuts_example = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(nuts_example)
NutsPoint = nuts_example.Point
Tree = nuts_example.Tree
Chain = nuts_example.Chain
MAX_ENERGY_ERROR = nuts_example.MAX_ENERGY_ERROR


def make_nuts_with_helpers(precision: np.ndarray, max_depth: int) -> types.SimpleNamespace:  # noqa: C901
    """examples/nuts.py's sampler written as a user would first write it: the log density, the
    leapfrog step, the uniform draw and the U-turn test are batched helper functions."""
    dim = precision.shape[0]

    def times_precision(q):  # opaque (a 2-D closure constant; see examples/nuts.py)
        return q @ precision

    def target(q):
        """The log density and its gradient."""
        grad = -times_precision(q)
        return 0.5 * (grad @ q), grad

    def uniform(key, counter):
        return abir.random.uniform(key, counter)

    def no_u_turn(first_q, first_p, last_q, last_p, direction):
        span = last_q - first_q
        forward = direction * (span @ first_p) >= 0.0
        backward = direction * (span @ last_p) >= 0.0
        return forward & backward

    def leapfrog(point, step):
        """One leapfrog step; returns the new Point and its energy."""
        p = point.p + (0.5 * step) * point.grad
        q = point.q + step * p
        log_density, grad = target(q)
        p = p + (0.5 * step) * grad
        return NutsPoint(q, p, grad), 0.5 * (p @ p) - log_density

    def normal(key, counter):
        return abir.random.normal(key, counter, shape=(dim,)), counter + 1

    def build_tree(start, step, depth, energy0, key, counter):
        if depth == 0:
            point, energy = leapfrog(start, step)
            ok = energy - energy0 < MAX_ENERGY_ERROR
            return Tree(point.q, point.p, point, point.q, energy0 - energy, 1, ok), counter
        inner, counter = build_tree(start, step, depth - 1, energy0, key, counter)
        if not inner.ok:
            return inner, counter
        outer, counter = build_tree(inner.last, step, depth - 1, energy0, key, counter)
        leapfrogs = inner.leapfrogs + outer.leapfrogs
        if not outer.ok:
            return Tree(inner.first_q, inner.first_p, outer.last, inner.sample, inner.log_weight,
                        leapfrogs, False), counter  # fmt: skip
        log_weight = np.logaddexp(inner.log_weight, outer.log_weight)
        sample = inner.sample
        if np.log(uniform(key, counter)) < outer.log_weight - log_weight:
            sample = outer.sample
        last = outer.last
        ok = no_u_turn(inner.first_q, inner.first_p, last.q, last.p, step)
        return Tree(inner.first_q, inner.first_p, last, sample, log_weight, leapfrogs, ok), counter + 1

    def transition(q, grad, eps, key, counter):
        p, counter = normal(key, counter)
        log_density, _ = target(q)
        energy0 = 0.5 * (p @ p) - log_density
        left = NutsPoint(q, p, grad)
        right = left
        sample = q
        log_weight = 0.0
        leapfrogs = 0
        depth = 0
        while depth < max_depth:
            step = eps
            start = right
            if uniform(key, counter) < 0.5:
                step = -eps
                start = left
            tree, counter = build_tree(start, step, depth, energy0, key, counter + 1)
            leapfrogs += tree.leapfrogs
            if not tree.ok:
                break
            if step > 0.0:
                right = tree.last
            else:
                left = tree.last
            if np.log(uniform(key, counter)) < tree.log_weight - log_weight:
                sample = tree.sample
            counter = counter + 1
            log_weight = np.logaddexp(log_weight, tree.log_weight)
            depth += 1
            if not no_u_turn(left.q, left.p, right.q, right.p, 1.0):
                break
        return sample, leapfrogs, counter

    def sample_chain(q, eps, key, num_steps):
        counter = 0
        leapfrogs = 0
        sum_q = 0.0 * q
        sum_q2 = 0.0 * q
        for _ in range(num_steps):
            _, grad = target(q)
            q, taken, counter = transition(q, grad, eps, key, counter)
            leapfrogs += taken
            sum_q = sum_q + q
            sum_q2 = sum_q2 + q * q
        return Chain(q, counter, leapfrogs, sum_q, sum_q2)

    return types.SimpleNamespace(
        target=target, uniform=uniform, no_u_turn=no_u_turn, leapfrog=leapfrog, normal=normal,
        build_tree=build_tree, transition=transition, sample_chain=sample_chain, max_depth=max_depth,
    )  # fmt: skip


NUTS_FUNCTIONS = (
    "target",
    "uniform",
    "no_u_turn",
    "leapfrog",
    "normal",
    "build_tree",
    "transition",
    "sample_chain",
)


def run_nuts(nuts, q0, eps, keys, steps, backend):
    ctx = abir.Context()
    batched_fns = {name: ctx.batch_uncurried(getattr(nuts, name)) for name in NUTS_FUNCTIONS}
    result = batched_fns["sample_chain"](
        q0, eps, keys, np.int64(steps), backend=backend, max_stack_depth=nuts.max_depth + 6
    )
    return nuts_example.as_chain(result), ctx


def test_nuts_with_helpers_matches_per_chain_and_takes_fewer_steps(monkeypatch):
    nuts = make_nuts_with_helpers(nuts_example.PRECISION, max_depth=4)
    keys = nuts_example.chain_keys(seed=3, chains=6)
    q0 = nuts_example.initial_positions(3, 6, nuts_example.DIM)
    want = nuts_example.run_per_chain(nuts, q0, 0.3, keys, 3)
    assert len(set(want.leapfrogs.tolist())) > 1
    after_backend = abir.NumpyBackend()
    got, ctx = run_nuts(nuts, q0, 0.3, keys, 3, after_backend)
    nuts_example.compare(got, want)
    sig = [
        abir.TensorType(np.float64, (nuts_example.DIM,)),
        abir.TensorType(np.float64, ()),
        abir.TensorType(np.uint32, (2,)),
        abir.TensorType(np.int64, ()),
    ]
    typed = ctx.program_compiled("sample_chain", sig)
    # only the recursion is left (build_tree is specialized for the Point it is called with)
    assert sorted(name.split(".")[0] for name in symbols(typed)) == ["build_tree", "sample_chain"]
    with monkeypatch.context() as m:
        no_inlining(m)
        before_backend = abir.NumpyBackend()
        before, _ = run_nuts(nuts, q0, 0.3, keys, 3, before_backend)
    nuts_example.compare(before, want)
    print(
        "NUTS with helpers, steps before/after:",
        before_backend.last_stats.steps,
        after_backend.last_stats.steps,
    )
    assert after_backend.last_stats.steps < 0.75 * before_backend.last_stats.steps
