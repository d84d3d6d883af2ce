"""Timing for ``stencilkit bench``: medians of interleaved calls, their spread, and the rule
that a row which cannot run is left out with its reason on stderr."""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np


class Medians(dict):
    """Median seconds per implementation; ``spread`` is each one's half interquartile range
    relative to its median (0.05: the middle half of the samples lies within about ±5%)."""

    def __init__(self, samples: dict[str, list[float]]) -> None:
        super().__init__({k: statistics.median(v) for k, v in samples.items()})
        self.spread = {k: spread(v) for k, v in samples.items()}


def spread(samples: list[float]) -> float:
    if len(samples) < 4:
        return 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4)
    return (q3 - q1) / 2 / statistics.median(samples)


#: The cases of ``stencilkit bench``, in the order they run, with what each times.

def skipped(what: str, exc: BaseException | str) -> None:
    """Say on stderr that ``what`` is left out, and why, in one line; the run goes on."""
    why = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    why = "; ".join(ln.strip() for ln in str(why).splitlines() if ln.strip())
    print(f"stencilkit bench: {what} skipped: {why[:500]}", file=sys.stderr, flush=True)


def median_times(fns: dict[str, Callable[[], object]], repeats: int, warmup: int = 2,
                  before: Callable[[str], object] | None = None) -> Medians:
    """Median seconds per call of each function. The calls are interleaved, one of each per
    round in an order shuffled every round (a fixed order lets the drift of a shared machine,
    or one implementation's cache footprint, favour its successor); ``before(name)`` runs
    untimed before each call. A function that raises (a backend that cannot build or run
    here) is left out, with the reason on stderr, and the others are timed."""
    order = random.Random(0)
    fns = dict(fns)
    for _ in range(warmup):
        for name in list(fns):
            if before:
                before(name)
            try:
                fns[name]()
            except Exception as exc:
                skipped(f"{name!r}", exc)
                del fns[name]
    names = list(fns)
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        order.shuffle(names)
        for name in names:
            if before:
                before(name)
            f = fns[name]
            t0 = time.perf_counter()
            f()
            samples[name].append(time.perf_counter() - t0)
    return Medians({k: samples[k] for k in fns})


def same(name: str, got: np.ndarray, want: np.ndarray) -> None:
    """A peer is timed only once its result matches ours (a wrong peer is a wrong ratio)."""
    if not np.allclose(got, want, rtol=1e-12, atol=1e-12):
        raise AssertionError(f"bench: {name} differs from stencilkit's result")


