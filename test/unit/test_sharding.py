"""A batch sharded over devices along its batch axis runs one machine per shard.

JAX sees 4 CPU devices only when XLA_FLAGS asks for them before it starts, so each test runs
its checks in a fresh Python process (`SCRIPT`, with `--xla_force_host_platform_device_count=4`):
results equal the plain per-member Python run and carry the arguments' sharding, the compiled
program holds no collective (each device's loop runs on its own members: no communication
between devices, so a device whose members have all halted leaves its loop), nearby calls reuse
it, and arguments shared by all members go to every device. Each shard's machine stops when its
own members have halted (per-shard run statistics), and a failing call raises abir's own error
naming members by their index in the whole batch, with nothing printed when the process exits.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("jax")

SCRIPT = r'''
import numpy as np, jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import abir
from interop_programs import fib, halving_steps

assert len(jax.devices()) == 4, jax.devices()
ctx = abir.Context()
batched_fib = ctx.batch_uncurried(fib)
halving = ctx.batch_uncurried(halving_steps)
backend = abir.JaxBackend()
mesh = jax.make_mesh((4,), ("batch",))
by_batch = NamedSharding(mesh, P("batch"))

n = np.arange(32) % 14
with jax.enable_x64(True):
    sharded_n = jax.device_put(jnp.asarray(n), by_batch)
got = batched_fib(sharded_n, backend=backend)
assert got.sharding == by_batch, got.sharding
np.testing.assert_array_equal(np.asarray(got), batched_fib(n, dry_run=True))
np.testing.assert_array_equal(np.asarray(batched_fib(sharded_n, backend=backend)), batched_fib(n, dry_run=True))
assert backend.trace_count == 1, backend.trace_count  # the second call reused the compiled shards

(program,) = ctx.compile_cache.values()
((sharded, _checks),) = [run for key, run in program.machine.run_cache.items() if key[0][0] == "abir.sharded"]
hlo = sharded.lower(sharded_n).compile().as_text()
for collective in ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter"):
    assert collective not in hlo, collective

# a float program, an argument shared by every member and one of B members left unsharded
x = np.linspace(1.0, 1000.0, 32)
tolerances = np.linspace(0.1, 0.5, 32)
with jax.enable_x64(True):
    sharded_x = jax.device_put(jnp.asarray(x), by_batch)
values, steps = halving(sharded_x, 0.3, backend=backend)
want_values, want_steps = halving(x, 0.3, dry_run=True)
assert values.sharding == steps.sharding == by_batch
np.testing.assert_array_equal(np.asarray(values), want_values)
np.testing.assert_array_equal(np.asarray(steps), want_steps)
values, steps = halving(sharded_x, tolerances, backend=backend)
np.testing.assert_array_equal(np.asarray(steps), halving(x, tolerances, dry_run=True)[1])


def put(array):
    with jax.enable_x64(True):
        return jax.device_put(jnp.asarray(array), by_batch)


def raises(call, error, message):
    try:
        call()
    except error as err:
        assert message in str(err), str(err)
        return err
    raise AssertionError(f"no error: {message}")


# abir's own errors, raised by the call as on one device, name members by their index in the
# whole batch (shard 3's sixth member is member 27)
n = np.repeat([1, 5, 9, 13], 8)
deep = n.copy()
deep[27] = 20
err = raises(lambda: batched_fib(put(deep), backend=backend, max_stack_depth=12), abir.StackOverflowError,
             "stack overflow in function 'fib' at ")
assert "batch member 27 recursed deeper than max_stack_depth=12" in str(err) and err.members == [27], err.members
far = np.full(32, 10.0)
far[13] = 1e300
err = raises(lambda: halving(put(far), 0.3, backend=backend, max_steps=30), abir.StepLimitError,
             "max_steps=30 reached: 1 member still running (batch member 13 in function 'halving_steps' at ")
assert err.members == [13], err.members
padded = raises(lambda: batched_fib(put(deep), backend=backend, max_stack_depth=12, pad_batch=True),
                abir.StackOverflowError, "batch member 27 recursed")
assert padded.members == [27], padded.members

# each shard's machine runs and stops on its own: its counts are those of a run of its members
# alone, and the shard whose members all halt at once leaves its loop after one sweep
counting = abir.JaxBackend(collect_stats=True)
np.testing.assert_array_equal(np.asarray(batched_fib(put(n), backend=counting)), batched_fib(n, dry_run=True))
assert counting.last_stats is None and len(counting.shard_stats) == 4
for shard, stats in enumerate(counting.shard_stats):
    alone = abir.JaxBackend(collect_stats=True)
    batched_fib(n[8 * shard : 8 * shard + 8], backend=alone)
    assert stats == alone.last_stats, (shard, stats, alone.last_stats)
sweeps = [stats.sweeps for stats in counting.shard_stats]
assert sweeps[0] == 1 and sweeps == sorted(sweeps) and sweeps[3] > 100, sweeps
print("ok")
'''


def test_a_batch_sharded_over_four_devices_runs_one_machine_per_shard():
    env = {
        **os.environ,
        "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip(),
        "PYTHONPATH": os.pathsep.join([str(pathlib.Path(__file__).parent), *sys.path]),
    }
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["ok"]
    # the failed runs leave nothing for JAX's exit handlers to raise again
    assert "Exception ignored" not in out.stderr and "Traceback" not in out.stderr, out.stderr[-3000:]
