"""bench/lanes.py at a tiny size: every workload, run as fixed batches, one batch and with
`lanes=`, on every backend, equals the per-member Python result (the bench checks each before
timing it and exits non-zero with FAILED rows otherwise), and its table has a row per way."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import lanes as bench_lanes  # noqa: E402

import abir  # noqa: E402


# the bench script on NumPy; on JAX and TF, whose lanes test_lanes.py checks, under `full` only
@pytest.mark.parametrize(
    "backend", [pytest.param("jax", marks=pytest.mark.full), "numpy", pytest.param("tf-xla", marks=pytest.mark.full)]
)
def test_bench_lanes_runs_and_checks_every_way(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = bench_lanes.main(["--size", "40", "--lanes", "8", "--backends", backend, "--repeats", "1"])
    table = capsys.readouterr().out
    assert code == 0, table
    assert "FAILED" not in table
    for workload in bench_lanes.WORKLOADS:
        rows = [line for line in table.splitlines() if line.startswith(f"| {workload} | {backend} |")]
        assert len(rows) == 3, table  # fixed batches, one batch, lanes


@pytest.mark.parametrize("name", sorted(bench_lanes.WORKLOADS))
def test_each_workload_with_lanes_equals_python_per_member(name: str) -> None:
    workload = bench_lanes.WORKLOADS[name]
    inputs = workload.make_inputs(30)
    want = bench_lanes.python_run(workload, inputs)
    batched = abir.Context().batch_uncurried(workload.function)
    got = bench_lanes.run_way(batched, "lanes", inputs, 4, abir.NumpyBackend())
    bench_lanes.suite_programs.assert_equal(got, want, name)


def test_heavy_tail_depths_are_geometric() -> None:
    """Half the members stop at depth 0, a quarter at 1: the cost 2**depth is heavy-tailed."""
    inputs = bench_lanes.WORKLOADS["heavy-tail"].make_inputs(400)
    depths = bench_lanes.python_run(bench_lanes.WORKLOADS["heavy-tail"], inputs)[0]
    assert 0.4 < np.mean(depths == 0) < 0.6
    assert 0.15 < np.mean(depths == 1) < 0.35
    assert depths.max() >= 5


@pytest.mark.full  # make test: lanes on two devices through test_lanes_devices.py
def test_bench_lanes_on_two_devices_runs_itself_with_them(capfd: pytest.CaptureFixture[str]) -> None:
    """`--devices 2` in a process whose JAX has one device: the bench runs again in a fresh
    process with two host devices, and its table gains the row of lanes= on both."""
    pytest.importorskip("jax")
    argv = ["--size", "40", "--lanes", "8", "--backends", "jax", "--workloads", "collatz", "--repeats", "1", "--devices", "2"]
    code = bench_lanes.main(argv)
    table = capfd.readouterr().out
    assert code == 0, table
    assert "FAILED" not in table
    rows = [line for line in table.splitlines() if line.startswith("| collatz | jax | 8 | lanes, 2 devices |")]
    assert len(rows) == 1 and rows[0].endswith("x |"), table
