"""`f(xs..., lanes=L)`: more members than rows, each lane starting the next member when its own
halts. Every result is checked member by member against plain Python (`dry_run=True`), on
every registered backend, and against an ordinary call's dtypes and structure."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import optree
import pytest

import abir
import abir.vm.lanes
import abir.vm.machine
from abir.backend_registry import spec_named
from abir.errors import StackOverflowError, StepLimitError
from abir.testing.fuzz import main as fuzz_main

ctx = abir.Context()


@ctx.batch()
def collatz(n):
    steps = 0
    while n != 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps = steps + 1
    return steps


@ctx.batch()
def fib(n):
    if n > 1:
        return fib(n - 1) + fib(n - 2)
    return 1


@ctx.batch()
def first_square_above(n, target):
    i = 0
    while i < n:
        if i * i >= target:
            return i, True
        i = i + 1
    return n, False


@ctx.batch()
def damped(x, weights, rounds):
    total = x * 0.0
    k = 0
    while k < rounds:
        total = total + weights * x
        x = x * 0.5
        k = k + 1
    return total, k


@ctx.batch()
def tries_until_below(key, p):
    counter = 0
    while abir.random.uniform(key, counter) >= p:
        counter = counter + 1
    return counter


@ctx.batch()
def two_loops(n):
    i = 0
    if n % 2 == 0:
        while i < n:
            i = i + 1
    else:
        while i < 3 * n:
            i = i + 2
    return i


def assert_same_results(got: Any, want: Any, plain: Any) -> None:
    """`got` (a call with lanes) equals `want` (plain Python) leaf by leaf, with the structure,
    dtypes and shapes of `plain` (the same call without lanes)."""
    got_leaves, got_tree = optree.tree_flatten(got)
    plain_leaves, plain_tree = optree.tree_flatten(plain)
    assert got_tree == plain_tree
    for g, w, p in zip(got_leaves, optree.tree_leaves(want), plain_leaves, strict=True):
        g, p = np.asarray(g), np.asarray(p)
        assert g.dtype == p.dtype and g.shape == p.shape
        np.testing.assert_array_equal(g, np.asarray(w))
        assert type(g) is type(p)


PROGRAMS = {
    "per-member trip counts": (collatz, lambda: (np.arange(1, 60, dtype=np.int64),)),
    "recursion": (fib, lambda: (np.arange(0, 14, dtype=np.int64) % 11,)),
    "early return, tuple of results": (
        first_square_above,
        lambda: (np.arange(0, 40, dtype=np.int64) % 13, (np.arange(40, dtype=np.int64) * 7) % 50),
    ),
    "shared arguments, vector events": (
        damped,
        lambda: (np.linspace(-2.0, 3.0, 23)[:, None] * np.ones((1, 3)), np.array([[1.0, -0.5, 2.0]]), np.arange(23) % 6),
    ),
    "random keys": (tries_until_below, lambda: (abir.random.key(np.arange(31)), 0.3)),
    "a lane in each of two loops": (two_loops, lambda: (np.array([4, 7, 10, 3, 6, 9, 2, 11], dtype=np.int64),)),
}


@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("lanes", [1, 3, 8])
@pytest.mark.make_test_keeps(
    {"backend_name": "numpy"},
    {"backend_name": "jax", "lanes": 3},
    {"lanes": 3, "program": "per-member trip counts"},
    {"lanes": 3, "program": "recursion"},
)
def test_lanes_equal_plain_python_member_by_member(backend_name: str, program: str, lanes: int) -> None:
    function, make_args = PROGRAMS[program]
    args = make_args()
    want = function(*args, dry_run=True)
    plain = function(*args, backend=backend_name)
    got = function(*args, backend=backend_name, lanes=lanes)
    assert_same_results(got, want, plain)


def test_lanes_at_least_the_members_is_an_ordinary_call(backend_name: str) -> None:
    xs = np.arange(1, 9, dtype=np.int64)
    plain = collatz(xs, backend=backend_name)
    for lanes in (8, 100):
        assert_same_results(collatz(xs, backend=backend_name, lanes=lanes), collatz(xs, dry_run=True), plain)


def test_a_full_ring_pauses_the_run_to_empty_it(backend_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three lanes run long members while the fourth finishes most others, one refill each:
    the rings' 16 rows (one per refill) fill, which pauses the run to empty them (one chunk
    otherwise)."""
    monkeypatch.setattr(abir.vm.lanes, "MAX_RING_ROWS", 16)
    emptied = []
    take = abir.vm.lanes._take_finished
    monkeypatch.setattr(abir.vm.lanes, "_take_finished", lambda *args: emptied.append(1) or take(*args))
    backend = spec_named(backend_name).new_backend()
    backend.launch_seconds = None
    xs = np.array([27, 97, 871] + [2, 3, 4, 5] * 20, dtype=np.int64)
    np.testing.assert_array_equal(np.asarray(collatz(xs, backend=backend, lanes=4)), collatz(xs, dry_run=True))
    assert len(emptied) >= 2


def test_lanes_choose_one_kernel_by_the_state_a_sweep_carries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The members' arguments and the rings, read and written at indexed rows only, are left
    out of the state size that chooses one kernel: lanes choose as a fixed batch of as many
    rows would, here with a state limit the lanes' whole state passes."""
    from abir.backends.jax import one_kernel

    monkeypatch.setattr(one_kernel, "ONE_KERNEL_MAX_BATCH", 2)
    monkeypatch.setattr(one_kernel, "ONE_KERNEL_MAX_STATE_BYTES", 4096)
    xs = np.arange(1, 2000, dtype=np.int64)
    cache: dict = {}
    got = collatz(xs, backend=abir.JaxBackend(code_cache=cache), lanes=8)
    np.testing.assert_array_equal(np.asarray(got), collatz(xs, dry_run=True))
    (entry,) = cache.values()
    loop = entry[1]
    (signature,) = loop.chosen
    sizes = {key: math.prod(shape) * np.dtype(dtype).itemsize for key, shape, dtype in signature}
    assert sum(sizes.values()) > 4096 >= sum(size for key, size in sizes.items() if key not in loop.indexed_keys)
    assert list(loop.chosen.values()) == [loop.fused]


@pytest.mark.parametrize("backend_name", ["jax", "tf"])
def test_a_chunk_after_the_first_is_one_launch(backend_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk's run begins with a launch as long as the chunks before allow (`paced_by`), not
    the first launch of a run: the first chunk's first launch runs out of its few iterations,
    each later chunk, ending on a full ring, is one launch (of about `launch_seconds`, long
    here so that a loaded machine's pace still covers a chunk)."""
    import abir.backends.base

    monkeypatch.setattr(abir.backends.base, "FIRST_LAUNCH_ITERATIONS", 64)
    monkeypatch.setattr(abir.vm.lanes, "MAX_RING_ROWS", 16)
    backend = spec_named(backend_name).new_backend()
    backend.launch_seconds = 60.0
    launches: list[int] = []
    run_in_launches = backend.run_in_launches

    def counted(launch: Any, state: Any, halt_index: int) -> Any:
        launches.append(0)

        def one(state: Any, iterations: int) -> Any:
            launches[-1] += 1
            return launch(state, iterations)

        return run_in_launches(one, state, halt_index)

    monkeypatch.setattr(backend, "run_in_launches", counted)
    xs = np.array([27, 97, 871, 703] * 10 + [2, 3, 4, 5] * 20, dtype=np.int64)
    np.testing.assert_array_equal(np.asarray(collatz(xs, backend=backend, lanes=4)), collatz(xs, dry_run=True))
    assert len(launches) >= 3 and launches[0] > 1
    assert launches[1:] == [1] * (len(launches) - 1)


def test_a_second_run_with_lanes_puts_no_zeros_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lanes' zero state (rings, flags, registers) is put on the device by the first run of
    a compiled loop and read by every later run of it (`abir.backends.jax.backend.Launch`), not
    put there again per call; the results stay those of plain Python."""
    from abir.backends.jax.loop import Fill

    made: list[Fill] = []
    on_device = Fill.on_device
    monkeypatch.setattr(Fill, "on_device", lambda fill: made.append(fill) or on_device(fill))
    backend = abir.JaxBackend()
    xs = np.arange(1, 300, dtype=np.int64)
    want = collatz(xs, dry_run=True)
    np.testing.assert_array_equal(np.asarray(collatz(xs, backend=backend, lanes=8)), want)
    first = len(made)
    np.testing.assert_array_equal(np.asarray(collatz(xs[::-1], backend=backend, lanes=8)), want[::-1])
    assert first > 0 and len(made) == first


@pytest.mark.parametrize("backend_name", ["jax", "tf"])
def test_a_sweep_with_lanes_runs_no_block_that_only_jumps(backend_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Collatz's entry only jumps to its function's first block and its way out only jumps to
    the halt: members start past the entry and the refill takes them on the way out, so no
    sweep runs those blocks (counted by `collect_stats`); the results stay plain Python's."""
    layouts: list[Any] = []
    lane_layout = abir.vm.lanes.lane_layout
    monkeypatch.setattr(abir.vm.lanes, "lane_layout", lambda *args: layouts.append(lane_layout(*args)) or layouts[-1])
    backend = abir.JaxBackend(collect_stats=True) if backend_name == "jax" else abir.TensorFlowBackend(jit_compile=True, collect_stats=True)
    ran = np.zeros(0, np.int64)
    run = backend.run

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal ran
        state = run(*args, **kwargs)
        steps = np.asarray(backend.last_stats.block_steps)
        ran = steps if ran.size == 0 else ran + steps
        return state

    monkeypatch.setattr(backend, "run", counted)
    xs = np.arange(1, 200, dtype=np.int64)
    np.testing.assert_array_equal(np.asarray(collatz(xs, backend=backend, lanes=8)), collatz(xs, dry_run=True))
    (layout,) = layouts
    skipped = list(layout.skipped_blocks())
    assert layout.start != 0 and 0 in skipped and layout.halts
    assert ran[skipped].sum() == 0 and ran[layout.start] > 0


def test_the_rings_keep_only_the_flags_a_program_can_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """Collatz has no stacks, so no member overflows or underflows one: its rings keep its
    results only (each a ring row written per sweep and read per chunk); recursion keeps the
    flags. Every member's flags still come back, normal."""
    layouts: list[Any] = []
    lane_layout = abir.vm.lanes.lane_layout
    monkeypatch.setattr(abir.vm.lanes, "lane_layout", lambda *args: layouts.append(lane_layout(*args)) or layouts[-1])
    flags = ("overflow", "underflow")
    xs = np.arange(1, 40, dtype=np.int64)
    np.testing.assert_array_equal(np.asarray(collatz(xs, backend="numpy", lanes=4)), collatz(xs, dry_run=True))
    ns = np.arange(0, 14, dtype=np.int64) % 11
    np.testing.assert_array_equal(np.asarray(fib(ns, backend="numpy", lanes=4)), fib(ns, dry_run=True))
    kept = [set(layout.results) for layout in layouts]
    assert kept[0].isdisjoint(flags) and kept[1].issuperset(flags)


def test_a_members_result_does_not_depend_on_its_lane() -> None:
    """Member 30 runs in a different lane (and after different members) for each lane count."""
    keys = abir.random.key(np.arange(31))
    results = {lanes: tries_until_below(keys, 0.3, lanes=lanes)[30] for lanes in (1, 2, 5, 7, 31)}
    assert len(set(results.values())) == 1


def test_max_steps_keeps_the_finished_results(backend_name: str) -> None:
    """Also after a run with the same lanes without max_steps, whose loop counts no steps."""
    xs = np.arange(1, 80, dtype=np.int64)
    want = collatz(xs, dry_run=True)
    np.testing.assert_array_equal(np.asarray(collatz(xs, backend=backend_name, lanes=6)), want)
    with pytest.raises(StepLimitError) as plain:
        collatz(xs, backend=backend_name, max_steps=60)
    with pytest.raises(StepLimitError) as lanes:
        collatz(xs, backend=backend_name, max_steps=60, lanes=6)
    error = lanes.value
    assert error.unfinished == sorted(plain.value.members) == sorted(error.members)
    assert sorted(error.finished + error.unfinished) == list(range(len(xs)))
    results = np.asarray(error.results)
    np.testing.assert_array_equal(results[error.finished], want[error.finished])


def test_a_stack_overflow_keeps_the_finished_results(backend_name: str) -> None:
    xs = np.arange(0, 20, dtype=np.int64)
    want = fib(xs, dry_run=True)
    with pytest.raises(StackOverflowError) as caught:
        fib(xs, backend=backend_name, max_stack_depth=8, lanes=4)
    error = caught.value
    assert error.unfinished == sorted(error.members) == [n for n in range(20) if n > 9]
    np.testing.assert_array_equal(np.asarray(error.results)[error.finished], want[error.finished])


_calls = {"made": 0, "limit": None}


@ctx.primitive
def _counted(x):
    _calls["made"] += 1
    if _calls["limit"] is not None and _calls["made"] >= _calls["limit"]:
        raise KeyboardInterrupt
    return x


@ctx.batch()
def slow_collatz(n):
    steps = 0
    while n != 1:
        n = _counted(n // 2 if n % 2 == 0 else 3 * n + 1)
        steps = steps + 1
    return steps


def test_keyboard_interrupt_keeps_the_finished_results() -> None:
    """NumPy runs helpers at every step, so one interrupts the run; the results finished by the
    chunk before the interrupt come with it."""
    xs = np.arange(1, 400, dtype=np.int64)
    want = collatz(xs, dry_run=True)
    _calls.update(made=0, limit=None)
    slow_collatz(xs, lanes=4)
    whole_run = _calls["made"]
    _calls.update(made=0, limit=int(whole_run * 0.8))
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            slow_collatz(xs, lanes=4)
    finally:
        _calls["limit"] = None
    error = caught.value
    assert error.finished and error.unfinished
    assert sorted(error.finished + error.unfinished) == list(range(len(xs)))
    np.testing.assert_array_equal(np.asarray(error.results)[error.finished], want[error.finished])


def test_progress_shows_the_finished_members(capsys: pytest.CaptureFixture[str]) -> None:
    xs = np.arange(1, 50, dtype=np.int64)
    np.testing.assert_array_equal(collatz(xs, lanes=5, progress=True), collatz(xs, dry_run=True))
    np.testing.assert_array_equal(collatz(xs, progress=True), collatz(xs, dry_run=True))
    assert "49/49" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("lanes", "error", "message"),
    [
        (0, ValueError, "lanes must be a positive int"),
        (-3, ValueError, "lanes must be a positive int"),
        (2.0, TypeError, "lanes must be None or a positive int"),
        (True, TypeError, "lanes must be None or a positive int"),
        ("4", TypeError, "lanes must be None or a positive int"),
    ],
)
def test_bad_lanes_are_refused(lanes: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        collatz(np.arange(1, 5), lanes=lanes)


def test_lanes_refuse_options_that_change_the_rows() -> None:
    with pytest.raises(ValueError, match="cannot be combined with stackless=True"):
        collatz(np.arange(1, 5), lanes=2, stackless=True)
    with pytest.raises(ValueError, match="cannot be combined with pad_batch=True"):
        collatz(np.arange(1, 5), lanes=2, pad_batch=True)
    with pytest.raises(TypeError, match="progress must be True or False"):
        collatz(np.arange(1, 5), progress=1)


def test_lanes_refuse_traced_arguments() -> None:
    jax = pytest.importorskip("jax")
    with pytest.raises(ValueError, match="runs outside traced functions"):
        jax.jit(lambda xs: collatz(xs, backend="jax", lanes=2))(np.arange(1, 5))


def test_fuzzer_checks_programs_under_lanes(capsys: pytest.CaptureFixture[str]) -> None:
    assert fuzz_main(["--count", "4", "--lanes", "1", "--backends", "numpy,numpy-sweep", "--no-shrink"]) == 0
    assert "numpy:lanes=1" in capsys.readouterr().out


def test_imap_yields_every_member_of_a_generator_as_plain_python(backend_name: str) -> None:
    count = 45
    members = ((np.int64(n % 13), np.int64(7 * n % 50)) for n in range(count))
    got = dict(first_square_above.imap(members, lanes=4, chunk_size=8, backend=backend_name))
    want = first_square_above(np.arange(count) % 13, 7 * np.arange(count) % 50, dry_run=True)
    assert sorted(got) == list(range(count))
    for index, (square, found) in got.items():
        assert (square, found) == (want[0][index], want[1][index])


def test_imap_reads_its_members_a_chunk_at_a_time() -> None:
    """An endless stream: the first results come while only a few chunks have been read."""
    read = []

    def endless():
        for n in itertools.count(1):
            read.append(n)
            yield (np.int64(n),)

    first = list(itertools.islice(collatz.imap(endless(), lanes=4, chunk_size=16), 20))
    want = collatz(np.arange(1, 200), dry_run=True)
    assert all(result == want[index] for index, result in first)
    assert len(read) <= 4 * 16


def test_imap_raises_for_failed_members_after_the_others() -> None:
    got = {}
    with pytest.raises(StepLimitError) as caught:
        for index, result in collatz.imap(((np.int64(n),) for n in range(1, 60)), lanes=4, max_steps=60):
            got[index] = result
    want = collatz(np.arange(1, 60), dry_run=True)
    assert sorted(caught.value.members) == [i for i in range(59) if want[i] >= 60]
    assert sorted(got) == [i for i in range(59) if want[i] < 60]


def test_imap_wants_tuples_of_arguments() -> None:
    with pytest.raises(TypeError, match=r"each member is the tuple of its arguments"):
        list(collatz.imap([3, 4], lanes=1))


def test_a_refill_resets_only_the_registers_some_block_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Collatz writes neither stack flag (it has no stacks): a refill leaves them as the run
    began, so a sweep carries them no more; its result register is reset for each member, and
    the results stay plain Python's."""
    layouts: list[Any] = []
    lane_layout = abir.vm.lanes.lane_layout
    monkeypatch.setattr(abir.vm.lanes, "lane_layout", lambda *args: layouts.append(lane_layout(*args)) or layouts[-1])
    xs = np.arange(1, 40, dtype=np.int64)
    np.testing.assert_array_equal(np.asarray(collatz(xs, backend="numpy", lanes=4)), collatz(xs, dry_run=True))
    (layout,) = layouts
    reset = {key for key, _ in layout.resets}
    assert reset.isdisjoint({"overflow", "underflow"}) and any(key.endswith("result0") for key in reset)


def test_a_call_after_the_first_runs_in_one_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks' and launches' pace a call with lanes leaves is kept with the compiled loop
    (`abir.vm.lanes.LanePace`): the next call of the same program, lanes and shapes begins at
    that pace, so a run that fits its rings is one chunk of one launch, where the first call
    begins with `FIRST_LANE_CHUNK` refills and a short first launch."""
    backend = abir.JaxBackend()
    backend.launch_seconds = 60.0  # long: a loaded machine's pace still covers the run
    launches: list[int] = []
    run_in_launches = backend.run_in_launches

    def counted(launch: Any, state: Any, halt_index: int) -> Any:
        def one(state: Any, iterations: int) -> Any:
            launches.append(iterations)
            return launch(state, iterations)

        return run_in_launches(one, state, halt_index)

    monkeypatch.setattr(backend, "run_in_launches", counted)
    xs = np.arange(1, 2000, dtype=np.int64)
    want = collatz(xs, dry_run=True)
    np.testing.assert_array_equal(np.asarray(collatz(xs, backend=backend, lanes=4)), want)
    assert len(launches) > 1
    launches.clear()
    np.testing.assert_array_equal(np.asarray(collatz(xs, backend=backend, lanes=4)), want)
    assert len(launches) == 1


def test_a_pace_is_kept_for_its_own_backend_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """`lane_pace` keys its cache by the backend's id (`abir.vm.machine.kept_for`); a pace left
    by another backend object with the same id (Python reuses the id of a freed object) is not
    taken for this one's."""

    class Machine:
        run_cache: dict[Any, Any] = {}

    monkeypatch.setattr(abir.vm.machine, "id", lambda obj: 7, raising=False)  # both backends: one id
    machine, old, new = Machine(), abir.NumpyBackend(), abir.NumpyBackend()
    stale = abir.vm.lanes.lane_pace(machine, old, "loop")  # type: ignore[arg-type]
    pace = abir.vm.lanes.lane_pace(machine, new, "loop")  # type: ignore[arg-type]
    assert pace is not stale
    assert abir.vm.lanes.lane_pace(machine, new, "loop") is pace  # type: ignore[arg-type]
