"""Lanes on several devices: the devices a call with `lanes=` or a stream (`f.imap`) runs on.

`lane_devices` reads the sharding of the call's first argument split along its batch axis
(`abir.backends.jax.sharding.batch_sharding`): the devices of this process in its mesh each run
their own lanes (`abir.lane_devices`), drawing from one queue of the members this process holds
(the rows of the shards addressable here, brought to the host). With several processes
(`jax.distributed.initialize`) each process runs the members of its own shards: the split is the
sharding's, so no process reads another's rows. `LaneDevices.place` puts the results back with
the argument's sharding, each device holding the results of its own rows. A stream names its
devices itself (`named_devices`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from abir.backends.jax.sharding import batch_sharding


@dataclass(frozen=True)
class Devices:
    """Devices of this process that each run their own lanes (`abir.lane_devices`)."""

    devices: tuple[Any, ...]

    def on_device(self, device: Any) -> contextlib.AbstractContextManager[Any]:
        """Within: arrays the backend makes, and the loops it runs, are on `device` (a thread's
        setting: each thread running lanes enters its own)."""
        return jax.default_device(device)


@dataclass(frozen=True)
class LaneDevices(Devices):
    """The devices of this process that run lanes (in mesh order), the members this process
    runs (`members`: their indices in the whole batch, ascending), the call's leaves with every
    batched one cut to those members' rows on the host (`leaves`, rows in `members` order;
    shared leaves as given), the whole batch's size and the sharding of the results."""

    members: np.ndarray
    leaves: list[Any]
    batch: int
    sharding: jax.sharding.NamedSharding

    def place(self, outputs: Sequence[np.ndarray]) -> list[jax.Array]:
        """Results of this process's members (rows in `members` order) as arrays of the whole
        batch with the results' sharding; the rows of other processes' members are theirs."""
        placed = []
        for output in outputs:
            whole = np.zeros((self.batch, *output.shape[1:]), output.dtype)
            whole[self.members] = output
            placed.append(jax.make_array_from_callback(whole.shape, self.sharding, lambda index, w=whole: w[index]))
        return placed


def lane_devices(caller: str, leaves: Sequence[Any]) -> LaneDevices:
    """The devices, members and host rows of a call with lanes on `leaves`, of which one is
    sharded over devices along its batch axis (`batch_sharding`). Errors name `caller`."""
    sharding = batch_sharding(leaves)
    assert sharding is not None
    _check_one_platform(f"{caller} with lanes= runs lanes on every device of its argument's mesh, which", sharding.device_set)
    here = jax.process_index()
    devices = tuple(device for device in sharding.mesh.devices.flat if device.process_index == here)
    batch = max(int(leaf.shape[0]) for leaf in leaves if getattr(leaf, "shape", ()))
    results = jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec(sharding.spec[0]))
    members = _held_members(results, batch)
    cut = [_member_rows(caller, position, leaf, batch, members) for position, leaf in enumerate(leaves)]
    return LaneDevices(devices, members, cut, batch, results)


def named_devices(caller: str, devices: Any) -> Devices:
    """The devices a stream (`f.imap(..., devices=...)`) runs lanes on: a non-empty sequence of
    JAX devices of one platform, all of this process. Errors name `caller`."""
    if isinstance(devices, jax.Device):
        devices = [devices]
    if not isinstance(devices, Sequence) or not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise TypeError(
            f"devices= of {caller} must be a non-empty list of JAX devices, each running its own lanes, got "
            f"{devices!r}; e.g. devices=jax.local_devices()"
        )
    _check_one_platform(f"devices= of {caller}", devices)
    here = jax.process_index()
    elsewhere = [device for device in devices if device.process_index != here]
    if elsewhere:
        raise ValueError(
            f"devices= of {caller} names {elsewhere[0]}, a device of process {elsewhere[0].process_index}, not of this "
            f"one ({here}); a process runs lanes on its own devices: devices=jax.local_devices()"
        )
    return Devices(tuple(dict.fromkeys(devices)))


def _check_one_platform(what: str, devices: Any) -> None:
    """A `ValueError` when `devices` mix platforms (`what` says whose devices they are)."""
    platforms = sorted({device.platform for device in devices})
    if len(platforms) > 1:
        raise ValueError(
            f"{what} mixes platforms ({', '.join(platforms)}); run lanes on devices of one platform "
            "(e.g. jax.devices('cpu'))"
        )


def _held_members(sharding: jax.sharding.NamedSharding, batch: int) -> np.ndarray:
    """The indices of the members whose rows are on this process's devices under `sharding` (of
    the batch axis alone)."""
    held = np.zeros(batch, bool)
    for index in sharding.addressable_devices_indices_map((batch,)).values():
        held[index[0]] = True
    return np.flatnonzero(held)


def _member_rows(caller: str, position: int, leaf: Any, batch: int, members: np.ndarray) -> Any:
    """Leaf `position` of the call as NumPy rows of `members` when it has a row per member of
    the batch; else (shared by every member) as given."""
    if batch <= 1 or not getattr(leaf, "shape", ()) or int(leaf.shape[0]) != batch:
        return leaf
    if not isinstance(leaf, jax.Array) or leaf.is_fully_addressable:
        return np.asarray(leaf)[members]
    rows: np.ndarray | None = None
    held = np.zeros(batch, bool)
    for shard in leaf.addressable_shards:
        data = np.asarray(shard.data)
        if rows is None:
            rows = np.zeros((batch, *data.shape[1:]), data.dtype)
        rows[shard.index[0]] = data
        held[shard.index[0]] = True
    missing = members[~held[members]]
    if len(missing) or rows is None:
        raise ValueError(
            f"argument leaf {position} of {caller} is sharded over the batch differently from the first sharded "
            f"argument: this process (jax.process_index() = {jax.process_index()}) holds no rows of member(s) "
            f"{missing[:8].tolist()}; give every batched argument the same sharding (jax.device_put(x, sharding))"
        )
    return rows[members]
