"""Column physics in gtscript: implicit vertical diffusion, a tridiagonal solve per column.

    python examples/column_physics.py [--size 64] [--levels 60] [--steps 20] [--output FILE.png]

Each step solves (1 - r d²/dz²) q_new = q_old in every column with no flux through the top
and bottom: a PARALLEL computation sets up the matrix, a FORWARD sweep eliminates, a
BACKWARD sweep substitutes (the Thomas algorithm). Written as GT4Py code is written: only the
import differs. Checked against np.linalg.solve, and the column totals are conserved.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _plot import pyplot

from stencilkit import gtscript
from stencilkit.gtscript import BACKWARD, FORWARD, PARALLEL, Field, computation, interval


@gtscript.stencil(backend="c")
def implicit_diffusion(q: Field[np.float64], *, r: float):
    with computation(PARALLEL):
        with interval(0, 1):
            a = 0.0
            b = 1.0 + r
            c = -r
        with interval(1, -1):
            a = -r
            b = 1.0 + 2.0 * r
            c = -r
        with interval(-1, None):
            a = -r
            b = 1.0 + r
            c = 0.0
    with computation(FORWARD):
        with interval(0, 1):
            cp = c / b
            dp = q / b
        with interval(1, None):
            m = 1.0 / (b - a * cp[0, 0, -1])
            cp = c * m
            dp = (q - a * dp[0, 0, -1]) * m
    with computation(BACKWARD):
        with interval(-1, None):
            q = dp
        with interval(0, -1):
            q = dp - cp * q[0, 0, 1]


def matrix(nk: int, r: float) -> np.ndarray:
    m = np.diag(np.full(nk, 1.0 + 2.0 * r)) - r * np.eye(nk, k=1) - r * np.eye(nk, k=-1)
    m[0, 0] = m[-1, -1] = 1.0 + r
    return m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="columns per horizontal axis")
    parser.add_argument("--levels", type=int, default=60)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--output", default="column_physics.png", help='a PNG; "" for none')
    args = parser.parse_args()
    n, nk, r = args.size, args.levels, 2.0
    z = np.linspace(0.0, 1.0, nk)
    rng = np.random.default_rng(0)
    # a sharp layer at a height that varies from column to column
    height = 0.3 + 0.4 * rng.random((n, n, 1))
    q = np.exp(-((z[None, None, :] - height) / 0.03) ** 2)
    q0 = q.copy()
    start = time.perf_counter()
    for _ in range(args.steps):
        implicit_diffusion(q, r=r)
    elapsed = time.perf_counter() - start
    expected = q0[0, 0]
    for _ in range(args.steps):
        expected = np.linalg.solve(matrix(nk, r), expected)
    diff = np.abs(q[0, 0] - expected).max()
    drift = np.abs(q.sum(axis=2) - q0.sum(axis=2)).max()
    print(f"{args.steps} implicit steps on {n}x{n} columns of {nk} levels: {elapsed:.3f} s "
          f"(the first compiles)")
    print(f"column (0, 0) against np.linalg.solve: max difference {diff:.1e}; "
          f"largest change of a column total: {drift:.1e}")
    assert diff < 1e-10 and drift < 1e-9, (diff, drift)
    plt = pyplot() if args.output else None
    if plt is not None:
        plt.plot(q0[0, 0], z, label="initial")
        plt.plot(q[0, 0], z, label=f"after {args.steps} steps")
        plt.xlabel("q")
        plt.ylabel("height")
        plt.legend()
        plt.title("implicit vertical diffusion, column (0, 0)")
        plt.savefig(args.output, dpi=100)
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
