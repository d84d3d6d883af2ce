"""The same gtscript definitions on GT4Py's "numpy" backend and on ours give the same result."""

from __future__ import annotations

import inspect
import linecache
import textwrap

import numpy as np
import pytest

import stencilkit as sk

from . import computations as C

gt = pytest.importorskip("gt4py.cartesian.gtscript",
                         reason="gt4py is not installed (pip install '.[gt4py]')")

_n = [0]


def as_gt4py(func, externals=None):
    """Re-define ``func`` from its source with gtscript's names in place of ours."""
    _n[0] += 1
    filename = f"<gt4py-{func.__name__}-{_n[0]}>"
    source = textwrap.dedent(inspect.getsource(func))
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {name: getattr(gt, name) for name in ("Field", "IJ", "K", "computation", "interval",
                                                "PARALLEL", "FORWARD", "BACKWARD")}
    ns["np"] = np
    exec(compile(source, filename, "exec"), ns)
    return gt.stencil(backend="numpy", definition=ns[func.__name__], externals=externals or {})


CASES = {
    "tridiagonal": (C.tridiagonal, lambda r: [r.random((5, 4, 9)), 3 + r.random((5, 4, 9)),
                                              r.random((5, 4, 9)), r.random((5, 4, 9))],
                    (0, 0, 0), (5, 4, 9), {}),
    "hdiff": (C.hdiff, lambda r: [r.random((12, 11, 4)), np.zeros((12, 11, 4)),
                                  0.1 * r.random((12, 11, 4))], (2, 2, 0), (8, 7, 4), {}),
    "upwind": (C.upwind, lambda r: [r.random((4, 4, 8)), r.random((4, 4, 8)) - 0.5,
                                    np.zeros((4, 4, 8))], (0, 0, 0), (4, 4, 8), {"dt": 0.1}),
    "lap3d": (C.lap3d, lambda r: [r.random((7, 6, 5)), np.zeros((7, 6, 5))], (1, 1, 1),
              (5, 4, 3), {}),
    "column_sum": (C.column_sum, lambda r: [r.random((3, 3, 6)), np.zeros((3, 3, 6))],
                   (0, 0, 0), (3, 3, 6), {}),
    "branches": (C.branches, lambda r: [r.random((4, 4, 4)), np.zeros((4, 4, 4))], (0, 0, 0),
                 (4, 4, 4), {}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_result_as_gt4py(name, backend):
    func, make, origin, domain, scalars = CASES[name]
    ref_args = make(np.random.default_rng(5))
    our_args = [a.copy() for a in ref_args]
    as_gt4py(func)(*ref_args, **scalars, origin=origin, domain=domain)
    sk.stencil(func, backend=backend)(*our_args, **scalars, origin=origin, domain=domain)
    for ours, ref in zip(our_args, ref_args):
        np.testing.assert_allclose(ours, ref, rtol=1e-13, atol=1e-15)
