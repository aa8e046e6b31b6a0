"""The per-chain NUTS program: plain Python for ONE chain, batched over chains by abir.

`make_program` returns the functions of the program (closures over the sampler's constants and
the log density's `value_and_grad`). Each runs on one chain's values exactly as written; abir's
compiler batches them together, each chain with its own program counter, so chains take
trajectories of their own lengths and adapt without waiting for each other.

The transition is Stan's multinomial NUTS (Betancourt 2017, appendix A): trajectory doubling in
a random direction, uniform progressive sampling inside a subtree and biased progressive sampling
when a subtree joins the trajectory, the generalized U-turn criterion with the extra checks
across the two halves of every merge, and divergences (energy error above `MAX_ENERGY_ERROR`)
ending the trajectory. Each doubling's subtree is built iteratively, one leapfrog per loop
iteration (`build_subtree`), as NumPyro's `iterative_build_tree` does: the U-turn checks of its
own subtrees run at the leaves where they end, from momentum checkpoints indexed by the bits
of the leaf's number (`subtrees_ending_at`, `turned_inside`), and its sample is drawn leaf by
leaf; the subtrees, checks and draws' distribution are those of Stan's recursive tree.

The warm-up is Stan's windowed adaptation: Stan's initial step-size search
(`initial_step_size`) at the start and after each window, dual averaging of the step size, and
a diagonal inverse mass matrix estimated with Welford's algorithm in the slow windows
(`WarmupSchedule`), regularized towards 1e-3 as Stan does.
"""

from __future__ import annotations

import collections
import dataclasses
import types

import numpy as np

import abir

MAX_ENERGY_ERROR = 1000.0
MAX_STEP_SIZE_DOUBLINGS = 50  # a step size between 2**-50 and 2**50 times the initial one

# A phase-space point with its log density and gradient.
Point = collections.namedtuple("Point", ["q", "p", "logp", "grad"])
# A subtree: its first momentum (next to where it started), its far end, the point drawn from
# it, its log weight, the sum of its momenta, the sum of its acceptance probabilities, its
# leapfrogs, whether it may be kept (no U-turn, no divergence) and whether it diverged.
Tree = collections.namedtuple(
    "Tree", ["p_first", "end", "sample", "log_weight", "rho", "sum_accept", "leapfrogs", "ok", "divergent"]
)
# What a chain carries from one transition to the next (and from one call to the next).
State = collections.namedtuple(
    "State",
    [
        "q", "logp", "grad", "step_size", "inverse_mass", "counter",
        "da_mu", "da_count", "da_s_bar", "da_x_bar",
        "w_count", "w_mean", "w_m2",
    ],
)  # fmt: skip
# The statistics of one transition.
Info = collections.namedtuple("Info", ["tree_depth", "leapfrogs", "divergent", "accept", "energy"])


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sampler's constants: dimension, warm-up length, tree depth, dual-averaging
    parameters (Stan's defaults), thinning, and the rows of draws one call returns."""

    dim: int
    num_warmup: int
    max_tree_depth: int = 10
    target_accept: float = 0.8
    gamma: float = 0.05
    t0: float = 10.0
    kappa: float = 0.75
    thin: int = 1
    chunk_rows: int = 10


def warmup_schedule(num_warmup: int, init_buffer=75, term_buffer=50, base_window=25):
    """Stan's windows: (in_slow_window, window_ends), boolean arrays over the warm-up iterations.

    Iterations [init_buffer, num_warmup - term_buffer) are slow windows of doubling size from
    `base_window`; a later window that would leave less than twice its size before the terminal
    buffer is stretched to it. When the warm-up is shorter than the three buffers, Stan's 15%/75%/10%
    split is used instead."""
    in_slow = np.zeros(num_warmup + 1, dtype=bool)
    ends = np.zeros(num_warmup + 1, dtype=bool)
    if num_warmup < 20:
        return in_slow, ends
    if init_buffer + base_window + term_buffer > num_warmup:
        init_buffer = int(0.15 * num_warmup)
        term_buffer = int(0.1 * num_warmup)
        base_window = num_warmup - (init_buffer + term_buffer)
    last = num_warmup - term_buffer - 1
    size, start, end = base_window, init_buffer, init_buffer + base_window - 1
    while True:
        in_slow[start : end + 1] = True
        ends[end] = True
        if end >= last:
            break
        size, start = 2 * size, end + 1
        end = min(end + size, last)
        if end + 2 * size >= num_warmup - term_buffer:
            end = last
    return in_slow, ends


def make_program(value_and_grad, settings: Settings) -> types.SimpleNamespace:  # noqa: C901 (closures)
    """The per-chain functions of NUTS with warm-up for the log density's `value_and_grad`
    (q -> (log density, gradient); batched, it is declared a primitive of the Context)."""
    s = settings
    in_slow, window_ends = warmup_schedule(s.num_warmup)
    bits = np.arange(s.max_tree_depth + 1)
    rows = max(s.max_tree_depth, 2)  # checkpoints: a subtree of 2**(D - 1) leaves uses D - 1 of them
    levels = np.arange(rows)

    def kinetic(p, inverse_mass):
        return 0.5 * np.sum(inverse_mass * p * p)

    def no_u_turn(p_minus, p_plus, rho, inverse_mass):
        """The generalized criterion: both ends' velocities still point along the summed momenta."""
        return (np.sum(inverse_mass * p_minus * rho) > 0.0) & (np.sum(inverse_mass * p_plus * rho) > 0.0)

    def no_u_turn_rows(p_minus, p_plus, rho, inverse_mass):
        """`no_u_turn` of each row of [rows, dim] momenta (p_plus may be one [dim] momentum)."""
        minus = np.sum(inverse_mass * p_minus * rho, axis=1)
        return (minus > 0.0) & (np.sum(inverse_mass * p_plus * rho, axis=1) > 0.0)

    def leapfrog(start, step, inverse_mass):
        p = start.p + (0.5 * step) * start.grad
        q = start.q + step * (inverse_mass * p)
        logp, grad = value_and_grad(q)
        p = p + (0.5 * step) * grad
        return Point(q, p, logp, grad)

    def popcount(n):
        """The number of set bits of n (0 <= n < 2**max_tree_depth)."""
        return np.sum((n >> bits) & 1)

    def subtrees_ending_at(n):
        """(first, last): the checkpoints of the subtrees of two or more leaves that end at leaf
        n of the subtree being built (none when n is even: first > last). Checkpoint
        popcount(m >> 1) holds leaf m, for m even, the first leaf of the subtrees starting there;
        those ending at n of sizes 2, 4, ..., 2**t (t the trailing ones of n) started at
        checkpoints last, last - 1, ..., last - t + 1."""
        last = popcount(n >> 1)
        return last - (popcount(n ^ (n + 1)) - 1) + 1, last

    def turned_inside(n, p, rho, checkpoints, inverse_mass):
        """Whether a subtree ending at leaf n with momentum p turns back: the criterion on its
        ends and summed momenta, and for subtrees of four leaves or more Stan's checks across
        its halves (the right half of the subtree at checkpoint i starts at checkpoint i + 1).
        `rho` sums the momenta of the leaves 0..n; `checkpoints` are (momentum of leaf m, rho at
        leaf m, momentum of leaf m - 1) for the leaves m they hold."""
        ck_p, ck_rho, ck_before = checkpoints
        first, last = subtrees_ending_at(n)
        ending = (levels >= first) & (levels <= last)
        rho_sub = rho - ck_rho + ck_p  # each checkpoint's subtree: its leaves up to n
        turned = ~no_u_turn_rows(ck_p, p, rho_sub, inverse_mass)
        rho_left = (ck_rho[1:] - ck_p[1:]) - (ck_rho[:-1] - ck_p[:-1])
        across = ~no_u_turn_rows(ck_p[:-1], ck_p[1:], rho_left + ck_p[1:], inverse_mass) | ~no_u_turn_rows(
            ck_before[1:], p, rho_sub[1:] + ck_before[1:], inverse_mass
        )
        return np.any(ending & turned) | np.any(ending[:-1] & (levels[:-1] < last) & across)

    def build_subtree(start, step, depth, energy0, inverse_mass, key, counter):
        """A subtree of 2**depth leapfrogs of signed size `step` from `start`, one leapfrog per
        iteration, ending early at a divergence or at a U-turn of any of its subtrees (checked
        at the leaves where they end, from momentum checkpoints); its sample drawn leaf by leaf
        in proportion to exp(-H) (uniform progressive sampling). Returns (Tree, counter)."""
        checkpoints = (np.zeros((rows, s.dim)), np.zeros((rows, s.dim)), np.zeros((rows, s.dim)))
        end = start
        sample = start
        p_first = start.p
        log_weight = -np.inf
        rho = 0.0 * start.p
        sum_accept = 0.0
        ok = True
        divergent = False
        n = 0
        # tested at the end (2**depth >= 1): a test at the top would be a path past the loop, and
        # the doubling code around it a loop the sweep repeats on its own, one more sweep each
        while True:
            before = end.p
            end = leapfrog(end, step, inverse_mass)
            leaf_weight = energy0 - (kinetic(end.p, inverse_mass) - end.logp)
            leaf_weight = np.where(np.isnan(leaf_weight), -np.inf, leaf_weight)
            divergent = -leaf_weight > MAX_ENERGY_ERROR
            sum_accept += np.minimum(1.0, np.exp(leaf_weight))
            log_weight_with = np.logaddexp(log_weight, leaf_weight)
            take = np.log(abir.random.uniform(key, counter)) < leaf_weight - log_weight_with
            counter = counter + 1
            sample = end if take else sample
            log_weight = log_weight_with
            rho = rho + end.p
            p_first = end.p if n == 0 else p_first
            checkpoints = recorded(checkpoints, n, end.p, rho, before)
            n += 1
            # `or` skips the checks after a divergence; the loop compiles to two blocks (the
            # leapfrog; the checks and the test), one sweep per leapfrog for every chain
            # (form-superblocks does not fuse a nested loop into one block that a sweep would
            # repeat until every chain had left it)
            if divergent or turned_inside(n - 1, end.p, rho, checkpoints, inverse_mass):
                ok = False
                break
            if n == (1 << depth):
                break
        return Tree(p_first, end, sample, log_weight, rho, sum_accept, n, ok, divergent), counter

    def recorded(checkpoints, n, p, rho, before):
        """The checkpoints with leaf n's (p, rho, the previous leaf's momentum) at checkpoint
        popcount(n >> 1) when n is even, else unchanged."""
        here = ((levels == popcount(n >> 1)) & (n % 2 == 0))[:, None]
        ck_p, ck_rho, ck_before = checkpoints
        return np.where(here, p, ck_p), np.where(here, rho, ck_rho), np.where(here, before, ck_before)

    def transition(q, logp, grad, step_size, inverse_mass, key, counter):
        """One NUTS transition from q; returns (new Point, Info, counter)."""
        p = abir.random.normal(key, counter, shape=(s.dim,)) / np.sqrt(inverse_mass)
        counter = counter + 1
        left = Point(q, p, logp, grad)
        right = left
        sample = left
        energy0 = kinetic(p, inverse_mass) - logp
        rho = p
        log_weight = 0.0
        sum_accept = 0.0
        leapfrogs = 0
        depth = 0
        divergent = False
        while True:  # max_tree_depth >= 1: at least one doubling, tested at the end
            forward = abir.random.uniform(key, counter) < 0.5
            counter = counter + 1
            step = step_size
            start = right
            far = left.p
            if not forward:
                step = -step_size
                start = left
                far = right.p
            tree, counter = build_subtree(start, step, depth, energy0, inverse_mass, key, counter)
            leapfrogs += tree.leapfrogs
            sum_accept += tree.sum_accept
            if not tree.ok:
                divergent = tree.divergent
                break
            depth += 1
            if forward:
                right = tree.end
            else:
                left = tree.end
            if np.log(abir.random.uniform(key, counter)) < tree.log_weight - log_weight:
                sample = tree.sample
            counter = counter + 1
            log_weight = np.logaddexp(log_weight, tree.log_weight)
            turned = not (
                no_u_turn(far, tree.end.p, rho + tree.rho, inverse_mass)
                & no_u_turn(far, tree.p_first, rho + tree.p_first, inverse_mass)
                & no_u_turn(start.p, tree.end.p, tree.rho + start.p, inverse_mass)
            )
            rho = rho + tree.rho
            if turned or depth == s.max_tree_depth:
                break
        energy = kinetic(sample.p, inverse_mass) - sample.logp
        info = Info(depth, leapfrogs, divergent, sum_accept / leapfrogs, energy)
        return sample, info, counter

    def log_accept_one_step(q, logp, grad, step_size, inverse_mass, key, counter):
        """H0 - H after one leapfrog of `step_size` from q with a fresh momentum (-inf for NaN)."""
        p = abir.random.normal(key, counter, shape=(s.dim,)) / np.sqrt(inverse_mass)
        end = leapfrog(Point(q, p, logp, grad), step_size, inverse_mass)
        delta = (kinetic(p, inverse_mass) - logp) - (kinetic(end.p, inverse_mass) - end.logp)
        if np.isnan(delta):
            delta = -np.inf
        return delta

    def initial_step_size(q, logp, grad, step_size, inverse_mass, key, counter):
        """Stan's init_stepsize: double (or halve) the step size until one leapfrog's acceptance
        probability crosses 0.8; (step size, counter). Stan raises past 1e7 or at 0; here the
        search stops after `MAX_STEP_SIZE_DOUBLINGS` and the warm-up goes on from there."""
        log_target = np.log(0.8)
        delta = log_accept_one_step(q, logp, grad, step_size, inverse_mass, key, counter)
        counter = counter + 1
        direction = 1.0 if delta > log_target else -1.0
        tries = 0
        while tries < MAX_STEP_SIZE_DOUBLINGS:
            delta = log_accept_one_step(q, logp, grad, step_size, inverse_mass, key, counter)
            counter = counter + 1
            if direction > 0.0 and not delta > log_target:
                break
            if direction < 0.0 and not delta < log_target:
                break
            step_size = step_size * 2.0 if direction > 0.0 else step_size * 0.5
            tries += 1
        return step_size, counter

    def adapt(state, accept, i, key):
        """Stan's windowed adaptation after warm-up iteration i: a dual-averaging step, a Welford
        update in slow windows, and at a window's end the new inverse mass, a step size found by
        `initial_step_size` and a restarted dual averaging."""
        da_count = state.da_count + 1
        eta = 1.0 / (da_count + s.t0)
        s_bar = (1.0 - eta) * state.da_s_bar + eta * (s.target_accept - np.minimum(1.0, accept))
        x = state.da_mu - s_bar * np.sqrt(da_count) / s.gamma
        x_eta = da_count ** (-s.kappa)
        x_bar = (1.0 - x_eta) * state.da_x_bar + x_eta * x
        step_size = np.exp(x)
        da_mu = state.da_mu
        w_count, w_mean, w_m2 = state.w_count, state.w_mean, state.w_m2
        inverse_mass = state.inverse_mass
        counter = state.counter
        if in_slow[i]:
            w_count = w_count + 1
            delta = state.q - w_mean
            w_mean = w_mean + delta / w_count
            w_m2 = w_m2 + delta * (state.q - w_mean)
        if window_ends[i]:
            n = w_count
            variance = w_m2 / (n - 1.0)
            inverse_mass = (n / (n + 5.0)) * variance + 1e-3 * (5.0 / (n + 5.0))
            w_count, w_mean, w_m2 = 0, 0.0 * w_mean, 0.0 * w_m2
            step_size, counter = initial_step_size(state.q, state.logp, state.grad, step_size, inverse_mass,
                                                   key, counter)  # fmt: skip
            da_mu = np.log(10.0 * step_size)
            da_count, s_bar, x_bar = 0, 0.0, 0.0
        if i == s.num_warmup - 1:
            step_size = np.exp(x_bar)
        return State(state.q, state.logp, state.grad, step_size, inverse_mass, counter,
                     da_mu, da_count, s_bar, x_bar, w_count, w_mean, w_m2)  # fmt: skip

    def initial_state(q, step_size, key):
        """The chain's state at q before the warm-up (unit inverse mass; with a warm-up, the step
        size found by `initial_step_size` from `step_size`, as Stan starts). The first window's
        dual averaging shrinks towards ten times the given `step_size`, not the one found: Stan
        sets mu before its search (and BlackJAX, which does not search, from the same value)."""
        logp, grad = value_and_grad(q)
        zero = 0.0 * q
        counter = 0
        da_mu = np.log(10.0 * step_size)
        if s.num_warmup > 0:
            step_size, counter = initial_step_size(q, logp, grad, step_size, zero + 1.0, key, counter)
        return State(q, logp, grad, step_size, zero + 1.0, counter, da_mu, 0, 0.0, 0.0,
                     0, zero, zero)  # fmt: skip

    def run_chunk(state, key, first, count):
        """Iterations first .. first + count - 1 (warm-up ones adapt, later ones may be kept);
        returns (State, draws [chunk_rows, dim], Info of [chunk_rows] arrays). Row r holds the
        r-th kept draw of the chunk; `first - num_warmup` is a multiple of `thin` when sampling."""
        draws = np.zeros((s.chunk_rows, s.dim))
        depths = np.zeros(s.chunk_rows, dtype=np.int64)
        leapfrog_counts = np.zeros(s.chunk_rows, dtype=np.int64)
        divergences = np.zeros(s.chunk_rows, dtype=bool)
        accepts = np.zeros(s.chunk_rows)
        energies = np.zeros(s.chunk_rows)
        i = first
        while i < first + count:
            point, info, counter = transition(state.q, state.logp, state.grad, state.step_size,
                                              state.inverse_mass, key, state.counter)  # fmt: skip
            state = State(point.q, point.logp, point.grad, state.step_size, state.inverse_mass, counter,
                          state.da_mu, state.da_count, state.da_s_bar, state.da_x_bar,
                          state.w_count, state.w_mean, state.w_m2)  # fmt: skip
            if i < s.num_warmup:
                state = adapt(state, info.accept, i, key)
            elif (i - s.num_warmup) % s.thin == 0:
                row = (i - first) // s.thin
                draws[row] = point.q
                depths[row] = info.tree_depth
                leapfrog_counts[row] = info.leapfrogs
                divergences[row] = info.divergent
                accepts[row] = info.accept
                energies[row] = info.energy
            i += 1
        return state, draws, Info(depths, leapfrog_counts, divergences, accepts, energies)

    return types.SimpleNamespace(
        kinetic=kinetic, no_u_turn=no_u_turn, no_u_turn_rows=no_u_turn_rows, leapfrog=leapfrog, popcount=popcount,
        subtrees_ending_at=subtrees_ending_at, turned_inside=turned_inside, recorded=recorded,
        build_subtree=build_subtree, transition=transition, log_accept_one_step=log_accept_one_step,
        initial_step_size=initial_step_size, adapt=adapt, initial_state=initial_state, run_chunk=run_chunk,
        settings=settings,
    )  # fmt: skip


FUNCTIONS = (
    "kinetic", "no_u_turn", "no_u_turn_rows", "leapfrog", "popcount", "subtrees_ending_at", "turned_inside", "recorded",
    "build_subtree", "transition", "log_accept_one_step", "initial_step_size", "adapt", "initial_state",
    "run_chunk",
)  # fmt: skip


def batch(program: types.SimpleNamespace, value_and_grad, ctx: abir.Context | None = None):
    """(batched initial_state, batched run_chunk): the program's functions in one Context, with
    `value_and_grad` declared a whole-batch primitive."""
    ctx = ctx or abir.Context()
    ctx.primitive(value_and_grad)
    batched = {name: ctx.batch_uncurried(getattr(program, name)) for name in FUNCTIONS}
    return batched["initial_state"], batched["run_chunk"]


def stack_depth(settings: Settings) -> int:
    """A `max_stack_depth` enough for the calls below `run_chunk` (none recurses)."""
    return 8
