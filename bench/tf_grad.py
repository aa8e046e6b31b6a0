"""Value and gradient by `tf.GradientTape` of batched functions on the TensorFlow backend,
against the forward call (`abir.backends.tf.reverse`).

For `damped` (a loop of per-member trip count 0-20) and `tree_sum` (tree recursion of depth
0-8) of test/unit/test_reverse_mode.py, float64, the default backend (XLA), with respect to the
per-member inputs and a shared `tf.Variable`, three ways, each against the forward call of the
same kind: an eager tape around the call (against the eager call); a tape inside
`abir.tf_function(jit_compile=True)` and a tape around such a function (against the compiled
function's forward call). Each variant is called twice before timing, then the variants are
alternated `--repeats` times in one process; the medians of CPU time (the process's) are
compared. Gradients are checked against the forward values' sum once per program.

Run: `.venv/bin/python bench/tf_grad.py [--sizes 64,1024] [--repeats 7]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

import abir

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test", "unit"))
from test_reverse_mode import damped, tree_sum  # noqa: E402 (the programs of the reverse-mode tests)

PROGRAMS = {"damped": (damped, 21), "tree_sum": (tree_sum, 9)}
"""name: (function, the exclusive bound of its per-member count)."""


def median_cpu_times(variants: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """The median CPU time of each variant, called twice first, then alternated in turn order
    and reversed order."""
    for variant in variants.values():
        variant()
        variant()
    times: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants.items())
    for repeat in range(repeats):
        for name, variant in order if repeat % 2 else order[::-1]:
            start = time.process_time()
            variant()
            times[name].append(time.process_time() - start)
    return {name: float(np.median(values)) for name, values in times.items()}


def variants_of(name: str, members: int, rng: np.random.Generator) -> dict[str, Callable[[], object]]:
    function, bound = PROGRAMS[name]
    batched = abir.Context().batch_uncurried(function)
    backend = abir.TensorFlowBackend()
    x, w, n = tf.constant(rng.uniform(-1, 1, members)), tf.Variable(0.8, dtype=tf.float64), rng.integers(0, bound, members)

    def total(x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_sum(batched(x, w, n, backend=backend))

    def taped(x: tf.Tensor, call: Callable[[tf.Tensor], tf.Tensor]) -> list[tf.Tensor]:
        with tf.GradientTape() as tape:
            tape.watch(x)
            value = call(x)
        return [value, *tape.gradient(value, [x, w])]

    compiled = abir.tf_function(total, jit_compile=True)
    inside = abir.tf_function(lambda x: taped(x, total), jit_compile=True)
    return {
        "eager forward": lambda: total(x).numpy(),
        "eager tape": lambda: [t.numpy() for t in taped(x, total)],
        "compiled forward": lambda: compiled(x).numpy(),
        "tape inside": lambda: [t.numpy() for t in inside(x)],
        "tape around": lambda: [t.numpy() for t in taped(x, compiled)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="64,1024", help="members per batch, comma-separated")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    for members in [int(size) for size in args.sizes.split(",")]:
        for name in PROGRAMS:
            variants = variants_of(name, members, rng)
            values = [float(variants[key]()[0]) for key in ("eager tape", "tape inside", "tape around")]
            np.testing.assert_allclose(values, float(variants["eager forward"]()), rtol=1e-9)
            median = median_cpu_times(variants, args.repeats)
            eager, compiled = median["eager forward"], median["compiled forward"]
            print(
                f"{members} members, {name}: eager tape {median['eager tape'] / eager:.2f}x, tape inside "
                f"abir.tf_function(jit_compile=True) {median['tape inside'] / compiled:.2f}x, tape around it "
                f"{median['tape around'] / compiled:.2f}x the forward call (forward CPU: eager {eager * 1e3:.1f} ms, "
                f"compiled {compiled * 1e3:.1f} ms)",
                flush=True,
            )


if __name__ == "__main__":
    main()
