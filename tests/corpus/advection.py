"""Transport in the style of FV3's finite-volume advection (fv3core's xppm/yppm/fvtp2d).

Fluxes live on cell faces, so a flux computed for nx cells covers nx + 1 faces; edges of
the tile use lower-order stencils inside horizontal regions, as the cubed-sphere code does.
"""

import numpy as np
from gt4py.cartesian import gtscript
from gt4py.cartesian.gtscript import (
    BACKWARD,
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

# fourth-order edge interpolation weights of PPM (Colella and Woodward 1984)
P1 = 7.0 / 12.0
P2 = -1.0 / 12.0


@gtscript.function
def upwind(q_left, q_right, courant):
    return q_left if courant > 0.0 else q_right


@gtscript.function
def ppm_edge_x(q):
    return P1 * (q[-1, 0, 0] + q) + P2 * (q[-2, 0, 0] + q[1, 0, 0])


@gtscript.function
def ppm_edge_y(q):
    return P1 * (q[0, -1, 0] + q) + P2 * (q[0, -2, 0] + q[0, 1, 0])


@gtscript.function
def sign(a, b):
    return abs(a) if b >= 0.0 else -abs(a)


@gtscript.function
def mc_limited_slope(dq_minus, dq_plus):
    dq = 0.5 * (dq_minus + dq_plus)
    bound = min(abs(dq), min(2.0 * abs(dq_minus), 2.0 * abs(dq_plus)))
    return sign(bound, dq) if dq_minus * dq_plus > 0.0 else 0.0


def courant_numbers(u: FloatField, v: FloatField, rdxa: FloatFieldIJ, rdya: FloatFieldIJ,
                    crx: FloatField, cry: FloatField, dt: float):
    with computation(PARALLEL), interval(...):
        crx = dt * u * rdxa
        cry = dt * v * rdya


def upwind_flux_x(q: FloatField, crx: FloatField, fx: FloatField):
    with computation(PARALLEL), interval(...):
        fx = crx * upwind(q[-1, 0, 0], q, crx)


def xppm_flux(q: FloatField, crx: FloatField, fx: FloatField):
    from __externals__ import i_end, i_start

    with computation(PARALLEL), interval(...):
        al = ppm_edge_x(q)
        with horizontal(region[i_start, :], region[i_end, :]):
            al = 0.5 * (q[-1, 0, 0] + q)
        bl = al - q
        br = al[1, 0, 0] - q
        b0 = bl + br
        if crx > 0.0:
            fx = q[-1, 0, 0] + (1.0 - crx) * (br[-1, 0, 0] - crx * b0[-1, 0, 0])
        else:
            fx = q + (1.0 + crx) * (bl + crx * b0)
        fx = crx * fx


def yppm_flux(q: FloatField, cry: FloatField, fy: FloatField):
    from __externals__ import j_end, j_start

    with computation(PARALLEL), interval(...):
        al = ppm_edge_y(q)
        with horizontal(region[:, j_start]):
            al = 0.5 * (q[0, -1, 0] + q)
        with horizontal(region[:, j_end]):
            al = 0.5 * (q[0, -1, 0] + q)
        bl = al - q
        br = al[0, 1, 0] - q
        # flatten local extrema, as PPM's monotonicity constraint does
        if bl * br > 0.0:
            bl = 0.0
            br = 0.0
        b0 = bl + br
        fy = cry * (q[0, -1, 0] + (1.0 - cry) * (br[0, -1, 0] - cry * b0[0, -1, 0])) \
            if cry > 0.0 else cry * (q + (1.0 + cry) * (bl + cry * b0))


def muscl_flux_x(q: FloatField, u: FloatField, fx: FloatField, dt_dx: float):
    with computation(PARALLEL), interval(...):
        dq = mc_limited_slope(q - q[-1, 0, 0], q[1, 0, 0] - q)
        if u > 0.0:
            fx = u * (q[-1, 0, 0] + 0.5 * (1.0 - u * dt_dx) * dq[-1, 0, 0])
        else:
            fx = u * (q - 0.5 * (1.0 + u * dt_dx) * dq)


def lax_wendroff_x(q: FloatField, crx: FloatField, q_out: FloatField):
    with computation(PARALLEL), interval(...):
        flux = 0.5 * crx * (q[-1, 0, 0] + q) - 0.5 * crx * crx * (q - q[-1, 0, 0])
        q_out = q - (flux[1, 0, 0] - flux)


def flux_form_update(q: FloatField, delp: FloatField, fx: FloatField, fy: FloatField,
                     mfx: FloatField, mfy: FloatField, rarea: FloatFieldIJ,
                     q_out: FloatField, delp_out: FloatField):
    with computation(PARALLEL), interval(...):
        delp_out = delp + (mfx - mfx[1, 0, 0] + mfy - mfy[0, 1, 0]) * rarea
        q_out = (q * delp + (fx - fx[1, 0, 0] + fy - fy[0, 1, 0]) * rarea) / delp_out


def vertical_upwind(q: FloatField, w: FloatField, q_out: FloatField, dt_dz: float):
    with computation(PARALLEL):
        with interval(0, 1):
            q_out = q - dt_dz * min(w, 0.0) * (q[0, 0, 1] - q)
        with interval(1, -1):
            q_out = q - dt_dz * (max(w, 0.0) * (q - q[0, 0, -1])
                                 + min(w, 0.0) * (q[0, 0, 1] - q))
        with interval(-1, None):
            q_out = q - dt_dz * max(w, 0.0) * (q - q[0, 0, -1])


def fill_negative_tracer(q: FloatField, dp: FloatField):
    """Borrow mass from the level below to fill negative values, top to bottom (fillz)."""
    with computation(FORWARD), interval(0, -1):
        if q < 0.0:
            q[0, 0, 1] = q[0, 0, 1] + q * dp / dp[0, 0, 1]
            q = 0.0
    with computation(BACKWARD), interval(1, None):
        if q < 0.0:
            q[0, 0, -1] = q[0, 0, -1] + q * dp / dp[0, 0, -1]
            q = 0.0


def fill_corners_x(q: FloatField, q_out: FloatField):
    with computation(PARALLEL), interval(...):
        q_out = q
        with horizontal(region[I[0], J[0]], region[I[-1], J[0]]):
            q_out = 0.5 * (q[0, 1, 0] + q[0, 2, 0])
        with horizontal(region[I[0], J[-1]], region[I[-1], J[-1]]):
            q_out = 0.5 * (q[0, -1, 0] + q[0, -2, 0])


def tracer_update_4d(q: Field[(np.float64, (3,))], fx: Field[(np.float64, (3,))],
                     rarea: FloatFieldIJ, q_out: Field[(np.float64, (3,))]):
    with computation(PARALLEL), interval(...):
        q_out[0, 0, 0][0] = q[0, 0, 0][0] + (fx[0, 0, 0][0] - fx[1, 0, 0][0]) * rarea
        q_out[0, 0, 0][1] = q[0, 0, 0][1] + (fx[0, 0, 0][1] - fx[1, 0, 0][1]) * rarea
        q_out[0, 0, 0][2] = q[0, 0, 0][2] + (fx[0, 0, 0][2] - fx[1, 0, 0][2]) * rarea


def edge_damped_flux(q: FloatField, crx: FloatField, fx: FloatField, damp: float):
    from __externals__ import i_start

    with computation(PARALLEL), interval(...):
        fx = crx * upwind(q[-1, 0, 0], q, crx)
        with horizontal(region[i_start : i_start + 2, :]):
            fx = damp * fx


NX, NY, NZ = 8, 7, 5


def _courant(r):
    s = (NX, NY, NZ)
    return dict(u=uniform(r, s, -20, 20), v=uniform(r, s, -20, 20),
                rdxa=uniform(r, (NX, NY), 1e-4, 2e-4), rdya=uniform(r, (NX, NY), 1e-4, 2e-4),
                crx=zeros(s), cry=zeros(s), dt=30.0)


def _flux_x(halo):
    def make(r):
        s = (NX + 1 + 2 * halo, NY, NZ)
        return dict(q=uniform(r, s, 0.5, 1.5), crx=uniform(r, s, -0.9, 0.9), fx=zeros(s))
    return make


def _flux_y(r):
    s = (NX, NY + 1 + 6, NZ)
    return dict(q=uniform(r, s, 0.5, 1.5), cry=uniform(r, s, -0.9, 0.9), fy=zeros(s))


def _muscl(r):
    s = (NX + 5, NY, NZ)
    return dict(q=uniform(r, s, 0.5, 1.5), u=uniform(r, s, -10, 10), fx=zeros(s), dt_dx=0.05)


def _lax(r):
    s = (NX + 2, NY, NZ)
    return dict(q=uniform(r, s, 0.5, 1.5), crx=uniform(r, s, -0.5, 0.5), q_out=zeros(s))


def _ffu(r):
    s = (NX + 1, NY + 1, NZ)
    return dict(q=uniform(r, s, 0.5, 1.5), delp=uniform(r, s, 900, 1100),
                fx=uniform(r, s, -1e3, 1e3), fy=uniform(r, s, -1e3, 1e3),
                mfx=uniform(r, s, -1e3, 1e3), mfy=uniform(r, s, -1e3, 1e3),
                rarea=uniform(r, (NX + 1, NY + 1), 0.05, 0.1), q_out=zeros(s), delp_out=zeros(s))


def _vup(r):
    s = (NX, NY, NZ)
    return dict(q=uniform(r, s), w=uniform(r, s, -2, 2), q_out=zeros(s), dt_dz=0.2)


def _fill(r):
    s = (NX, NY, NZ)
    return dict(q=uniform(r, s, -0.3, 1.0), dp=uniform(r, s, 50, 150))


def _corners(r):
    s = (NX, NY, NZ)
    return dict(q=uniform(r, s), q_out=zeros(s))


def _tracers(r):
    s = (NX + 1, NY, NZ, 3)
    return dict(q=uniform(r, s), fx=uniform(r, s, -0.1, 0.1),
                rarea=uniform(r, (NX + 1, NY), 0.5, 1.0), q_out=zeros(s))


CASES = [
    Case("courant_numbers", _courant, (0, 0, 0), (NX, NY, NZ)),
    Case("upwind_flux_x", _flux_x(1), (1, 0, 0), (NX + 1, NY, NZ)),
    Case("xppm_flux", _flux_x(3), (3, 0, 0), (NX + 1, NY, NZ),
         externals={"i_start": I[0], "i_end": I[-1]}),
    Case("yppm_flux", _flux_y, (0, 3, 0), (NX, NY + 1, NZ),
         externals={"j_start": J[0], "j_end": J[-1]}),
    Case("muscl_flux_x", _muscl, (2, 0, 0), (NX + 1, NY, NZ)),
    Case("lax_wendroff_x", _lax, (1, 0, 0), (NX, NY, NZ)),
    Case("flux_form_update", _ffu, (0, 0, 0), (NX, NY, NZ)),
    Case("vertical_upwind", _vup, (0, 0, 0), (NX, NY, NZ)),
    Case("fill_negative_tracer", _fill, (0, 0, 0), (NX, NY, NZ)),
    Case("fill_corners_x", _corners, (0, 2, 0), (NX, NY - 4, NZ)),
    Case("tracer_update_4d", _tracers, (0, 0, 0), (NX, NY, NZ)),
    Case("edge_damped_flux", lambda r: {**_flux_x(1)(r), "damp": 0.5}, (1, 0, 0), (NX + 1, NY, NZ),
         externals={"i_start": I[0] + 1}),
]
