"""The 2-D heat equation on N MPI ranks, with a point kernel and a computation.

    mpiexec -n 4 python examples/heat_mpi.py [--size 1024] [--steps 200] [--output heat_mpi.png]

Rank 0 builds the initial state; ``dec.scatter`` hands every rank its block; the stencil
calls exchange the halos they need; ``dec.gather`` brings the result back to rank 0, which
checks it against the same steps on one process and writes a picture.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _plot import pyplot
from mpi4py import MPI

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval


@sk.stencil
def heat(u, alpha):
    return u[0, 0] + alpha * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4.0 * u[0, 0])


@sk.stencil
def relax(u: Field[float], out: Field[float], weight: float):
    # a 9-point smoothing step as a computation (3-D fields, one K level)
    with computation(PARALLEL), interval(...):
        out = (1.0 - weight) * u + weight * 0.125 * (  # noqa: F841 (a field write)
            u[1, 0, 0] + u[-1, 0, 0] + u[0, 1, 0] + u[0, -1, 0]
            + u[1, 1, 0] + u[-1, 1, 0] + u[1, -1, 0] + u[-1, -1, 0])


def initial(n: int) -> np.ndarray:
    y, x = np.mgrid[0:n, 0:n] / n
    return np.where((x - 0.35) ** 2 + (y - 0.4) ** 2 < 0.05**2, 100.0, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--output", default="heat_mpi.png")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    n = args.size
    dec = sk.Decomposition(comm, (n, n), halo=1)
    u = dec.scatter(initial(n) if comm.rank == 0 else None)
    v = dec.zeros()
    start = time.perf_counter()
    for _ in range(args.steps):
        heat(u, 0.24, out=v)  # exchanges the four one-point faces of u
        u, v = v, u
    comm.Barrier()
    elapsed = time.perf_counter() - start
    # a computation on 3-D fields of one level: the 9-point stencil exchanges corners too
    dec3 = sk.Decomposition(comm, (n, n, 1), halo=1)
    f, g = dec3.zeros(), dec3.zeros()
    f.local[..., 0] = u.local
    g.local[...] = f.local
    relax(f, g, weight=0.5)
    result = dec.gather(u)
    smooth = dec3.gather(g)
    if comm.rank == 0:
        ref, tmp = initial(n), np.zeros((n, n))
        for _ in range(args.steps):
            heat(ref, 0.24, out=tmp)
            ref, tmp = tmp, ref
        ref3 = ref[:, :, None].copy()
        relax(ref[:, :, None], ref3, weight=0.5)
        print(f"{comm.size} rank(s) as {dec.dims}: {args.steps} steps of {n}x{n} in "
              f"{elapsed:.3f} s; equal to one process bit for bit: "
              f"{np.array_equal(result, ref) and np.array_equal(smooth, ref3)}")
        plt = pyplot()  # None without matplotlib (an optional extra): no picture then
        if plt is not None:
            plt.imshow(smooth[:, :, 0], cmap="inferno", origin="lower")
            plt.title(f"heat equation on {comm.size} MPI ranks, then one relaxation step")
            plt.colorbar()
            plt.savefig(args.output, dpi=100)
            print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
