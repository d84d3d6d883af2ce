"""Dynamical-core pieces on a C-grid: divergence and vorticity, divergence damping,
Smagorinsky and fourth-order diffusion, kinetic energy, pressure gradient, Coriolis,
Rayleigh friction, sponge layers and nudging."""

import numpy as np
from gt4py.cartesian import gtscript
from gt4py.cartesian.gtscript import (
    __INLINED,
    FORWARD,
    PARALLEL,
    Field,
    I,
    J,
    computation,
    horizontal,
    interval,
    region,
)

from tests.corpus.registry import Case, uniform, zeros

FloatField = Field[np.float64]
FloatFieldIJ = Field[gtscript.IJ, np.float64]
FloatFieldK = Field[gtscript.K, np.float64]


@gtscript.function
def laplacian(q):
    return q[1, 0, 0] + q[-1, 0, 0] + q[0, 1, 0] + q[0, -1, 0] - 4.0 * q


@gtscript.function
def divergence(u, v, rdx, rdy):
    return (u[1, 0, 0] - u) * rdx + (v[0, 1, 0] - v) * rdy


@gtscript.function
def flux_limiter(flux, dq):
    return 0.0 if flux * dq > 0.0 else flux


def divergence_damping(u: FloatField, v: FloatField, rdx: FloatFieldIJ, rdy: FloatFieldIJ,
                       u_out: FloatField, v_out: FloatField, damp: float):
    with computation(PARALLEL), interval(...):
        div = divergence(u, v, rdx, rdy)
        u_out = u + damp * (div - div[-1, 0, 0]) * rdx
        v_out = v + damp * (div - div[0, -1, 0]) * rdy


def del4_divergence_damping(u: FloatField, v: FloatField, u_out: FloatField,
                            v_out: FloatField, nord_coeff: float):
    from __externals__ import i_end, i_start, j_end, j_start

    with computation(PARALLEL), interval(...):
        div = u[1, 0, 0] - u + v[0, 1, 0] - v
        lap = laplacian(div)
        with horizontal(region[i_start - 1, :], region[i_end + 1, :]):
            lap = 0.0
        with horizontal(region[:, j_start - 1], region[:, j_end + 1]):
            lap = 0.0
        u_out = u - nord_coeff * (lap - lap[-1, 0, 0])
        v_out = v - nord_coeff * (lap - lap[0, -1, 0])


def smagorinsky_diffusion(u: FloatField, v: FloatField, q: FloatField, q_out: FloatField,
                          dx: float, cs: float, dt: float):
    with computation(PARALLEL), interval(...):
        tension = (u[1, 0, 0] - u[-1, 0, 0] - v[0, 1, 0] + v[0, -1, 0]) / (2.0 * dx)
        shear = (v[1, 0, 0] - v[-1, 0, 0] + u[0, 1, 0] - u[0, -1, 0]) / (2.0 * dx)
        kh = (cs * dx) ** 2 * sqrt(tension * tension + shear * shear)
        kh = min(kh, 0.2 * dx * dx / dt)
        q_out = q + dt * kh * laplacian(q) / (dx * dx)


def hdiff_limited(inp: FloatField, coeff: FloatField, out: FloatField):
    with computation(PARALLEL), interval(...):
        lap = laplacian(inp)
        flx = lap[1, 0, 0] - lap
        flx = flux_limiter(flx, inp[1, 0, 0] - inp)
        fly = lap[0, 1, 0] - lap
        fly = flux_limiter(fly, inp[0, 1, 0] - inp)
        out = inp - coeff * (flx - flx[-1, 0, 0] + fly - fly[0, -1, 0])


def relative_vorticity(u: FloatField, v: FloatField, rarea: FloatFieldIJ, vort: FloatField):
    with computation(PARALLEL), interval(...):
        vort = (v - v[-1, 0, 0] - u + u[0, -1, 0]) * rarea


def kinetic_energy(u: FloatField, v: FloatField, ke: FloatField):
    with computation(PARALLEL), interval(...):
        ke = 0.25 * (u * u + u[1, 0, 0] * u[1, 0, 0] + v * v + v[0, 1, 0] * v[0, 1, 0])


def coriolis_ke_update(u: FloatField, v: FloatField, f: FloatFieldIJ, u_out: FloatField,
                       v_out: FloatField, dt: float, rdx: float):
    with computation(PARALLEL), interval(...):
        ke = 0.5 * (u * u + v * v)
        vbar = 0.25 * (v + v[-1, 0, 0] + v[0, 1, 0] + v[-1, 1, 0])
        ubar = 0.25 * (u + u[0, -1, 0] + u[1, 0, 0] + u[1, -1, 0])
        u_out = u
        v_out = v
        u_out += dt * (f * vbar - (ke - ke[-1, 0, 0]) * rdx)
        v_out -= dt * (f * ubar + (ke - ke[0, -1, 0]) * rdx)


def pressure_gradient(u: FloatField, pp: FloatField, gz: FloatField, pk: FloatField,
                      u_out: FloatField, dt: float, rdx: float):
    with computation(PARALLEL), interval(...):
        pgrad = (pp - pp[-1, 0, 0]) + (gz - gz[-1, 0, 0]) * (pk + pk[-1, 0, 0]) * 0.5
        u_out[0, 0, 0] = u - dt * rdx * pgrad


def rayleigh_friction(u: FloatField, v: FloatField, pfull: FloatFieldK, dt: float):
    from __externals__ import RF_CUTOFF, TAU

    with computation(PARALLEL), interval(...):
        if pfull < RF_CUTOFF:
            rf = dt / TAU * (1.0 - pfull / RF_CUTOFF) ** 2
            u = u / (1.0 + rf)
            v = v / (1.0 + rf)


def sponge_layer(q: FloatField, q_out: FloatField, coeff: float):
    from __externals__ import N_SPONGE

    with computation(PARALLEL):
        with interval(0, N_SPONGE):
            q_out = q + coeff * laplacian(q)
        with interval(N_SPONGE, None):
            q_out = q


def nudge_towards(q: FloatField, q_ref: FloatField, mask: FloatFieldIJ, *, dt: float,
                  tau: float = 3600.0):
    with computation(PARALLEL), interval(...):
        q = q + mask * dt / tau * (q_ref - q)


def boundary_relaxation(q: FloatField, q_bnd: FloatField, q_out: FloatField, alpha: float):
    from __externals__ import i_end, i_start, j_end, j_start

    with computation(PARALLEL), interval(...):
        q_out = q
        with horizontal(region[i_start, :], region[i_end, :], region[:, j_start],
                        region[:, j_end]):
            q_out = q + alpha * (q_bnd - q)
        with horizontal(region[I[0] + 1 : I[-1], J[0] + 1]):
            q_out = q + 0.5 * alpha * (q_bnd - q)


def omega_diagnostic(u: FloatField, v: FloatField, delp: FloatField, omega: FloatField,
                     rdx: float):
    with computation(FORWARD):
        with interval(0, 1):
            conv = -((u[1, 0, 0] - u) + (v[0, 1, 0] - v)) * rdx * delp
            omega = 0.5 * conv
        with interval(1, None):
            conv = conv[0, 0, -1] - ((u[1, 0, 0] - u) + (v[0, 1, 0] - v)) * rdx * delp
            omega = 0.5 * (conv[0, 0, -1] + conv)


def upper_boundary_filter(q: FloatField, q_out: FloatField):
    from __externals__ import USE_FOURTH_ORDER

    with computation(PARALLEL), interval(...):
        if __INLINED(USE_FOURTH_ORDER):
            q_out = q - 0.01 * laplacian(laplacian(q))
        else:
            q_out = q + 0.1 * laplacian(q)


def mixed_precision_ke(u: Field[np.float32], v: Field[np.float32], ke: Field[np.float64]):
    with computation(PARALLEL), interval(...):
        ke = 0.5 * (u * u + v * v)


NX, NY, NZ = 7, 6, 5


def _uv(r, halo, *outs, **scalars):
    s = (NX + 2 * halo + 1, NY + 2 * halo + 1, NZ)
    out = dict(u=uniform(r, s, -20, 20), v=uniform(r, s, -20, 20))
    out.update({name: zeros(s) for name in outs})
    out.update(scalars)
    return out


def _ij(r, halo, lo, hi):
    return uniform(r, (NX + 2 * halo + 1, NY + 2 * halo + 1), lo, hi)


def _shape(halo):
    return (NX + 2 * halo + 1, NY + 2 * halo + 1, NZ)


def _damping(r):
    return {**_uv(r, 1, "u_out", "v_out", damp=1e4), "rdx": _ij(r, 1, 1e-4, 2e-4),
            "rdy": _ij(r, 1, 1e-4, 2e-4)}


def _smag(r):
    return {**_uv(r, 1, "q_out", dx=1e4, cs=0.2, dt=60.0), "q": uniform(r, _shape(1), 280, 300)}


def _hdiff(r):
    s = _shape(2)
    return dict(inp=uniform(r, s), coeff=uniform(r, s, 0, 0.1), out=zeros(s))


def _vort(r):
    return {**_uv(r, 1, "vort"), "rarea": _ij(r, 1, 1e-8, 2e-8)}


def _coriolis(r):
    return {**_uv(r, 1, "u_out", "v_out", dt=60.0, rdx=1e-4), "f": _ij(r, 1, 1e-4, 1.4e-4)}


def _pgrad(r):
    s = _shape(1)
    return dict(u=uniform(r, s, -20, 20), pp=uniform(r, s, -100, 100),
                gz=uniform(r, s, 0, 1e4), pk=uniform(r, s, 5, 10), u_out=zeros(s),
                dt=60.0, rdx=1e-4)


def _rayleigh(r):
    return {**_uv(r, 0), "pfull": np.linspace(100.0, 90000.0, NZ), "dt": 60.0}


def _sponge(r):
    s = _shape(1)
    return dict(q=uniform(r, s), q_out=zeros(s), coeff=0.1)


def _nudge(r):
    s = _shape(0)
    return dict(q=uniform(r, s), q_ref=uniform(r, s), mask=_ij(r, 0, 0, 1), dt=60.0)


def _relax(r):
    s = _shape(0)
    return dict(q=uniform(r, s), q_bnd=uniform(r, s), q_out=zeros(s), alpha=0.3)


def _omega(r):
    return {**_uv(r, 0, "omega", rdx=1e-4), "delp": uniform(r, _shape(0), 900, 1100)}


def _filter(r):
    s = _shape(2)
    return dict(q=uniform(r, s), q_out=zeros(s))


def _mixed(r):
    s = _shape(0)
    return dict(u=uniform(r, s, -20, 20).astype(np.float32),
                v=uniform(r, s, -20, 20).astype(np.float32), ke=zeros(s))


DOMAIN = (NX, NY, NZ)
EDGES = dict(i_start=I[0], i_end=I[-1], j_start=J[0], j_end=J[-1])
CASES = [
    Case("divergence_damping", _damping, (1, 1, 0), DOMAIN),
    Case("del4_divergence_damping", lambda r: _uv(r, 2, "u_out", "v_out", nord_coeff=0.01),
         (2, 2, 0), DOMAIN, externals=EDGES),
    Case("smagorinsky_diffusion", _smag, (1, 1, 0), DOMAIN),
    Case("hdiff_limited", _hdiff, (2, 2, 0), DOMAIN),
    Case("relative_vorticity", _vort, (1, 1, 0), DOMAIN),
    Case("kinetic_energy", lambda r: _uv(r, 0, "ke"), (0, 0, 0), DOMAIN),
    Case("coriolis_ke_update", _coriolis, (1, 1, 0), DOMAIN),
    Case("pressure_gradient", _pgrad, (1, 0, 0), DOMAIN),
    Case("rayleigh_friction", _rayleigh, (0, 0, 0), DOMAIN,
         externals={"RF_CUTOFF": 3e4, "TAU": 86400.0}),
    Case("sponge_layer", _sponge, (1, 1, 0), DOMAIN, externals={"N_SPONGE": 2}),
    Case("nudge_towards", _nudge, (0, 0, 0), DOMAIN),
    Case("boundary_relaxation", _relax, (0, 0, 0), DOMAIN, externals=EDGES),
    Case("omega_diagnostic", _omega, (0, 0, 0), DOMAIN),
    Case("upper_boundary_filter", _filter, (2, 2, 0), DOMAIN,
         externals={"USE_FOURTH_ORDER": True}),
    Case("mixed_precision_ke", _mixed, (0, 0, 0), DOMAIN),
]
