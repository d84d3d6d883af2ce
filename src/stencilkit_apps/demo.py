"""``stencilkit demo``: a 2-D heat equation, a hot square diffusing on a cold plate, stepped
on the default backend with a progress bar and written out as a picture.

``main`` is what the command runs (its options are ``stencilkit.cli``'s); with ``--mpi`` it
hands over to ``demo_mpi``. Needs neither matplotlib nor tqdm (``picture``, ``progress``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from . import _internals, picture, progress
from .heat import ALPHA, heat_step, initial_state


def main(args: argparse.Namespace) -> int:
    """Run the simulation of ``args.size`` squared points for ``args.steps`` steps, print the
    timings and write the picture to ``args.output``."""
    if args.mpi:
        from .demo_mpi import main as main_mpi

        return main_mpi(args)
    out = Path(args.output)
    picture.check_output(out)
    n, steps = args.size, args.steps
    heat = heat_step()
    u = initial_state(n)
    v = np.zeros_like(u)
    start = time.perf_counter()
    heat(u, ALPHA, out=v)  # build (or load from the disk cache) outside the timed loop
    built = time.perf_counter() - start
    initial_heat = u.sum()
    start = time.perf_counter()
    for _ in progress.steps(steps, f"heat {n}x{n}", disable=args.quiet):
        heat(u, ALPHA, out=v)
        u, v = v, u
    elapsed = time.perf_counter() - start
    backend = _internals.default_backend()
    print(f"backend: {backend}; build or cache load: {built * 1e3:.1f} ms")
    if steps and elapsed > 0:
        print(f"{steps} steps of {n}x{n}: {elapsed / steps * 1e6:.1f} us per step "
              f"({n * n * steps / elapsed / 1e6:.0f} Mpoints/s)")
    else:
        print(f"{steps} steps of {n}x{n}: nothing timed")
    kept = f"{100 * u.sum() / initial_heat:.2f}%" if initial_heat > 0 else "n/a (no hot cell)"
    print(f"peak temperature {u.max():.2f} (from 100); total heat kept: {kept}")
    picture.write(u, out, f"2-D heat equation after {steps} steps ({backend} backend)")
    return 0
