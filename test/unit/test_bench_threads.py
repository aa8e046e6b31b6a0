"""bench/threads.py: its table groups the processes of each program, size and variant into one
row with their spread; a run at a tiny size measures every program in a fresh process (a failed
process makes the bench exit non-zero)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import threads as bench_threads  # noqa: E402


def measurement(variant: str, wall: float, threads: int) -> bench_threads.Measurement:
    return bench_threads.Measurement("collatz", 64, variant, 0.5, 0.5, wall, 2 * wall, wall, 0.0, wall, threads, 100)


def test_the_table_has_one_row_per_program_size_and_variant_with_the_spread_over_processes() -> None:
    rows = bench_threads.table(
        [measurement("default", 1e-4, 2), measurement("default", 3e-4, 3), measurement("other", 2e-4, 1)]
    )
    assert len(rows) == 2 + 2
    default = next(row for row in rows if "| default |" in row)
    assert "| 2 | 100 / 200 / 300 us |" in default  # two processes, min / median / max
    assert "| 2-3 |" in default
    assert "| 1 |" in next(row for row in rows if "| other |" in row)


@pytest.mark.full
def test_a_run_measures_every_program_in_fresh_processes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "threads.json"
    code = bench_threads.main(["--processes", "1", "--programs", "collatz,nuts-d10", "--sizes", "8",
                               "--settle", "0", "--seconds", "0.2", "--json-out", str(out)])  # fmt: skip
    table = capsys.readouterr().out
    assert code == 0, table
    measured = json.loads(out.read_text())
    assert [(m["program"], m["size"]) for m in measured] == [("collatz", 8), ("nuts-d10", 8)]
    assert all(m["calls"] >= 3 and m["cpu"] > 0 for m in measured)


@pytest.mark.full
def test_a_failed_process_is_reported_and_the_bench_exits_non_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code = bench_threads.main(["--processes", "1", "--programs", "no-such-program", "--sizes", "8"])
    assert code == 1
    assert "process 1, variant default: FAILED" in capsys.readouterr().out
