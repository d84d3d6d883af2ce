"""The C backend's measured choices for a call (issue 30; the knobs, the budget and the
wisdom are ``build/tuning.py``'s).

When a point kernel's signature, or a computation's layout, is first built for a call of at
least ``tuning.MIN_WORK`` points and ``autotune`` (the stencil's option, else the configured
one) is not "off": the stored choice for (front
key, size class, machine, toolchain) is used if there is one ("on"); else the candidates
are built (cached like any build) and timed on the call's own inputs, writing only
stand-ins (a point kernel's output of the call's shape, copies of a computation's fields:
nothing the caller holds is written before the real call); the fastest is stored, logged
(DEBUG) and dumped (``STENCILKIT_DUMP=tune``), and its entry becomes the call's. Small
calls, other backends and "off" leave the call as it was built."""

from __future__ import annotations

import dataclasses
import logging
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
    from collections.abc import Callable

    from ..compile.requests import ComputationRequest, PointRequest, Request
    from ..runtime.launch import PointCall

logger = logging.getLogger("stencilkit")


class _Refused(Exception):
    """A candidate returned an error status: the call itself reports it; nothing is tuned."""


def tune_point_call(call: PointCall, request: PointRequest, args: tuple) -> None:
    """Give ``call`` (just built for ``request``) the entry of the variant chosen for calls
    like ``args`` (module docstring)."""
    points = int(getattr(args[0], "size", 0))
    if not _wanted(request, points):
        return
    out = np.empty(args[0].shape, call.out_dtype)  # the stand-in output

    def runner(entry: Callable[..., int]) -> Callable[[], None]:
        def run() -> None:
            if entry(*args, out, True, call.cval):
                raise _Refused
        return run

    knobs = point_knobs(request, call.source, points, machine.current())
    choice = _choice(request, "point kernel", points, knobs, runner(call.entry),
                     lambda v: runner(_entry(request, v)))
    if choice is not None and choice != DEFAULT:
        _install(call, _entry(request, choice))


def tune_computation_call(run: Callable[..., None], request: ComputationRequest,
                          source: str, values: dict, temps: dict, geo: object
                          ) -> Callable[..., None]:
    """The computation call to use for calls like this one (``run``, built for
    ``request``, or a variant's). The candidates run on copies of the fields (a
    computation writes in place: the caller's fields are not touched before the real
    call) and on the call's own temporaries (scratch the real call writes first)."""
    domain = tuple(getattr(geo, "domain", ()))
    points = int(np.prod(domain)) if domain else 0
    if not _wanted(request, points):
        return run
    stand_in = {n: _copy(v) for n, v in values.items()}

    def runner(call: Callable[..., None]) -> Callable[[], None]:
        def go() -> None:
            try:
                call(stand_in, temps, geo)
            except Exception as exc:  # an error status: the real call reports it
                raise _Refused from exc
        return go

    knobs = computation_knobs(source, machine.current())
    choice = _choice(request, "computation", points, knobs, runner(run),
                     lambda v: runner(_entry(request, v)))
    return run if choice is None or choice == DEFAULT else _entry(request, choice)


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


def _choice(request: Request, what: str, points: int, knobs: list[list[Variant]],
            default: Callable[[], None], build: Callable[[Variant], Callable[[], None]]
            ) -> Variant | None:
    """The stored choice ("on"), else the one measured now (stored, logged, dumped); None
    where a candidate refused to run."""
    if not knobs:
        return DEFAULT
    profile = machine.current()
    key = cache.key("wisdom", front_key(request), str(tuning.size_class(points)),
                    profile.key, current_toolchain().identity)
    if _mode(request) == Autotune.ON:
        stored = _stored(key)
        if stored is not None:
            logger.debug("%s %r [c]: stored tuning choice for %d points: %s", what,
                         request.name, points, stored.describe())
            return stored
    started = time.perf_counter()
    try:
        found, built_s = _measure(knobs, default, build)
    except _Refused:
        return None
    total = time.perf_counter() - started
    choice = found.choice
    cache.write_wisdom(key, {
        "kernel": request.name, "points": points, "machine": profile.describe(),
        "choice": choice.to_json(), "measure_seconds": found.seconds,
        "build_seconds": built_s, "times": [[v.to_json(), t] for v, t in found.times]})
    dump("tune", f"{request.name} [c]",
         f"{profile.describe()}\n{points} points (size class {tuning.size_class(points)}); "
         f"timed runs {found.seconds:.3f} s, candidate builds {built_s:.3f} s\n"
         f"{found.table()}")
    logger.debug("%s %r [c]: autotuned for %d points: %s\n%s", what, request.name, points,
                 choice.describe(), found.table())
    build_event("%s %r: autotuned in %.3f s (%.3f s timing): %s", what, request.name,
                total, found.seconds, choice.describe())
    return choice


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
    alternatives per knob (each names only its own knob): streaming or plain stores where
    the kernel has streamed rows, then the common knobs (``common_knobs``) and the
    OpenMP ones (``thread_knobs``)."""
    knobs: list[list[Variant]] = []
    if has_streamed_rows(source):
        out_bytes = points * np.dtype(request.out_dtype).itemsize
        streams = out_bytes >= _stream_min_bytes(profile)
        knobs.append([Variant(streaming=not streams)])
    return knobs + common_knobs(profile) + thread_knobs(source, profile)


def computation_knobs(source: str, profile: machine.MachineProfile) -> list[list[Variant]]:
    """A computation's knobs: its J/K rows collapsed into one loop or not (where the code
    has the collapsed loop), then the common and the OpenMP knobs."""
    knobs = [[Variant(collapse=False)]] if _COLLAPSED.search(source) else []
    return knobs + common_knobs(profile) + thread_knobs(source, profile)


def common_knobs(profile: machine.MachineProfile) -> list[list[Variant]]:
    """The preferred vector width where the ISA has 512-bit vectors; the nearest known
    processor's tuning where the compiler does not know this one."""
    knobs: list[list[Variant]] = []
    if profile.vector_bytes >= 64:
        knobs.append([Variant(vector_bits=256), Variant(vector_bits=512)])
    tunes = machine.tune_candidates(profile, config().cflags)
    if tunes:
        knobs.append([Variant(tune=t) for t in tunes])
    return knobs


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


def has_streamed_rows(source: str) -> bool:
    """Whether generated C copies rows with streaming stores (a call statement, not the
    prelude's definition)."""
    return re.search(r"^\s+sk_stream_copy\(", source, re.M) is not None


def _stream_min_bytes(profile: machine.MachineProfile) -> int:
    from ..lower.point import stream_min_bytes_override

    override = stream_min_bytes_override()
    return profile.stream_min_bytes() if override is None else override


def _measure(knobs: list[list[Variant]], default: Callable[[], None],
             build: Callable[[Variant], Callable[[], None]]) -> tuple[Measurement, float]:
    """Coordinate descent over the knobs: each knob's alternatives against the best so far,
    within ``tuning.BUDGET_S`` shared by the knobs (a knob whose turn comes after the budget
    is spent is not tried: at most one knob's single round more than the budget). Returns
    the measurement (every variant tried, its best time) and the seconds the candidates'
    builds took."""
    built_s, spent, best = 0.0, 0.0, DEFAULT
    times: dict[Variant, float] = {}
    runs: dict[Variant, Callable[[], None]] = {DEFAULT: default}
    warm: set[Variant] = set()
    for i, knob in enumerate(knobs):
        if spent >= tuning.BUDGET_S:  # a slow call (or a loaded machine): the rest untried
            break
        tried = [best]
        for alternative in knob:
            v = _merged(best, alternative)
            if v not in runs:
                started = time.perf_counter()
                runs[v] = build(v)
                built_s += time.perf_counter() - started
            tried.append(v)
        share = max(0.0, tuning.BUDGET_S - spent) / (len(knobs) - i)
        best, found, seconds = tuning.fastest([(v, runs[v]) for v in tried], budget_s=share,
                                               baseline=best, warm=warm)
        times.update(found)
        spent += seconds
    return Measurement(tuple(times.items()), best, spent), built_s


def _merged(base: Variant, alternative: Variant) -> Variant:
    """``base`` with the knobs ``alternative`` sets."""
    return dataclasses.replace(base, **{f.name: getattr(alternative, f.name)
                                        for f in dataclasses.fields(alternative)
                                        if getattr(alternative, f.name) is not None})
