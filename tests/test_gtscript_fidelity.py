"""Third-party gtscript, unchanged, gives GT4Py's numbers (issue 28): typed temporaries
(2-D ones carry their value from level to level), the default origin in K, ``Field[dtype]``
with dtype a name, compile-time conditions GT4Py resolves, GT4Py's axis-offset syntax.

Each definition runs on GT4Py's "numpy" backend and on ours (``tests/gtscript_harness``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import stencilkit as sk

from .gtscript_harness import compare, load, stencils

pytest.importorskip("gt4py.cartesian.gtscript", reason="gt4py is not installed")

HEAD = '''
import numpy as np
from __GT__ import gtscript
from __GT__.gtscript import (BACKWARD, FORWARD, IJ, PARALLEL, Field, computation, interval,
                             exp)
'''

rng = np.random.default_rng(28)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # GT4Py: "2D temporaries is an experimental feature"
        warnings.simplefilter("ignore")
        yield


# ------------------------------------------------------------------ typed 2-D temporaries

# A physics column: the water path integrated from the top down, carried level to level in
# a 2-D accumulator, then each level's share of the column total (the accumulator after the
# FORWARD sweep holds the total).
WATER_PATH = HEAD + '''
def definition(q: Field[float], dp: Field[float], path: Field[float], share: Field[float]):
    with computation(FORWARD):
        with interval(0, 1):
            acc: Field[IJ, float] = q * dp
            path = acc
        with interval(1, None):
            acc = acc + q * dp
            path = acc
    with computation(PARALLEL), interval(...):
        share = q * dp / (acc + 1e-12)
'''


def _column(nx=5, ny=4, nz=7, h=0):
    q = rng.uniform(0.0, 1e-2, (nx + 2 * h, ny + 2 * h, nz))
    dp = rng.uniform(50.0, 150.0, q.shape)
    return q, dp


def test_2d_temporary_carries_the_column_integral(backend):
    q, dp = _column()
    out = compare(WATER_PATH, backend, {"q": q, "dp": dp, "path": np.zeros_like(q),
                                        "share": np.zeros_like(q)},
                  origin=(0, 0, 0), domain=q.shape)
    np.testing.assert_allclose(out["path"], np.cumsum(q * dp, axis=2), rtol=1e-12)
    np.testing.assert_allclose(out["share"].sum(axis=2), 1.0, rtol=1e-9)


# The case: [1, 2, 3, 4] in GT4Py, [1, 1, 1, 1] when the annotation was dropped.
COUNTER = HEAD + '''
def definition(out: Field[float]):
    with computation(FORWARD), interval(...):
        n: Field[IJ, float] = 0.0
    with computation(FORWARD), interval(...):
        n = n + 1.0
        out = n
'''


def test_2d_temporary_counts_levels(backend):
    out = compare(COUNTER, backend, {"out": np.zeros((2, 3, 4))}, origin=(0, 0, 0),
                  domain=(2, 3, 4))
    np.testing.assert_array_equal(out["out"][0, 0], [1.0, 2.0, 3.0, 4.0])


# Integrated from the surface up in a BACKWARD sweep, an integer plane counting the cloudy
# levels in a branch, and the accumulator read at horizontal offsets by a later
# computation (its writer runs on the extended domain, as GT4Py's).
SURFACE_UP = HEAD + '''
def definition(q: Field[float], dp: Field[float], flux: Field[float], n_cloudy: Field[float],
               smooth: Field[float]):
    with computation(BACKWARD):
        with interval(-1, None):
            acc: Field[IJ, float] = 0.0
            count: Field[IJ, np.int32] = 0
        with interval(0, -1):
            acc = acc + q[0, 0, 1] * dp[0, 0, 1]
            flux = exp(-acc * 1e-2)
            if q > 5e-3:
                count = count + 1
            n_cloudy = count
    with computation(PARALLEL), interval(...):
        smooth = 0.25 * (acc[1, 0] + acc[-1, 0] + acc[0, 1] + acc[0, -1])
'''


def test_2d_temporaries_backward_integer_and_offsets(backend):
    q, dp = _column(h=1)
    out = compare(SURFACE_UP, backend, {"q": q, "dp": dp, "flux": np.zeros_like(q),
                                        "n_cloudy": np.zeros_like(q),
                                        "smooth": np.zeros_like(q)},
                  origin=(1, 1, 0), domain=(5, 4, 7))
    assert out["n_cloudy"][1:-1, 1:-1, 0].max() > 0


# An integer plane truncates what is assigned to it; a plainly annotated temporary keeps
# its dtype (the value is cast, as GT4Py's numpy backend does).
TRUNCATING = HEAD + '''
def definition(a: Field[float], out: Field[float], out2: Field[float]):
    with computation(FORWARD), interval(...):
        t: Field[IJ, np.int32] = a * 2.5
        u: np.float32 = a / 3.0
        out = t
        out2 = u
'''


def test_typed_temporaries_keep_their_dtype(backend):
    a = rng.uniform(-4.0, 4.0, (3, 3, 4))
    out = compare(TRUNCATING, backend, {"a": a, "out": np.zeros_like(a),
                                        "out2": np.zeros_like(a)},
                  origin=(0, 0, 0), domain=a.shape, rtol=0, atol=0)
    np.testing.assert_array_equal(out["out"], np.trunc(a * 2.5))
    np.testing.assert_array_equal(out["out2"], (a / 3.0).astype(np.float32))


def test_typed_3d_temporary(backend):
    """``Field[np.float32]`` on a temporary (GT4Py 1.1 refuses 3-D typed temporaries as
    "not yet available"; we honour the dtype): the value is rounded to float32."""
    ns = load(HEAD + '''
def definition(a: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        t: Field[np.float32] = a / 3.0
        out = t[0, 0, 0] + t[0, 0, 0]
''', "stencilkit")
    from stencilkit import gtscript

    st = gtscript.stencil(backend=backend, definition=ns["definition"])
    a = rng.uniform(-1.0, 1.0, (3, 3, 4))
    out = np.zeros_like(a)
    st(a, out)
    t = (a / 3.0).astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(out, t + t)


@pytest.mark.parametrize("text, message", [
    ('''
def definition(a: Field[float]):
    with computation(PARALLEL), interval(...):
        t: Field[IJ, float] = a
        a = t
''', "'t' .Field\\[IJ\\]. is written in a PARALLEL computation"),
    ('''
def definition(a: Field[float]):
    with computation(FORWARD), interval(...):
        t: Field[IJ, float] = a
        a = t[0, 0, -1]
''', "has no K axis"),
    ('''
from __GT__.gtscript import K
def definition(a: Field[float]):
    with computation(FORWARD), interval(...):
        t: Field[K, float] = a
        a = t
''', "annotated Field\\[K, ...\\]"),
    ('''
def definition(a: Field[float]):
    with computation(FORWARD), interval(0, 1):
        t: Field[IJ, float] = a
    with computation(FORWARD), interval(1, None):
        t: Field[IJ, np.float32] = a
        a = t
''', "annotated twice, differently"),
    ('''
def definition(a: Field[float]):
    with computation(FORWARD), interval(...):
        t: Field[IJ, "precision"] = a
        a = t
''', "'precision' is neither a NumPy dtype nor a name"),
])
def test_typed_temporary_errors(text, message):
    from stencilkit import gtscript

    ns = load(HEAD + text, "stencilkit")
    with pytest.raises(sk.StencilSyntaxError, match=message) as info:
        gtscript.stencil(backend="numpy", definition=ns["definition"])
    assert "<gtscript-case-stencilkit-" in str(info.value)


def test_2d_temporary_is_no_parameter():
    """The plane is allocated by the call: the caller neither passes nor sees it."""
    from stencilkit import gtscript

    st = gtscript.stencil(backend="numpy", definition=load(COUNTER, "stencilkit")["definition"])
    out = np.zeros((1, 1, 3))
    st(out)
    np.testing.assert_array_equal(out.ravel(), [1.0, 2.0, 3.0])
    st(out=out)  # again: a fresh plane (zero) each call
    np.testing.assert_array_equal(out.ravel(), [1.0, 2.0, 3.0])
    with pytest.raises(sk.ArgumentError, match="unexpected argument 'n'"):
        st(out, n=np.zeros((1, 1)))
    assert "2-D temporaries: n: Field[IJ, float64]" in st.ir or "n: Field[IJ" in st.ir


# ------------------------------------------------------------------ the default origin in K

RECURRENCE = HEAD + '''
def definition(a: Field[float]):
    with computation(FORWARD), interval(...):
        a = a + a[0, 0, -1]
'''


def test_k_halo_the_field_lacks_is_an_error(backend):
    """GT4Py: "Origin for field a too small". The default origin never moves K (it did by
    the vertical halo: interval(...) then skipped level 0 and gave [1, 2, 3, 4])."""
    ref, ours = stencils(RECURRENCE, backend)
    with pytest.raises(ValueError, match="Origin for field a too small"):
        ref(np.ones((1, 1, 4)), origin=(0, 0, 0), domain=(1, 1, 4))
    a = np.ones((1, 1, 4))
    with pytest.raises(sk.ArgumentError, match="field 'a' lacks the halo .* along K") as info:
        ours(a)
    assert "<gtscript-case-stencilkit-" in str(info.value)
    np.testing.assert_array_equal(a, 1.0)  # nothing ran
    with pytest.raises(sk.ArgumentError, match="field 'a' lacks the halo"):
        ours(a, origin=(0, 0, 0), domain=(1, 1, 4))


def test_k_halo_given_explicitly(backend):
    """With a K halo (origin 1 in K) both run every level of interval(...)."""
    out = compare(RECURRENCE, backend, {"a": np.ones((2, 2, 5))}, origin=(0, 0, 1),
                  domain=(2, 2, 4))
    np.testing.assert_array_equal(out["a"][0, 0], [1.0, 2.0, 3.0, 4.0, 5.0])


def test_intervals_name_levels_from_k_zero(backend):
    """interval(1, None) reads a[0, 0, -1] within the field: no K halo, the default origin
    is 0 in K, and GT4Py's numbers."""
    text = RECURRENCE.replace("interval(...)", "interval(1, None)")
    out = compare(text, backend, {"a": np.ones((1, 1, 4))}, origin=(0, 0, 0),
                  domain=(1, 1, 4))
    np.testing.assert_array_equal(out["a"].ravel(), [1.0, 2.0, 3.0, 4.0])
    _, ours = stencils(text, backend)
    a = np.ones((1, 1, 4))
    ours(a)  # default origin and domain: the same levels
    np.testing.assert_array_equal(a.ravel(), [1.0, 2.0, 3.0, 4.0])


# ------------------------------------------------------------------ Field[dtype], dtype a name

FACTORY = '''
import numpy as np
from __GT__.gtscript import FORWARD, IJ, PARALLEL, Field, computation, interval

precision = np.dtype("float32")   # a dtype object in the module's scope

def make(gt_dtype):               # a factory's parameter
    def definition(q: Field[gt_dtype], out: Field[gt_dtype], scaled: Field[precision]):
        with computation(FORWARD):
            with interval(0, 1):
                acc: Field[IJ, np.float64] = q
            with interval(1, None):
                acc = acc + q
        with computation(PARALLEL), interval(...):
            out = acc
            scaled = q * 0.5
    return definition

definition = make(np.float32)
'''


def test_field_dtype_named_in_scope_factory_and_externals(backend):
    q = rng.uniform(0.0, 1.0, (3, 4, 5)).astype(np.float32)
    out = compare(FACTORY, backend, {"q": q, "out": np.zeros_like(q),
                                     "scaled": np.zeros_like(q)},
                  origin=(0, 0, 0), domain=q.shape, rtol=1e-6)
    assert out["out"].dtype == np.float32
    np.testing.assert_allclose(out["out"][:, :, 0], q.astype(np.float64).sum(axis=2),
                               rtol=1e-6)


def test_field_dtype_named_in_externals_with_postponed_annotations(backend):
    """``from __future__ import annotations``: the annotation is the text "Field[dtype]";
    ``dtype`` given through externals= (or dtypes=) is a dtype (GT4Py evaluates the text in
    the module's globals only, and fails)."""
    from stencilkit import gtscript

    text = ('from __future__ import annotations\n' + FACTORY
            .replace("Field[gt_dtype]", "Field[dtype]").replace("Field[precision]", "Field[dtype]")
            .replace("Field[IJ, np.float64]", "Field[IJ, dtype]"))
    definition = load(text, "stencilkit")["definition"]
    q = rng.uniform(0.0, 1.0, (2, 2, 3))
    for options in ({"externals": {"dtype": np.dtype("float64")}},
                    {"dtypes": {"dtype": np.float64}}):
        st = gtscript.stencil(backend=backend, definition=definition, **options)
        out, scaled = np.zeros_like(q), np.zeros_like(q)
        st(q, out, scaled)
        np.testing.assert_allclose(out[:, :, 0], q.sum(axis=2), rtol=1e-14)
        np.testing.assert_array_equal(scaled, q * 0.5)
    with pytest.raises(sk.StencilSyntaxError, match="annotation of parameter 'q'.*'dtype'"):
        gtscript.stencil(backend=backend, definition=definition)


# ------------------------------------------------------------------ compile-time conditions

# Externals of every scalar kind, combined with not/and/or, comparisons and arithmetic,
# in __INLINED, plain `if`s, conditional expressions, interval bounds and helpers (nested
# ones importing their own externals): resolved when the stencil is defined, as GT4Py does.
STATIC = HEAD + '''
from __GT__.gtscript import __INLINED

@gtscript.function
def limited(x):
    from __externals__ import LIMIT, USE_LIMIT
    z = x
    if __INLINED(USE_LIMIT and LIMIT > 0.0):
        z = min(x, LIMIT)
    return z

@gtscript.function
def scheme(x, y):
    from __externals__ import ORDER
    z = limited(x)
    if ORDER * 2 >= 4:
        z = z + 0.5 * y
    return z

def definition(a: Field[float], b: Field[float], out: Field[float]):
    from __externals__ import FLAG, N, SCALE, NK
    with computation(PARALLEL), interval(0, NK - 1):
        if __INLINED(FLAG and not (N < 2 or N > 5)):
            out = scheme(a, b) * SCALE
        elif FLAG:
            out = -scheme(a, b)
        else:
            out = a if N % 2 == 1 else b
    with computation(PARALLEL), interval(NK - 1, None):
        out = a * SCALE + N
'''


@pytest.mark.parametrize("flag, n, scale, order, use_limit, limit", [
    (np.bool_(True), np.int8(3), np.float32(0.5), 2, True, 0.25),
    (True, 7, 2.0, np.int64(1), np.bool_(False), 0.25),
    (False, np.int32(3), 1.5, 3, True, np.float64(-1.0)),
    (np.bool_(False), 4, 1, 2, 1, 0.5),
])
def test_externals_of_every_scalar_kind(backend, flag, n, scale, order, use_limit, limit):
    a, b = rng.uniform(-1.0, 1.0, (2, 3, 3, 5))
    compare(STATIC, backend, {"a": a, "b": b, "out": np.zeros_like(a)}, origin=(0, 0, 0),
            domain=a.shape, externals={"FLAG": flag, "N": n, "SCALE": scale, "NK": 4,
                                       "ORDER": order, "USE_LIMIT": use_limit,
                                       "LIMIT": limit})


RUNTIME_CONDITIONS = HEAD + '''
@gtscript.function
def pick(x, y):
    if y:                   # a helper's argument: a run-time condition
        x = 2.0 * x
    return x

def definition(a: Field[float], out: Field[float], s: float):
    with computation(PARALLEL), interval(...):
        out = pick(a, s)
        if s:               # a scalar parameter: known only when called
            out = out + 1.0
        if a:               # a field, true where nonzero
            out = out + 10.0
'''


def test_runtime_names_as_conditions(backend):
    """``if s:`` on a scalar parameter, a field or a helper's argument raised the frontend's
    internal ``NotStatic``; they are run-time conditions (Python's truth: nonzero)."""
    from stencilkit import gtscript

    st = gtscript.stencil(backend=backend,
                          definition=load(RUNTIME_CONDITIONS, "stencilkit")["definition"])
    a = np.array([0.0, 1.0, -2.0, 0.0]).reshape(1, 1, 4)
    for s in (0.0, 3.0):
        out = np.zeros_like(a)
        st(a, out, s)
        expected = (2.0 * a if s else a) + (1.0 if s else 0.0) + np.where(a != 0, 10.0, 0.0)
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("text, externals, message", [
    ('''
def definition(a: Field[float], s: float):
    if s:
        with computation(PARALLEL), interval(...):
            a = 1.0
''', {}, "the condition `s` of this `if` around computations is not known at compile time"),
    ('''
def definition(a: Field[float]):
    from __externals__ import X
    with computation(PARALLEL), interval(...):
        if __INLINED(X):
            a = 1.0
''', {"X": np.array([1.0, 2.0])}, "the truth of `__INLINED\\(X\\)` cannot be decided"),
    ('''
def definition(a: Field[float]):
    from __externals__ import X
    with computation(PARALLEL), interval(...):
        a = a * X
''', {"X": 2**70}, "'X' = 1180591620717411303424 does not fit a 64-bit integer"),
    ('''
def definition(a: Field[float]):
    from __externals__ import X
    with computation(PARALLEL), interval(...):
        if __INLINED(X > 1):
            a = 1.0
''', {"X": None},
     "cannot evaluate `__INLINED\\(X > 1\\)` at compile time: .>. not supported"),
    ('''
def definition(a: Field[float], s: float):
    with computation(PARALLEL), interval(...):
        compile_assert(s > 0)
        a = 1.0
''', {}, "the condition of compile_assert\\(\\) is not known at compile time"),
])
def test_conditions_not_known_at_compile_time(text, externals, message):
    from stencilkit import gtscript

    ns = load(HEAD + "from __GT__.gtscript import __INLINED, compile_assert\n" + text,
              "stencilkit")
    with pytest.raises(sk.StencilSyntaxError, match=message) as info:
        gtscript.stencil(backend="numpy", definition=ns["definition"], externals=externals)
    assert "<gtscript-case-stencilkit-" in str(info.value)


# ------------------------------------------------------------------ GT4Py's axis syntax

# GT4Py's quickstart writes offsets with axes; K is also the level index as a value. A
# diffusion-like update with a level-dependent coefficient, and a FORWARD sweep that reads
# the level below with K - 1.
AXES = HEAD + '''
from __GT__.gtscript import I, J, K

def definition(a: Field[float], b: Field[float], c: Field[float], d: Field[float]):
    with computation(PARALLEL), interval(0, -1):
        b = (a[I - 1] + a[I + 1] + a[J - 1] + a[J + 1] - 4.0 * a) * (1.0 + 0.1 * K) \\
            + a[K + 1] - a[I - 1, J + 1]
    with computation(PARALLEL), interval(-1, None):
        b = a[I + 1, J - 1, K - 1]
    with computation(FORWARD):
        with interval(0, 1):
            c = a * 0.0 + K  # (GT4Py's numpy backend cannot broadcast a bare `c = K` here)
        with interval(1, None):
            c = c[K - 1] + a
            if a[K - 1] > 0.0:
                d = a[I + 2 - 1]
'''


def test_axis_offsets_and_k_as_a_value(backend):
    shape = (7, 6, 6)
    a = rng.uniform(-1.0, 1.0, shape)
    compare(AXES, backend, {"a": a, "b": np.zeros(shape), "c": np.zeros(shape),
                            "d": np.zeros(shape)}, origin=(1, 1, 0), domain=(5, 4, 6))


def test_k_in_a_sequential_sweep(backend):
    """K read in a FORWARD interval of several levels (GT4Py's numpy backend broadcasts it
    over the interval's levels and fails): c = 0 + 1 + ... + k."""
    from stencilkit import gtscript

    ns = load(HEAD + '''
from __GT__.gtscript import K

def definition(c: Field[float]):
    with computation(FORWARD):
        with interval(0, 1):
            c = 0.0
        with interval(1, None):
            c = c[K - 1] + K
            if K > 3:
                c = -c
''', "stencilkit")
    st = gtscript.stencil(backend=backend, definition=ns["definition"])
    c = np.ones((2, 2, 6))
    st(c)
    k = np.arange(6.0)
    expected = k * (k + 1) / 2
    expected[4] = -expected[4]  # level 5 reads the negated level 4
    expected[5] = -(expected[4] + 5)
    np.testing.assert_array_equal(c[1, 1], expected)


def test_k_read_shifted_through_a_helper(backend):
    """A helper reading its argument a level below, given K: the index of the level below
    (-1 under the first level: the level index covers the levels the shift reaches)."""
    from stencilkit import gtscript

    ns = load(HEAD + '''
from __GT__.gtscript import K

@gtscript.function
def below(x):
    return x[0, 0, -1]

def definition(c: Field[float]):
    with computation(PARALLEL), interval(...):
        c = below(K) * 1.0
''', "stencilkit")
    st = gtscript.stencil(backend=backend, definition=ns["definition"])
    c = np.zeros((1, 2, 4))
    st(c)
    np.testing.assert_array_equal(c[0, 1], [-1.0, 0.0, 1.0, 2.0])


def test_k_is_the_level_of_the_domain(backend):
    """K counts levels from the domain's start (its origin), as in GT4Py."""
    text = HEAD + '''
from __GT__.gtscript import K

def definition(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(1, None):
        b = a * 0.0 + K + 0.5
    with computation(FORWARD), interval(0, 1):
        b = a[K - 1] * 0.0 + K
'''
    out = compare(text, backend, {"a": np.ones((3, 3, 5)), "b": np.full((3, 3, 5), -1.0)},
                  origin=(1, 1, 1), domain=(1, 1, 3))
    np.testing.assert_array_equal(out["b"][1, 1], [-1.0, 0.0, 1.5, 2.5, -1.0])


@pytest.mark.parametrize("text, message", [
    ("b = I", "the parallel axis I cannot be read as a value"),
    ("b = a[I - 1, 0]", "mixes plain offsets with axis offsets"),
    ("b = a[I - 1, I + 1]", "axis I is offset twice"),
    ("b = a[K + s]", "an axis offset must be an integer known at compile time"),
])
def test_axis_syntax_errors(text, message):
    from stencilkit import gtscript

    ns = load(HEAD + f'''
from __GT__.gtscript import I, K

def definition(a: Field[float], b: Field[float], s: float):
    with computation(PARALLEL), interval(1, -1):
        {text}
''', "stencilkit")
    with pytest.raises(sk.StencilSyntaxError, match=message):
        gtscript.stencil(backend="numpy", definition=ns["definition"])


# ------------------------------------------------------------------ vector operations

VECTORS = HEAD + '''
V = Field[(np.float64, (3,))]

def definition(wind: V, rho: Field[float], flux: V, zero: V, shifted: V):
    with computation(PARALLEL), interval(...):
        flux = 3.0 * wind * rho
        zero = 0.0
    with computation(FORWARD), interval(1, None):
        shifted = wind[1, 0, 0] - wind[0, 0, -1]
'''


def test_vector_operations_on_data_dimensions(backend):
    wind = rng.uniform(-1.0, 1.0, (5, 4, 3, 3))
    rho = rng.uniform(0.5, 1.5, (5, 4, 3))
    out = compare(VECTORS, backend, {"wind": wind, "rho": rho,
                                     "flux": np.zeros_like(wind), "zero": np.ones_like(wind),
                                     "shifted": np.zeros_like(wind)},
                  origin=(0, 0, 0), domain=(4, 4, 3))
    np.testing.assert_allclose(out["flux"][:4], 3.0 * wind[:4] * rho[:4, :, :, None],
                               rtol=1e-15)


def test_vector_shapes_must_agree():
    from stencilkit import gtscript

    ns = load(HEAD + '''
def definition(a: Field[(np.float64, (3,))], b: Field[(np.float64, (2,))]):
    with computation(PARALLEL), interval(...):
        b = 2.0 * a
''', "stencilkit")
    with pytest.raises(sk.StencilSyntaxError, match="'b' has data dimensions \\(2,\\) but "
                                                    "'a' has \\(3,\\)"):
        gtscript.stencil(backend="numpy", definition=ns["definition"])


# ------------------------------------------------------------------ regions inside an `if`

# FV3-style edge handling under a run-time switch: the corrections at the tile's edges are
# regions nested in the branches of an `if` (GT4Py allows it).
EDGES = HEAD + '''
from __GT__.gtscript import I, J, horizontal, region

def definition(u: Field[float], flux: Field[float], limited: Field[float]):
    with computation(PARALLEL), interval(...):
        flux = 0.5 * (u[-1, 0, 0] + u)
        if u > 0.5:
            limited = 2.0 * u
            with horizontal(region[I[0], :], region[:, J[-1]]):
                flux = u + limited          # upwind at the west and north edges
            limited = limited + flux
        else:
            limited = u
            with horizontal(region[I[-1], :]):
                flux = -u[1, 0, 0]
'''


def test_horizontal_regions_inside_an_if(backend):
    u = rng.uniform(0.0, 1.0, (8, 7, 3))
    compare(EDGES, backend, {"u": u, "flux": np.zeros_like(u), "limited": np.zeros_like(u)},
            origin=(1, 1, 0), domain=(6, 5, 3))


# ------------------------------------------------------------------ temporaries GT4Py defines

# Physics code assigns temporaries in an earlier interval or computation, under a condition
# that also guards the read, or in a helper's branches: each has GT4Py's defined value, and
# no warning.
DEFINED = HEAD + '''
@gtscript.function
def saturate(q, qs):
    if q > qs:
        excess = q - qs
    else:
        excess = 0.0
    return excess

def definition(q: Field[float], qs: Field[float], rain: Field[float], cloud: Field[float],
               top: Field[float]):
    with computation(PARALLEL), interval(...):
        if q > 0.5:
            growth = 2.0 * q
        cloud = q
        if q > 0.5:
            cloud = growth + saturate(q, qs)
    with computation(BACKWARD):
        with interval(-1, None):
            acc = q
        with interval(0, -1):
            acc = acc[0, 0, 1] + q
    with computation(FORWARD):
        with interval(0, 1):
            top_q = q
        with interval(1, None):
            top_q = q * 3.0
    with computation(PARALLEL), interval(...):
        rain = acc + saturate(q, qs)
        top = top_q
'''


def test_temporaries_defined_on_their_paths(backend):
    q, qs = rng.uniform(0.0, 1.0, (2, 4, 3, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", sk.errors.UndefinedReadWarning)
        compare(DEFINED, backend, {"q": q, "qs": qs, "rain": np.zeros_like(q),
                                   "cloud": np.zeros_like(q), "top": np.zeros_like(q)},
                origin=(0, 0, 0), domain=q.shape)


MAYBE = HEAD + '''
def definition(q: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        if q > 0.5:
            growth = 2.0 * q
        out = growth
'''


def test_read_outside_the_branch_that_writes_warns(backend):
    """Where the condition fails the value read is undefined (GT4Py reads uninitialized
    memory): a warning naming the branch and the read; where it holds, GT4Py's numbers."""
    from stencilkit import gtscript

    ns = load(MAYBE, "stencilkit")
    with pytest.warns(sk.errors.UndefinedReadWarning,
                      match=r"temporary 'growth' is written only when the condition of the "
                            r"`if` at <gtscript-case-stencilkit-\d+>:9:9 holds, and read here")\
            as record:
        st = gtscript.stencil(backend=backend, definition=ns["definition"])
    assert ":11:15:" in str(record[0].message)  # the read
    q = rng.uniform(0.0, 1.0, (3, 3, 4))
    out = np.zeros_like(q)
    st(q, out)
    np.testing.assert_array_equal(out[q > 0.5], 2.0 * q[q > 0.5])


def test_jitted_calls_refuse_fields_the_call_allocates():
    """A call from numba.njit code does not allocate 2-D temporaries or the level index
    (yet): refused by name when the caller is compiled, never run without them."""
    numba = pytest.importorskip("numba")
    from stencilkit import gtscript

    st = gtscript.stencil(backend="numpy", definition=load(COUNTER, "stencilkit")["definition"])

    @numba.njit
    def call(out):
        st(out)

    with pytest.raises(sk.ArgumentError, match="a call from jitted code cannot run a "
                                               "computation with 2-D temporaries .*\\(n\\)"):
        call(np.zeros((1, 1, 3)))
