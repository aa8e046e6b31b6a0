"""`f(xs..., lanes=L)` on a batch sharded over devices: each device runs its own L lanes, all
drawing from one queue (`abir.lane_devices`), and across processes started with
`jax.distributed.initialize` each process runs the members of its own shards.

JAX sees several CPU devices only when XLA_FLAGS asks for them before it starts, so the checks
on devices run in fresh Python processes (`TWO_DEVICES`; `DISTRIBUTED`, two of them talking over
loopback) on test_lanes.py's programs: results equal the plain per-member Python run with an ordinary call's dtypes and
structure and the argument's sharding; both devices run members; every program XLA compiled
for the run (dumped with `--xla_dump_to`) holds a loop and no collective, so nothing
synchronizes the devices; an interruption and members' errors keep what finished.
"""

from __future__ import annotations

import itertools
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

import abir
from abir.lane_devices import ArrayChunks, MemberQueue, chunk_rows

pytest.importorskip("jax")

PROGRAMS = r'''
import numpy as np
import abir
from test_lanes import collatz, ctx, fib, first_square_above, tries_until_below  # on PYTHONPATH


def assert_same(got, want, ordinary):
    """`got` (a call with lanes) equals `want` (per-member Python), leaf by leaf, with the dtypes
    of `ordinary` (an ordinary call)."""
    got, want, ordinary = (x if isinstance(x, tuple) else (x,) for x in (got, want, ordinary))
    assert len(got) == len(want) == len(ordinary)
    for g, w, o in zip(got, want, ordinary):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        assert np.asarray(g).dtype == np.asarray(o).dtype, (g.dtype, o.dtype)
'''

TWO_DEVICES = PROGRAMS + r'''
import pathlib, sys
import jax
from jax.sharding import NamedSharding, PartitionSpec as P
from abir.backends.jax.devices import lane_devices
from abir.errors import StepLimitError
from abir.lane_devices import run_lanes_on_devices
from abir.vm.machine import compile_machine

assert len(jax.devices()) == 2, jax.devices()
mesh = jax.make_mesh((2,), ("batch",))
sharding = NamedSharding(mesh, P("batch"))
backend = abir.JaxBackend()


def put(x):
    with jax.enable_x64(True):
        return jax.device_put(x, sharding)


n = np.arange(1, 301, dtype=np.int64)
got = collatz(put(n), lanes=8, backend=backend)
assert got.sharding == sharding, got.sharding
assert_same(got, collatz(n, dry_run=True), collatz(n[:4], backend=backend))

depths = np.arange(40, dtype=np.int64) % 12
assert_same(fib(put(depths), lanes=4, backend=backend), fib(depths, dry_run=True), fib(depths[:2], backend=backend))

# a second argument unsharded, and a Python number shared by every member
targets = (np.arange(64) * 7) % 50
ns = np.arange(64, dtype=np.int64)
want = first_square_above(ns, targets, dry_run=True)
assert_same(first_square_above(put(ns), targets, lanes=4, backend=backend), want, first_square_above(ns, targets, backend=backend))
assert_same(first_square_above(put(ns), 30, lanes=4, backend=backend), first_square_above(ns, 30, dry_run=True),
            first_square_above(ns, 30, backend=backend))

# random keys (an event axis, not split) and a float shared by every member
keys = abir.random.key(np.arange(50))
with jax.enable_x64(True):
    split_keys = jax.device_put(keys, NamedSharding(mesh, P("batch", None)))
assert_same(tries_until_below(split_keys, 0.2, lanes=4, backend=backend), tries_until_below(keys, 0.2, dry_run=True),
            tries_until_below(keys[:2], 0.2, backend=backend))

# with a progress bar (updated by the calling thread)
assert_same(collatz(put(n), lanes=8, backend=backend, progress=True), collatz(n, dry_run=True), collatz(n[:4], backend=backend))

# both devices run members, drawn from one queue
many = np.arange(1, 2001, dtype=np.int64)
machine = compile_machine(ctx.lowered_for_args("collatz", [n], backend))
placement = lane_devices("collatz()", [put(many)])
with backend.scope():
    outcome = run_lanes_on_devices(machine, placement, backend, 8, 15, ("test", 8), chunk=16)
assert outcome.error is None and outcome.finished.all()
assert sum(outcome.members_per_device) == len(many) and min(outcome.members_per_device) > 0, outcome.members_per_device
np.testing.assert_array_equal(np.asarray(outcome.outputs[0]), collatz(many, dry_run=True))

# members that reach max_steps stop alone, named by their index in the whole batch
try:
    collatz(n, lanes=8, backend=backend, max_steps=100)
except StepLimitError as error:
    slow = error.members
try:
    collatz(put(n), lanes=8, backend=backend, max_steps=100)
except StepLimitError as error:
    assert error.members == slow and error.unfinished == slow, (error.members, slow)
    assert sorted(error.finished + error.unfinished) == list(range(len(n)))
    np.testing.assert_array_equal(np.asarray(error.results)[error.finished], collatz(n, dry_run=True)[error.finished])
else:
    raise AssertionError("max_steps=100 did not stop Collatz of 1..300")


# a KeyboardInterrupt while the devices run stops them and keeps what finished
def interrupt(done):
    if done > 0:
        raise KeyboardInterrupt


big = np.arange(1, 20_001, dtype=np.int64)
placement = lane_devices("collatz()", [put(big)])
with backend.scope():
    outcome = run_lanes_on_devices(machine, placement, backend, 8, 15, ("test", 8), on_progress=interrupt, chunk=16)
assert isinstance(outcome.error, KeyboardInterrupt) and 0 < outcome.finished.sum() < len(big)
done = np.flatnonzero(outcome.finished)
np.testing.assert_array_equal(np.asarray(outcome.outputs[0])[done], collatz(big[done], dry_run=True))

# a stream on both devices: every member once, with its plain Python result
stream = ((np.int64(k),) for k in range(1, 2001))
seen = dict(collatz.imap(stream, lanes=8, chunk_size=16, devices=jax.devices(), backend=backend))
assert sorted(seen) == list(range(2000))
np.testing.assert_array_equal([seen[i] for i in range(2000)], collatz(np.arange(1, 2001), dry_run=True))

# every program compiled for the runs: a loop, and no collective
dumped = [path.read_text() for path in pathlib.Path(sys.argv[1]).glob("*after_optimizations.txt")]
assert any(" while(" in text for text in dumped), len(dumped)
for collective in ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter"):
    assert not any(collective in text for text in dumped), collective
print("ok")
'''

DISTRIBUTED = PROGRAMS + r'''
import sys
import jax

process, port = int(sys.argv[1]), sys.argv[2]
jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=process)
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec as P

assert jax.process_count() == 2 and len(jax.devices()) == 4 and len(jax.local_devices()) == 2
sharding = NamedSharding(jax.make_mesh((4,), ("batch",)), P("batch"))
n = np.arange(1, 1001, dtype=np.int64)
with jax.enable_x64(True):
    spread = jax.make_array_from_callback(n.shape, sharding, lambda index: n[index])
    got = collatz(spread, lanes=16, backend="jax")
    assert got.sharding == sharding and not got.is_fully_addressable
    gathered = multihost_utils.process_allgather(got, tiled=True)
assert_same(gathered, collatz(n, dry_run=True), collatz(n[:4], backend="jax"))
print("ok", process)
'''


def _environment(devices: int, extra_flags: str = "") -> dict[str, str]:
    return {
        **os.environ,
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices} {extra_flags}",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }


def _script(directory: pathlib.Path, text: str) -> str:
    """`text` as a file in `directory` (abir reads a batched function's source from its file)."""
    path = directory / "lanes_devices_script.py"
    path.write_text(text)
    return str(path)


def test_lanes_on_two_devices_draw_from_one_queue_without_collectives(tmp_path: pathlib.Path) -> None:
    dump = tmp_path / "hlo"
    env = _environment(2, f"--xla_dump_to={dump} --xla_dump_hlo_as_text")
    script = _script(tmp_path, TWO_DEVICES)
    out = subprocess.run([sys.executable, script, str(dump)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ok"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return int(probe.getsockname()[1])


def test_lanes_across_two_processes_of_jax_distributed(tmp_path: pathlib.Path) -> None:
    env = _environment(2)
    port = str(_free_port())
    script = _script(tmp_path, DISTRIBUTED)
    runs = [
        subprocess.Popen([sys.executable, script, str(process), port], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)  # fmt: skip
        for process in (0, 1)
    ]
    try:
        outputs = [run.communicate(timeout=600) for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
    for process, (run, (stdout, stderr)) in enumerate(zip(runs, outputs, strict=True)):
        assert run.returncode == 0, stderr[-3000:]
        assert stdout.splitlines()[-1] == f"ok {process}", stdout[-3000:]  # after gloo's connection lines


def test_the_queue_hands_out_every_member_once_in_order_the_last_chunks_small() -> None:
    queue = MemberQueue(members=1000, rows=100, least=8, devices=2)
    chunks = []
    while (taken := queue.take()) is not None:
        chunks.append(taken)
    starts = [start for start, _ in chunks]
    counts = [count for _, count in chunks]
    assert starts == list(np.cumsum([0, *counts[:-1]])) and sum(counts) == 1000
    assert counts[0] == 100 and max(counts) <= 100
    assert counts[-2] == 8 and counts == sorted(counts, reverse=True)
    assert queue.take() is None


def test_chunks_hold_two_members_per_lane_at_least_and_sixteen_at_most() -> None:
    assert chunk_rows(members=100, lanes=64, devices=2) == 128
    assert chunk_rows(members=65_536, lanes=1024, devices=2) == 8192
    assert chunk_rows(members=10**8, lanes=1024, devices=2) == 16 * 1024


def test_few_members_are_split_evenly_over_the_devices() -> None:
    source = ArrayChunks([np.arange(100), 7], members=100, lanes=64, devices=2)
    first, second = source.take(), source.take()
    assert source.take() is None
    assert (first.start, first.count, second.start, second.count) == (0, 50, 50, 50)
    np.testing.assert_array_equal(second.leaves[0], np.minimum(np.arange(50, 178), 99))  # padded with the last
    assert first.leaves[1] == 7


def test_lanes_on_a_mesh_of_mixed_platforms_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import abir.backends.jax.devices as devices

    class Device:
        def __init__(self, platform: str):
            self.platform = platform

    class Mixed:
        device_set = {Device("cpu"), Device("gpu")}

    monkeypatch.setattr(devices, "batch_sharding", lambda leaves: Mixed())
    with pytest.raises(ValueError, match=r"f\(\) with lanes= .* mixes platforms \(cpu, gpu\); run lanes on devices of one platform"):
        devices.lane_devices("f()", [np.zeros(4)])


ctx = abir.Context()


@ctx.batch()
def halving_steps(n):
    steps = 0
    while n > 1:
        n = n // 2
        steps = steps + 1
    return steps


def test_a_stream_on_the_devices_of_this_process_equals_plain_python() -> None:
    jax = pytest.importorskip("jax")
    stream = ((np.int64(k),) for k in range(1, 300))
    seen = dict(halving_steps.imap(stream, lanes=4, chunk_size=8, devices=jax.local_devices(), backend="jax"))
    assert sorted(seen) == list(range(299))
    np.testing.assert_array_equal([seen[i] for i in range(299)], halving_steps(np.arange(1, 300), dry_run=True))


def test_a_stream_on_devices_stops_when_its_consumer_does() -> None:
    jax = pytest.importorskip("jax")
    endless = ((np.int64(k),) for k in itertools.count(1))
    results = halving_steps.imap(endless, lanes=4, chunk_size=8, devices=jax.local_devices(), backend="jax")
    first = list(itertools.islice(results, 10))
    results.close()  # the devices' threads stop; nothing keeps reading the endless stream
    assert len(first) == 10


@pytest.mark.parametrize(
    ("devices", "backend", "error", "message"),
    [
        ([], "jax", TypeError, r"devices= of halving_steps.imap\(\) must be a non-empty list of JAX devices"),
        (["cpu"], "jax", TypeError, r"must be a non-empty list of JAX devices, each running its own lanes, got \['cpu'\]"),
        (None, "numpy", ValueError, r"devices= of halving_steps.imap\(\) names JAX devices, which only the JAX backend"),
    ],
)
def test_bad_devices_of_a_stream_are_clear_errors(devices: object, backend: str, error: type, message: str) -> None:
    jax = pytest.importorskip("jax")
    named = jax.local_devices() if devices is None else devices
    with pytest.raises(error, match=message):
        list(halving_steps.imap([(np.int64(3),)], lanes=2, devices=named, backend=backend))
