"""The demo's simulation: an explicit 2-D heat equation and its initial state, shared by the
one-process and the MPI demo (whose results are equal bit for bit)."""

from __future__ import annotations

import numpy as np

import stencilkit as sk

ALPHA = 0.24  # explicit scheme stable for alpha <= 0.25


def heat_step() -> sk.PointStencil:
    """One explicit Euler step of the heat equation (5-point Laplacian)."""

    @sk.stencil
    def heat(u, alpha):
        return u[0, 0] + alpha * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4.0 * u[0, 0])

    return heat


def initial_state(n: int) -> np.ndarray:
    """Two hot discs on a cold plate."""
    y, x = np.mgrid[0:n, 0:n] / n
    u = np.where((x - 0.35) ** 2 + (y - 0.4) ** 2 < 0.05**2, 100.0, 0.0)
    u[(x - 0.7) ** 2 + (y - 0.65) ** 2 < 0.03**2] = 60.0
    return u
