# ruff: noqa: F841  (gtscript assigns fields by name)
"""One array passed as a written field and a read field (GT4Py's Burgers demo passes the new
velocity as input and output), against GT4Py's "numpy" backend on the same aliased arrays,
on every backend (frontend/aliasing.py, issue 28)."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk

gtscript = pytest.importorskip("gt4py.cartesian.gtscript")
gt_storage = pytest.importorskip("gt4py.storage")
# GT4Py's own names, so that one definition runs on both
BACKWARD, FORWARD, PARALLEL = gtscript.BACKWARD, gtscript.FORWARD, gtscript.PARALLEL
Field, computation, interval = gtscript.Field, gtscript.computation, gtscript.interval

ORIGIN, DOMAIN, SHAPE = (2, 2, 1), (4, 5, 3), (8, 9, 5)


@gtscript.function
def laplacian(f):
    return f[1, 0, 0] + f[-1, 0, 0] + f[0, 1, 0] + f[0, -1, 0] - 4.0 * f


def burgers_like(u_now: Field[float], u_tmp: Field[float], u_new: Field[float], *,
                 dt: float):
    with computation(PARALLEL), interval(...):
        adv = u_tmp * (u_tmp[1, 0, 0] - u_tmp[-1, 0, 0]) + u_tmp[0, 1, 0] * 0.25
        diff = laplacian(u_tmp)
        u_new = u_now + dt * (-adv + 0.1 * diff)


def self_read(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = a[1, 0, 0] + a[-1, 0, 0] + a[0, 0, 1]


def read_after_write(a: Field[float], b: Field[float], c: Field[float]):
    with computation(PARALLEL), interval(...):
        b = 2.0 * a + 1.0
        c = a * 3.0
    with computation(PARALLEL), interval(...):
        c = c + a


def branches(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(1, -1):
        if a > 0.5:
            b = a[1, 0, 0] + a[0, 0, 1]
        else:
            b = a[0, 0, -1] - a


def forward_sweep(a: Field[float], b: Field[float]):
    with computation(FORWARD), interval(1, None):
        b = a[0, 0, -1] * 0.5 + a
    with computation(BACKWARD), interval(0, -1):
        b = a[0, 0, 1] * 0.25 + a


CASES = {
    "burgers_like": (burgers_like, (1, 2), {"dt": 0.3}),
    "self_read": (self_read, (0, 1), {}),
    "read_after_write": (read_after_write, (0, 1), {}),
    "branches": (branches, (0, 1), {}),
    "forward_sweep": (forward_sweep, (0, 1), {}),
}


def _fields(defn, aliased, seed=3):
    rng = np.random.default_rng(seed)
    n = sum(1 for p in defn.__code__.co_varnames[:defn.__code__.co_argcount])
    arrays = [rng.random(SHAPE) for _ in range(n)]
    arrays[aliased[0]] = arrays[aliased[1]]
    return arrays


@pytest.mark.parametrize("name", CASES)
def test_aliased_fields_as_gt4py(name, backend):
    defn, aliased, scalars = CASES[name]
    ref = _fields(defn, aliased)
    storages = [gt_storage.from_array(a, backend="numpy", aligned_index=ORIGIN) for a in ref]
    storages[aliased[0]] = storages[aliased[1]]
    gtscript.stencil(backend="numpy", definition=defn)(*storages, origin=ORIGIN,
                                                        domain=DOMAIN, **scalars)
    got = _fields(defn, aliased)
    sk.stencil(defn, backend=backend)(*got, origin=ORIGIN, domain=DOMAIN, **scalars)
    for g, s in zip(got, storages):
        np.testing.assert_array_equal(g, np.asarray(s))


def offset_read_after_write(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = 2.0 * a
        b = b + a[1, 0, 0]


def offset_read_in_sweep(a: Field[float], b: Field[float]):
    with computation(FORWARD), interval(...):
        b = a[1, 0, 0] + 1.0


@pytest.mark.parametrize("defn", [offset_read_after_write, offset_read_in_sweep])
def test_aliased_offset_read_after_the_write_is_refused(defn):
    """GT4Py would read new values inside the domain and old ones in its halo there."""
    a = np.random.default_rng(1).random(SHAPE)
    with pytest.raises(sk.ArgumentError, match=r"fields 'a' and 'b' are passed the same "
                       r"array, and 'a' is read at the offset \(1, 0, 0\)") as info:
        sk.stencil(defn)(a, a, origin=ORIGIN, domain=DOMAIN)
    assert "pass a copy of the array for 'a'" in str(info.value)
    assert "test_gtscript_aliasing.py" in str(info.value)


def test_partial_overlap_stays_an_error():
    a = np.random.default_rng(1).random((9, 9, 5))
    with pytest.raises(sk.ArgumentError, match="shares memory"):
        sk.stencil(self_read)(a[1:], a[:-1], origin=ORIGIN, domain=DOMAIN)
