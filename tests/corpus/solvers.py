"""Column solvers: tridiagonal (Thomas) systems, implicit vertical diffusion, an acoustic
Riemann-type solver, pressure and geopotential integration, vertical remapping."""

import numpy as np
from gt4py.cartesian import gtscript
from gt4py.cartesian.gtscript import (
    BACKWARD,
    FORWARD,
    PARALLEL,
    Field,
    computation,
    interval,
)

from tests.corpus.registry import Case, profile, uniform, zeros

FloatField = Field[np.float64]
FloatFieldIJ = Field[gtscript.IJ, np.float64]
FloatFieldK = Field[gtscript.K, np.float64]

RDGAS = 287.05
GRAV = 9.80665
CP_AIR = 1004.6


@gtscript.function
def thomas_first(b, c, d):
    return c / b, d / b


@gtscript.function
def thomas_sweep(a, b, c, d, c_prev, d_prev):
    denom = 1.0 / (b - a * c_prev)
    return c * denom, (d - a * d_prev) * denom


def tridiagonal_solve(a: FloatField, b: FloatField, c: FloatField, d: FloatField,
                      x: FloatField):
    with computation(FORWARD):
        with interval(0, 1):
            cp, dp = thomas_first(b, c, d)
        with interval(1, None):
            cp, dp = thomas_sweep(a, b, c, d, cp[0, 0, -1], dp[0, 0, -1])
    with computation(BACKWARD):
        with interval(-1, None):
            x = dp
        with interval(0, -1):
            x = dp - cp * x[0, 0, 1]


def implicit_diffusion(q: FloatField, kh: FloatField, dz: FloatField, dt: float):
    """Backward-Euler vertical diffusion with zero-flux boundaries, solved in place."""
    with computation(PARALLEL):
        with interval(0, 1):
            a = 0.0
            c = -dt * kh[0, 0, 1] / (dz * 0.5 * (dz + dz[0, 0, 1]))
        with interval(1, -1):
            a = -dt * kh / (dz * 0.5 * (dz + dz[0, 0, -1]))
            c = -dt * kh[0, 0, 1] / (dz * 0.5 * (dz + dz[0, 0, 1]))
        with interval(-1, None):
            a = -dt * kh / (dz * 0.5 * (dz + dz[0, 0, -1]))
            c = 0.0
    with computation(PARALLEL), interval(...):
        b = 1.0 - a - c
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


def acoustic_solver(w: FloatField, pp: FloatField, dm: FloatField, gm: FloatField,
                    pe: FloatField, dt: float):
    """Implicit vertically-propagating sound waves (a much reduced sim1 solver): w at
    interfaces from a tridiagonal system whose coefficients come from layer sound speeds."""
    with computation(PARALLEL), interval(...):
        cs2 = gm * pe / dm
        t2 = dt * dt * cs2
    with computation(PARALLEL):
        with interval(0, 1):
            aa = 0.0
            bb = 1.0 + t2
            cc = -0.5 * (t2 + t2[0, 0, 1])
        with interval(1, -1):
            aa = -0.5 * (t2 + t2[0, 0, -1])
            bb = 1.0 + t2 + 0.5 * (t2[0, 0, -1] + t2[0, 0, 1])
            cc = -0.5 * (t2 + t2[0, 0, 1])
        with interval(-1, None):
            aa = -0.5 * (t2 + t2[0, 0, -1])
            bb = 1.0 + t2
            cc = 0.0
    with computation(FORWARD):
        with interval(0, 1):
            gam = cc / bb
            w = (w + dt * pp / dm) / bb
        with interval(1, None):
            bet = bb - aa * gam[0, 0, -1]
            gam = cc / bet
            w = (w + dt * (pp - pp[0, 0, -1]) / dm - aa * w[0, 0, -1]) / bet
    with computation(BACKWARD), interval(0, -1):
        w = w - gam * w[0, 0, 1]
    with computation(PARALLEL), interval(...):
        pp = pp - dt * cs2 * dm * w


def hydrostatic_pressure(delp: FloatField, pe: FloatField, peln: FloatField, ptop: float):
    with computation(FORWARD):
        with interval(0, 1):
            pe = ptop
        with interval(1, None):
            pe = pe[0, 0, -1] + delp[0, 0, -1]
    with computation(PARALLEL), interval(...):
        peln = log(pe)


def geopotential_height(pt: FloatField, pe: FloatField, zs: FloatFieldIJ, gz: FloatField):
    with computation(BACKWARD):
        with interval(-1, None):
            gz = zs * GRAV
        with interval(0, -1):
            gz = gz[0, 0, 1] + RDGAS * pt * (log(pe[0, 0, 1]) - log(pe))


def column_mass(q: FloatField, delp: FloatField, total: FloatFieldIJ):
    with computation(FORWARD):
        with interval(0, 1):
            total = q * delp / GRAV
        with interval(1, None):
            total = total + q * delp / GRAV


def column_max_level(t: FloatField, tmax: FloatFieldIJ, kmax: FloatFieldIJ, kz: FloatFieldK):
    with computation(FORWARD):
        with interval(0, 1):
            tmax = t
            kmax = kz
        with interval(1, None):
            if t > tmax:
                tmax = t
                kmax = kz


def cumulative_heating(q: FloatField, dp: FloatField, acc: FloatField):
    with computation(FORWARD):
        with interval(0, 1):
            partial = q * dp
            acc = partial
        with interval(1, None):
            partial = partial[0, 0, -1] + q * dp
            acc = partial / (acc[0, 0, -1] + 1.0)


def layer_to_interface(q: FloatField, dp: FloatField, qi: FloatField):
    with computation(PARALLEL):
        with interval(0, 1):
            qi = q
        with interval(1, -1):
            qi = (q[0, 0, -1] * dp + q * dp[0, 0, -1]) / (dp + dp[0, 0, -1])
        with interval(-1, None):
            qi = q[0, 0, -1]


def jacobi_poisson(phi: FloatField, rhs: FloatField, phi_new: FloatField, h2: float):
    with computation(PARALLEL), interval(1, -1):
        phi_new = (phi[1, 0, 0] + phi[-1, 0, 0] + phi[0, 1, 0] + phi[0, -1, 0]
                   + phi[0, 0, 1] + phi[0, 0, -1] - h2 * rhs) / 6.0


def remap_linear(q1: FloatField, pe1: FloatField, pe2: FloatField, q2: FloatField):
    """Interpolate q1, given at pressures pe1, to pressures pe2 (monotone in k)."""
    with computation(PARALLEL), interval(...):
        lev = 0
        while pe1[0, 0, lev] > pe2:
            lev = lev - 1
        while pe1[0, 0, lev + 1] <= pe2:
            lev = lev + 1
        weight = (pe2 - pe1[0, 0, lev]) / (pe1[0, 0, lev + 1] - pe1[0, 0, lev])
        q2 = q1[0, 0, lev] + weight * (q1[0, 0, lev + 1] - q1[0, 0, lev])


NX, NY, NZ = 5, 4, 9


def _tridiag(r):
    s = (NX, NY, NZ)
    return dict(a=uniform(r, s, -1, 0), b=uniform(r, s, 3, 4), c=uniform(r, s, -1, 0),
                d=uniform(r, s), x=zeros(s))


def _diffusion(r):
    s = (NX, NY, NZ)
    return dict(q=uniform(r, s, 280, 300), kh=uniform(r, s, 1, 50), dz=uniform(r, s, 100, 300),
                dt=60.0)


def _acoustic(r):
    s = (NX, NY, NZ)
    return dict(w=uniform(r, s, -1, 1), pp=uniform(r, s, -50, 50), dm=uniform(r, s, 500, 1500),
                gm=uniform(r, s, 1.3, 1.5), pe=profile(r, s, 1e4, 1e5), dt=1.0)


def _pressure(r):
    s = (NX, NY, NZ + 1)
    return dict(delp=uniform(r, s, 800, 1200), pe=zeros(s), peln=zeros(s), ptop=300.0)


def _geopotential(r):
    s = (NX, NY, NZ + 1)
    return dict(pt=uniform(r, s, 220, 300), pe=profile(r, s, 300.0, 1e5),
                zs=uniform(r, (NX, NY), 0, 3000), gz=zeros(s))


def _column(r):
    s = (NX, NY, NZ)
    return dict(q=uniform(r, s, 0, 0.02), delp=uniform(r, s, 800, 1200), total=zeros((NX, NY)))


def _kmax(r):
    s = (NX, NY, NZ)
    return dict(t=uniform(r, s, 200, 300), tmax=zeros((NX, NY)), kmax=zeros((NX, NY)),
                kz=np.arange(NZ, dtype=np.float64))


def _cumulative(r):
    s = (NX, NY, NZ)
    return dict(q=uniform(r, s), dp=uniform(r, s, 1, 2), acc=zeros(s))


def _interfaces(r):
    s = (NX, NY, NZ)
    return dict(q=uniform(r, s), dp=uniform(r, s, 1, 2), qi=zeros(s))


def _jacobi(r):
    s = (NX + 2, NY + 2, NZ)
    return dict(phi=uniform(r, s), rhs=uniform(r, s, -1, 1), phi_new=zeros(s), h2=0.01)


def _remap(r):
    s = (NX, NY, NZ)
    pe1 = np.cumsum(uniform(r, s, 0.5, 1.5), axis=2)
    frac = np.sort(uniform(r, s, 0.02, 0.98), axis=2)
    pe2 = pe1[:, :, :1] + frac * (pe1[:, :, -1:] - pe1[:, :, :1])
    return dict(q1=uniform(r, s), pe1=pe1, pe2=pe2, q2=zeros(s))


CASES = [
    Case("tridiagonal_solve", _tridiag, (0, 0, 0), (NX, NY, NZ)),
    Case("implicit_diffusion", _diffusion, (0, 0, 0), (NX, NY, NZ)),
    Case("acoustic_solver", _acoustic, (0, 0, 0), (NX, NY, NZ)),
    Case("hydrostatic_pressure", _pressure, (0, 0, 0), (NX, NY, NZ + 1)),
    Case("geopotential_height", _geopotential, (0, 0, 0), (NX, NY, NZ + 1)),
    Case("column_mass", _column, (0, 0, 0), (NX, NY, NZ)),
    Case("column_max_level", _kmax, (0, 0, 0), (NX, NY, NZ)),
    Case("cumulative_heating", _cumulative, (0, 0, 0), (NX, NY, NZ)),
    Case("layer_to_interface", _interfaces, (0, 0, 0), (NX, NY, NZ)),
    Case("jacobi_poisson", _jacobi, (1, 1, 0), (NX, NY, NZ)),
    Case("remap_linear", _remap, (0, 0, 0), (NX, NY, NZ)),
]
