"""A run with lanes on several devices: each device runs its own lanes, all drawing from one queue.

`run_lanes_on_devices` starts one host thread per device of a `LaneDevices` (from
`abir.backends.jax.devices`). Each thread runs the machine's lanes loop (`Machine.lane_flushes`)
on its device and takes its members from one `MemberQueue` a chunk at a time, the next chunk
once every member of its last has started; so a device whose members finish early takes more
of them, and no device waits for another's slow members. The devices never communicate: each
loop is a program of one device, and the threads meet only at the queue and the host's results.
The results are gathered on the host in input order and put back with the argument's sharding.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from abir.backends.base import Backend
from abir.vm.machine import FinishedMembers, LaneOutcome, LaneResults, LaneWindow, Machine
from abir.vm.state_ops import flag_normal_value, register_key

if TYPE_CHECKING:
    from abir.backends.jax.devices import LaneDevices

MAX_CHUNK_LANES = 16
"""A chunk of members taken from the queue holds at most this many per lane (`chunk_rows`)."""
LEAST_CHUNK_LANES = 1
"""and at least this many per lane (but for the last)."""
CHUNKS_PER_DEVICE = 8
"""A chunk holds about this share of a device's members while many remain (`chunk_rows`)."""
PROGRESS_SECONDS = 0.1
"""How often the calling thread, waiting for the devices, reports progress (and can be
interrupted)."""


def lane_devices(caller: str, backend: Backend, leaves: Sequence[Any]) -> LaneDevices:
    """The devices a call with lanes on `leaves` runs on: those of the argument's sharding
    (`abir.backends.jax.devices.lane_devices`; only JAX arrays are sharded over devices)."""
    from abir.backends.jax.devices import lane_devices as jax_lane_devices

    return jax_lane_devices(caller, leaves)


class MemberQueue:
    """The members of a run, handed out in chunks of consecutive members, in order, to
    whichever device asks first (`take`, safe to call from several threads). A chunk holds at
    most `rows` members; while many remain, `rows`, and then, as guided self-scheduling does,
    half of an even share of the rest per device, but at least `least`: the last chunks are
    small, so the devices finish close together, and the first are large, so a device pauses
    seldom to take one (each pause is a return to the host)."""

    def __init__(self, members: int, rows: int, least: int, devices: int):
        self.members = members
        self.rows = rows
        self.least = min(least, rows)
        self.devices = devices
        self._next = 0
        self._lock = threading.Lock()

    def take(self) -> tuple[int, int] | None:
        """The first member and the count of the next chunk, or None when all are taken."""
        with self._lock:
            start = self._next
            left = self.members - start
            if left <= 0:
                return None
            share = -(-left // (2 * self.devices))
            count = min(self.rows, max(self.least, share), left)
            self._next = start + count
            return start, count


def chunk_rows(members: int, lanes: int, devices: int) -> int:
    """The rows of the chunks a run of `members` on `devices` devices of `lanes` lanes each takes:
    about an eighth of a device's share, at least one member per lane and at most
    `MAX_CHUNK_LANES` per lane."""
    return max(LEAST_CHUNK_LANES * lanes, min(members // (CHUNKS_PER_DEVICE * devices), MAX_CHUNK_LANES * lanes))


@dataclass
class DeviceLaneOutcome(LaneOutcome):
    """A `LaneOutcome` (outputs placed with the argument's sharding; `finished` and `flags` over
    the whole batch) and how many members each device ran (`members_per_device`, in the order
    of `LaneDevices.devices`)."""

    members_per_device: list[int]


class _Gathered:
    """The results of every device's lanes on the host (`LaneResults` of this process's
    members, by their position in `LaneDevices.members`), put by several threads."""

    def __init__(self, machine: Machine, members: int, counting: bool, devices: int):
        self.results = LaneResults(machine, members, counting)
        self.per_device = [0] * devices
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()

    def put(self, device: int, finished: FinishedMembers) -> None:
        with self.lock:
            self.results.put(finished)
            self.per_device[device] += len(finished.members)

    def finished_count(self) -> int:
        with self.lock:
            return int(self.results.finished.sum())


def run_lanes_on_devices(
    machine: Machine,
    placement: LaneDevices,
    backend: Backend,
    lanes: int,
    max_stack_depth: int,
    cache_key: Any,
    max_steps: int | None = None,
    on_progress: Callable[[int], None] | None = None,
    chunk: int | None = None,
) -> DeviceLaneOutcome:
    """Run this process's members of `placement` through `lanes` lanes on each of its devices,
    taking members from one `MemberQueue` in chunks of at most `chunk` (default: `chunk_rows`). A KeyboardInterrupt
    stops every device after its current launch and is returned as the outcome's error, with
    what finished; members' errors (stack overflow, `max_steps`) name them by their index in
    the whole batch. An error of a device's run (not of its members) is raised once every
    device has stopped."""
    counting = max_steps is not None
    local = len(placement.members)
    devices = len(placement.devices)
    rows = chunk_rows(local, int(lanes), devices) if chunk is None else int(chunk)
    queue = MemberQueue(local, rows, LEAST_CHUNK_LANES * int(lanes), devices)
    gathered = _Gathered(machine, local, counting, len(placement.devices))
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=_device_lanes,
            args=(machine, placement, backend, index, queue, gathered, stop, lanes, max_stack_depth, cache_key, max_steps),
            name=f"abir-lanes-{device}",
            daemon=True,
        )
        for index, device in enumerate(placement.devices)
    ]
    interrupt = _wait_for(threads, stop, gathered, on_progress)
    if gathered.errors:
        raise gathered.errors[0]
    results = gathered.results
    outputs = placement.place([results.values[register_key(name)] for name in machine.outputs])
    finished = np.zeros(placement.batch, bool)
    finished[placement.members] = results.finished
    flags = {}
    for key in results.flag_keys:
        flags[key] = np.full(placement.batch, flag_normal_value(key), np.int32)
        flags[key][placement.members] = results.values[key]
    error: BaseException | None = interrupt
    if error is None:
        error = machine.lane_member_errors(backend, flags, max_stack_depth, max_steps)
    return DeviceLaneOutcome(outputs, finished, flags, error, list(gathered.per_device))


def _wait_for(
    threads: Sequence[threading.Thread],
    stop: threading.Event,
    gathered: _Gathered,
    on_progress: Callable[[int], None] | None,
) -> KeyboardInterrupt | None:
    """Start `threads` and wait for them, reporting progress; on a KeyboardInterrupt tell them to
    `stop`, wait for them, and return it."""
    for thread in threads:
        thread.start()
    interrupt = None
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(PROGRESS_SECONDS)
                if on_progress is not None:
                    on_progress(gathered.finished_count())
        if on_progress is not None:
            on_progress(gathered.finished_count())
    except KeyboardInterrupt as stopped:
        interrupt = stopped
        stop.set()
        for thread in threads:
            thread.join()
    return interrupt


def _device_lanes(
    machine: Machine,
    placement: LaneDevices,
    backend: Backend,
    device_index: int,
    queue: MemberQueue,
    gathered: _Gathered,
    stop: threading.Event,
    lanes: int,
    max_stack_depth: int,
    cache_key: Any,
    max_steps: int | None,
) -> None:
    """One device's thread: its lanes loop over the chunks it takes from `queue`, its finished
    members put in `gathered` (by position among this process's members), until the queue is
    empty or `stop` is set. An exception is kept in `gathered.errors` and stops the others."""
    device = placement.devices[device_index]
    try:
        with backend.scope(placement.leaves), placement.on_device(device):
            taken = TakenChunks()
            windows = _windows(machine, placement, backend, queue, stop, taken)
            first = next(windows, None)
            if first is None:
                return
            flushes = machine.lane_flushes(
                itertools.chain([first], windows), backend, lanes, max_stack_depth, cache_key, max_steps
            )
            for finished in flushes:
                gathered.put(device_index, FinishedMembers(taken.positions(finished.members), finished.values))
                if stop.is_set():
                    return
    except BaseException as error:  # kept for the calling thread, which raises it
        with gathered.lock:
            gathered.errors.append(error)
        stop.set()


def _windows(
    machine: Machine,
    placement: LaneDevices,
    backend: Backend,
    queue: MemberQueue,
    stop: threading.Event,
    taken: TakenChunks,
) -> Iterator[LaneWindow]:
    """The chunks a device takes from `queue` as windows of the lanes loop, each padded to the
    queue's chunk of rows (one compiled loop for all), each kept in `taken`."""
    batched = [_is_batched(leaf, len(placement.members)) for leaf in placement.leaves]
    while not stop.is_set():
        chunk = queue.take()
        if chunk is None:
            return
        start, count = chunk
        taken.add(start, count)
        rows = np.minimum(np.arange(start, start + queue.rows), start + count - 1)
        leaves = [leaf[rows] if cut else leaf for leaf, cut in zip(placement.leaves, batched, strict=True)]
        arrays = machine.pending_inputs(leaves, backend)
        yield LaneWindow(arrays, count, tuple(int(a.shape[0]) == 1 for a in arrays))


class TakenChunks:
    """The chunks one device took, in order: its lanes loop numbers their members on from 0,
    and `positions` maps those numbers back to positions in the queue."""

    def __init__(self) -> None:
        self.numbers: list[int] = []  # the loop's number of each chunk's first member
        self.starts: list[int] = []  # the queue's position of each chunk's first member
        self.count = 0

    def add(self, start: int, count: int) -> None:
        self.numbers.append(self.count)
        self.starts.append(start)
        self.count += count

    def positions(self, numbers: np.ndarray) -> np.ndarray:
        chunk = np.searchsorted(np.asarray(self.numbers), numbers, side="right") - 1
        return np.asarray(self.starts)[chunk] + (numbers - np.asarray(self.numbers)[chunk])


def _is_batched(leaf: Any, members: int) -> bool:
    """Whether `leaf` has a row per member (cut into chunks) rather than one shared by all."""
    shape = getattr(leaf, "shape", ())
    return isinstance(leaf, np.ndarray) and len(shape) > 0 and int(shape[0]) == members and members > 1
