"""Computation definitions used by the tests (gtscript syntax with stencilkit's imports)."""

import numpy as np

import stencilkit as sk
from stencilkit import (
    BACKWARD,
    FORWARD,
    IJ,
    PARALLEL,
    Field,
    I,
    J,
    K,
    computation,
    horizontal,
    interval,
    region,
)

# The tridiagonal (Thomas) solver and COSMO horizontal diffusion with its flux limiter are
# the definitions the benchmark suite times: one definition for both.
from stencilkit_apps.definitions import hdiff, tridiagonal  # noqa: E402, F401

# ------------------------------------------------------------------ vertical advection


def upwind(q: Field[float], w: Field[float], out: Field[float], dt: float):
    with computation(PARALLEL):
        with interval(0, 1):
            out = q
        with interval(1, -1):
            flux = w * (q[0, 0, 0] - q[0, 0, -1]) if w > 0 else w * (q[0, 0, 1] - q[0, 0, 0])
            out = q - dt * flux
        with interval(-1, None):
            out = q


def implicit_diffusion(q: Field[float], nu: float):
    # (1 + 2 nu) x_k - nu x_{k-1} - nu x_{k+1} = q_k, solved with the Thomas algorithm
    with computation(FORWARD):
        with interval(0, 1):
            cp = -nu / (1.0 + 2.0 * nu)
            dp = q / (1.0 + 2.0 * nu)
        with interval(1, None):
            den = 1.0 + 2.0 * nu + nu * cp[0, 0, -1]
            cp = -nu / den
            dp = (q + nu * dp[0, 0, -1]) / den
    with computation(BACKWARD):
        with interval(-1, None):
            q = dp
        with interval(0, -1):
            q = dp - cp * q[0, 0, 1]


# ------------------------------------------------------------------ 3-D offsets, IJ and K fields


def lap3d(u: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        out = (u[1, 0, 0] + u[-1, 0, 0] + u[0, 1, 0] + u[0, -1, 0] + u[0, 0, 1] + u[0, 0, -1]
               - 6.0 * u)


def column_ops(u: Field[float], surface: Field[IJ, float], profile: Field[K, float],
               out: Field[float]):
    with computation(PARALLEL), interval(...):
        out = u * profile + surface[1, 0] - surface


def column_sum(u: Field[float], total: Field[float]):
    with computation(FORWARD):
        with interval(0, 1):
            total = u
        with interval(1, None):
            total = total[0, 0, -1] + u


def corners(u: Field[float], out: Field[float]):
    with computation(PARALLEL):
        with interval(0, 1):
            out = 1.0 + 0.0 * u
        with interval(1, 3):
            out = 2.0 + 0.0 * u
        with interval(-1, None):
            out = 3.0 + 0.0 * u


# ------------------------------------------------------------------ control flow, helpers, externals


def newton_sqrt(x: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        y = x
        n = 0.0
        while n < 30.0:
            y = 0.5 * (y + x / y)
            n = n + 1.0
        out = y


def temporaries_only(u: Field[float], out: Field[float]):  # writes no field: GT4Py runs it
    with computation(PARALLEL), interval(...):
        tmp = u[1, 0, 0] + 1.0
        unused = tmp * 2.0  # noqa: F841


def branches(u: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        if u > 0.7:
            out = 1.0
        elif u > 0.3:
            out = u * 2.0
        else:
            out = -u


@sk.function
def centred_diff(f):
    return f[1, 0, 0] - f[-1, 0, 0], f[0, 1, 0] - f[0, -1, 0]


@sk.function
def norm(a, b):
    s = a * a + b * b
    return sk.sqrt(s)


def gradient(u: Field[float], out: Field[float]):
    from __externals__ import SCALE

    with computation(PARALLEL), interval(...):
        dx, dy = centred_diff(u)
        out = SCALE * norm(dx, dy)


# ------------------------------------------------------------------ NumPy loop references


def ref_tridiagonal(a, b, c, d):
    a, b, c, d = (x.copy() for x in (a, b, c, d))
    ni, nj, nk = a.shape
    for i in range(ni):
        for j in range(nj):
            c[i, j, 0] /= b[i, j, 0]
            d[i, j, 0] /= b[i, j, 0]
            for k in range(1, nk):
                m = 1.0 / (b[i, j, k] - a[i, j, k] * c[i, j, k - 1])
                c[i, j, k] *= m
                d[i, j, k] = (d[i, j, k] - a[i, j, k] * d[i, j, k - 1]) * m
            for k in range(nk - 2, -1, -1):
                d[i, j, k] -= c[i, j, k] * d[i, j, k + 1]
    return c, d


def ref_hdiff(inp, coeff):
    ni, nj, nk = inp.shape
    out = np.zeros_like(inp)

    def lap(i, j, k):
        return 4 * inp[i, j, k] - (inp[i + 1, j, k] + inp[i - 1, j, k] + inp[i, j + 1, k]
                                   + inp[i, j - 1, k])

    def flx(i, j, k):
        r = lap(i + 1, j, k) - lap(i, j, k)
        return 0.0 if r * (inp[i + 1, j, k] - inp[i, j, k]) > 0 else r

    def fly(i, j, k):
        r = lap(i, j + 1, k) - lap(i, j, k)
        return 0.0 if r * (inp[i, j + 1, k] - inp[i, j, k]) > 0 else r

    for i in range(2, ni - 2):
        for j in range(2, nj - 2):
            for k in range(nk):
                out[i, j, k] = inp[i, j, k] - coeff[i, j, k] * (
                    flx(i, j, k) - flx(i - 1, j, k) + fly(i, j, k) - fly(i, j - 1, k))
    return out


def ref_upwind(q, w, dt):
    out = q.copy()
    nk = q.shape[2]
    for k in range(1, nk - 1):
        for i in range(q.shape[0]):
            for j in range(q.shape[1]):
                if w[i, j, k] > 0:
                    f = w[i, j, k] * (q[i, j, k] - q[i, j, k - 1])
                else:
                    f = w[i, j, k] * (q[i, j, k + 1] - q[i, j, k])
                out[i, j, k] = q[i, j, k] - dt * f
    return out


def ref_implicit(q, nu):
    ni, nj, nk = q.shape
    m = (np.diag(np.full(nk, 1 + 2 * nu)) + np.diag(np.full(nk - 1, -nu), 1)
         + np.diag(np.full(nk - 1, -nu), -1))
    out = np.empty_like(q)
    for i in range(ni):
        for j in range(nj):
            out[i, j] = np.linalg.solve(m, q[i, j])
    return out


# ------------------------------------------------------------------ executed by planes


def planes(a: Field[float], q: Field[float]):
    # t is read with a horizontal offset in the computation that writes it: planes, not
    # columns (GT4Py refuses this; the meaning is still sequential, level after level).
    with computation(PARALLEL), interval(0, 1):
        q = a
    with computation(FORWARD), interval(0, -1):
        t = a * 2.0
        q[0, 0, 1] = t[1, 0, 0] + q + t[-1, 0, 0]


def ref_planes(a, q):
    """``planes`` on I in [1, ni - 1), every J and K (a NumPy loop over levels)."""
    expect = q.copy()
    ni = a.shape[0]
    expect[1:ni - 1, :, 0] = a[1:ni - 1, :, 0]
    for k in range(a.shape[2] - 1):
        expect[1:ni - 1, :, k + 1] = (2.0 * a[2:, :, k] + expect[1:ni - 1, :, k]
                                      + 2.0 * a[:ni - 2, :, k])
    return expect


def regions(a: Field[float], b: Field[float]):  # its domain needs 2 points along I and J
    with computation(PARALLEL), interval(...):
        t = a * 2.0
        with horizontal(region[I[0], :]):
            t = a[-1, 0, 0] + a[0, -1, 0]
        with horizontal(region[I[-1], J[0] : J[0] + 2]):
            t = a[1, 0, 0] - a[-1, 0, 0]
        b = t[1, 0, 0] + t[-1, 0, 0]
