"""A/B of the loop over the active members' rows (`abir.backends.jax.one_kernel.ActiveRows`) on
the suite's programs, in one process, by CPU time.

    PYTHONPATH=. .venv/bin/python bench/active_rows.py --programs all --sizes 64,1024

"off" is the same code with the choice disabled (`compaction.LIVE_ROWS_MIN` out of reach: the
runs count their active members but never compile a loop over fewer rows); "on" the default.
Each program is compiled afresh for both (first call), called once more (the second call waits
for the background compilation), then called alternately `--repeats` times; the table gives
the first calls, the second call of "on" and the steady medians. Results of both are checked
equal first.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import suite_programs as sp  # noqa: E402

import abir  # noqa: E402
from abir.backends.jax import compaction  # noqa: E402

DEFAULT_MIN = compaction.LIVE_ROWS_MIN


def cpu_seconds(call: Callable[[], Any]) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def row(program: sp.SuiteProgram, size: int, repeats: int) -> str:
    inputs = program.make_inputs(size, False)
    calls, first, second = {}, {}, {}
    for label, minimum in (("off", 10**9), ("on", DEFAULT_MIN)):
        compaction.LIVE_ROWS_MIN = minimum  # read when a loop is traced and when a run is counted
        try:
            function, backend = sp.abir_function(program), abir.JaxBackend()

            def call(function: Any = function, backend: abir.JaxBackend = backend) -> tuple[np.ndarray, ...]:
                return sp.as_tuple(function(*inputs, backend=backend, max_stack_depth=program.max_stack_depth))

            first[label] = cpu_seconds(call)
            second[label] = cpu_seconds(call)
        finally:
            compaction.LIVE_ROWS_MIN = DEFAULT_MIN
        calls[label] = call
    sp.assert_equal(calls["on"](), calls["off"](), program.name)
    times: dict[str, list[float]] = {label: [] for label in calls}
    for _ in range(repeats):
        for label, call in calls.items():
            times[label].append(cpu_seconds(call))
    off, on = float(np.median(times["off"])), float(np.median(times["on"]))
    return (
        f"| {program.name} | {size} | {first['off']:.2f} / {first['on']:.2f} s | {second['on']:.2f} s "
        f"| {off * 1e3:.2f} / {on * 1e3:.2f} ms | {on / off:.2f} |"
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", default="all", help="comma-separated names of bench/suite_programs.py, or all")
    parser.add_argument("--sizes", default="64,1024")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    names = list(sp.SUITE) if args.programs == "all" else args.programs.split(",")
    print("| program | B | first call off / on | 2nd call on | steady off / on | on / off |")
    print("|---|---|---|---|---|---|")
    for name in names:
        for size in (int(s) for s in args.sizes.split(",")):
            print(row(sp.SUITE[name], size, args.repeats), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
