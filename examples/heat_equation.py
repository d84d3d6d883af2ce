"""The 2-D heat equation with a point kernel, checked against NumPy slicing.

    python examples/heat_equation.py [--size 256] [--steps 500] [--output heat_equation.png]

A hot disc diffuses on a square plate whose edges stay at 0. Each step is one call of the
stencil with ``out=``, which writes the interior only: the edges keep the boundary value.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _plot import pyplot

import stencilkit as sk


@sk.stencil
def heat(u, alpha):
    return u[0, 0] + alpha * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4.0 * u[0, 0])


def initial(n: int) -> np.ndarray:
    y, x = np.mgrid[0:n, 0:n] / n
    return np.where((x - 0.4) ** 2 + (y - 0.5) ** 2 < 0.15**2, 100.0, 0.0)


def numpy_steps(u: np.ndarray, alpha: float, steps: int) -> np.ndarray:
    u, v = u.copy(), u.copy()
    for _ in range(steps):
        v[1:-1, 1:-1] = u[1:-1, 1:-1] + alpha * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2]
                                                 + u[1:-1, 2:] - 4.0 * u[1:-1, 1:-1])
        u, v = v, u
    return u


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--output", default="heat_equation.png", help='a PNG; "" for none')
    args = parser.parse_args()
    alpha = 0.24                                 # alpha * dt / dx**2 < 1/4: stable
    u = initial(args.size)
    v = u.copy()
    heat(u, alpha, out=v)                        # the first call compiles
    u = initial(args.size)
    start = time.perf_counter()
    for _ in range(args.steps):
        heat(u, alpha, out=v)
        u, v = v, u
    elapsed = time.perf_counter() - start
    reference = numpy_steps(initial(args.size), alpha, args.steps)
    diff = np.abs(u - reference).max()
    print(f"{args.steps} steps of {args.size}x{args.size} on backend {sk.registry.resolve(None).name!r}: "
          f"{elapsed / args.steps * 1e6:.1f} us per step")
    print(f"heat left on the plate: {u.sum() / initial(args.size).sum():.3f} of the initial; "
          f"max difference from NumPy slicing: {diff:.1e}")
    assert diff < 1e-10, diff
    plt = pyplot() if args.output else None
    if plt is not None:
        plt.imshow(u, cmap="inferno", origin="lower")
        plt.title(f"heat equation after {args.steps} steps")
        plt.colorbar()
        plt.savefig(args.output, dpi=100)
        print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
