"""Definitions timed by ``stencilkit bench``: gtscript computations and their Numba peers."""

from __future__ import annotations

import numpy as np

from stencilkit.gtscript import BACKWARD, FORWARD, PARALLEL, Field, computation, function, interval


def hdiff(in_field: Field[float], out_field: Field[float], coeff: Field[float]):
    with computation(PARALLEL), interval(...):
        lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0]
                                + in_field[0, 1, 0] + in_field[0, -1, 0])
        res = lap[1, 0, 0] - lap
        flx = 0.0 if res * (in_field[1, 0, 0] - in_field) > 0 else res
        res = lap[0, 1, 0] - lap
        fly = 0.0 if res * (in_field[0, 1, 0] - in_field) > 0 else res
        out_field = in_field - coeff * (flx - flx[-1, 0, 0] + fly - fly[0, -1, 0])  # noqa: F841


# hdiff spelled differently: each must compile to the same fused loop (bench case hdiff)


def hdiff_if(in_field: Field[float], out_field: Field[float], coeff: Field[float]):
    # one name per temporary, `if` statements instead of conditional expressions
    with computation(PARALLEL), interval(...):
        lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0]
                                + in_field[0, 1, 0] + in_field[0, -1, 0])
        res_x = lap[1, 0, 0] - lap
        flx = res_x
        if res_x * (in_field[1, 0, 0] - in_field) > 0:
            flx = 0.0
        res_y = lap[0, 1, 0] - lap
        fly = res_y
        if res_y * (in_field[0, 1, 0] - in_field) > 0:
            fly = 0.0
        out_field = in_field - coeff * (flx - flx[-1, 0, 0] + fly - fly[0, -1, 0])  # noqa: F841


@function
def _laplacian(f):
    return 4.0 * f - (f[1, 0, 0] + f[-1, 0, 0] + f[0, 1, 0] + f[0, -1, 0])


@function
def _limited(res, grad):
    return 0.0 if res * grad > 0 else res


def hdiff_functions(in_field: Field[float], out_field: Field[float], coeff: Field[float]):
    # helpers instead of inline code
    with computation(PARALLEL), interval(...):
        lap = _laplacian(in_field)
        flx = _limited(lap[1, 0, 0] - lap, in_field[1, 0, 0] - in_field)
        fly = _limited(lap[0, 1, 0] - lap, in_field[0, 1, 0] - in_field)
        out_field = in_field - coeff * (flx - flx[-1, 0, 0] + fly - fly[0, -1, 0])  # noqa: F841


def tridiagonal(a: Field[float], b: Field[float], c: Field[float], d: Field[float]):
    with computation(FORWARD):
        with interval(0, 1):
            c = c / b
            d = d / b
        with interval(1, None):
            m = 1.0 / (b - a * c[0, 0, -1])
            c = c * m
            d = (d - a * d[0, 0, -1]) * m
    with computation(BACKWARD), interval(0, -1):
        d = d - c * d[0, 0, 1]  # noqa: F841


def tridiagonal_temporaries(a: Field[float], b: Field[float], c: Field[float],
                            d: Field[float], x: Field[float]):
    # GT4Py's own spelling (the peer-bench's and issue 17's case): cp/dp temporaries, the
    # solution in x, the inputs left as they are
    with computation(FORWARD):
        with interval(0, 1):
            cp = c / b
            dp = d / b
        with interval(1, None):
            m = 1.0 / (b - a * cp[0, 0, -1])
            cp = c * m
            dp = (d - a * dp[0, 0, -1]) * m
    with computation(BACKWARD):
        with interval(-1, None):
            x = dp
        with interval(0, -1):
            x = dp - cp * x[0, 0, 1]  # noqa: F841


def _numba_peers():
    import numba

    @numba.njit(parallel=True, fastmath=False)
    def hdiff_loop(inp, coeff, out):
        ni, nj, nk = inp.shape
        for i in numba.prange(2, ni - 2):
            for j in range(2, nj - 2):
                for k in range(nk):
                    lap_c = 4 * inp[i, j, k] - (inp[i + 1, j, k] + inp[i - 1, j, k]
                                                + inp[i, j + 1, k] + inp[i, j - 1, k])
                    lap_e = 4 * inp[i + 1, j, k] - (inp[i + 2, j, k] + inp[i, j, k]
                                                    + inp[i + 1, j + 1, k] + inp[i + 1, j - 1, k])
                    lap_w = 4 * inp[i - 1, j, k] - (inp[i, j, k] + inp[i - 2, j, k]
                                                    + inp[i - 1, j + 1, k] + inp[i - 1, j - 1, k])
                    lap_n = 4 * inp[i, j + 1, k] - (inp[i + 1, j + 1, k] + inp[i - 1, j + 1, k]
                                                    + inp[i, j + 2, k] + inp[i, j, k])
                    lap_s = 4 * inp[i, j - 1, k] - (inp[i + 1, j - 1, k] + inp[i - 1, j - 1, k]
                                                    + inp[i, j, k] + inp[i, j - 2, k])
                    r = lap_e - lap_c
                    flx_c = 0.0 if r * (inp[i + 1, j, k] - inp[i, j, k]) > 0 else r
                    r = lap_c - lap_w
                    flx_w = 0.0 if r * (inp[i, j, k] - inp[i - 1, j, k]) > 0 else r
                    r = lap_n - lap_c
                    fly_c = 0.0 if r * (inp[i, j + 1, k] - inp[i, j, k]) > 0 else r
                    r = lap_c - lap_s
                    fly_s = 0.0 if r * (inp[i, j, k] - inp[i, j - 1, k]) > 0 else r
                    out[i, j, k] = inp[i, j, k] - coeff[i, j, k] * (flx_c - flx_w + fly_c - fly_s)

    @numba.njit(parallel=True)
    def tridiag_loop(a, b, c, d):
        ni, nj, nk = a.shape
        for i in numba.prange(ni):
            for j in range(nj):
                c[i, j, 0] /= b[i, j, 0]
                d[i, j, 0] /= b[i, j, 0]
                for k in range(1, nk):
                    m = 1.0 / (b[i, j, k] - a[i, j, k] * c[i, j, k - 1])
                    c[i, j, k] *= m
                    d[i, j, k] = (d[i, j, k] - a[i, j, k] * d[i, j, k - 1]) * m
                for k in range(nk - 2, -1, -1):
                    d[i, j, k] -= c[i, j, k] * d[i, j, k + 1]

    return hdiff_loop, tridiag_loop


def hdiff_numba(inp: np.ndarray, coeff: np.ndarray, out: np.ndarray) -> None:
    _peers()[0](inp, coeff, out)


def tridiag_numba(a, b, c, d) -> None:
    _peers()[1](a, b, c, d)


_cache: list = []


def _peers():
    if not _cache:
        _cache.extend(_numba_peers())
    return _cache
