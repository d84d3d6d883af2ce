"""The benchmark suite behind ``stencilkit bench``.

One process, every figure a median of repeated calls after warm-up, the implementations of a
case interleaved (round-robin), and the machine's STREAM copy/triad bandwidth measured in the
same run by a C kernel built with the same toolchain. Never used for assertions in tests.

``main`` is what ``stencilkit bench`` runs (the options are ``stencilkit.cli``'s); the cases
are in ``cases``, the timing rules in ``timing``, the text in ``report``, the chart in
``chart``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
from pathlib import Path

import numpy as np

from . import chart
from .cases import CASES, runs
from .errors import UsageError
from .report import compare, table
from .stream import stream
from .timing import skipped


def unknown_cases(only: list[str]) -> list[str]:
    """The names in ``only`` that are not cases of the suite."""
    return [name for name in only if name not in CASES]


def main(args: argparse.Namespace) -> int:
    """``stencilkit bench``: list, compare, or check the options and run."""
    if args.list:
        width = max(map(len, CASES))
        for name, what in CASES.items():
            print(f"{name:<{width}}  {what}")
        return 0
    if args.compare:
        return compare(*args.compare)
    wrong = unknown_cases(args.only or [])
    if wrong:
        raise UsageError(f"--only: unknown case {', '.join(map(repr, wrong))}; the cases are: "
                         f"{', '.join(CASES)} (stencilkit bench --list)")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        # refused before the run, not after minutes of timing
        raise UsageError(f"--plot {args.plot}: the chart needs matplotlib, which is not "
                         "installed (pip install 'stencilkit[apps]')")
    return run(quick=args.quick, json_path=args.json, plot_path=args.plot, only=args.only)


def run(quick: bool = False, json_path: str | None = None, plot_path: str | None = None,
        only: list[str] | None = None) -> int:
    """Run the cases named in ``only`` (all by default; names from ``CASES``). A case or an
    implementation that fails (a backend that cannot build or run here) is left out with
    the reason on stderr, and the run goes on."""
    repeats = 5 if quick else 20
    wrong = unknown_cases(only or [])
    if wrong:
        raise ValueError(f"unknown case {', '.join(map(repr, wrong))}; the cases are: "
                         f"{', '.join(CASES)}")
    want = set(only or CASES)
    try:
        bw: dict[str, float] | None = stream(1 << 21 if quick else 1 << 25, repeats)
    except Exception as exc:  # no C compiler: the cases still run on what there is
        skipped("the STREAM bandwidth", exc)
        bw = None
    results = []
    for name, case in runs(quick, repeats).items():
        if name not in want:
            continue
        try:
            results += case()
        except Exception as exc:
            skipped(f"the case {name!r}", exc)
    for r in results:
        r.setdefault("spread", getattr(r["seconds"], "spread", {}))
    print(table(results, bw))
    print("\nspread: half the interquartile range of the samples, relative to the median; "
          "vs ours: median / stencilkit's median")
    meta = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
            "numpy": np.__version__, "quick": quick, "stream_gbs": bw, "cases": results}
    if json_path:
        Path(json_path).write_text(json.dumps(meta, indent=2))
    if plot_path:
        chart.save(results, bw, plot_path)
    return 0
