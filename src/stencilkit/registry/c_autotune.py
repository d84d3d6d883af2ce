"""The C backend's measured choices for a call (issue 30; the knobs, the budget and the
wisdom are ``build/tuning.py``'s).

When a point kernel's signature, or a computation's layout, is first built for a call of at
least ``tuning.MIN_WORK`` points and ``autotune`` (the stencil's option, else the configured
one) is not "off": the stored choice for (front
key, size class, machine, toolchain) is used if there is one ("on"); else the candidates
are built (cached like any build) and timed on the call's own inputs. A point kernel's
candidates write the call's ``out=`` where it overlaps no input (the values the call then
writes there again), else a stand-in of its shape; a computation's write copies of its
written fields (it writes in place, so the caller's fields keep their values until the
real call). The choice is stored, logged
(DEBUG) and dumped (``STENCILKIT_DUMP=tune``), and its entry becomes the call's. A first
call spends at most ``tuning.TOTAL_BUDGET_S`` on it, builds included: the knobs it has no
time left for keep their default, and the record names them ("measure" tries them all). Small
calls, other backends and "off" leave the call as it was built."""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import dataclasses
import logging
import math
import os
import re
import time
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..build import cache, machine, tuning
from ..build.extension import current_toolchain
from ..build.tuning import DEFAULT, Measurement, Variant
from ..compile import driver
from ..compile.keys import front_key
from ..config import Autotune
from ..config import current as config
from ..log import build_event, dump

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ..compile.requests import ComputationRequest, PointRequest, Request
    from ..runtime.launch import PointCall

logger = logging.getLogger("stencilkit")


class _Refused(Exception):
    """A candidate returned an error status: the call itself reports it; nothing is tuned."""


def tune_point_call(request: PointRequest, args: tuple, build: Callable[[], PointCall],
                    out: np.ndarray | None = None) -> PointCall:
    """``build()``'s call for ``request``, with the entry of the variant chosen for calls
    like ``args`` (module docstring); ``out``: the call's own, timed on where it can be
    (``_timed_output``)."""
    points = int(getattr(args[0], "size", 0))
    if not _wanted(request, points):
        return build()
    out = _timed_output(request, args, out)
    built: list[PointCall] = []

    def runner(entry: Callable[..., int]) -> Callable[[], None]:
        def run() -> None:  # runs after the default's build: built[0] is the call
            if entry(*args, out, True, built[0].cval):
                raise _Refused
        return run

    def default() -> tuple[Callable[[], None], str]:
        built.append(build())
        return runner(built[0].entry), built[0].source

    def knobs(source: str) -> list[list[Variant]]:
        return point_knobs(request, source, points, machine.current())

    choice = _choice(request, "point kernel", points, knobs, default,
                     lambda v: runner(_entry(request, v)))
    if choice is not None and choice != DEFAULT:
        _install(built[0], _entry(request, choice))
    return built[0]


def _timed_output(request: PointRequest, args: tuple, out: np.ndarray | None) -> np.ndarray:
    """The array the candidates write: the call's ``out=`` where it is an output of the
    call's shape and type that shares no memory with an argument (every candidate writes
    the values the call then writes there again), else a stand-in of that shape.

    Why the caller's: where the stores go is a knob, and the output's place moves plain
    stores' speed. The peer-bench's lap3d 256^3 allocates its output right after its input:
    plain stores into it took 1.07-1.18x as long as into arrays allocated later, streaming
    stores 1.02-1.08x (10-12 interleaved rounds, four processes, Zen 4). Timed on a
    stand-in, the tuner found the two kinds of stores nearer level and chose plain ones in
    the first round of a peer-bench run; the three rounds after paid for it
    (docs/performance.md)."""
    shape = getattr(args[0], "shape", ())
    if (type(out) is np.ndarray and out.shape == shape and out.dtype == request.out_dtype
            and out.flags.writeable and not any(
                isinstance(a, np.ndarray) and np.may_share_memory(a, out) for a in args)):
        return out
    return np.empty(shape, request.out_dtype)


def tune_computation_call(request: ComputationRequest, call: tuple,
                          build: Callable[[], tuple[str, Callable[..., None]]]
                          ) -> tuple[str, Callable[..., None]]:
    """``build()``'s (source, call) for ``request``, the call being the variant's chosen for
    calls like ``call`` (its values, temporaries and geometry). The candidates run on
    copies of the fields the computation writes (it writes in place: the caller's fields
    are not touched before the real call; those it only reads are shared, which saved the
    C-ordered tridiagonal solve 256x256x80 four 42 MB copies) and on the call's own
    temporaries (scratch the real call writes first)."""
    values, temps, geo = call
    domain = tuple(getattr(geo, "domain", ()))
    points = int(np.prod(domain)) if domain else 0
    if not _wanted(request, points):
        return build()
    stand_ins: list[dict] = []  # made at the first timed run: a stored choice needs none
    written = request.sched.written
    built: list[tuple[str, Callable[..., None]]] = []

    def runner(run: Callable[..., None]) -> Callable[[], None]:
        def go() -> None:
            if not stand_ins:
                stand_ins.append({n: _copy(v) if n in written else v
                                  for n, v in values.items()})
            try:
                run(stand_ins[0], temps, geo)
            except Exception as exc:  # an error status: the real call reports it
                raise _Refused from exc
        return go

    def default() -> tuple[Callable[[], None], str]:
        built.append(build())
        return runner(built[0][1]), built[0][0]

    def knobs(source: str) -> list[list[Variant]]:
        return computation_knobs(source, machine.current())

    choice = _choice(request, "computation", points, knobs, default,
                     lambda v: runner(_entry(request, v)))
    source, run = built[0]
    return source, run if choice is None or choice == DEFAULT else _entry(request, choice)


def _copy(value: object) -> object:
    if not isinstance(value, np.ndarray):
        return value
    copy = np.empty_like(value)  # the same memory order (np.copy would make C order)
    copy[...] = value
    return copy


def _wanted(request: Request, points: int) -> bool:
    return (request.backend.name == "c" and points >= tuning.MIN_WORK
            and _mode(request) in (Autotune.ON, Autotune.MEASURE))


def _mode(request: Request) -> str:
    """The stencil's ``autotune=``, else the configured one."""
    return getattr(request, "autotune", None) or config().autotune


def _choice(request: Request, what: str, points: int,
            knobs_of: Callable[[str], list[list[Variant]]],
            default: Callable[[], tuple[Callable[[], None], str]],
            build: Callable[[Variant], Callable[[], None]]) -> Variant | None:
    """The stored choice ("on"), else the one measured now (stored, logged, dumped); None
    where a candidate refused to run. ``default()`` builds the call as it is and returns
    its runner and source; ``knobs_of`` gives the knobs of the generated source. Where a
    choice is measured, the first knob's candidates start building while the default
    builds, on the CPUs left (``_Builds.start_early``): on two idle CPUs their compiler
    runs overlap the default's, which the first call waits for anyway. (Not where a dump
    is asked for: the source is then known after the default's build, whose stages would
    otherwise run, and print, twice.)"""
    profile = machine.current()
    key = cache.key("wisdom", front_key(request), str(tuning.size_class(points)),
                    profile.key, current_toolchain().identity)
    if _mode(request) == Autotune.ON:
        stored = _stored(key)
        if stored is not None:
            default()
            logger.debug("%s %r [c]: stored tuning choice for %d points: %s", what,
                         request.name, points, stored.describe())
            return stored
    # the front stages, kept for the default's build (with a dump, they would run again)
    knobs = None if config().dump else knobs_of(driver.render(request).source)
    with _Builds(build) as builds:
        if knobs:
            builds.start_early([_merged(DEFAULT, v) for v in knobs[0]])
        default_run, source = default()
        if knobs is None:
            knobs = knobs_of(source)
        if not knobs:
            return DEFAULT
        started = time.perf_counter()
        try:
            # "measure" asks for the cost now: every knob, only the timed runs bounded
            found, built_s = _measure(knobs, default_run, build,
                                      None if _mode(request) == Autotune.ON else math.inf,
                                      builds=builds)
        except _Refused:
            return None
    total = time.perf_counter() - started
    choice = found.choice
    cache.write_wisdom(key, {
        "kernel": request.name, "points": points, "machine": profile.describe(),
        "choice": choice.to_json(), "pending": list(found.pending),
        "measure_seconds": found.seconds,
        "build_seconds": built_s, "times": [[v.to_json(), t] for v, t in found.times]})
    dump("tune", f"{request.name} [c]",
         f"{profile.describe()}\n{points} points (size class {tuning.size_class(points)}); "
         f"timed runs {found.seconds:.3f} s, candidate builds {built_s:.3f} s"
         f"{_pending_text(found)}\n{found.table()}")
    logger.debug("%s %r [c]: autotuned for %d points: %s\n%s", what, request.name, points,
                 choice.describe(), found.table())
    build_event("%s %r: autotuned in %.3f s (%.3f s timing): %s%s", what, request.name,
                total, found.seconds, choice.describe(), _pending_text(found))
    return choice


def _pending_text(found: Measurement) -> str:
    return (f"; {', '.join(found.pending)} not tried (time budget)"
            if found.pending else "")


def _stored(key: str) -> Variant | None:
    record = cache.read_wisdom(key)
    if record is None:
        return None
    try:
        return Variant.from_json(record.get("choice"))
    except (TypeError, ValueError):
        return None  # another version's or a damaged record: measured again


def _entry(request: Request, variant: Variant) -> Callable[..., Any]:
    """The entry of ``request`` built as ``variant`` (a C entry point, or a computation
    call)."""
    with tuning.building(variant):
        entry = driver.run(request).entry
    assert callable(entry)
    return cast("Callable[..., Any]", entry)


def _install(call: PointCall, entry: Callable[..., int]) -> None:
    call.entry = entry
    call.exact = getattr(getattr(entry, "__self__", None), "call_exact", None)


def point_knobs(request: PointRequest, source: str, points: int,
                profile: machine.MachineProfile) -> list[list[Variant]]:
    """The knobs to try for a point kernel's call of ``points`` points, one list of
    alternatives per knob: streaming or plain stores where the kernel has streamed rows
    (lap3d 256³ 1.13x), then the common knobs (``common_knobs``) and the OpenMP ones
    (``thread_knobs``). The order matters: the first call's budget often covers only the
    first knob or two (``_measure``); the rest wait for ``autotune="measure"``."""
    knobs: list[list[Variant]] = []
    if has_streamed_rows(source):
        out_bytes = points * np.dtype(request.out_dtype).itemsize
        streams = out_bytes >= _stream_min_bytes(profile)
        knobs.append([Variant(streaming=not streams)])
    return knobs + common_knobs(profile) + thread_knobs(source, profile)


def computation_knobs(source: str, profile: machine.MachineProfile) -> list[list[Variant]]:
    """A computation's knobs: the compiler's tuning (``tune_knobs``: hdiff 1.05-1.12x on a
    Zen 4), its J/K rows collapsed into one loop or not (where the code has the collapsed
    loop), the columns per block of its column sweeps (where K is the contiguous axis:
    ``COLUMN_BLOCKS``), then the vector width and the OpenMP knobs. The tuning comes first
    because the first call's budget often covers one knob only, and the collapse and the
    column block moved no kernel measured by more than 2%."""
    knobs = [[Variant(collapse=False)]] if _COLLAPSED.search(source) else []
    if _COLUMN_BLOCKS.search(source):
        knobs.append([Variant(column_block=b) for b in COLUMN_BLOCKS])
    return (tune_knobs(profile) + knobs + vector_knobs(profile)
            + thread_knobs(source, profile))


#: the columns per block tried against the default's (``lower.computation.COLUMN_BLOCK``,
#: 8): half. Each column's recurrence is computed alone whatever the block, so the results
#: are the same; the block sets how many independent recurrences overlap (4 float64: one
#: AVX2 vector, 8 one AVX-512 vector) against how much of the column buffers stays in L1.
#: Measured on the 2-vCPU AVX-512 machine (C-ordered tridiagonal solve 256x256x80, loaded
#: by a test run, 15 interleaved rounds): 4 and 8 within 2%, 16 and 32 1.2x and 1.4x
#: slower. So only 4 is tried: a second candidate (16) made this knob's builds, the first
#: the solve's tuning tries, cost 1.1-1.4 s of its first call
COLUMN_BLOCKS = (4,)


def common_knobs(profile: machine.MachineProfile) -> list[list[Variant]]:
    """The compiler's tuning (``tune_knobs``), then the preferred vector width
    (``vector_knobs``)."""
    return tune_knobs(profile) + vector_knobs(profile)


def tune_knobs(profile: machine.MachineProfile) -> list[list[Variant]]:
    """``-mtune=`` of another processor (``machine.tune_candidates``: the nearest known
    one where the compiler does not know this one, Intel's model where it tunes for an AMD
    one), with 512-bit vectors where the ISA has them: the Intel models prefer 256-bit ones,
    which the vector-width knob tries on its own (``-mtune=icelake-server`` alone made hdiff
    1.00-1.06x faster on a Zen 4, with 512-bit vectors 1.04-1.08x)."""
    wide = 512 if profile.vector_bytes >= 64 else None
    tunes = machine.tune_candidates(profile, config().cflags)
    return [[Variant(tune=t, vector_bits=wide) for t in tunes]] if tunes else []


def vector_knobs(profile: machine.MachineProfile) -> list[list[Variant]]:
    """The preferred vector width where the ISA has 512-bit vectors."""
    if profile.vector_bytes >= 64:
        return [[Variant(vector_bits=256), Variant(vector_bits=512)]]
    return []


def thread_knobs(source: str, profile: machine.MachineProfile) -> list[list[Variant]]:
    """The OpenMP schedule, then the team, where the code has parallel loops and no
    reduction (whose order of combining partial results would change with either):
    ``machine.schedule_candidates`` and ``machine.team_candidates``."""
    if "#pragma omp parallel" not in source or "reduction(" in source:
        return []
    knobs = [[Variant(chunk=c) for c in machine.schedule_candidates(profile)],
             [Variant(threads=t) for t in machine.team_candidates(profile)]]
    return [knob for knob in knobs if knob]


#: the loop lower/collapse_rows.py makes, as codegen/c.py prints it
_COLLAPSED = re.compile(r"for \(int64_t t = 0; t < nj \* nk;")
#: the loop over blocks of columns lower/computation.py makes for K-contiguous sweeps
_COLUMN_BLOCKS = re.compile(r"for \(int64_t jb\w* = .*; jb\w* \+= \d+\)")


def has_streamed_rows(source: str) -> bool:
    """Whether generated C copies rows with streaming stores (a call statement, not the
    prelude's definition)."""
    return re.search(r"^\s+sk_stream_copy\(", source, re.M) is not None


def _stream_min_bytes(profile: machine.MachineProfile) -> int:
    from ..lower.point import stream_min_bytes_override

    override = stream_min_bytes_override()
    return profile.stream_min_bytes() if override is None else override


def _measure(knobs: list[list[Variant]], default: Callable[[], None],
             build: Callable[[Variant], Callable[[], None]], total_s: float | None = None,
             builds: _Builds | None = None) -> tuple[Measurement, float]:
    """Coordinate descent over the knobs: each knob's alternatives against the best so
    far. Two bounds: ``tuning.BUDGET_S`` of timed runs, shared by the knobs,
    and ``total_s`` (default ``tuning.TOTAL_BUDGET_S``) of builds and timed runs together;
    a knob whose turn comes when it no longer fits is not tried, and named in the result as
    pending (the first knob is always tried). Returns
    the measurement (every variant tried, its best time, the pending knobs) and the seconds
    spent waiting for the candidates' builds.

    The builds run concurrently (``_Builds``), never while candidates are timed. Without a
    total bound ("measure": every knob is tried), as many of the next knobs' alternatives
    on the best so far are built with those of the knob whose turn it is as there are CPUs
    left. Within the bound they are not: waiting for them before the timed runs cost
    hdiff a knob's builds (0.5 s) that its bound then left untried. ``builds``: the
    caller's, where some were started before (``_choice``); else its own."""
    begun, built_s, spent, best = time.perf_counter(), 0.0, 0.0, DEFAULT
    total_s = tuning.TOTAL_BUDGET_S if total_s is None else total_s
    times: dict[Variant, float] = {}
    runs: dict[Variant, Callable[[], None]] = {DEFAULT: default}
    warm: set[Variant] = set()
    pending: list[str] = []
    busy_team: list[str] = []  # the team knob, where it was measured on a busy machine
    with contextlib.nullcontext(builds) if builds is not None else _Builds(build) as builds:
        for i, knob in enumerate(knobs):
            tried = [best] + [_merged(best, alternative) for alternative in knob]
            share = max(0.0, tuning.BUDGET_S - spent) / (len(knobs) - i)
            # the timed runs take the share, or MIN_ROUNDS rounds (and the first, untimed
            # runs) of the slowest candidate so far where that is more
            timing = max(share, (1 + tuning.MIN_ROUNDS) * len(tried)
                         * max(times.values(), default=0.0))
            if i > 0 and (spent >= tuning.BUDGET_S or time.perf_counter() - begun
                          + builds.estimate([v for v in tried if v not in runs]) + timing
                          > total_s):
                pending = [tuning.knob_name(k) for k in knobs[i:]]
                break
            ahead = [_merged(best, alternative) for later in knobs[i + 1:]
                     for alternative in later] if total_s == math.inf else []
            builds.start([v for v in tried if v not in runs],
                         ahead=[v for v in ahead if v not in runs])
            waited = time.perf_counter()
            runs.update({v: builds.result(v) for v in tried if v not in runs})
            builds.settle()  # nothing builds while candidates are timed
            built_s += time.perf_counter() - waited
            before = best
            others = _others_cpu_seconds()
            best, found, seconds = tuning.fastest([(v, runs[v]) for v in tried],
                                                   budget_s=share, baseline=before, warm=warm)
            times.update(found)
            spent += seconds
            if (best.threads or 0) and not (before.threads or 0) and _others_were_busy(
                    others, _others_cpu_seconds(), seconds):
                # a smaller team wins while other work holds CPUs, and the choice would
                # outlive that work: the whole team stays, the knob waits for "measure"
                best = before
                busy_team.append(tuning.knob_name(knob))
    return (Measurement(tuple(times.items()), best, spent, tuple(busy_team + pending)),
            built_s)


def _spare_cpus() -> int:
    """How many builds to run at a time: the CPUs this process may run on, less those other
    work keeps busy (``_other_work``). On a loaded machine a second build only competes
    with the first."""
    cpus = max(1, machine.current().cpus)
    return max(1, cpus - round(_other_work()))


#: other processes' CPU time, as a share of the timed runs' wall time, above which a team
#: smaller than the whole is not chosen: a fifth of a CPU (a compiler, a test run) is
#: enough to make one thread look as fast as two on a 2-CPU machine
BUSY_SHARE = 0.2


def _others_were_busy(before: float | None, after: float | None, seconds: float) -> bool:
    """Whether other processes used more than ``BUSY_SHARE`` of a CPU between two readings
    of ``_others_cpu_seconds`` taken ``seconds`` apart; True where that cannot be told
    (a smaller team is then never chosen: the whole is OpenMP's own default)."""
    if before is None or after is None or seconds <= 0:
        return True
    return (after - before) / seconds > BUSY_SHARE


def _others_cpu_seconds() -> float | None:
    """CPU seconds every process but this one has used since boot: all CPUs' busy time
    (``/proc/stat``'s first line: user, nice, system, irq, softirq, steal) less this
    process's (``os.times``, every thread's: OpenMP's workers spinning after a loop are
    ours). Unlike the runnable tasks at one instant (``_other_work``), the difference of
    two readings covers everything between them. None without ``/proc/stat``."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    if not fields or fields[0] != "cpu" or len(fields) < 9:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[1:9])
    own = os.times()
    return (user + nice + system + irq + softirq + steal) / ticks - own.user - own.system


def _other_work() -> float:
    """The CPUs other work keeps busy now: the tasks the kernel counts as runnable at this
    instant (``/proc/loadavg``'s fourth field) less the thread asking. Where there is no
    such file, the 1-minute load average less this process: it lags (a process that ended
    seconds ago still counts) and on a VM may not fall to 0 (on this one it stayed at
    1.2-1.4 with nothing running, which left no CPU to spare on 2)."""
    try:
        with open("/proc/loadavg") as f:
            return max(0, int(f.read().split()[3].split("/")[0]) - 1)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return max(0.0, os.getloadavg()[0] - 1)
    except OSError:  # no load average on this platform
        return 0.0


class _Builds:
    """Candidates built on worker threads, as many at a time as there are spare CPUs: the
    front stages take turns under the GIL, the compiler runs (most of a build) overlap.
    Each build runs in a copy of the starting thread's context (``tuning.building`` and
    the verifier are context variables). On exit, the builds still running are waited for
    (none outlives the tuning)."""

    def __init__(self, build: Callable[[Variant], Callable[[], None]]) -> None:
        self._build = build
        self._workers = _spare_cpus()
        self._futures: dict[Variant, concurrent.futures.Future] = {}
        self._seconds: list[float] = []  # how long each finished build took
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._workers, thread_name_prefix="stencilkit-tune")

    def __enter__(self) -> _Builds:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def start_early(self, variants: list[Variant]) -> None:
        """Start the builds of ``variants`` while the caller builds the default: as many
        as there are spare CPUs besides the one that build takes (none on one CPU or a
        loaded machine, where they would only slow it)."""
        for v in variants[:self._workers - 1]:
            self._submit(v)

    def start(self, needed: list[Variant], ahead: Sequence[Variant] = ()) -> None:
        """Start the builds of ``needed``, then of ``ahead`` while fewer builds than CPUs
        are running."""
        for v in needed:
            self._submit(v)
        for v in ahead:
            if sum(not f.done() for f in self._futures.values()) >= self._workers:
                break
            self._submit(v)

    def _submit(self, v: Variant) -> None:
        if v not in self._futures:
            self._futures[v] = self._pool.submit(contextvars.copy_context().run,
                                                 self._timed, v)

    def _timed(self, v: Variant) -> Callable[[], None]:
        started = time.perf_counter()
        run = self._build(v)
        self._seconds.append(time.perf_counter() - started)
        return run

    def estimate(self, variants: list[Variant]) -> float:
        """Seconds until ``variants`` are built, judged by the longest build so far (none
        where they are built)."""
        if all(v in self._futures and self._futures[v].done() for v in variants):
            return 0.0
        return max(self._seconds, default=0.0)

    def settle(self) -> None:
        """Wait for every build started (their errors wait for ``result``): a build running
        while candidates are timed would take a CPU from them, and the GIL for its front
        stages."""
        concurrent.futures.wait(list(self._futures.values()))

    def result(self, v: Variant) -> Callable[[], None]:
        """The runner of ``v`` (built now if it was not started); a build's error is
        raised here, by the candidate that is used."""
        self._submit(v)
        return self._futures[v].result()


def _merged(base: Variant, alternative: Variant) -> Variant:
    """``base`` with the knobs ``alternative`` sets."""
    return dataclasses.replace(base, **{f.name: getattr(alternative, f.name)
                                        for f in dataclasses.fields(alternative)
                                        if getattr(alternative, f.name) is not None})
