"""gt-ir's features (regions, offset writes, run-time K offsets, data dimensions) through
gt-front's translator: inside helpers, with GT4Py's annotations, and their error messages.
Every accepted definition runs on GT4Py's "numpy" backend and on each of ours."""

# ruff: noqa: F841
from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import gtscript

pytest.importorskip("gt4py.cartesian.gtscript", reason="gt4py is not installed")

from .gtscript_harness import compare, load  # noqa: E402

rng = np.random.default_rng(21)
SHAPE = (7, 6, 5)
ORIGIN, DOMAIN = (1, 1, 0), (5, 4, 5)

HEAD = '''
import numpy as np
from __GT__ import gtscript
from __GT__.gtscript import (Field, IJ, computation, interval, PARALLEL, FORWARD, horizontal,
    region, I, J)
'''

REGION_IN_HELPER = HEAD + '''
@gtscript.function
def edge_zero(x):
    y = x * 2.0
    with horizontal(region[I[0], :], region[:, J[-1]]):
        y = 0.0
    return y

def definition(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = edge_zero(a[1, 0, 0])
'''

REGION_EXTERNAL_IN_HELPER = HEAD + '''
@gtscript.function
def ramp(x):
    from __externals__ import i_start
    y = x
    with horizontal(region[i_start:, :]):
        y = x + 1.0
    return y

def definition(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = ramp(a)
'''

K_RUNTIME_IN_HELPER = HEAD + '''
@gtscript.function
def at_level(x, lev):
    return x[0, 0, lev]

def definition(a: Field[float], b: Field[float], lev: int):
    with computation(PARALLEL), interval(0, 2):
        b = at_level(a, lev)
'''

DATA_DIMS_IN_HELPER = HEAD + '''
@gtscript.function
def weighted(v, w):
    return v[0, 0, 0][0] * w + v[0, 0, 0][2]

def definition(v: Field[(np.float64, (3,))], b: Field[float], o: Field[(np.float64, (3,))]):
    with computation(FORWARD), interval(0, -1):
        b = weighted(v, 2.0)
        o[0, 0, 0][1] = b
        o[0, 0, 1][2] += b
'''


def test_region_inside_a_helper(backend):
    args = {n: rng.random(SHAPE) for n in "ab"}
    out = compare(REGION_IN_HELPER, backend, args, origin=ORIGIN, domain=DOMAIN)
    assert (out["b"][1, 1:5] == 0.0).all()


def test_region_position_from_an_external_imported_in_a_helper(backend):
    args = {n: rng.random(SHAPE) for n in "ab"}
    compare(REGION_EXTERNAL_IN_HELPER, backend, args, origin=ORIGIN, domain=DOMAIN,
            externals={"i_start": 2})
    ours = load(REGION_EXTERNAL_IN_HELPER, "stencilkit")
    st = gtscript.stencil(backend=backend, definition=ours["definition"],
                          externals={"i_start": gtscript.I[0] + 2})
    a, b = rng.random(SHAPE), np.zeros(SHAPE)
    st(a, b, origin=ORIGIN, domain=DOMAIN)
    np.testing.assert_allclose(b[3:6, 1:5], a[3:6, 1:5] + 1.0)
    np.testing.assert_allclose(b[1:3, 1:5], a[1:3, 1:5])


def test_run_time_vertical_offset_inside_a_helper(backend):
    args = {"a": rng.random(SHAPE), "b": rng.random(SHAPE), "lev": 2}
    compare(K_RUNTIME_IN_HELPER, backend, args, origin=ORIGIN, domain=DOMAIN)


def test_data_dimensions_through_helpers_and_element_writes(backend):
    args = {"v": rng.random((*SHAPE, 3)), "b": rng.random(SHAPE), "o": rng.random((*SHAPE, 3))}
    compare(DATA_DIMS_IN_HELPER, backend, args, origin=ORIGIN, domain=DOMAIN)


def test_helper_arguments_shifted_keep_run_time_offsets_and_elements(backend):
    # GT4Py rejects both forms (a read at a run-time K offset of an argument read at an
    # offset; an element of an argument read at an offset): checked against NumPy
    src = HEAD + '''
@gtscript.function
def at_level(x, lev):
    return x[0, 0, lev]

@gtscript.function
def second(v):
    return v[0, 0, 0][1]

def definition(a: Field[float], v: Field[(np.float64, (3,))], b: Field[float], lev: int):
    with computation(PARALLEL), interval(0, 2):
        b = at_level(a[1, 0, 1], lev) + second(v[0, -1, 0])
'''
    st = gtscript.stencil(backend=backend, definition=load(src, "stencilkit")["definition"])
    a, v, b = rng.random(SHAPE), rng.random((*SHAPE, 3)), np.zeros(SHAPE)
    st(a, v, b, lev=2, origin=ORIGIN, domain=DOMAIN)
    expected = a[2:7, 1:5, 3:5] + v[1:6, 0:4, 0:2, 1]
    np.testing.assert_allclose(b[1:6, 1:5, 0:2], expected)


def test_gt4py_field_annotation_with_data_dimensions():
    # GT4Py's own Field[(dtype, (n,))] descriptor, compiled by our gtscript.stencil
    ns = load(DATA_DIMS_IN_HELPER, "gt4py.cartesian")
    st = gtscript.stencil(backend="numpy", definition=ns["definition"])
    v, b, o = rng.random((*SHAPE, 3)), np.zeros(SHAPE), np.zeros((*SHAPE, 3))
    st(v, b, o, origin=ORIGIN, domain=DOMAIN)
    expected = v[1:6, 1:5, 0:4, 0] * 2.0 + v[1:6, 1:5, 0:4, 2]
    np.testing.assert_allclose(b[1:6, 1:5, 0:4], expected)


def test_symbolic_dtype_with_data_dimensions():
    src = HEAD + '''
def definition(v: Field[("dtype", (2,))], b: Field["dtype"]):
    with computation(PARALLEL), interval(...):
        b = v[0, 0, 0][0] - v[0, 0, 0][1]
'''
    st = gtscript.stencil(backend="numpy", definition=load(src, "stencilkit")["definition"],
                          dtypes={"dtype": np.float32})
    v, b = rng.random((*SHAPE, 2)).astype(np.float32), np.zeros(SHAPE, np.float32)
    st(v, b, origin=(0, 0, 0), domain=SHAPE)
    np.testing.assert_allclose(b, v[..., 0] - v[..., 1], rtol=1e-6)


_HELPER_REGION = '''
@gtscript.function
def edge(x):
    y = x
    with horizontal(region[I[0], :]):
        y = 0.0
    return y
'''


@pytest.mark.parametrize("text, message", [
    (_HELPER_REGION + '''
def definition(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        if a > 0.5:
            b = edge(a)
''', r"not inside an `if` \(where helper 'edge' is called\)"),
    (_HELPER_REGION + '''
def definition(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        with horizontal(region[:, J[0]]):
            b = edge(a)
''', "not inside a horizontal region"),
    ('''
@gtscript.function
def edge(x):
    with horizontal(region[I[0], :]):
        return 0.0
    return x

def definition(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = edge(a)
''', "cannot return from inside a horizontal region"),
    ('''
@gtscript.function
def at_level(x, lev):
    return x[0, 0, lev]

def definition(a: Field[float], b: Field[float], lev: int):
    with computation(PARALLEL), interval(...):
        b = at_level(a + 1.0, lev)
''', "bound to an expression.*run-time vertical offset"),
    ('''
@gtscript.function
def first(x):
    return x[0, 0, 0][0]

def definition(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = first(a + 1.0)
''', "cannot be indexed by element"),
    ('''
def definition(a: Field[float], b: Field[float], lev: int):
    with computation(FORWARD), interval(...):
        b[0, 0, lev] = a
''', "written at a run-time offset"),
    ('''
@gtscript.function
def bad(x):
    x[0, 0, 1] = 1.0
    return x

def definition(a: Field[float], b: Field[float]):
    with computation(FORWARD), interval(0, -1):
        b = bad(a)
''', "cannot write its parameter 'x'"),
    ('''
def definition(a: Field[IJ, float], b: Field[float], lev: int):
    with computation(FORWARD), interval(...):
        b = a[0, 0, lev]
''', "'a' has no K axis"),
])
def test_errors_of_the_merged_features(text, message):
    ns = load(HEAD + text, "stencilkit")
    with pytest.raises(sk.StencilSyntaxError, match=message) as info:
        gtscript.stencil(backend="numpy", definition=ns["definition"])
    assert "<gtscript-case-stencilkit-" in str(info.value)
