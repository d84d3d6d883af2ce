"""PARALLEL stage nests with the J and K loops collapsed into one where the fields' (J, K)
planes are contiguous (``lower/collapse_rows.py``), and the plain nest where they are not:
results equal the "numpy" backend's either way, on arrays with and without K halos, domains
smaller than the arrays in K, sliced fields, a field whose J stride alone differs, and J
offsets."""

from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval
from stencilkit_apps.definitions import hdiff

from .requires import needs_c


def shifted(a: Field[np.float64], b: Field[np.float64], out: Field[np.float64]):
    # reads rows two before and one after in J: the flat index moves by whole rows
    with computation(PARALLEL), interval(...):
        out = a[0, 2, 0] - a[0, -1, 0] + 0.5 * b[1, 0, 0] - b[0, -2, 0]  # noqa: F841


def _compare(defn, make, **geo):
    """``make()`` builds the arrays (twice: views keep their strides, copies would not)."""
    want, got = make(), make()
    sk.stencil(defn, backend="numpy")(*want, **geo)
    sk.stencil(defn, backend="c")(*got, **geo)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def _hdiff_fields(shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.random(shape), np.zeros(shape), 0.1 * rng.random(shape)]


@pytest.mark.parametrize("nj, nk", [(1, 1), (3, 7), (9, 80)])
def test_hdiff_on_contiguous_planes(nj, nk):
    """No K halo: the collapsed loop runs."""
    needs_c()
    _compare(hdiff, lambda: _hdiff_fields((7, nj + 4, nk)), origin=(2, 2, 0),
             domain=(3, nj, nk))


@pytest.mark.parametrize("case", ["k-halo", "k-domain", "sliced", "one-field-differs"])
def test_hdiff_where_planes_are_not_contiguous(case):
    """The run-time test fails: the plain nest runs."""
    needs_c()
    geo = {"origin": (2, 2, 0), "domain": (4, 5, 6)}

    def make():
        if case == "k-halo":
            return _hdiff_fields((8, 9, 8), seed=1)
        if case == "sliced":
            return [x[:, :, ::2] for x in _hdiff_fields((8, 9, 12), seed=1)]
        fields = _hdiff_fields((8, 9, 6), seed=1)
        if case == "one-field-differs":
            big = np.zeros((8, 9, 9))
            big[:, :, :6] = fields[2]
            fields[2] = big[:, :, :6]  # coeff: J stride 9, the others 6
        return fields

    if case == "k-halo":
        geo["origin"] = (2, 2, 1)
    elif case == "k-domain":
        geo["domain"] = (4, 5, 4)
    _compare(hdiff, make, **geo)


@pytest.mark.parametrize("shape, origin, domain", [
    ((5, 9, 6), (0, 2, 0), (4, 5, 6)),   # collapsed
    ((5, 9, 6), (0, 2, 0), (4, 5, 5)),   # K domain short of the arrays: not
    ((4, 6, 3), (0, 2, 0), (3, 2, 3)),   # collapsed, one row
])
def test_offsets_in_j(shape, origin, domain):
    needs_c()
    def make():
        rng = np.random.default_rng(2)
        return [rng.random(shape), rng.random(shape), np.zeros(shape)]

    _compare(shifted, make, origin=origin, domain=domain)


def test_the_generated_code_collapses_and_keeps_the_nest():
    needs_c()
    src = sk.stencil(hdiff, backend="c").generate(backend="c")
    assert "for (int64_t t = 0; t < nj * nk; ++t)" in src
    assert "in_field_stride_1_ == nk" in src and "coeff_stride_1_ == nk" in src
    assert "for (int64_t j = 0; j < nj; ++j)" in src  # the fallback
    assert "for (int64_t t = 0; t < nj * nk; ++t)" in \
        sk.stencil(shifted, backend="c").generate(backend="c")


CHILD = '''
import numpy as np
import stencilkit as sk
from tests.corpus.solvers import remap_linear

shape = (3, 4, 9)  # no K halo: the planes are contiguous
rng = np.random.default_rng(0)
pe1 = np.cumsum(rng.uniform(0.5, 1.5, shape), axis=2)
frac = np.sort(rng.uniform(0.02, 0.98, shape), axis=2)
pe2 = pe1[:, :, :1] + frac * (pe1[:, :, -1:] - pe1[:, :, :1])
args = dict(q1=rng.random(shape), pe1=pe1, pe2=pe2, q2=np.zeros(shape))
want = {k: v.copy() for k, v in args.items()}
sk.stencil(remap_linear, backend="numpy")(**want, origin=(0, 0, 0), domain=shape)
st = sk.stencil(remap_linear, backend="c")
st(**args, origin=(0, 0, 0), domain=shape)
assert "t < nj * nk" not in st.generate(backend="c")
np.testing.assert_allclose(args["q2"], want["q2"], rtol=1e-13)
print("ok")
'''


def test_a_level_computed_at_run_time_is_not_collapsed():
    """``f[0, 0, lev]`` indexes K by a run-time level, checked against the field's levels:
    with K replaced by the flat counter, the check fails or a search loop never ends (this
    hung the corpus's ``remap_linear`` once). A child process, so that a hang fails."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    needs_c()
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(root), *filter(None, [os.environ.get("PYTHONPATH")])]))
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=60, env=env, cwd=root)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
