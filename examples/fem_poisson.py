"""Finite-element assembly with parallel loops: Poisson's equation on the unit square.

    python examples/fem_poisson.py [--size 32] [--output fem_poisson.png]

-Δu = f with u = 0 on the boundary and the exact solution u = x(1-x)y(1-y). Linear (P1)
elements on a triangulated grid: one parallel loop over the cells adds each cell's 3 x 3
stiffness block into a sparse matrix, another its load into a vector (colouring keeps the
shared nodes race-free); SciPy solves. The error shrinks as h² as the mesh is refined.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse.linalg
from _plot import pyplot

import stencilkit as sk


@sk.kernel
def stiffness(A, x):
    det = (x[1, 0] - x[0, 0]) * (x[2, 1] - x[0, 1]) - (x[2, 0] - x[0, 0]) * (x[1, 1] - x[0, 1])
    for i in range(3):
        bi = x[(i + 1) % 3, 1] - x[(i + 2) % 3, 1]
        ci = x[(i + 2) % 3, 0] - x[(i + 1) % 3, 0]
        for j in range(3):
            bj = x[(j + 1) % 3, 1] - x[(j + 2) % 3, 1]
            cj = x[(j + 2) % 3, 0] - x[(j + 1) % 3, 0]
            A[i, j] += (bi * bj + ci * cj) / (2.0 * abs(det))


@sk.kernel
def load(b, x):
    det = (x[1, 0] - x[0, 0]) * (x[2, 1] - x[0, 1]) - (x[2, 0] - x[0, 0]) * (x[1, 1] - x[0, 1])
    cx = (x[0, 0] + x[1, 0] + x[2, 0]) / 3.0
    cy = (x[0, 1] + x[1, 1] + x[2, 1]) / 3.0
    f = 2.0 * (cx * (1.0 - cx) + cy * (1.0 - cy))
    for i in range(3):
        b[i, 0] += f * abs(det) / 6.0


def mesh(n: int) -> tuple[np.ndarray, np.ndarray]:
    xs = np.linspace(0.0, 1.0, n + 1)
    xy = np.stack(np.meshgrid(xs, xs, indexing="ij"), axis=-1).reshape(-1, 2)
    v = np.arange((n + 1) ** 2).reshape(n + 1, n + 1)
    tri = np.concatenate([np.stack([v[:-1, :-1], v[1:, :-1], v[1:, 1:]], axis=-1).reshape(-1, 3),
                          np.stack([v[:-1, :-1], v[1:, 1:], v[:-1, 1:]], axis=-1).reshape(-1, 3)])
    return xy, tri


def solve(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    xy, tri = mesh(n)
    cells, nodes = sk.Set(len(tri)), sk.Set(len(xy))
    cell2node = sk.Map(cells, nodes, 3, tri)
    coords = sk.Dat(nodes, dim=2, data=xy)
    K = sk.Mat(sk.Sparsity(cell2node, cell2node))
    rhs = sk.Dat(nodes)
    start = time.perf_counter()
    sk.par_loop(stiffness, cells, K(sk.INC, (cell2node, cell2node)), coords(sk.READ, cell2node))
    sk.par_loop(load, cells, rhs(sk.INC, cell2node), coords(sk.READ, cell2node))
    A = K.to_scipy().tocsr()
    elapsed = time.perf_counter() - start
    x, y = xy[:, 0], xy[:, 1]
    inner = np.flatnonzero((x > 0) & (x < 1) & (y > 0) & (y < 1))
    u = np.zeros(len(xy))
    u[inner] = scipy.sparse.linalg.spsolve(A[inner][:, inner].tocsc(), rhs.data[inner])
    return xy, tri, u, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=32, help="squares per side (2 triangles each)")
    parser.add_argument("--output", default="fem_poisson.png", help='a PNG; "" for none')
    args = parser.parse_args()
    errors = []
    for n in (args.size // 2, args.size):
        xy, tri, u, elapsed = solve(n)
        exact = xy[:, 0] * (1 - xy[:, 0]) * xy[:, 1] * (1 - xy[:, 1])
        errors.append(np.abs(u - exact).max())
        note = " (compiling included)" if len(errors) == 1 else ""
        print(f"{len(tri)} triangles: assembly {elapsed * 1e3:.1f} ms{note}, "
              f"max nodal error {errors[-1]:.2e}")
    order = np.log2(errors[0] / errors[1])
    print(f"observed order of convergence: {order:.2f} (P1 elements: 2)")
    assert errors[1] < errors[0] and order > 1.5, errors
    plt = pyplot() if args.output else None
    if plt is not None:
        plt.tripcolor(xy[:, 0], xy[:, 1], tri, u, shading="gouraud", cmap="viridis")
        plt.gca().set_aspect("equal")
        plt.colorbar()
        plt.title(f"-Δu = f on {len(tri)} triangles")
        plt.savefig(args.output, dpi=100)
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
