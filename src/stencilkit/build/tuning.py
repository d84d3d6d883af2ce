"""Measured choices for the C backend (issue 30): the knobs whose best setting depends on the
machine, the variant being built, timing candidates within a budget, and the "wisdom" that
remembers a choice per (kernel, signature, size class, machine).

The knobs are the ones that moved the numbers (docs/performance.md, "Autotuning"):
streaming or plain stores of a point kernel's output, the columns per block of a column
sweep over K-contiguous arrays, the vector width GCC prefers on a CPU
with AVX-512, ``-mtune=`` of the nearest processor the compiler knows where it does not
know this one, and the OpenMP schedule (static blocks or chunks dealt round-robin) and team
(the whole or fewer threads) of loops without reductions. Every variant computes the same
values with the same operations in the same order per element (the knobs change where stores
go, how loops are vectorized and which thread runs an iteration, never the arithmetic:
``-ffp-contract=off`` and no reassociation stay), so results are bit-identical whatever is
chosen (tests/test_tuning.py and tests/test_tuning_knobs.py run every candidate).

How the cost is bounded (FFTW's wisdom, Devito's "basic" autotuning mode): only calls of at
least ``MIN_WORK`` points are tuned; knobs are tried one at a time, each against the best so
far (coordinate descent: at most 1 + number of knobs builds, not their product); the timed
runs are interleaved rounds, stopped after ``BUDGET_S`` seconds of running or
``MAX_ROUNDS``; and the choice is stored, so it is paid once per machine. A candidate is
chosen by its per-round ratio to the best so far (``choose``), not by its best time alone:
on a shared machine a lucky run decided that, and two runs chose differently.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..config import Autotune  # noqa: F401 (the modes, re-exported for the tuner)

#: calls with fewer points than this run the default variant and are never measured: the
#: C call of a 64^3 Laplacian takes about 0.1 ms, where no knob here moves anything
MIN_WORK = 1 << 20
#: seconds of timed runs per kernel and size class, shared by its knobs (the builds of the
#: candidates come on top, once per machine: they are cached as any other build)
BUDGET_S = 0.6
#: seconds a first call may spend tuning after its default's build, candidate builds
#: included: a knob is tried only where its builds and timed runs still fit (the first
#: always is; its candidates start building with the default, on a spare CPU); the knobs
#: left keep their default, and the stored record names them as pending ("measure" tries
#: every knob). At 1 s a second knob's builds (about 0.55 s) still fitted, and a first call
#: of jacobi2d 4096² cost 0.9-1.1 s more than with tuning off; the issue asks for under a
#: second. Trying the pending knobs in later processes' first calls instead spread the
#: cost without cutting it: at load average 3.6 lap3d's three processes spent 1.1, 1.8 and
#: 0.7 s (base: 2.6 s once)
TOTAL_BUDGET_S = 0.6
MAX_ROUNDS = 7  # more rounds, fewer choices made by a busy neighbour (choose)
#: rounds run whatever the budget where candidates are compared: one or two rounds let a
#: single burst of load decide (a large call on a loaded machine spends its share in one)
MIN_ROUNDS = 3
#: a candidate must beat the default by this fraction to be chosen: below it, the shared
#: machine's noise decides, and the default is as good
MIN_GAIN = 0.03


@dataclass(frozen=True)
class Variant:
    """One setting of the knobs; None: the default (machine-derived) choice."""

    streaming: bool | None = None  # a point kernel's large outputs with streaming stores
    vector_bits: int | None = None  # -mprefer-vector-width=
    tune: str | None = None  # -mtune=
    collapse: bool | None = None  # a computation's contiguous J/K rows as one loop
    threads: int | None = None  # at most this many threads per parallel loop (the team's)
    chunk: int | None = None  # schedule(static, chunk) instead of one block per thread
    column_block: int | None = None  # columns per block of a K-contiguous column sweep

    @property
    def flags(self) -> tuple[str, ...]:
        """The compiler flags the variant adds to the toolchain's."""
        out = []
        if self.vector_bits is not None:
            out.append(f"-mprefer-vector-width={self.vector_bits}")
        if self.tune is not None:
            out.append(f"-mtune={self.tune}")
        return tuple(out)

    @property
    def key(self) -> str:
        return "" if self == DEFAULT else repr(self.to_json())

    @property
    def source_key(self) -> str:
        """``key`` of the knobs that change the generated source (part of the front key):
        the knobs that only add compiler flags (``FLAG_KNOBS``) change the binary, which
        the toolchain's identity in the back key covers, so variants differing only in
        them share the front stages' work (and a stored choice of one costs no second
        run of the front stages)."""
        return dataclasses.replace(self, **{k: None for k in FLAG_KNOBS}).key

    def to_json(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}

    @classmethod
    def from_json(cls, data: object) -> Variant:
        if not isinstance(data, dict):
            raise ValueError(f"not a variant: {data!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        if not set(data) <= names:
            raise ValueError(f"unknown knobs {sorted(set(data) - names)}")
        v = cls(**data)
        if not all(isinstance(x, t) or x is None for x, t in (
                (v.streaming, bool), (v.vector_bits, int), (v.tune, str), (v.collapse, bool),
                (v.threads, int), (v.chunk, int), (v.column_block, int))):
            raise ValueError(f"a knob of the wrong type: {data!r}")
        return v

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.to_json().items()) or "default"


DEFAULT = Variant()

#: the knobs ``Variant.flags`` turns into compiler flags, and nothing else reads
FLAG_KNOBS = frozenset({"vector_bits", "tune"})

_building: contextvars.ContextVar[Variant] = contextvars.ContextVar(
    "stencilkit_variant", default=DEFAULT)


def knob_name(knob: list[Variant]) -> str:
    """The name a knob (its list of alternatives) is stored under: the knobs it sets."""
    return "+".join(sorted({k for v in knob for k in v.to_json()}))


def current_variant() -> Variant:
    """The variant being built (``DEFAULT`` outside ``building``)."""
    return _building.get()


@contextlib.contextmanager
def building(variant: Variant) -> Iterator[None]:
    """Builds inside make ``variant`` (in this thread or task only)."""
    token = _building.set(variant)
    try:
        yield
    finally:
        _building.reset(token)


def size_class(points: int) -> int:
    """Calls whose sizes are within a factor of two share a choice."""
    return max(0, int(points)).bit_length()


@dataclass(frozen=True)
class Measurement:
    """What one tuning found: the best time of each candidate tried (seconds), the choice,
    and how long the timed runs took in all."""

    times: tuple[tuple[Variant, float], ...]
    choice: Variant
    seconds: float
    pending: tuple[str, ...] = ()  # the knobs (``knob_name``) not tried: no time left

    def table(self) -> str:
        best = min(t for _, t in self.times)
        rows = [f"  {v.describe():<40} {t * 1e3:9.3f} ms  x{t / best:5.3f}"
                + ("  <- chosen" if v == self.choice else "") for v, t in self.times]
        return "\n".join(rows)


def fastest(candidates: list[tuple[Variant, Callable[[], None]]], *,
            budget_s: float = BUDGET_S, baseline: Variant = DEFAULT,
            warm: set[Variant] | None = None, timer: Callable[[], float] | None = None
            ) -> tuple[Variant, dict[Variant, float], float]:
    """The candidate chosen by ``choose`` from interleaved timed rounds, with every
    candidate's best time and the seconds spent.

    A candidate not in ``warm`` runs once untimed first (its first run pays page faults and
    loading; it is added to ``warm``); then rounds, each running every candidate once, in
    an order rotated per round (no candidate always runs after the same one), until
    ``budget_s`` is spent: at least ``MIN_ROUNDS`` (one for a lone candidate) and at most
    ``MAX_ROUNDS``."""
    clock = time.perf_counter if timer is None else timer
    started = clock()
    warm = set() if warm is None else warm
    for v, run in candidates:
        if v not in warm:
            run()
            warm.add(v)
    rounds: list[dict[Variant, float]] = []
    while len(rounds) < MAX_ROUNDS:
        k = len(rounds) % len(candidates)
        timed: dict[Variant, float] = {}
        for v, run in candidates[k:] + candidates[:k]:
            t = clock()
            run()
            timed[v] = clock() - t
        rounds.append(timed)
        least = MIN_ROUNDS if len(candidates) > 1 else 1
        if len(rounds) >= least and clock() - started > budget_s:
            break
    best = {v: min(r[v] for r in rounds) for v, _ in candidates}
    return choose(rounds, baseline), best, clock() - started


def choose(rounds: list[dict[Variant, float]], baseline: Variant) -> Variant:
    """The candidate to use, from rounds of times of the same candidates.

    Robust to a busy neighbour, whose bursts slow whichever runs they overlap: each round
    gives a candidate its ratio to ``baseline``'s time in that round, and a candidate wins
    only where the median of its ratios is ``MIN_GAIN`` below 1 (so it was that much faster
    in a majority of the rounds) and so is its best time against the baseline's; of the
    winners, the least median. Otherwise (also where ``baseline`` was not timed) the
    baseline stays. On a simulated busy machine (tests/test_tuning.py) this keeps an equal
    candidate from being chosen two to three times as often as the best times alone did."""
    if not rounds or baseline not in rounds[0]:
        return baseline
    base_best = min(r[baseline] for r in rounds)
    choice, least = baseline, 1.0 - MIN_GAIN
    for v in rounds[0]:
        if v == baseline:
            continue
        median = statistics.median(r[v] / r[baseline] if r[baseline] > 0 else 1.0
                                   for r in rounds)
        best = min(r[v] for r in rounds)
        if median < least and best < base_best * (1.0 - MIN_GAIN):
            choice, least = v, median
    return choice
