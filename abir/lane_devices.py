"""Runs with lanes on several devices: each device runs its own lanes, all drawing from one queue.

One host thread per device (`DeviceLanes`) runs the machine's lanes loop
(`abir.vm.lanes.lane_flushes`) on its device and takes its members from one source a chunk at a
time, the next chunk once every member of its last has started; so a device whose members
finish early takes more of them, and no device waits for another's slow members. The devices
never communicate: each loop is a program of one device, and the threads meet only at the
source and the host's results. Two sources: the rows of a call's arguments (`ArrayChunks`, for
`run_lanes_on_devices`: a call with `lanes=` on a batch sharded over devices, the results
gathered on the host in input order and put back with the argument's sharding) and the blocks
of a stream (`StreamChunks`, for `stream_lanes_on_devices`: `f.imap(..., devices=...)`, the
results yielded as they finish). The devices come from `abir.backends.jax.devices`.
"""

from __future__ import annotations

import contextvars
import itertools
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

from abir.backends.base import Backend
from abir.vm.lanes import (
    FinishedMembers,
    LaneOutcome,
    LaneResults,
    LaneWindow,
    lane_flushes,
    lane_member_errors,
    pending_inputs,
)
from abir.vm.machine import Machine
from abir.vm.state_ops import flag_normal_value, register_key

if TYPE_CHECKING:
    from abir.backends.jax.devices import Devices, LaneDevices

MAX_CHUNK_LANES = 16
"""A chunk of members taken from the queue holds at most this many per lane (`chunk_rows`)."""
LEAST_CHUNK_LANES = 2
"""A chunk holds at least this many members per lane, but for the last, and for a call of few
members (then one chunk per device: `ArrayChunks`)."""
CHUNKS_PER_DEVICE = 4
"""A chunk holds about this share of a device's members while many remain (`chunk_rows`)."""
PROGRESS_SECONDS = 0.1
"""How often the calling thread, waiting for the devices, reports progress (and can be
interrupted)."""


def lane_devices(caller: str, leaves: Sequence[Any]) -> LaneDevices:
    """The devices a call with lanes on `leaves` runs on: those of the argument's sharding
    (`abir.backends.jax.devices.lane_devices`; only JAX arrays are sharded over devices)."""
    from abir.backends.jax.devices import lane_devices as jax_lane_devices

    return jax_lane_devices(caller, leaves)


def stream_devices(caller: str, backend: Backend, devices: Any) -> Devices:
    """The devices a stream (`f.imap(..., devices=...)`) runs on, checked
    (`abir.backends.jax.devices.named_devices`); JAX's only."""
    if getattr(backend, "name", None) != "jax":
        raise ValueError(
            f"devices= of {caller} names JAX devices, which only the JAX backend runs on; pass backend='jax' "
            "(or abir.JaxBackend()), or drop devices="
        )
    from abir.backends.jax.devices import named_devices

    return named_devices(caller, devices)


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
    about `1 / CHUNKS_PER_DEVICE` of a device's share, from `LEAST_CHUNK_LANES` to
    `MAX_CHUNK_LANES` members per lane."""
    return max(LEAST_CHUNK_LANES * lanes, min(members // (CHUNKS_PER_DEVICE * devices), MAX_CHUNK_LANES * lanes))


class Chunk(NamedTuple):
    """Members `start` to `start + count` of a run: per input, their arguments as host rows
    (padded to the source's rows with copies of the last member), or one row all share."""

    start: int
    count: int
    leaves: list[Any]


class ChunkSource(Protocol):
    """Where the devices of a run take their members from (safe to call from several threads)."""

    def take(self) -> Chunk | None:
        """The next chunk of members, numbered on from the last; None when there are no more."""
        ...


class ArrayChunks:
    """The members of a call's arguments (`leaves`, host rows of `members` members, or shared)
    in the chunks of a `MemberQueue`."""

    def __init__(self, leaves: Sequence[Any], members: int, lanes: int, devices: int, rows: int | None = None):
        rows = chunk_rows(members, lanes, devices) if rows is None else rows
        least = min(LEAST_CHUNK_LANES * lanes, -(-members // devices))  # few members: one chunk per device
        self.queue = MemberQueue(members, rows, least, devices)
        self.leaves = list(leaves)
        self.batched = [_is_batched(leaf, members) for leaf in leaves]

    def take(self) -> Chunk | None:
        taken = self.queue.take()
        if taken is None:
            return None
        start, count = taken
        rows = np.minimum(np.arange(start, start + self.queue.rows), start + count - 1)
        return Chunk(start, count, [leaf[rows] if cut else leaf for leaf, cut in zip(self.leaves, self.batched, strict=True)])


class StreamChunks:
    """The members of a stream, read a block at a time from `blocks` (each the host rows of a
    block, padded to the same rows, and its count of members), by one device at a time."""

    def __init__(self, blocks: Iterator[tuple[list[Any], int]]):
        self.blocks = blocks
        self._next = 0
        self._lock = threading.Lock()

    def take(self) -> Chunk | None:
        with self._lock:
            block = next(self.blocks, None)
            if block is None:
                return None
            leaves, count = block
            start = self._next
            self._next += count
            return Chunk(start, count, leaves)


Deliver = Callable[[int, FinishedMembers], None]
"""Takes the members a device (by its index) finished, numbered as their source numbers them."""


@dataclass
class DeviceLanes:
    """A run of `machine` with `lanes` lanes on each of `devices`, all taking their members from
    `source` (see the module docstring). `start` starts a thread per device; `stop` asks them to
    stop after their current launch; `errors` keeps what a thread raised (it stops the others)."""

    machine: Machine
    backend: Backend
    devices: Devices
    source: ChunkSource
    lanes: int
    max_stack_depth: int
    cache_key: Any
    max_steps: int | None
    stop: threading.Event = field(default_factory=threading.Event)
    errors: list[BaseException] = field(default_factory=list)

    def start(self, deliver: Deliver) -> list[threading.Thread]:
        """A thread per device, each in a copy of the caller's context (the call's batch, which
        errors about helpers name, and the trace mode are context variables)."""
        threads = [
            threading.Thread(
                target=contextvars.copy_context().run, args=(self._run, index, deliver), name=f"abir-lanes-{device}",
                daemon=True,
            )  # fmt: skip
            for index, device in enumerate(self.devices.devices)
        ]
        for thread in threads:
            thread.start()
        return threads

    def _run(self, index: int, deliver: Deliver) -> None:
        """One device's thread: its lanes loop over the chunks it takes, its finished members
        delivered by their number in the source, until the source is empty or `stop` is set."""
        try:
            with self.backend.scope(), self.devices.on_device(self.devices.devices[index]):
                taken = TakenChunks()
                windows = self._windows(taken)
                first = next(windows, None)
                if first is None:
                    return
                flushes = lane_flushes(
                    self.machine, itertools.chain([first], windows), self.backend, self.lanes, self.max_stack_depth, self.cache_key,
                    self.max_steps,
                )  # fmt: skip
                for finished in flushes:
                    deliver(index, FinishedMembers(taken.numbers_in_source(finished.members), finished.values))
                    if self.stop.is_set():
                        return
        except BaseException as error:  # kept for the calling thread, which raises it
            self.errors.append(error)
            self.stop.set()

    def _windows(self, taken: TakenChunks) -> Iterator[LaneWindow]:
        """The chunks this device takes, as windows of its lanes loop, each kept in `taken`."""
        while not self.stop.is_set():
            chunk = self.source.take()
            if chunk is None:
                return
            taken.add(chunk.start, chunk.count)
            arrays = pending_inputs(self.machine, chunk.leaves, self.backend)
            yield LaneWindow(arrays, chunk.count, tuple(int(a.shape[0]) == 1 for a in arrays))


class TakenChunks:
    """The chunks one device took, in order: its lanes loop numbers their members on from 0,
    and `numbers_in_source` maps those numbers back to the source's."""

    def __init__(self) -> None:
        self.numbers: list[int] = []  # the loop's number of each chunk's first member
        self.starts: list[int] = []  # the source's number of each chunk's first member
        self.count = 0

    def add(self, start: int, count: int) -> None:
        self.numbers.append(self.count)
        self.starts.append(start)
        self.count += count

    def numbers_in_source(self, numbers: np.ndarray) -> np.ndarray:
        firsts = np.asarray(self.numbers)
        chunk = np.searchsorted(firsts, numbers, side="right") - 1
        return np.asarray(self.starts)[chunk] + (numbers - firsts[chunk])


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
        self.lock = threading.Lock()

    def put(self, device: int, finished: FinishedMembers) -> None:
        with self.lock:
            self.results.put(finished)
            self.per_device[device] += len(finished.members)

    def finished_count(self) -> int:
        with self.lock:
            return self.results.count


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
    taking members from one `MemberQueue` in chunks of at most `chunk` (default: `chunk_rows`).
    A KeyboardInterrupt stops every device after its current launch and is returned as the
    outcome's error, with what finished; members' errors (stack overflow, `max_steps`) name
    them by their index in the whole batch. An error of a device's run (not of its members)
    is raised once every device has stopped. The backend's and machine's `last_stats` are None
    after it (each device's thread wrote its own launches' there)."""
    counting = max_steps is not None
    local = len(placement.members)
    devices = len(placement.devices)
    source = ArrayChunks(placement.leaves, local, int(lanes), devices, chunk)
    run = DeviceLanes(machine, backend, placement, source, lanes, max_stack_depth, cache_key, max_steps)
    gathered = _Gathered(machine, local, counting, devices)
    interrupt = _wait_for(run, run.start(gathered.put), gathered, on_progress)
    backend.last_stats = machine.last_stats = None
    if run.errors:
        raise run.errors[0]
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
        error = lane_member_errors(machine, backend, flags, max_stack_depth, max_steps)
    return DeviceLaneOutcome(outputs, finished, flags, error, list(gathered.per_device))


def _wait_for(
    run: DeviceLanes,
    threads: Sequence[threading.Thread],
    gathered: _Gathered,
    on_progress: Callable[[int], None] | None,
) -> KeyboardInterrupt | None:
    """Wait for `threads`, reporting progress; on a KeyboardInterrupt stop the run, wait for
    them, and return it."""
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
        run.stop.set()
        for thread in threads:
            thread.join()
    return interrupt


def stream_lanes_on_devices(
    machine: Machine,
    devices: Devices,
    backend: Backend,
    blocks: Iterator[tuple[list[Any], int]],
    lanes: int,
    max_stack_depth: int,
    cache_key: Any,
    max_steps: int | None = None,
) -> Iterator[FinishedMembers]:
    """The members of `blocks` (a stream read a block at a time, `StreamChunks`) as each
    chunk of a device's run finishes them, numbered in stream order, run through `lanes` lanes
    on each of `devices`. Closing the iterator stops the devices after their current launch;
    an error of a device's run (or of reading the stream) is raised once every device has
    stopped."""
    run = DeviceLanes(machine, backend, devices, StreamChunks(blocks), lanes, max_stack_depth, cache_key, max_steps)
    finished: queue.SimpleQueue[FinishedMembers] = queue.SimpleQueue()
    threads = run.start(lambda device, members: finished.put(members))
    try:
        while any(thread.is_alive() for thread in threads):
            try:
                yield finished.get(timeout=PROGRESS_SECONDS)
            except queue.Empty:
                continue
        while not finished.empty():  # what the threads put before they ended
            yield finished.get()
    finally:
        run.stop.set()
        for thread in threads:
            thread.join()
        backend.last_stats = machine.last_stats = None
    if run.errors:
        raise run.errors[0]


def _is_batched(leaf: Any, members: int) -> bool:
    """Whether `leaf` has a row per member (cut into chunks) rather than one shared by all."""
    shape = getattr(leaf, "shape", ())
    return isinstance(leaf, np.ndarray) and len(shape) > 0 and int(shape[0]) == members and members > 1
