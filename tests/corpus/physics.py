"""Column physics: saturation adjustment, warm-rain microphysics, sedimentation, ice
partitioning, convective adjustment, radiation, with helpers the way schemes share them."""

import numpy as np
from gt4py.cartesian import gtscript
from gt4py.cartesian.gtscript import (
    __INLINED,
    BACKWARD,
    FORWARD,
    PARALLEL,
    Field,
    compile_assert,
    computation,
    exp,
    interval,
    log,
    sqrt,
)

from tests.corpus.registry import Case, profile, uniform, zeros

FloatField = Field[np.float64]
FloatFieldIJ = Field[gtscript.IJ, np.float64]

TICE = 273.16
RVGAS = 461.5
RDGAS = 287.05
EPS = RDGAS / RVGAS
LV0 = 2.5e6
LI0 = 3.34e5
CP_AIR = 1004.6
GRAV = 9.80665


@gtscript.function
def saturation_vapor_pressure(t):
    return 610.78 * exp(17.27 * (t - TICE) / (t - 35.86))


@gtscript.function
def qsat_and_derivative(t, p):
    es = saturation_vapor_pressure(t)
    qs = EPS * es / (p - (1.0 - EPS) * es)
    dqsdt = qs * 17.27 * (TICE - 35.86) / ((t - 35.86) ** 2)
    return qs, dqsdt


@gtscript.function
def ice_fraction(t):
    if t >= TICE:
        frac = 0.0
    elif t <= TICE - 40.0:
        frac = 1.0
    else:
        frac = (TICE - t) / 40.0
    return frac


@gtscript.function
def terminal_velocity(rho, qr):
    vt = 0.0
    if qr > 1e-8:
        vt = 36.34 * (rho * qr) ** 0.1346 * sqrt(1.2 / rho)
    return vt


def saturation_adjustment(t: FloatField, p: FloatField, qv: FloatField, qc: FloatField):
    with computation(PARALLEL), interval(...):
        qs, dqsdt = qsat_and_derivative(t, p)
        dq = (qv - qs) / (1.0 + LV0 / CP_AIR * dqsdt)
        if dq < 0.0:
            dq = max(dq, -qc)
        qv = qv - dq
        qc = qc + dq
        t = t + LV0 / CP_AIR * dq


def kessler_autoconversion(qc: FloatField, qr: FloatField, dt: float):
    from __externals__ import AUTO_RATE, QC_CRIT

    with computation(PARALLEL), interval(...):
        if qc > QC_CRIT:
            conv = min(AUTO_RATE * (qc - QC_CRIT) * dt, qc - QC_CRIT)
            qc -= conv
            qr += conv


def warm_rain_processes(t: FloatField, p: FloatField, qv: FloatField, qc: FloatField,
                        qr: FloatField, dt: float):
    """Accretion of cloud by rain and evaporation of rain in subsaturated air."""
    with computation(PARALLEL), interval(...):
        rho = p / (RDGAS * t * (1.0 + 0.608 * qv))
        accretion = 2.2 * qc * (rho * qr) ** 0.875 * dt
        accretion = min(accretion, qc)
        qs, dqsdt = qsat_and_derivative(t, p)
        subsat = max(qs - qv, 0.0)
        ventilation = 1.6 + 124.9 * (rho * qr) ** 0.2046
        evap = ventilation * (rho * qr) ** 0.525 * subsat / (rho * (5.4e5 + 2.55e8 / (p * qs)))
        evap = min(evap * dt, qr + accretion)
        qc = qc - accretion
        qr = qr + accretion - evap
        qv = qv + evap
        t = t - LV0 / CP_AIR * evap


def rain_sedimentation(qr: FloatField, rho: FloatField, dz: FloatField,
                       precip: FloatFieldIJ, dt: float):
    """Upwind fall of rain from the top (k = 0) to the surface; the surface flux is the
    precipitation rate."""
    with computation(PARALLEL), interval(...):
        vt = terminal_velocity(rho, qr)
        flux = rho * qr * vt
    with computation(FORWARD):
        with interval(0, 1):
            qr = qr - dt * flux / (rho * dz)
        with interval(1, None):
            qr = qr + dt * (flux[0, 0, -1] - flux) / (rho * dz)
    with computation(FORWARD), interval(-1, None):
        precip = flux


def partition_condensate(t: FloatField, qc: FloatField, ql: FloatField, qi: FloatField):
    with computation(PARALLEL), interval(...):
        fi = ice_fraction(t)
        qi = fi * qc
        ql = qc - qi


def latent_heating(t: FloatField, ql_old: FloatField, ql: FloatField, qi_old: FloatField,
                   qi: FloatField):
    from __externals__ import DO_ICE

    with computation(PARALLEL), interval(...):
        heating = LV0 * (ql - ql_old)
        if __INLINED(DO_ICE):
            heating = heating + (LV0 + LI0) * (qi - qi_old)
        t = t + heating / CP_AIR


def virtual_temperature(t: FloatField, qv: FloatField, qc: FloatField, tv: FloatField,
                        rho: FloatField, p: FloatField):
    with computation(PARALLEL), interval(...):
        tv = t * (1.0 + (1.0 / EPS - 1.0) * qv - qc)
        rho = p / (RDGAS * tv)


def dry_convective_adjustment(theta: FloatField, dp: FloatField):
    """One upward sweep: mix any statically unstable pair of layers (k = 0 is the top)."""
    with computation(BACKWARD), interval(0, -1):
        if theta < theta[0, 0, 1]:
            mixed = (theta * dp + theta[0, 0, 1] * dp[0, 0, 1]) / (dp + dp[0, 0, 1])
            theta = mixed
            theta[0, 0, 1] = mixed


def wet_bulb_temperature(t: FloatField, p: FloatField, qv: FloatField, tw: FloatField):
    """Newton iterations on t_w + L/cp q_s(t_w) = t + L/cp q_v, to a tolerance."""
    with computation(PARALLEL), interval(...):
        tw = t
        residual = 1.0
        n_iter = 0
        while abs(residual) > 1e-9 and n_iter < 20:
            qs, dqsdt = qsat_and_derivative(tw, p)
            residual = tw + LV0 / CP_AIR * qs - t - LV0 / CP_AIR * qv
            tw = tw - residual / (1.0 + LV0 / CP_AIR * dqsdt)
            n_iter = n_iter + 1


def shortwave_heating(dp: FloatField, kappa: FloatField, heating: FloatField,
                      sw_top: FloatFieldIJ, cos_zenith: FloatFieldIJ):
    with computation(FORWARD):
        with interval(0, 1):
            tau = kappa * dp / GRAV
            flux_top = sw_top * cos_zenith
        with interval(1, None):
            tau = tau[0, 0, -1] + kappa * dp / GRAV
            flux_top = flux_top[0, 0, -1] * exp(-kappa[0, 0, -1] * dp[0, 0, -1]
                                                / (GRAV * max(cos_zenith, 0.05)))
    with computation(PARALLEL), interval(...):
        flux_bot = flux_top * exp(-kappa * dp / (GRAV * max(cos_zenith, 0.05)))
        heating = GRAV / CP_AIR * (flux_top - flux_bot) / dp


def gamma_size_distribution(qr: FloatField, rho: FloatField, n0: FloatField,
                            lam: FloatField, mu: float):
    with computation(PARALLEL), interval(...):
        lam = (3.14159265 * 1000.0 * gamma(4.0 + mu) / (6.0 * rho * max(qr, 1e-12))) \
            ** (1.0 / 3.0)
        n0 = rho * qr * lam ** (4.0 + mu) / (3.14159265 * 1000.0 / 6.0 * gamma(4.0 + mu))


def subcolumn_cloud_cover(rh: FloatField, cover: FloatField):
    from __externals__ import NSUB, RH_CRIT

    with computation(PARALLEL), interval(...):
        compile_assert(NSUB > 0)
        cover = 0.0
        if rh > RH_CRIT:
            cover = 1.0 - sqrt(max((1.0 - rh) / (1.0 - RH_CRIT), 0.0))
        cover = floor(cover * NSUB + 0.5) / NSUB


def relative_humidity(t: FloatField, p: FloatField, qv: FloatField, rh: FloatField):
    with computation(PARALLEL), interval(...):
        qs, _ = qsat_and_derivative(t, p)
        rh = min(max(qv / qs, 0.0), 1.0)
        dew = 1.0 / (1.0 / TICE - RVGAS / LV0 * log(max(rh, 1e-6)))


NX, NY, NZ = 6, 5, 7


def _thermo(r, *extra):
    s = (NX, NY, NZ)
    out = dict(t=uniform(r, s, 250, 300), p=profile(r, s, 3e4, 1e5),
               qv=uniform(r, s, 0.001, 0.02))
    for name in extra:
        out[name] = uniform(r, s, 0.0, 2e-3)
    return out


def _kessler(r):
    s = (NX, NY, NZ)
    return dict(qc=uniform(r, s, 0, 2e-3), qr=uniform(r, s, 0, 1e-3), dt=60.0)


def _sedimentation(r):
    s = (NX, NY, NZ)
    return dict(qr=uniform(r, s, 0, 2e-3), rho=profile(r, s, 0.4, 1.2),
                dz=uniform(r, s, 200, 400), precip=zeros((NX, NY)), dt=5.0)


def _partition(r):
    s = (NX, NY, NZ)
    return dict(t=uniform(r, s, 220, 290), qc=uniform(r, s, 0, 1e-3), ql=zeros(s), qi=zeros(s))


def _latent(r):
    s = (NX, NY, NZ)
    return dict(t=uniform(r, s, 250, 300), ql_old=uniform(r, s, 0, 1e-3),
                ql=uniform(r, s, 0, 1e-3), qi_old=uniform(r, s, 0, 1e-3),
                qi=uniform(r, s, 0, 1e-3))


def _virtual(r):
    s = (NX, NY, NZ)
    return dict(t=uniform(r, s, 250, 300), qv=uniform(r, s, 0, 0.02), qc=uniform(r, s, 0, 1e-3),
                tv=zeros(s), rho=zeros(s), p=profile(r, s, 3e4, 1e5))


def _convective(r):
    s = (NX, NY, NZ)
    return dict(theta=uniform(r, s, 290, 300), dp=uniform(r, s, 900, 1100))


def _wet_bulb(r):
    return {**_thermo(r), "tw": zeros((NX, NY, NZ))}


def _shortwave(r):
    s = (NX, NY, NZ)
    return dict(dp=uniform(r, s, 900, 1100), kappa=uniform(r, s, 1e-3, 1e-2), heating=zeros(s),
                sw_top=uniform(r, (NX, NY), 1300, 1400), cos_zenith=uniform(r, (NX, NY), -0.2, 1))


def _gamma(r):
    s = (NX, NY, NZ)
    return dict(qr=uniform(r, s, 0, 2e-3), rho=uniform(r, s, 0.5, 1.2), n0=zeros(s),
                lam=zeros(s), mu=2.0)


def _cover(r):
    s = (NX, NY, NZ)
    return dict(rh=uniform(r, s, 0.5, 1.0), cover=zeros(s))


def _rh(r):
    return {**_thermo(r), "rh": zeros((NX, NY, NZ))}


DOMAIN = (NX, NY, NZ)
CASES = [
    Case("saturation_adjustment", lambda r: _thermo(r, "qc"), (0, 0, 0), DOMAIN),
    Case("kessler_autoconversion", _kessler, (0, 0, 0), DOMAIN,
         externals={"AUTO_RATE": 1e-3, "QC_CRIT": 5e-4}),
    Case("warm_rain_processes", lambda r: {**_thermo(r, "qc", "qr"), "dt": 30.0}, (0, 0, 0),
         DOMAIN),
    Case("rain_sedimentation", _sedimentation, (0, 0, 0), DOMAIN),
    Case("partition_condensate", _partition, (0, 0, 0), DOMAIN),
    Case("latent_heating", _latent, (0, 0, 0), DOMAIN, externals={"DO_ICE": True}),
    Case("virtual_temperature", _virtual, (0, 0, 0), DOMAIN),
    Case("dry_convective_adjustment", _convective, (0, 0, 0), DOMAIN),
    Case("wet_bulb_temperature", _wet_bulb, (0, 0, 0), DOMAIN),
    Case("shortwave_heating", _shortwave, (0, 0, 0), DOMAIN),
    Case("gamma_size_distribution", _gamma, (0, 0, 0), DOMAIN),
    Case("subcolumn_cloud_cover", _cover, (0, 0, 0), DOMAIN,
         externals={"NSUB": 8, "RH_CRIT": 0.8}),
    Case("relative_humidity", _rh, (0, 0, 0), DOMAIN),
]
