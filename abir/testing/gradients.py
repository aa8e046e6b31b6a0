"""Differential fuzzing of reverse mode: random float programs, their batched vjp on JAX against
`jax.vjp` of the same per-member Python function run member by member.

    python -m abir.testing.fuzz --grad --count 100 --seed 0

A program (`GradientProgram`) is an entry `f(x, y, n, w)`: `x` and `y` per-member floats, `n` a
per-member int in 0..5 (trip counts, recursion depths), `w` a float shared by all members (a
model parameter). Its body assigns smooth expressions (`+ - *`, `np.sin`, `np.tanh`,
`a / (1.0 + b * b)`, `np.exp(np.tanh(a))`) and kinks (`np.abs`, `np.maximum`, `np.minimum`, where
JAX's derivative is a convention the batched run must follow too), branches on float
comparisons, loops with per-member trip counts (`while k > 0`, `for _ in range(n)`, a `while`
bounded by a counter whose test is a float comparison), early returns and calls of a recursive
function `r(d, a, b)` (one or two recursive calls: chains and trees). Values stay bounded: a
loop's assignments pass through `np.tanh` or add half a sine.

The check (`check_program`): the batched `jax.vjp` with respect to `x`, `y` and `w` with a random
cotangent equals, at float64 and rtol `RTOL`, the sum over members of `jax.vjp` of the per-member
function (the same source with `np` bound to `jax.numpy`) run eagerly, and the batched value equals
the plain NumPy run per member. Program `i` of seed `s` is drawn from `random.Random(f"grad:{s}:{i}")`.
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

RTOL = 1e-9
"""Relative tolerance of derivatives and values (float64)."""
ATOL = 1e-12
"""Absolute tolerance, for derivatives that vanish up to rounding (a zero summed over members)."""
BATCH = 6
"""Members per program."""
MAX_N = 5
"""The per-member int `n` is drawn from 0..MAX_N."""
MAX_DEPTH = 4
"""The recursion depth a call of `r` passes at most (`min(n, MAX_DEPTH)`)."""

CONSTANTS = ("0.5", "-1.25", "0.75", "2.0", "-0.3")
SMOOTH_UNARY = ("np.sin({})", "np.tanh({})", "np.cos({})", "np.exp(np.tanh({}))", "({} * 0.5)")
KINKED_UNARY = ("np.abs({})",)
BINARY = ("({} + {})", "({} - {})", "({} * {})", "({} / (1.0 + {} ** 2))", "np.maximum({}, {})", "np.minimum({}, {})")


@dataclass
class GradientProgram:
    """A generated program: its source (functions `f` and maybe `r`, `np` meaning NumPy) and its
    inputs (`x`, `y`: [BATCH] floats, `n`: [BATCH] ints, `w`: a float)."""

    label: str
    source: str
    x: np.ndarray
    y: np.ndarray
    n: np.ndarray
    w: float


class FloatProgramGenerator:
    """Draws a `GradientProgram` from `rng` (see the module docstring for its shape)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.names = 0
        self.recursive = rng.random() < 0.5

    def generate(self, label: str) -> GradientProgram:
        entry = self.function("f", ["x", "y", "w"], ["n"], recursive_body=False)
        functions = [entry]
        if self.recursive:
            functions.append(self.recursive_function())
        source = "import numpy as np\n\n\n" + "\n\n".join(functions)
        rng = self.rng
        x = np.array([rng.uniform(-2, 2) for _ in range(BATCH)])
        y = np.array([rng.uniform(-2, 2) for _ in range(BATCH)])
        n = np.array([rng.randint(0, MAX_N) for _ in range(BATCH)])
        return GradientProgram(label, source, x, y, n, rng.uniform(-1, 1))

    def new_name(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    # ----- functions ----------------------------------------------------------------------------
    def function(self, name: str, floats: list[str], ints: list[str], recursive_body: bool) -> str:
        scope = list(floats)
        body = self.block(scope, ints, size=self.rng.randint(2, 5), depth=0, in_loop=False)
        if self.recursive and not any("r(" in line for line in body):
            boundaries = [i for i, line in enumerate(body) if not line.startswith((" ", "else:"))] + [len(body)]
            body.insert(self.rng.choice(boundaries), self.recursive_call(list(floats), ints, in_loop=False)[0])
        body.append(f"return {self.expr(scope, 2)}")
        return f"def {name}({', '.join(floats[:2] + ints + floats[2:])}):\n" + indent(body)

    def recursive_function(self) -> str:
        """`r(d, a, b)`: a base case, a few statements, then one or two recursive calls."""
        scope = ["a", "b"]
        base = f"if d <= 0:\n    return {self.expr(scope, 1)}"
        body = [base, *self.block(scope, [], size=self.rng.randint(0, 2), depth=0, in_loop=False, calls=False)]
        first = f"r(d - 1, {self.expr(scope, 1)}, {self.expr(scope, 1)})"
        if self.rng.random() < 0.5:
            second = f"r(d - 2, {self.expr(scope, 1)}, {self.expr(scope, 1)})"
            body.append(f"return np.tanh({first} * {self.expr(scope, 1)} + {second})")
        else:
            body.append(f"return np.tanh({first} + {self.expr(scope, 1)})")
        return "def r(d, a, b):\n" + indent(body)

    # ----- statements ---------------------------------------------------------------------------
    def block(self, scope: list[str], ints: list[str], size: int, depth: int, in_loop: bool, calls: bool = True) -> list[str]:
        lines: list[str] = []
        for _ in range(size):
            lines.extend(self.statement(scope, ints, depth, in_loop, calls))
        return lines or ["pass"]

    def statement(self, scope: list[str], ints: list[str], depth: int, in_loop: bool, calls: bool) -> list[str]:
        choices: list[Callable[[], list[str]]] = [lambda: self.assign(scope, in_loop)] * 3
        if depth < 2:
            choices.append(lambda: self.if_statement(scope, ints, depth, in_loop, calls))
            if ints:
                choices += [lambda: self.counted_loop(scope, ints, depth, calls), lambda: self.for_loop(scope, ints, depth, calls)]
            choices.append(lambda: self.float_loop(scope, ints, depth, calls))
        if not in_loop and depth > 0:
            choices.append(lambda: [f"return {self.expr(scope, 2)}"])
        if calls and self.recursive and ints:
            choices.append(lambda: self.recursive_call(scope, ints, in_loop))
        return self.rng.choice(choices)()

    def assign(self, scope: list[str], in_loop: bool) -> list[str]:
        value = self.expr(scope, 2)
        target = self.rng.choice(scope) if in_loop or self.rng.random() < 0.5 else self.new_name("v")
        if in_loop:  # bounded however many times the loop runs
            value = f"np.tanh({value})" if self.rng.random() < 0.5 else f"{target} + 0.5 * np.sin({value})"
        if target not in scope and not in_loop:
            scope.append(target)
        return [f"{target} = {value}"]

    def if_statement(self, scope: list[str], ints: list[str], depth: int, in_loop: bool, calls: bool) -> list[str]:
        test = f"{self.expr(scope, 1)} > {self.expr(scope, 1)}"
        then = self.block(list(scope), ints, self.rng.randint(1, 2), depth + 1, in_loop, calls)
        otherwise = self.block(list(scope), ints, self.rng.randint(1, 2), depth + 1, in_loop, calls)
        return [f"if {test}:", *indent_lines(then), "else:", *indent_lines(otherwise)]

    def counted_loop(self, scope: list[str], ints: list[str], depth: int, calls: bool) -> list[str]:
        counter = self.new_name("k")
        body = [f"{counter} -= 1", *self.block(scope, ints, self.rng.randint(1, 3), depth + 1, True, calls)]
        return [f"{counter} = {self.rng.choice(ints)}", f"while {counter} > 0:", *indent_lines(body)]

    def for_loop(self, scope: list[str], ints: list[str], depth: int, calls: bool) -> list[str]:
        body = self.block(scope, ints, self.rng.randint(1, 3), depth + 1, True, calls)
        return [f"for _ in range({self.rng.choice(ints)}):", *indent_lines(body)]

    def float_loop(self, scope: list[str], ints: list[str], depth: int, calls: bool) -> list[str]:
        """A loop whose trip count a float comparison decides, bounded by a counter."""
        counter = self.new_name("k")
        variable = self.rng.choice(scope)
        body = [f"{counter} += 1", f"{variable} = {variable} + 0.25 + 0.5 * np.tanh({self.expr(scope, 1)})",
                *self.block(scope, ints, self.rng.randint(0, 2), depth + 1, True, calls)]  # fmt: skip
        test = f"{counter} < {MAX_N} and {variable} < {self.rng.choice(CONSTANTS)}"
        return [f"{counter} = 0", f"while {test}:", *indent_lines(body)]

    def recursive_call(self, scope: list[str], ints: list[str], in_loop: bool) -> list[str]:
        call = f"r(min({self.rng.choice(ints)}, {MAX_DEPTH}), {self.expr(scope, 1)}, {self.expr(scope, 1)})"
        target = self.rng.choice(scope)
        return [f"{target} = {call}" if not in_loop else f"{target} = np.tanh({call})"]

    # ----- expressions --------------------------------------------------------------------------
    def expr(self, scope: list[str], depth: int) -> str:
        roll = self.rng.random()
        if depth <= 0 or roll < 0.3:
            return self.rng.choice(scope) if self.rng.random() < 0.8 else self.rng.choice(CONSTANTS)
        if roll < 0.6:
            form = self.rng.choice(SMOOTH_UNARY * 3 + KINKED_UNARY)
            return form.format(self.expr(scope, depth - 1))
        form = self.rng.choice(BINARY)
        return form.format(self.expr(scope, depth - 1), self.expr(scope, depth - 1))


def indent_lines(lines: list[str]) -> list[str]:
    return ["    " + line for line in "\n".join(lines).split("\n")]


def indent(lines: list[str]) -> str:
    return "\n".join(indent_lines(lines)) + "\n"


def generate(seed: int, index: int) -> GradientProgram:
    """Program `index` of `seed`."""
    rng = random.Random(f"grad:{seed}:{index}")
    return FloatProgramGenerator(rng).generate(f"gradient seed {seed}, program {index}")


# ----- the check ----------------------------------------------------------------------------


@dataclass
class GradientFailure:
    """What differed: `what` names the value or derivative, with the batched and the per-member
    (reference) numbers."""

    what: str
    got: Any
    want: Any

    def describe(self) -> str:
        return f"{self.what}: batched {np.asarray(self.got).tolist()}, per member {np.asarray(self.want).tolist()}"


def load_module(program: GradientProgram, directory: str, name: str) -> Any:
    """The program's source as a module written to `directory` (abir reads a function's source
    from its file)."""
    path = os.path.join(directory, f"{name}.py")
    with open(path, "w") as file:
        file.write(program.source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def per_member_vjp(program: GradientProgram, cotangent: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(values, d/dx, d/dy per member, d/dw summed over members) by `jax.vjp` of the per-member
    function, the source run eagerly with `np` bound to `jax.numpy`."""
    import jax
    import jax.numpy as jnp

    namespace: dict[str, Any] = {}
    exec(compile(program.source, program.label, "exec"), namespace)
    namespace["np"] = jnp
    values, dx, dy, dw = [], [], [], 0.0
    for x, y, n, c in zip(program.x, program.y, program.n, cotangent, strict=True):
        value, pull = jax.vjp(lambda x, y, w, n=int(n): namespace["f"](x, y, n, w), jnp.float64(x), jnp.float64(y), jnp.float64(program.w))
        gx, gy, gw = pull(jnp.float64(c))
        values.append(float(value))
        dx.append(float(gx))
        dy.append(float(gy))
        dw += float(gw)
    return np.array(values), np.array(dx), np.array(dy), dw


def check_program(program: GradientProgram, directory: str, name: str) -> list[GradientFailure]:
    """The differences between the batched run's values and vjp (JAX backend) and the
    per-member ones (see the module docstring); an error raised by abir is a failure too."""
    import jax
    import jax.numpy as jnp

    import abir

    rng = np.random.default_rng(zlib.crc32(program.label.encode()))  # the same cotangent in every process
    cotangent = rng.uniform(-1, 1, BATCH)
    with jax.enable_x64(True):
        want_values, want_dx, want_dy, want_dw = per_member_vjp(program, cotangent)
        module = load_module(program, directory, name)
        context = abir.Context()
        if "def r(" in program.source:
            context.batch_uncurried(module.r)
        batched = context.batch_uncurried(module.f)
        plain = np.array([module.f(x, y, int(n), program.w) for x, y, n in zip(program.x, program.y, program.n, strict=True)])
        backend = abir.JaxBackend()
        try:
            values, pull = jax.vjp(lambda x, y, w: batched(x, y, program.n, w, backend=backend), jnp.asarray(program.x), jnp.asarray(program.y), jnp.float64(program.w))
            dx, dy, dw = pull(jnp.asarray(cotangent))
        except Exception as error:  # noqa: BLE001 - any error of abir's is the finding
            return [GradientFailure(f"abir raised {type(error).__name__}: {error}", None, None)]
    compared = [("value (against plain NumPy)", values, plain), ("value (against JAX per member)", values, want_values),
                ("d/dx", dx, want_dx), ("d/dy", dy, want_dy), ("d/dw", dw, want_dw)]  # fmt: skip
    return [GradientFailure(what, got, want) for what, got, want in compared if not close(got, want)]


def close(got: Any, want: Any) -> bool:
    return bool(np.allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64), rtol=RTOL, atol=ATOL))


def repro(program: GradientProgram) -> str:
    """The program and its inputs as a standalone script."""
    return "\n".join([
        program.source.rstrip(), "", "", "import jax", "import abir", "", "jax.config.update('jax_enable_x64', True)",
        "ctx = abir.Context()", *(["ctx.batch_uncurried(r)"] if "def r(" in program.source else []),
        "batched_f = ctx.batch_uncurried(f)",
        f"x, y, n, w = np.array({program.x.tolist()}), np.array({program.y.tolist()}), np.array({program.n.tolist()}), {program.w!r}",
        "print(jax.grad(lambda x, y, w: batched_f(x, y, n, w, backend=abir.JaxBackend()).sum(), argnums=(0, 1, 2))(x, y, w))",
    ])  # fmt: skip


def run_gradient_campaign(count: int, seed: int, start: int, directory: str, out: Callable[[str], None] = print) -> int:
    """Check programs `start .. start + count - 1` of `seed`, printing each failure with a
    reproduction; the number of failing programs."""
    failing = 0
    for index in range(start, start + count):
        program = generate(seed, index)
        failures = check_program(program, directory, f"abir_grad_{seed}_{index}")
        if failures:
            failing += 1
            out(f"=== gradient failure {failing}: {program.label} ===")
            out("\n".join(f"# {failure.describe()}" for failure in failures))
            out(repro(program) + "\n")
        done = index - start + 1
        if done % 25 == 0 or done == count:
            out(f"# {done}/{count} gradient programs, {failing} failing")
    return failing
