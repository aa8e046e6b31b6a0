"""The XLA floor of one machine step: what a step costs when the machine adds nothing.

`floor_us_per_step(batch, num_blocks)` times a jitted `lax.while_loop` with the shape of a
switch-executed machine: `batch` members with an int32 program counter each, `num_blocks`
branches, and per iteration `k = min(pc)` then `lax.switch(k, branches, pc, x)` where branch j
does one masked update (`m = pc == j`; members at j move to `(j + 1) % num_blocks` and update
their float64 `x`). No stack, no registers, no scheduler: any abir JAX step costs at least this
plus its block's own work. `empty_loop_us(batch)` times a loop doing only a counter increment and
`x + 1.0`, the cost of a `while_loop` iteration itself.

Both compile once per shape (the iteration count is a traced argument), then time a second call
after a warm-up call; results are cached per shape, so repeated queries are free.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)  # float64, as abir's own runs use


def _branch(j: int, num_blocks: int) -> Callable[[Any, Any], tuple[Any, Any]]:
    """Block j of the floor machine: one masked update of the members at j."""

    def branch(pc: Any, x: Any) -> tuple[Any, Any]:
        m = pc == j
        return jnp.where(m, (pc + 1) % num_blocks, pc), jnp.where(m, x * 1.0001 + j, x)

    return branch


@cache
def _floor_loop(num_blocks: int) -> Callable[[Any, Any, Any], tuple[Any, Any]]:
    """The jitted floor machine for `num_blocks` blocks: (pc, x, iterations) -> (pc, x)."""
    branches = [_branch(j, num_blocks) for j in range(num_blocks)]

    def run(pc: Any, x: Any, iterations: Any) -> tuple[Any, Any]:
        def body(carry: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
            i, pc, x = carry
            pc, x = lax.switch(jnp.min(pc), branches, pc, x)
            return i + 1, pc, x

        _, pc, x = lax.while_loop(lambda c: c[0] < iterations, body, (jnp.int32(0), pc, x))
        return pc, x

    return jax.jit(run)


@cache
def _empty_loop() -> Callable[[Any, Any], Any]:
    """The jitted empty loop: (x, iterations) -> x + iterations, one `x + 1.0` per iteration."""

    def run(x: Any, iterations: Any) -> Any:
        def body(carry: tuple[Any, Any]) -> tuple[Any, Any]:
            i, x = carry
            return i + 1, x + 1.0

        _, x = lax.while_loop(lambda c: c[0] < iterations, body, (jnp.int32(0), x))
        return x

    return jax.jit(run)


def _us_per_iteration(call: Callable[[], Any], iterations: int) -> float:
    """Microseconds per loop iteration of the second of two calls (the first compiles)."""
    jax.block_until_ready(call())
    start = time.perf_counter()
    jax.block_until_ready(call())
    return (time.perf_counter() - start) / iterations * 1e6


@cache
def floor_us_per_step(batch: int, num_blocks: int, iterations: int = 20000) -> float:
    """Microseconds per iteration of the min-PC `lax.switch` loop over `num_blocks` one-masked-
    update branches at batch size `batch` (cached per arguments)."""
    pc = jnp.arange(batch, dtype=jnp.int32) % num_blocks
    x = jnp.zeros(batch, dtype=jnp.float64)
    n = jnp.int32(iterations)
    loop = _floor_loop(num_blocks)
    return _us_per_iteration(lambda: loop(pc, x, n), iterations)


@cache
def empty_loop_us(batch: int, iterations: int = 20000) -> float:
    """Microseconds per iteration of a `while_loop` doing only a counter increment and
    `x + 1.0` on a float64 [batch] (cached per arguments)."""
    x = jnp.zeros(batch, dtype=jnp.float64)
    n = jnp.int32(iterations)
    loop = _empty_loop()
    return _us_per_iteration(lambda: loop(x, n), iterations)


if __name__ == "__main__":
    for b in (1, 64, 1024, 4096):
        print(f"B={b:5d} empty {empty_loop_us(b):6.2f}us  "
              + "  ".join(f"N={n}: {floor_us_per_step(b, n):6.2f}us" for n in (4, 8, 16, 32)))  # fmt: skip
