"""``mpiexec -n N stencilkit demo --mpi``: the demo's heat equation split over N ranks.

Rank 0 builds the initial state and scatters it; every rank steps its block (the point
kernel exchanges the one-point faces it reads); the result is gathered on rank 0, which
prints the timings and writes the picture. The result equals the one-process demo's bit
for bit.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np


def demo_mpi(args: argparse.Namespace, heat, initial_state: Callable[[int], np.ndarray],
             check_output: Callable[[Path], None],
             write_picture: Callable[[np.ndarray, Path, str], None],
             usage_error: type[Exception]) -> int:
    from tqdm import tqdm

    from .. import registry
    from .decomposition import Decomposition, _mpi

    comm = _mpi().COMM_WORLD
    root = comm.Get_rank() == 0
    out = Path(args.output)
    problem = None
    if root:
        try:
            check_output(out)
        except usage_error as exc:
            problem = str(exc)
    problem = comm.bcast(problem)
    if problem:
        if root:
            raise usage_error(problem)
        return 2
    n, steps = args.size, args.steps
    dec = Decomposition(comm, (n, n), halo=1)
    u = dec.scatter(initial_state(n) if root else None)
    v = dec.zeros()
    alpha = 0.24  # explicit scheme stable for alpha <= 0.25
    start = time.perf_counter()
    heat(u, alpha, out=v)  # build (or load) outside the timed loop: one build per job
    built = time.perf_counter() - start
    comm.Barrier()
    exchanger = dec.exchanger
    exchanger.seconds = 0.0
    start = time.perf_counter()
    for _ in tqdm(range(steps), desc=f"heat {n}x{n} on {dec.size} ranks", unit="step",
                  disable=args.quiet or not root):
        heat(u, alpha, out=v)
        u, v = v, u
    comm.Barrier()
    elapsed = time.perf_counter() - start
    share = comm.gather(exchanger.seconds / elapsed if elapsed > 0 else 0.0)
    g = dec.gather(u)
    if not root:
        return 0
    backend = registry.resolve(heat.backend).name
    print(f"backend: {backend}; {dec.size} MPI rank(s) as {dec.dims[0]}x{dec.dims[1]} blocks; "
          f"build or cache load: {built * 1e3:.1f} ms")
    if steps and elapsed > 0:
        print(f"{steps} steps of {n}x{n}: {elapsed / steps * 1e6:.1f} us per step "
              f"({n * n * steps / elapsed / 1e6:.0f} Mpoints/s); halo exchange "
              f"{100 * min(share):.0f}-{100 * max(share):.0f}% of it (per rank)")
    initial = initial_state(n).sum()
    print(f"peak temperature {g.max():.2f} (from 100); total heat kept: "
          f"{100 * g.sum() / initial:.2f}%")
    write_picture(g, out, f"2-D heat equation after {steps} steps ({backend}, "
                          f"{dec.size} MPI ranks)")
    return 0
