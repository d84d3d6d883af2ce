"""Point kernels for the dask/xarray/pickling tests (module level: they pickle by source, and a
worker process imports nothing from the test)."""

from __future__ import annotations

import math

import numpy as np

import stencilkit as sk

SCALE = 0.5


def k1_uneven(a):
    return a[-2] + 3 * a[1] - a[0]


def k1_two_arrays(a, b, s):
    return a[-1] * b[2] + s


def k1_wide(a):
    # explicit neighbourhood wider than the reads, and non-constant indices
    acc = 0.0
    for i in range(-3, 2):
        acc += a[i]
    return acc


def k2_uneven(a):
    return a[-2, 1] + 2 * a[1, 0] - a[0, -1] * SCALE


def k2_weights(a, w):
    return w[0] * a[-1, 0] + w[1] * a[0, 0] + w[2] * a[1, 1]


def k2_int(a, b):
    return a[0, 1] // 2 + b[-1, 0] * 3


def k2_math(a):
    return math.sqrt(abs(a[0, 1])) + np.exp(a[-1, -1] * 0.1)


def k3_seven(a):
    return (a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1]
            - 6 * a[0, 0, 0])


def k3_shifted(a, b):
    return a[0, 2, -1] - b[1, 0, 0]


#: (function, ndim, options, extra arguments: "array" (relatively indexed, maybe larger),
#:  "weights" (standard_indexing), or a scalar)
KERNELS = [
    (k1_uneven, 1, {}, ()),
    (k1_two_arrays, 1, {"cval": -1.0}, ("array", 0.25)),
    (k1_wide, 1, {"neighborhood": ((-3, 1),)}, ()),
    (k2_uneven, 2, {"cval": 7.5}, ()),
    (k2_weights, 2, {"standard_indexing": ("w",)}, ("weights",)),
    (k2_int, 2, {}, ("array",)),
    (k2_math, 2, {}, ()),
    (k3_seven, 3, {}, ()),
    (k3_shifted, 3, {"cval": 2.0}, ("array",)),
]

MODES = ("constant", "nearest", "reflect", "mirror", "wrap")


def supported_modes() -> tuple[str, ...]:
    """The border modes this build of stencilkit accepts (read from the code: a mode it
    does not support raises when the stencil is made)."""
    out = []
    for mode in MODES:
        try:
            sk.stencil(mode)(k1_uneven)
        except sk.StencilError:
            continue
        out.append(mode)
    return tuple(out)


def make(func, options: dict, mode: str = "constant", backend: str | None = None):
    if mode == "constant":
        return sk.stencil(func, backend=backend, **options)
    return sk.stencil(mode, backend=backend, **options)(func)


def jacobi(a):
    return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])


def apply(stencil, *args):
    """Run in a worker process: the stencil arrives pickled."""
    return stencil(*args)


def run_computation(stencil, a, b, **scalars):
    stencil(a, b, **scalars)
    return b


def scaled(c: float):
    """Kernels that differ only in a closure value."""
    return sk.stencil(lambda a: c * a[1] - a[-1])
