"""``mpiexec -n N stencilkit demo --mpi``: the demo's heat equation split over N ranks.

Rank 0 builds the initial state and scatters it; every rank steps its block (the point
kernel exchanges the one-point faces it reads); the result is gathered on rank 0, which
prints the timings and writes the picture. The result equals the one-process demo's bit
for bit.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import stencilkit as sk

from . import _internals, picture, progress
from .errors import UsageError
from .heat import ALPHA, heat_step, initial_state


def main(args: argparse.Namespace) -> int:
    """The demo on every rank of MPI_COMM_WORLD; rank 0 prints and writes the picture."""
    try:
        from mpi4py import MPI
    except ImportError:
        raise UsageError("--mpi needs mpi4py (pip install 'stencilkit[mpi]')") from None

    comm = MPI.COMM_WORLD
    root = comm.Get_rank() == 0
    out = Path(args.output)
    problem = None
    if root:
        try:
            picture.check_output(out)
        except UsageError as exc:
            problem = str(exc)
    problem = comm.bcast(problem)
    if problem:
        if root:
            raise UsageError(problem)
        return 2
    n, steps = args.size, args.steps
    heat = heat_step()
    dec = sk.Decomposition(comm, (n, n), halo=1)
    u = dec.scatter(initial_state(n) if root else None)
    v = dec.zeros()
    start = time.perf_counter()
    heat(u, ALPHA, out=v)  # build (or load) outside the timed loop: one build per job
    built = time.perf_counter() - start
    comm.Barrier()
    _internals.halo_exchange_seconds(dec, reset=True)
    start = time.perf_counter()
    for _ in progress.steps(steps, f"heat {n}x{n} on {dec.size} ranks",
                            disable=args.quiet or not root):
        heat(u, ALPHA, out=v)
        u, v = v, u
    comm.Barrier()
    elapsed = time.perf_counter() - start
    exchanged = _internals.halo_exchange_seconds(dec)
    share = comm.gather(exchanged / elapsed if elapsed > 0 else 0.0)
    g = dec.gather(u)
    if not root:
        return 0
    backend = _internals.default_backend()
    print(f"backend: {backend}; {dec.size} MPI rank(s) as {dec.dims[0]}x{dec.dims[1]} blocks; "
          f"build or cache load: {built * 1e3:.1f} ms")
    if steps and elapsed > 0:
        print(f"{steps} steps of {n}x{n}: {elapsed / steps * 1e6:.1f} us per step "
              f"({n * n * steps / elapsed / 1e6:.0f} Mpoints/s); halo exchange "
              f"{100 * min(share):.0f}-{100 * max(share):.0f}% of it (per rank)")
    initial = initial_state(n).sum()
    print(f"peak temperature {g.max():.2f} (from 100); total heat kept: "
          f"{100 * g.sum() / initial:.2f}%")
    picture.write(g, out, f"2-D heat equation after {steps} steps ({backend}, "
                          f"{dec.size} MPI ranks)")
    return 0
