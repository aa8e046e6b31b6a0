"""Differential fuzzing of abir: random programs, batched on every backend, against plain Python.

    python -m abir.testing.fuzz --count 1000 --seed 0 --backends numpy,jax,tf
    python -m abir.testing.fuzz --count 200 --lanes 2     # members through 2 lanes (`lanes=2`)
    python -m abir.testing.fuzz --grad --count 100        # reverse mode on float programs (JAX)

Program `i` of seed `s` is drawn from `random.Random(f"{s}:{i}:{attempt}")` (the first attempt
whose plain Python run stays within the bounds, see `abir.testing.differential`), so a
`(seed, index)` pair names a program for good. A share of the programs (`--library-share`, drawn
from a stream of its own) computes on per-member arrays of several shapes with NumPy library
calls (`LIBRARY_CALLS`); the other programs are the ones the seed drew before library calls
existed. Each failure is shrunk on its cheapest failing backend (`abir.testing.shrink`) and
printed as a standalone script: the minimal program, how to batch and call it, the plain Python
result and each backend's. abir refusing to compile a program with library calls is tolerated
and counted by call (`--strict-refusals` makes it a failure). The exit status is 1 when a
program failed. `--grad` checks reverse-mode derivatives instead, on float programs of a generator
of their own (`abir.testing.gradients`).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from abir.testing.differential import (
    MAX_STACK_DEPTH,
    REFUSED,
    Failure,
    InvalidProgram,
    check,
    counts_as_failure,
    default_backends,
    describe_value,
    load,
    member_value,
    refused_calls,
    run_reference,
    variant_named,
    variants,
    with_lanes,
)
from abir.testing.generate import (
    ALL_FEATURES,
    DEFAULT_FEATURES,
    LIBRARY_CALLS,
    OFF_BY_DEFAULT,
    FuzzProgram,
    LibraryCall,
    ProgramGenerator,
    parse_calls,
    parse_features,
    tensor_types,
)
from abir.testing.gradients import run_gradient_campaign
from abir.testing.shrink import shrink

MAX_ATTEMPTS = 50
"""Draws per program index before giving up on finding a valid program."""
SHRINK_ORDER = ("numpy", "stackless", "numpy-sweep", "tf", "jax", "jax-switch", "tf-xla")
"""Backends from the cheapest to the dearest to compile a candidate for."""
LIBRARY_SHARE = 0.3
"""The share of programs that make library calls on arrays of several shapes (by default)."""


@dataclass
class Generated:
    program: FuzzProgram
    namespace: dict[str, Any]
    reference: list[Any]
    attempts: int


def generate(seed: int, index: int, features: frozenset[str], directory: str,
             calls: tuple[LibraryCall, ...] = LIBRARY_CALLS, library_share: float = LIBRARY_SHARE) -> Generated:  # fmt: skip
    """Program `index` of `seed`: the first draw that is valid plain Python within the bounds,
    making library calls (of `calls`) if it is one of the share `library_share` of programs."""
    features = program_features(seed, index, features, library_share)
    for attempt in range(MAX_ATTEMPTS):
        rng = random.Random(f"{seed}:{index}:{attempt}")
        program = ProgramGenerator(rng, features, calls).generate(f"seed {seed}, program {index}")
        try:
            reference = run_reference(program, directory)
        except InvalidProgram:
            continue
        return Generated(program, load(program, directory), reference, attempt + 1)
    raise RuntimeError(f"no valid program for seed {seed}, index {index} in {MAX_ATTEMPTS} draws")


def program_features(seed: int, index: int, features: frozenset[str], library_share: float) -> frozenset[str]:
    """The features of program `index` of `seed`: "library_calls" only for the share
    `library_share` of the programs, drawn from a stream of its own (the other programs are drawn
    as before library calls existed)."""
    if random.Random(f"{seed}:{index}:library").random() < library_share:
        return features
    return features - {"library_calls"}


@dataclass
class Report:
    """One failing program: its failures, and the shrunk program with its failures."""

    label: str
    original: FuzzProgram
    failures: list[Failure]
    """The failures that count (refusals only under the strict policy)."""
    minimal: FuzzProgram
    minimal_failures: list[Failure]
    reference: list[Any]
    checks: int
    duplicate_of: int | None = None

    def key(self) -> tuple[Any, ...]:
        """Failures with the same key are reported once: same backends, kind and message shape."""
        return failure_key(self.minimal_failures)


def failure_key(failures: list[Failure]) -> tuple[Any, ...]:
    return tuple(sorted((f.backend, *f.signature()) for f in failures))


@dataclass
class CampaignResult:
    count: int
    seed: int
    backends: tuple[str, ...]
    reports: list[Report] = field(default_factory=list)
    draws: int = 0
    seconds: float = 0.0
    library_programs: int = 0
    """Programs that make library calls."""
    calls_made: Counter[str] = field(default_factory=Counter)
    """Programs making each library call."""
    refused_programs: Counter[str] = field(default_factory=Counter)
    """Tolerated refusals by backend: programs abir declined to compile."""
    refused_calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Tolerated refusals by (backend, library call the refusal names)."""

    def summary(self) -> str:
        distinct = len({r.key() for r in self.reports})
        status = "no failures" if not self.reports else f"{len(self.reports)} failing programs ({distinct} distinct)"
        lines = [f"{self.count} programs (seed {self.seed}, {self.draws} draws), backends {','.join(self.backends)}: "
                 f"{status} in {self.seconds:.0f} s"]  # fmt: skip
        if self.library_programs:
            lines.append(f"{self.library_programs} programs made library calls; {self.refusal_summary()}")
        failing = Counter(call for report in self.reports for call in report.minimal.library_calls())
        if failing:
            lines.append("library calls in the failing programs (shrunk): " + _counts(failing))
        return "\n".join(lines)

    def refusal_summary(self) -> str:
        if not self.refused_programs:
            return "none refused"
        parts = []
        for backend, programs in sorted(self.refused_programs.items()):
            calls = Counter({call: n for (b, call), n in self.refused_calls.items() if b == backend})
            parts.append(f"{backend} refused {programs} ({_counts(calls)})")
        return "; ".join(parts)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counter.items(), key=lambda item: (-item[1], item[0])))


def run_campaign(
    count: int,
    seed: int,
    backends: tuple[str, ...] | None = None,
    features: frozenset[str] = DEFAULT_FEATURES,
    start: int = 0,
    shrink_failures: bool = True,
    shrink_seconds: float = 300.0,
    out: Callable[[str], None] = print,
    directory: str | None = None,
    stop_after: int | None = None,
    calls: tuple[LibraryCall, ...] = LIBRARY_CALLS,
    library_share: float = LIBRARY_SHARE,
    tolerate_refusals: bool = True,
) -> CampaignResult:
    """Generate and check programs `start .. start + count - 1` of `seed` (stopping after
    `stop_after` failing programs, if given); refusals count as failures unless tolerated."""
    backends = default_backends() if backends is None else backends
    result = CampaignResult(count, seed, backends)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="abir_fuzz_") as scratch:
        directory = directory or scratch
        for index in range(start, start + count):
            generated = generate(seed, index, features, directory, calls, library_share)
            result.draws += generated.attempts
            found = check(generated.program, backends, generated.namespace, generated.reference)
            count_library_calls(result, generated.program, found)
            failures = [f for f in found if counts_as_failure(f, tolerate_refusals)]
            if failures:
                report = _report(generated, failures, backends, directory, shrink_failures, shrink_seconds, result)
                result.reports.append(report)
                out(format_report(report, len(result.reports)))
                if stop_after is not None and len(result.reports) >= stop_after:
                    result.count = index - start + 1
                    break
            done = index - start + 1
            if done % 25 == 0 or done == count:
                out(f"# {done}/{count} programs, {len(result.reports)} failing, {result.library_programs} with library "
                    f"calls ({result.refusal_summary()}), {time.monotonic() - began:.0f} s")  # fmt: skip
    result.seconds = time.monotonic() - began
    return result


def count_library_calls(result: CampaignResult, program: FuzzProgram, failures: list[Failure]) -> None:
    """Add a program's library calls and refusals to the campaign's counts."""
    made = program.library_calls()
    if not made:
        return
    result.library_programs += 1
    result.calls_made.update(made)
    for failure in failures:
        if failure.kind == REFUSED:
            result.refused_programs[failure.backend] += 1
            result.refused_calls.update((failure.backend, call) for call in refused_calls(program, failure.message))


def _report(generated: Generated, failures: list[Failure], backends: tuple[str, ...], directory: str,
            shrink_failures: bool, shrink_seconds: float, campaign: CampaignResult) -> Report:  # fmt: skip
    """The report of a failing program: shrunk, unless it raises an error seen before."""
    program = generated.program
    report = Report(program.label, program, failures, program, failures, generated.reference, 0)
    earlier = {}
    for number, other in enumerate(campaign.reports, 1):
        if other.duplicate_of is None:
            earlier.setdefault(failure_key(other.failures), number)
            earlier.setdefault(other.key(), number)
    if failure_key(failures) in earlier and all(f.kind != "mismatch" for f in failures):
        report.duplicate_of = earlier[failure_key(failures)]
        return report
    if shrink_failures:
        failure = min(failures, key=lambda f: shrink_rank(f.backend))
        shrunk = shrink(program, failure, directory, time_budget=shrink_seconds)
        namespace = load(shrunk.program, directory)
        reference = run_reference(shrunk.program, directory)
        report.minimal, report.reference, report.checks = shrunk.program, reference, shrunk.checks
        report.minimal_failures = check(shrunk.program, backends, namespace, reference) or [shrunk.failure]
    return report


def shrink_rank(backend: str) -> int:
    """Where `backend` (maybe with lanes, `with_lanes`) stands in `SHRINK_ORDER` (unknown: last)."""
    base = backend.partition(":")[0]
    return SHRINK_ORDER.index(base) if base in SHRINK_ORDER else len(SHRINK_ORDER)


# ----- reports --------------------------------------------------------------------------------


def format_report(report: Report, number: int) -> str:
    failing = ", ".join(f"{f.backend}: {f.kind}" for f in report.minimal_failures)
    calls = report.minimal.library_calls()
    header = f"=== failure {number}: {report.label} ({failing}{'; calls ' + ', '.join(calls) if calls else ''}) ==="
    if report.duplicate_of is not None:
        return f"{header}\n# the same error as failure {report.duplicate_of}: {report.failures[0].message}\n"
    lines = report.original.source().count("\n")
    shrunk = report.minimal.source().count("\n")
    note = f"# shrunk from {lines} to {shrunk} lines ({report.checks} checks); a runnable reproduction:"
    if report.minimal is report.original:
        note = "# as generated (not shrunk); a runnable reproduction:"
    return "\n".join([header, note, repro_script(report.minimal, report.minimal_failures, report.reference), ""])


def repro_script(program: FuzzProgram, failures: list[Failure], reference: list[Any]) -> str:
    """The program as a standalone script: it batches the functions, prints the plain Python
    result of every member and the batched result on each failing backend (what each gave in
    the fuzzer's run follows as a comment)."""
    namespace: dict[str, Any] = {}
    exec(compile(program.source(), "<repro>", "exec"), namespace)
    lines = [program.source().rstrip(), "", "", "import abir", "", "ctx = abir.Context()"]
    for name in program.batched:
        inference = ""
        if name in program.declared_results:
            leaves = [f"abir.TensorType(np.{t.dtype.name}, {t.shape})" for t in
                      tensor_types(program.declared_results[name], program.vector_size)]  # fmt: skip
            answer = leaves[0] if len(leaves) == 1 else "[" + ", ".join(leaves) + "]"
            inference = f"type_inference=lambda types: {answer}"
        target = f"batched_{name} = " if name == program.entry else ""
        lines.append(f"{target}ctx.batch({inference})({name})")
    batched_args = ", ".join(_batched_argument(v, t) for v, t in zip(program.inputs, program.input_types, strict=True))
    lines.append(f"args = ({batched_args}{',' if len(program.inputs) == 1 else ''})")
    for i, expected in enumerate(reference):
        member = ", ".join(describe_value(member_value(v, t, i, namespace))
                           for v, t in zip(program.inputs, program.input_types, strict=True))  # fmt: skip
        lines.append(f"print({program.entry}({member}))  # plain Python, member {i}: {describe_value(expected)}")
    for failure in failures:
        variant = variant_named(failure.backend)
        options = "".join(f", {k}={v!r}" for k, v in variant.call_options)
        call = (f"batched_{program.entry}(*args, backend={variant.backend_source()}, "
                f"max_stack_depth={MAX_STACK_DEPTH}{options})")  # fmt: skip
        if failure.kind != "mismatch":
            lines.append(f"print({call})  # {failure.backend} raises {failure.message.splitlines()[0]}")
        else:
            lines.append(f"print({call})  # {failure.backend}, member {failure.member}: {describe_value(failure.got)}")
    return "\n".join(lines)


def _batched_argument(value: Any, t: Any) -> str:
    if isinstance(t, tuple):
        return "(" + ", ".join(_batched_argument(v, p) for v, p in zip(value, t, strict=True)) + ")"
    if t == "pair":
        return "P(" + ", ".join(_batched_argument(v, "leaf") for v in value) + ")"
    dtype = "" if value.dtype.kind == "f" else f", dtype=np.{value.dtype.name}"
    return f"np.array({value.tolist()!r}{dtype})"


# ----- command line ---------------------------------------------------------------------------


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m abir.testing.fuzz",
        description="Differential fuzzing: random programs batched by abir against plain Python, member by member.",
    )
    parser.add_argument("--count", type=int, default=1000, help="number of programs (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed; program i of a seed is always the same")
    parser.add_argument("--start", type=int, default=0, help="index of the first program (to rerun one: --start i --count 1)")
    parser.add_argument("--backends", default=",".join(default_backends()),
                        help=f"comma-separated, from {','.join(variants())} (default {','.join(default_backends())})")
    features = " ".join(f"{name}{' (off)' if name in OFF_BY_DEFAULT else ''}" for name in sorted(ALL_FEATURES))
    parser.add_argument("--features", default="",
                        help=f"changes to the default features, e.g. +item_assignment,-arrays; the features: {features}")
    parser.add_argument("--calls", default="",
                        help="library calls: e.g. -flip,-roll (all but those) or flip,roll (only those); "
                             f"the calls: {' '.join(c.name for c in LIBRARY_CALLS)}")
    parser.add_argument("--library-share", type=float, default=LIBRARY_SHARE,
                        help=f"share of the programs that make library calls (default {LIBRARY_SHARE}; 1 for all)")
    parser.add_argument("--strict-refusals", action="store_true",
                        help="count abir refusing to compile a program with library calls as a failure")
    parser.add_argument("--no-shrink", action="store_true", help="report failures as generated, unshrunk")
    parser.add_argument("--shrink-seconds", type=float, default=300.0, help="time limit for shrinking one failure")
    parser.add_argument("--lanes", type=int, default=None,
                        help="call every batched function with lanes=N (members through N lanes; the programs have "
                             "a few members, so 1 or 2 makes lanes refill)")
    parser.add_argument("--show", action="store_true", help="print the programs' source instead of checking them")
    parser.add_argument("--grad", action="store_true",
                        help="check reverse-mode derivatives (jax.vjp on the JAX backend) of float programs against "
                             "jax.vjp of the per-member function instead (abir.testing.gradients)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up notes would drown the report
    args = parse_arguments(argv)
    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    unknown = [b for b in backends if b not in variants()]
    if unknown:
        print(f"unknown backend(s) {', '.join(unknown)}; choose from {', '.join(variants())}", file=sys.stderr)
        return 2
    if args.lanes is not None:
        if args.lanes < 1:
            print(f"--lanes must be a positive number of lanes, got {args.lanes}", file=sys.stderr)
            return 2
        backends = tuple(with_lanes(b, args.lanes) for b in backends if variant_named(b).call_options != (("stackless", True),))
    try:
        features = parse_features(args.features)
        calls = parse_calls(args.calls)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if args.grad:
        return gradient_campaign(args)
    if args.show:
        with tempfile.TemporaryDirectory(prefix="abir_fuzz_") as directory:
            for index in range(args.start, args.start + args.count):
                program = generate(args.seed, index, features, directory, calls, args.library_share).program
                print(f"# {program.label}\n{program.source()}")
        return 0
    if any(variant_named(b).backend == "tensorflow" for b in backends):
        import tensorflow as tf

        tf.get_logger().setLevel("ERROR")  # retracing warnings: every program is a new tf.function
    print(f"# abir fuzz: {args.count} programs from seed {args.seed}, backends {','.join(backends)}, "
          f"features {','.join(sorted(features))}", flush=True)  # fmt: skip
    result = run_campaign(args.count, args.seed, backends, features, args.start, not args.no_shrink,
                          args.shrink_seconds, out=lambda text: print(text, flush=True), calls=calls,
                          library_share=args.library_share, tolerate_refusals=not args.strict_refusals)  # fmt: skip
    print(result.summary())
    return 1 if result.reports else 0


def gradient_campaign(args: argparse.Namespace) -> int:
    """The `--grad` campaign; 1 when a program failed."""
    print(f"# abir fuzz --grad: {args.count} float programs from seed {args.seed}", flush=True)
    with tempfile.TemporaryDirectory(prefix="abir_fuzz_") as directory:
        failing = run_gradient_campaign(args.count, args.seed, args.start, directory,
                                        out=lambda text: print(text, flush=True))  # fmt: skip
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
