"""The golden tier's corpus: small kernels of every kind whose generated sources are kept
under ``tests/golden/<backend>/<name>.<ext>`` (tests/test_golden_sources.py).

Each entry renders its source with the public ``generate()``; the sources name this file and
its lines in their comments, so an edit here changes the goldens: regenerate them with
``pytest tests/test_golden_sources.py --update-golden`` and review the diff.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import stencilkit as sk
from stencilkit import gtscript
from stencilkit.gtscript import BACKWARD, FORWARD, PARALLEL, Field, computation, interval


def lap3d(a):
    return (a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1]
            - 6.0 * a[0, 0, 0])


def jacobi2d(a):
    return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])


def blur_wrap(a):
    return (a[-1, 0] + 2.0 * a[0, 0] + a[1, 0]) * 0.25


def hdiff(in_field: Field[float], out_field: Field[float], coeff: Field[float]):
    with computation(PARALLEL), interval(...):
        lap = 4.0 * in_field - (in_field[1, 0, 0] + in_field[-1, 0, 0]
                                + in_field[0, 1, 0] + in_field[0, -1, 0])
        res = lap[1, 0, 0] - lap
        flx = 0.0 if res * (in_field[1, 0, 0] - in_field) > 0 else res
        res = lap[0, 1, 0] - lap
        fly = 0.0 if res * (in_field[0, 1, 0] - in_field) > 0 else res
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


@sk.kernel
def spread(area, node_vals):
    for i in range(3):
        node_vals[i, 0] += area[0] / 3.0


def _point(func, shape, mode: str = "constant") -> Callable[[str], str]:
    def render(backend: str) -> str:
        return sk.stencil(func_or_mode=mode)(func).generate(np.zeros(shape), backend=backend)
    return render


def _computation(definition) -> Callable[[str], str]:
    def render(backend: str) -> str:
        return gtscript.stencil(backend=backend, definition=definition).generate()
    return render


def _parloop(backend: str) -> str:
    # a ParLoop's source depends on the arguments' structure only, not on the mesh
    cells, nodes = sk.Set(2), sk.Set(4)
    cell2node = sk.Map(cells, nodes, 3, np.array([[0, 1, 2], [1, 2, 3]]))
    area = sk.Dat(cells, data=np.ones(2))
    values = sk.Dat(nodes, dim=2)
    loop = sk.ParLoop(spread, cells, area(sk.READ), values(sk.INC, cell2node))
    return loop.generate(backend=backend)


#: name -> render(backend) -> source
CORPUS: dict[str, Callable[[str], str]] = {
    "lap3d": _point(lap3d, (6, 7, 8)),
    "jacobi2d": _point(jacobi2d, (6, 7)),
    "blur_wrap": _point(blur_wrap, (6, 7), mode="wrap"),
    "hdiff": _computation(hdiff),
    "tridiagonal": _computation(tridiagonal),
    "spread_inc": _parloop,
}
