"""Runs on arguments sharded over devices along the batch axis: one machine per shard.

`run_sharded` maps the staged machine over the batch axis of the first sharded argument's mesh
with `jax.shard_map`; each device runs its own members, with no communication between devices.
While a shard's body is traced, the trace mode's `shard` (`abir.backends.jax.mode.ShardTrace`)
collects its error flags (`keep_shard_check`) and counters, which leave the body as outputs; the
call raises abir's own error from the flags on the host.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

import jax
import numpy as np

from abir.backends.base import RunStats
from abir.backends.jax.mode import ShardTrace, traced_as
from abir.backends.jax.staging import is_python_number
from abir.backends.traced import run_stats

Check = Callable[[dict[str, np.ndarray]], None]


def batch_sharding(leaves: Sequence[Any]) -> jax.sharding.NamedSharding | None:
    """The `NamedSharding` of the first argument split over more than one device along its
    batch axis (the others follow it), or None."""
    for leaf in leaves:
        sharding = getattr(leaf, "sharding", None)
        if (
            isinstance(sharding, jax.sharding.NamedSharding)
            and len(sharding.device_set) > 1
            and len(leaf.shape) > 0
            and sharding.spec
            and sharding.spec[0] is not None
        ):
            return sharding
    return None


def run_sharded(
    run: Callable[[list[Any]], list[Any]],
    leaves: Sequence[Any],
    cache: MutableMapping[Any, Any],
    cache_key: Any,
    collect_stats: bool,
) -> tuple[list[Any], list[RunStats] | None]:
    """`run` (a staged machine run) once per shard, and each shard's `RunStats` (in mesh order)
    with `collect_stats`. Arguments of B members are split along the batch axis (put there if
    they live elsewhere, as NumPy arrays do); arguments shared by all members are copied to
    every device. The results carry the same sharding. Each shard returns its error flags with
    its results, and the call raises abir's own error from them (`StackOverflowError`,
    `StepLimitError`), naming members by their index in the whole batch: the sharded program
    has no host callback, so a failed run leaves no failed runtime token behind (JAX would
    raise it again from its exit handler). The jitted `shard_map` is kept in `cache`."""
    sharding = batch_sharding(leaves)
    assert sharding is not None
    batch = max((int(leaf.shape[0]) for leaf in leaves if getattr(leaf, "shape", ())), default=1)
    batch_spec = jax.sharding.PartitionSpec(sharding.spec[0])
    axes = sharding.spec[0] if isinstance(sharding.spec[0], tuple) else (sharding.spec[0],)
    shards = int(np.prod([sharding.mesh.shape[axis] for axis in axes]))
    positions = [i for i, leaf in enumerate(leaves) if not is_python_number(leaf)]
    arrays = [leaves[i] for i in positions]
    specs = tuple(
        batch_spec if getattr(a, "shape", ()) and int(a.shape[0]) == batch and batch > 1 else jax.sharding.PartitionSpec()
        for a in arrays
    )
    constants = tuple((i, leaves[i]) for i in range(len(leaves)) if i not in positions)
    shapes = tuple((tuple(a.shape), np.dtype(a.dtype).str) for a in arrays)
    key = (cache_key, sharding.mesh, batch_spec, specs, shapes, constants, collect_stats)
    entry = cache.get(key)
    if entry is None:
        checks: list[tuple[Check, dict[str, int]]] = []  # filled when `sharded` is traced, on its first call

        def per_shard(*shard: Any) -> tuple[Any, Any, Any]:
            merged = list(leaves)
            for position, array in zip(positions, shard, strict=True):
                merged[position] = array
            trace = ShardTrace(batch // shards)
            with traced_as(shard=trace):  # no custom_vmap (stage_run): nothing vmaps this body, and the counters leave it
                outputs = tuple(run(merged))
            checks[:] = trace.checks
            return outputs, _stacked_counters(trace.counters), trace.flags

        sharded = jax.jit(
            jax.shard_map(per_shard, mesh=sharding.mesh, in_specs=specs, out_specs=batch_spec, check_vma=False)
        )
        entry = cache[key] = (sharded, checks)
    sharded, checks = entry
    placed = [jax.device_put(a, jax.sharding.NamedSharding(sharding.mesh, spec)) for a, spec in zip(arrays, specs, strict=True)]
    outputs, counters, flags = sharded(*placed)
    stats = None if counters is None else _shard_stats(counters, shards)
    for (check, normal), values in zip(checks, flags, strict=True):
        _raise_if_failed(check, normal, values)
    return list(outputs), stats


def keep_shard_check(shard: ShardTrace, check: Check, values: Mapping[str, Any], normal: Mapping[str, int]) -> None:
    """A run's error flags as outputs of the shard's body (without padding rows), and `check`
    to raise abir's error from them once the sharded call returns."""
    shard.flags.append({key: value[: shard.members] for key, value in values.items()})
    shard.checks.append((check, dict(normal)))


def _raise_if_failed(check: Check, normal: Mapping[str, int], values: Mapping[str, Any]) -> None:
    """abir's own error (`check`) if some member's flag in `values` (the whole batch's) is not
    its `normal` value."""
    host = {key: np.asarray(value) for key, value in values.items()}
    if any(np.any(value != normal.get(key, 0)) for key, value in host.items()):
        check(host)


def _stacked_counters(counters: dict[str, Any] | None) -> dict[str, Any] | None:
    """A shard's counters as shard_map outputs split along the batch axis: per-member counters
    as they are, the others with a leading axis of one row per shard."""
    if counters is None:
        return None
    return {key: value if key.startswith("member_") else value[None] for key, value in counters.items() if key != "ran"}


def _shard_stats(counters: dict[str, Any], shards: int) -> list[RunStats]:
    """One `RunStats` per shard from the counters of all shards (`_stacked_counters`)."""
    host = {key: np.asarray(value) for key, value in counters.items()}
    members = {key: np.split(host[key], shards) for key in ("member_steps", "member_sweeps")}
    return [
        run_stats({
            "block_steps": host["block_steps"][i], "block_members": host["block_members"][i],
            "sweeps": host["sweeps"][i], **{key: parts[i] for key, parts in members.items()},
        })  # fmt: skip
        for i in range(shards)
    ]
