"""MPI measurements for docs/mpi.md: run under mpiexec, one line of JSON per case on rank 0.

    OMP_NUM_THREADS=1 mpiexec -n 2 python benchmarks/mpi_heat.py [--reps 50]

- ``exchange``: one halo exchange of a 1024^2 float64 global array (halo 1 and 2; the
  faces the 5-point heat kernel reads, and the whole halo with corners), against one call
  of the heat kernel on the local block (a plain NumPy array of the block's shape);
- ``weak``: heat steps with a 1024^2 block per rank (global grows with the ranks);
- ``strong``: heat steps on a 2048^2 global grid;
- ``overlap`` (not in the default set): the library's steps against a hand-written overlap
  of the exchange with the rows that read no halo;
- ``--mode reflect`` (or any border mode): the steps in that mode (the halo beyond the global
  edge filled after each exchange), for comparison with "constant".

Times are medians over ``--reps`` repetitions of the slowest rank's time (each repetition
starts after a barrier). ``exchange_share`` is the fraction of the step time spent in halo
exchanges (packing, waiting, unpacking), the largest over ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
from mpi4py import MPI

import stencilkit as sk
from stencilkit.distributed import halo as halo_mod

COMM = MPI.COMM_WORLD


def heat_kernel(u, alpha):
    return u[0, 0] + alpha * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4.0 * u[0, 0])


heat = sk.stencil(heat_kernel, backend="c")


def timed(fn, reps: int) -> float:
    """Median over reps of the slowest rank's time of fn()."""
    times = []
    for _ in range(reps):
        COMM.Barrier()
        t = time.perf_counter()
        fn()
        times.append(COMM.allreduce(time.perf_counter() - t, op=MPI.MAX))
    return float(np.median(times))


def report(case: dict) -> None:
    if COMM.rank == 0:
        case.update(ranks=COMM.size, omp_threads=os.environ.get("OMP_NUM_THREADS", "unset"),
                    cores=os.cpu_count())
        print(json.dumps(case), flush=True)


def exchange_case(reps: int) -> None:
    for h in (1, 2):
        dec = sk.Decomposition(COMM, (1024, 1024), halo=h)
        u = dec.zeros()
        faces = halo_mod.from_box(dec, [(h, h)] * 2, corners=False)
        full = halo_mod.full_need(dec)
        block = np.random.default_rng(0).random(dec.local_shape)
        out = np.empty_like(block)
        heat(block, 0.2, out=out)
        ex = dec.exchanger
        report({"case": "exchange", "global": [1024, 1024], "halo": h, "dims": dec.dims,
                "local": dec.local_shape,
                "faces_s": timed(lambda ex=ex, u=u, n=faces: ex.run([u], [n]), reps),
                "faces_and_corners_s": timed(lambda ex=ex, u=u, n=full: ex.run([u], [n]), reps),
                "stencil_on_block_s": timed(lambda b=block, o=out: heat(b, 0.2, out=o), reps)})


def overhead_case(reps: int) -> None:
    """Microseconds per call on a 16^2 grid: plain arrays vs DistributedArrays (plan,
    the ranks' agreement, the exchange)."""
    dec = sk.Decomposition(COMM, (16 * COMM.size, 16), halo=1)
    u, v = dec.zeros(), dec.zeros()
    a, b = np.zeros((16, 16)), np.zeros((16, 16))
    heat(u, 0.2, out=v)
    heat(a, 0.2, out=b)

    def many(fn, n=200):
        def run():
            for _ in range(n):
                fn()
        return timed(run, reps) / n

    report({"case": "overhead", "local": dec.local_shape,
            "plain_call_s": many(lambda: heat(a, 0.2, out=b)),
            "distributed_call_s": many(lambda: heat(u, 0.2, out=v))})


def steps_case(kind: str, shape: tuple[int, int], reps: int, steps: int = 10,
               mode: str = "constant") -> None:
    heat = sk.stencil(mode, backend="c")(heat_kernel)
    dec = sk.Decomposition(COMM, shape, halo=1)
    u = dec.scatter(np.random.default_rng(1).random(shape) if COMM.rank == 0 else None)
    v = dec.zeros()
    heat(u, 0.2, out=v)

    def run():
        nonlocal u, v
        for _ in range(steps):
            heat(u, 0.2, out=v)
            u, v = v, u

    dec.exchanger.seconds = 0.0
    t0 = time.perf_counter()
    step = timed(run, reps) / steps
    share = COMM.allreduce(dec.exchanger.seconds / (time.perf_counter() - t0), op=MPI.MAX)
    report({"case": kind, "mode": mode, "global": list(shape), "dims": dec.dims, "local": dec.local_shape,
            "step_s": step, "mpoints_per_s": shape[0] * shape[1] / step / 1e6,
            "exchange_share": share})


def overlap_case(reps: int, steps: int = 10) -> None:
    """The stretch goal, measured before building it: heat steps on a 1024^2 block per
    rank split along axis 0, as the library runs them (plan lookup, agreement, exchange,
    then the block), the same by hand without plan and agreement ("sequential"), and a
    hand-written overlap (post the exchange, compute the rows that read no halo, wait,
    compute the first and last owned rows). The same results (checked)."""
    dims = MPI.Compute_dims(COMM.size, [0, 1])
    shape = (1024 * dims[0], 1024)
    dec = sk.Decomposition(COMM, shape, halo=1, dims=dims)
    g = np.random.default_rng(2).random(shape) if COMM.rank == 0 else None
    need = halo_mod.from_offsets(dec, [(-1, 0), (1, 0), (0, -1), (0, 1), (0, 0)])
    (s, e), n, h = dec.bounds[0], dec.local_shape[0], 1
    top, bottom = (h - 1 if s > 0 else h), (h + n + 1 if e < shape[0] else h + n)
    cols = slice(h, h + dec.local_shape[1])  # axis 1 is not split: clipped at both edges
    ex = dec.exchanger

    def overlapped_step(u, v):
        pending = ex.start([u], [need])
        heat(u.data[h:h + n, cols], 0.2, out=v.data[h:h + n, cols])  # rows needing no halo
        ex.finish(pending)
        heat(u.data[top:h + 2, cols], 0.2, out=v.data[top:h + 2, cols])  # first row
        heat(u.data[h + n - 2:bottom, cols], 0.2, out=v.data[h + n - 2:bottom, cols])

    def sequential_step(u, v):  # what the library does, without its plan and agreement
        ex.run([u], [need])
        heat(u.data[top:bottom, cols], 0.2, out=v.data[top:bottom, cols])

    results = {}
    for kind in ("library", "sequential", "overlapped"):
        u, v = dec.scatter(g), dec.zeros()

        def run(kind=kind):
            nonlocal u, v
            for _ in range(steps):
                if kind == "library":
                    heat(u, 0.2, out=v)
                elif kind == "sequential":
                    sequential_step(u, v)
                else:
                    overlapped_step(u, v)
                u, v = v, u

        run()
        results[kind] = timed(run, reps) / steps
        results[kind + "_result"] = dec.gather(u)
    ref = results.pop("library_result")
    same = [bool(np.array_equal(ref, results.pop(k + "_result"))) if COMM.rank == 0 else None
            for k in ("sequential", "overlapped")]
    report({"case": "overlap", "global": list(shape), "dims": dec.dims,
            "library_step_s": results["library"], "sequential_step_s": results["sequential"],
            "overlapped_step_s": results["overlapped"],
            "same_result": same})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--only", nargs="*", default=["exchange", "overhead", "weak", "strong"])
    parser.add_argument("--mode", default="constant", help="border mode of the steps")
    args = parser.parse_args()
    if "exchange" in args.only:
        exchange_case(args.reps)
    if "overhead" in args.only:
        overhead_case(args.reps)
    if "overlap" in args.only:
        overlap_case(max(3, args.reps // 3))
    dims = MPI.Compute_dims(COMM.size, [0, 0])
    if "weak" in args.only:
        steps_case("weak", (1024 * dims[0], 1024 * dims[1]), max(3, args.reps // 5),
                   mode=args.mode)
    if "strong" in args.only:
        steps_case("strong", (2048, 2048), max(3, args.reps // 5), mode=args.mode)


if __name__ == "__main__":
    main()
