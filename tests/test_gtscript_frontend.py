"""gtscript as GT4Py users write it: the same source runs on GT4Py's "numpy" backend and on
each of ours with the same results (contract.md section 2), and what is not supported says so."""

# ruff: noqa: F841  (gtscript definitions assign to fields: the assignments look unused)
from __future__ import annotations

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import gtscript

pytest.importorskip("gt4py.cartesian.gtscript", reason="gt4py is not installed")

from gt4py.cartesian import gtscript as gt  # noqa: E402

from .gtscript_harness import compare, load  # noqa: E402

rng = np.random.default_rng(8)
SHAPE = (7, 6, 5)
ORIGIN, DOMAIN = (1, 1, 0), (5, 4, 5)


def fields(*names: str, shape=SHAPE, low=0.1, high=0.9) -> dict[str, np.ndarray]:
    return {n: rng.uniform(low, high, shape) for n in names}


# ------------------------------------------------------------------ 1. the gtscript module

MATH = '''
from __GT__ import gtscript
from __GT__.gtscript import (Field, computation, interval, PARALLEL, sqrt, exp, log, log10,
    sin, cos, tan, asin, acos, atan, sinh, cosh, tanh, asinh, acosh, atanh, abs, min, max,
    mod, floor, ceil, trunc, round, round_away_from_zero, cbrt, erf, erfc, gamma, isnan,
    isinf, isfinite)

def definition(a: Field[float], h: Field[float], o1: Field[float], o2: Field[float],
               o3: Field[float], o4: Field[float], o5: Field[float], o6: Field[float]):
    with computation(PARALLEL), interval(...):
        o1 = sqrt(a) + exp(a) + log(a) + log10(a) + sin(a) + cos(a) + tan(a)
        o2 = asin(a) + acos(a) + atan(a) + sinh(a) + cosh(a) + tanh(a) + asinh(a)
        o3 = acosh(1.0 + a) + atanh(a) + abs(-a) + min(a, h) + max(a, h) + mod(h, 0.3)
        o4 = floor(h) + 10.0 * ceil(h) + 100.0 * trunc(-h) + 1000.0 * cbrt(a)
        o5 = round(h) + 10.0 * round_away_from_zero(h) + erf(a) + erfc(a) + gamma(a + 0.5)
        o6 = (1.0 if isnan(a) else 0.0) + (2.0 if isinf(a) else 0.0) + (
            4.0 if isfinite(a) else 0.0) + a ** 1.7
'''


def test_every_math_function_gives_gt4pys_values(backend):
    args = fields("a", "o1", "o2", "o3", "o4", "o5", "o6")
    # halfway cases, both signs, for the two roundings and the floor/ceil/trunc family
    args["h"] = rng.integers(-8, 8, SHAPE) / 2.0 + rng.choice([0.0, 0.25], SHAPE)
    compare(MATH, backend, args, origin=ORIGIN, domain=DOMAIN)


def test_float32_math_through_symbolic_dtypes(backend):
    src = MATH.replace("Field[float]", 'Field["dtype"]')
    args = {k: v.astype(np.float32) for k, v in fields("a", "o1", "o2", "o3", "o4", "o5",
                                                        "o6").items()}
    args["h"] = (rng.integers(-8, 8, SHAPE) / 2.0).astype(np.float32)
    out = compare(src, backend, args, origin=ORIGIN, domain=DOMAIN, rtol=2e-6, atol=1e-6,
                  dtypes={"dtype": np.float32})
    assert out["o1"].dtype == np.float32
    if backend == "c":
        code = gtscript.stencil(backend="c", definition=load(src, "stencilkit")["definition"],
                                dtypes={"dtype": np.float32}).generate()
        for f in ("sqrtf(", "expf(", "asinhf(", "tgammaf(", "cbrtf(", "rintf(", "erfcf("):
            assert f in code


def test_numpy_spelled_aliases(backend):
    @gtscript.stencil(backend=backend)
    def aliases(a: sk.Field[float], out: sk.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821 (resolved by the DSL)
            out = (gtscript.arcsin(a) + gtscript.arccos(a) + gtscript.arctan(a)
                   + gtscript.arcsinh(a) + gtscript.arctanh(a) + gtscript.arccosh(1.0 + a)
                   + gtscript.pow(a, 2.5))

    a = rng.uniform(0.1, 0.9, SHAPE)
    out = np.zeros_like(a)
    aliases(a, out)
    expected = (np.arcsin(a) + np.arccos(a) + np.arctan(a) + np.arcsinh(a) + np.arctanh(a)
                + np.arccosh(1.0 + a) + a ** 2.5)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_exports_of_stencilkit_and_gtscript():
    for name in ("Field", "IJ", "IK", "JK", "IJK", "I", "J", "K", "PARALLEL", "FORWARD",
                 "BACKWARD", "computation", "interval", "horizontal", "region", "__INLINED",
                 "compile_assert", "function", "sqrt", "round_away_from_zero", "gamma", "pow",
                 "asin", "arcsin"):
        assert getattr(sk, name) is getattr(gtscript, name)
    assert callable(gtscript.stencil)
    # axis positions, as horizontal regions write them
    assert gtscript.I[0] == gtscript.AxisIndex("I", 0)
    assert gtscript.I[-1] + 1 == gtscript.AxisIndex("I", -1, 1)
    assert gtscript.J[0] - 2 == gtscript.AxisIndex("J", 0, -2)
    assert gtscript.region[gtscript.I[0], :] == (gtscript.I[0], slice(None))


@pytest.mark.parametrize("name, ours", [
    ("gt:cpu_ifirst", "c"), ("gt:cpu_kfirst", "c"), ("dace:cpu", "c"), ("gt:cpu", "c"),
    ("gt:gpu", "cuda"), ("dace:gpu", "cuda"), ("cuda", "cuda"), ("debug", "numpy"),
    ("numpy", "numpy")])
def test_gt4py_backend_names_are_mapped(name, ours):
    assert gtscript.map_backend(name) == ours

    @gtscript.stencil(backend=name)
    def copy(a: gtscript.Field[float], b: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            b = a

    assert copy.backend == ours


def test_unknown_backend_name():
    with pytest.raises(sk.BackendError, match="unknown backend 'gt:fpga'"):
        gtscript.map_backend("gt:fpga")


# ------------------------------------------------------------------ 2. DSL names unimported

UNIMPORTED = '''
from __GT__ import gtscript

@gtscript.function
def limited(x):
    return min(max(x, 0.2), 0.8)

def definition(a: gtscript.Field[float], b: gtscript.Field[float]):
    with computation(FORWARD):
        with interval(0, 1):
            b = sqrt(a)
        with interval(1, None):
            b = limited(b[0, 0, -1] + a) + abs(a - 0.5)
    with computation(BACKWARD), interval(0, -1):
        b = b + exp(-b[0, 0, 1])
'''


def test_dsl_names_resolve_without_imports(backend):
    compare(UNIMPORTED, backend, fields("a", "b"), origin=ORIGIN, domain=DOMAIN)


MIXED = '''
from gt4py.cartesian.gtscript import Field, PARALLEL
from stencilkit import gtscript

def definition(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = 2.0 * a
'''


def test_definition_written_with_gt4py_imports_runs_on_ours(backend):
    st = gtscript.stencil(backend=backend, definition=load(MATH, "gt4py.cartesian")["definition"])
    args = fields("a", "o1", "o2", "o3", "o4", "o5", "o6")
    args["h"] = rng.integers(-8, 8, SHAPE) / 2.0
    ref = {k: v.copy() for k, v in args.items()}
    gtscript.stencil(backend=backend, definition=load(MATH, "stencilkit")["definition"])(**ref)
    st(**args)
    for k in args:
        np.testing.assert_array_equal(args[k], ref[k])


def test_gt4py_field_and_policy_objects_are_accepted(backend):
    st = gtscript.stencil(backend=backend, definition=load(MIXED, "x")["definition"])
    a = rng.random(SHAPE)
    b = np.zeros_like(a)
    st(a, b)
    np.testing.assert_array_equal(b, 2.0 * a)


# ------------------------------------------------------------------ 3. parameters

PARAMS = '''
from __GT__ import gtscript
from __GT__.gtscript import Field, IJ, K, computation, interval, PARALLEL

def definition(a: Field["dtype"], s: Field[IJ, "dtype"], z: Field[K, "dtype"],
               out: Field["dtype"], unused: Field[float] = None, *, dt: "float",
               weight: float = 2.0, nothing: float = None):
    with computation(PARALLEL), interval(...):
        out = weight * a + dt * s + z
'''


def test_keyword_only_default_and_none_parameters(backend):
    args = fields("a", "out")
    args.update(s=rng.random(SHAPE[:2]), z=rng.random(SHAPE[2]), dt=0.25)
    out = compare(PARAMS, backend, args, origin=ORIGIN, domain=DOMAIN,
                  dtypes={"dtype": np.float64})
    o, d = ORIGIN, DOMAIN
    sl = (slice(o[0], o[0] + d[0]), slice(o[1], o[1] + d[1]))
    np.testing.assert_allclose(out["out"][sl], 2.0 * args["a"][sl] + 0.25 * args["s"][sl][
        :, :, None] + args["z"][None, None, :], rtol=1e-14)


def test_keyword_only_parameter_cannot_be_positional(backend):
    st = gtscript.stencil(backend=backend, definition=load(PARAMS, "stencilkit")["definition"],
                          dtypes={"dtype": np.float64})
    a = rng.random(SHAPE)
    with pytest.raises(sk.ArgumentError, match="(?s)positional.*pass dt, weight, nothing by name"):
        st(a, a[:, :, 0].copy(), a[0, 0].copy(), np.zeros_like(a), None, 0.5)
    with pytest.raises(sk.ArgumentError, match=r"missing argument\(s\) \['dt'\]"):
        st(a, a[:, :, 0].copy(), a[0, 0].copy(), np.zeros_like(a))


def test_symbolic_dtype_missing_from_dtypes():
    with pytest.raises(sk.StencilSyntaxError, match="(?s)parameter .a.*dtypes="):
        gtscript.stencil(backend="numpy", definition=load(PARAMS, "stencilkit")["definition"])


def test_none_default_field_that_is_used_needs_an_array(backend):
    @gtscript.stencil(backend=backend)
    def uses(a: gtscript.Field[float], b: gtscript.Field[float] = None):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = b

    with pytest.raises(sk.ArgumentError, match="field 'b' is None but the stencil uses it"):
        uses(np.zeros(SHAPE))


# ------------------------------------------------------------------ 4. explicit and augmented writes

WRITES = '''
from __GT__ import gtscript
from __GT__.gtscript import Field, computation, interval, PARALLEL, FORWARD

def definition(a: Field[float], b: Field[float], c: Field[float]):
    with computation(PARALLEL), interval(...):
        b[0, 0, 0] = a[1, 0, 0] - a[-1, 0, 0]
        b += a
        b -= 0.5 * a
        b *= 3.0
        b /= 2.0
        t = a * a
        t += 1.0
        t[0, 0, 0] *= a
        c[0, 0, 0] += t
    with computation(FORWARD), interval(1, None):
        c[0, 0, 0] -= c[0, 0, -1] * 0.5
'''


def test_zero_offset_targets_and_augmented_assignment(backend):
    compare(WRITES, backend, fields("a", "b", "c"), origin=ORIGIN, domain=DOMAIN)


SHIFTED_WRITE = '''
from __GT__.gtscript import Field, computation, interval, FORWARD

def definition(a: Field[float]):
    with computation(FORWARD), interval(0, -1):
        a[0, 0, 1] = a + 1.0
'''


def test_write_at_vertical_offset_in_forward(backend):
    args = fields("a")
    out = compare(SHIFTED_WRITE, backend, args, origin=ORIGIN, domain=DOMAIN)
    # level k + 1 holds the value level k had after its own update: a[k] + (k + 1)
    np.testing.assert_allclose(out["a"][1:6, 1:5, 4], args["a"][1:6, 1:5, 0] + 4.0)


def test_write_at_vertical_offset_in_parallel_is_an_error():
    def shifted(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(0, -1):  # noqa: F821
            a[0, 0, 1] = a + 1.0

    with pytest.raises(sk.StencilSyntaxError, match="vertical offset 1 in a PARALLEL"):
        gtscript.stencil(backend="numpy", definition=shifted)


def test_write_at_horizontal_offset_is_an_error():
    def shifted(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a[1, 0, 0] += 1.0

    with pytest.raises(sk.StencilSyntaxError, match="horizontal offset"):
        gtscript.stencil(backend="numpy", definition=shifted)


# ------------------------------------------------------------------ 5. compile-time conditions

COMPILE_TIME = '''
from __GT__ import gtscript
from __GT__.gtscript import Field, computation, interval, PARALLEL, __INLINED, compile_assert

@gtscript.function
def scaled(x):
    from __externals__ import FACTOR, USE_SQUARE
    if __INLINED(USE_SQUARE):
        y = x * x
    else:
        y = x
    return FACTOR * y

def definition(a: Field[float], b: Field[float]):
    from __externals__ import MODE, FACTOR
    compile_assert(FACTOR > 0)
    with computation(PARALLEL), interval(...):
        from __externals__ import OFFSET
        if __INLINED(MODE == 1):
            b = scaled(a) + OFFSET
        elif __INLINED(MODE == 2):
            b = a - OFFSET
        else:
            b = a
        if MODE > 1 and OFFSET < 1.0:
            b = b * 2.0
'''


@pytest.mark.parametrize("mode, square", [(1, True), (1, False), (2, False), (3, True)])
def test_inlined_conditions_and_externals_anywhere(backend, mode, square):
    externals = {"MODE": mode, "FACTOR": 1.5, "USE_SQUARE": square, "OFFSET": 0.25}
    compare(COMPILE_TIME, backend, fields("a", "b"), origin=ORIGIN, domain=DOMAIN,
            externals=externals)


def test_compile_assert_false_names_the_line():
    ns = load(COMPILE_TIME, "stencilkit")
    with pytest.raises(sk.StencilSyntaxError) as err:
        gtscript.stencil(backend="numpy", definition=ns["definition"],
                         externals={"MODE": 1, "FACTOR": -1.0, "USE_SQUARE": True,
                                    "OFFSET": 0.0})
    line = COMPILE_TIME.splitlines().index("    compile_assert(FACTOR > 0)") + 1
    assert f":{line}" in str(err.value)
    assert "compile_assert(FACTOR > 0) failed" in str(err.value)


def test_inlined_condition_on_a_field_is_an_error():
    def bad(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            if __INLINED(a > 0):  # noqa: F821
                a = 1.0

    with pytest.raises(sk.StencilSyntaxError, match="not known at compile time"):
        gtscript.stencil(backend="numpy", definition=bad)


def test_missing_external_is_named():
    ns = load(COMPILE_TIME, "stencilkit")
    with pytest.raises(sk.StencilSyntaxError, match="external 'MODE' is not defined"):
        gtscript.stencil(backend="numpy", definition=ns["definition"], externals={})


# ------------------------------------------------------------------ 6. helpers

HELPERS = '''
import typing

from __GT__ import gtscript
from __GT__.gtscript import Field, IJ, K, computation, interval, PARALLEL, FORWARD

@gtscript.function
def sign_branch(x, y):
    if x > 0.5:
        r = y
    elif x > 0.3:
        r = 2.0 * y
    else:
        r = -y
    return r

@gtscript.function
def smooth(a):
    t = a[1, 0, 0] - a
    return t[-1, 0, 0] + t

@gtscript.function
def inner(b, scale=1.0):
    return scale * (b[0, 1, 0] - b[0, -1, 0])

@gtscript.function
def outer(c, b):
    local = 2.0 * b
    return inner(c) + inner(scale=0.5, b=local)

@typing.no_type_check
@gtscript.function
def stacked_above(x):
    return x + 1.0

@gtscript.function
@typing.no_type_check
def stacked_below(x):
    return x - 1.0

@gtscript.function
def pair(x, y):
    return x + y, x * y

@gtscript.function
def surface(s, z, a):
    return s[1, 0] - s[-1, 0] + z[1] - z[-1] + a[0, 0, 1]

@gtscript.function
def calls_global(x):
    return stacked_above(x) * 2.0

@gtscript.function
def shifted(e):
    return e[1, 0, 0] - e[-1, 0, 0]

def definition(a: Field[float], b: Field[float], c: Field[float], s: Field[IJ, float],
               z: Field[K, float], o1: Field[float], o2: Field[float], o3: Field[float],
               o4: Field[float], o5: Field[float], o6: Field[float]):
    from __externals__ import limiter
    with computation(PARALLEL), interval(1, -1):
        o1 = sign_branch(a, b) + smooth(a)
        # `b` is a parameter of `outer` AND a field of this stencil: outer's `b` is `c` here
        o2 = outer(b, c)
        o3 = stacked_above(a) + stacked_below(b) + calls_global(c)
        p, q = pair(a, b)
        o4 = p - q
        o5 = surface(s, z, a) + limiter(a, b)
        o6 = smooth(a + b) + shifted(a * b) + sign_branch(x=a, y=b + c)
'''

LIMITER = '''
from __GT__ import gtscript

@gtscript.function
def product(x, y):
    return x * y

@gtscript.function
def limiter(x, y):
    from __externals__ import CAP
    m = product(x, y)  # a helper of this module, unknown to the stencil's module
    if m > CAP:
        m = CAP
    return m
'''


def test_helpers_as_physics_code_writes_them(backend):
    from .gtscript_harness import stencils

    args = fields("a", "b", "c", "o1", "o2", "o3", "o4", "o5", "o6")
    args.update(s=rng.random(SHAPE[:2]), z=rng.random(SHAPE[2]))
    lim_gt = load(LIMITER, "gt4py.cartesian")["limiter"]
    lim_sk = load(LIMITER, "stencilkit")["limiter"]
    ref, _ = stencils(HELPERS, "numpy", externals={"limiter": lim_gt, "CAP": 0.3})
    ours = gtscript.stencil(backend=backend, definition=load(HELPERS, "stencilkit")[
        "definition"], externals={"limiter": lim_sk, "CAP": 0.3})
    ref_args = {k: v.copy() for k, v in args.items()}
    ref(**ref_args, origin=(1, 1, 0), domain=(5, 4, 5))
    ours(**args, origin=(1, 1, 0), domain=(5, 4, 5))
    for k in args:
        np.testing.assert_allclose(args[k], ref_args[k], rtol=1e-12, atol=1e-14, err_msg=k)


def test_nested_helper_argument_resolves_in_the_helpers_scope(backend):
    """Regression: the arguments of a call made inside a helper were resolved in the stencil's
    scope, so `outer`'s parameter `b` silently bound the stencil's field `b`."""

    @gtscript.function
    def inner(b):
        return b

    @gtscript.function
    def outer(b):
        return inner(b)

    @gtscript.stencil(backend=backend)
    def st(a: gtscript.Field[float], b: gtscript.Field[float], out: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            out = outer(a)

    a, b = rng.random(SHAPE), rng.random(SHAPE)
    out = np.zeros_like(a)
    st(a, b, out)
    np.testing.assert_array_equal(out, a)


def test_nested_helper_call_with_a_helper_local_argument(backend):
    """Regression: a helper-local variable passed on to another helper failed as 'not
    defined' (at the wrong line)."""

    @gtscript.function
    def twice(x):
        return 2.0 * x

    @gtscript.function
    def outer(x):
        y = x + 1.0
        return twice(y)

    @gtscript.stencil(backend=backend)
    def st(a: gtscript.Field[float], out: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            out = outer(a)

    a = rng.random(SHAPE)
    out = np.zeros_like(a)
    st(a, out)
    np.testing.assert_allclose(out, 2.0 * (a + 1.0), rtol=1e-15)


def test_helper_reading_an_expression_at_an_offset_shifts_it(backend):
    @gtscript.function
    def east(x):
        return x[1, 0, 0]

    @gtscript.stencil(backend=backend)
    def st(a: gtscript.Field[float], b: gtscript.Field[float], out: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            out = east(a * b + 1.0)

    a, b = rng.random(SHAPE), rng.random(SHAPE)
    out = np.zeros_like(a)
    st(a, b, out, origin=(0, 0, 0), domain=(6, 6, 5))
    np.testing.assert_allclose(out[:6], a[1:] * b[1:] + 1.0, rtol=1e-15)


def test_helper_with_keyword_only_parameter_and_defaults(backend):
    @gtscript.function
    def blend(x, y, *, w=0.25):
        return w * x + (1.0 - w) * y

    @gtscript.stencil(backend=backend)
    def st(a: gtscript.Field[float], b: gtscript.Field[float], out: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            out = blend(a, b) + blend(y=a, x=b, w=0.5)

    a, b = rng.random(SHAPE), rng.random(SHAPE)
    out = np.zeros_like(a)
    st(a, b, out)
    np.testing.assert_allclose(out, 0.25 * a + 0.75 * b + 0.5 * (a + b), rtol=1e-14)


def test_helper_returning_in_branches(backend):
    # GT4Py wants a single return; physics code often has several
    @gtscript.function
    def branchy(x, y):
        if x > 0.5:
            return y
        elif x > 0.3:
            r = 2.0 * y
            if r > 1.0:
                return r - 1.0
        else:
            return -y
        return r + 10.0

    @gtscript.stencil(backend=backend)
    def st(a: gtscript.Field[float], b: gtscript.Field[float], out: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            out = branchy(a, b)

    a, b = rng.random(SHAPE), rng.random(SHAPE)
    out = np.zeros_like(a)
    st(a, b, out)
    r = 2.0 * b
    expected = np.where(a > 0.5, b, np.where(a > 0.3, np.where(r > 1.0, r - 1.0, r + 10.0), -b))
    np.testing.assert_allclose(out, expected, rtol=1e-15)


# ------------------------------------------------------------------ 7. messages


def _error(definition, cls=sk.StencilSyntaxError, **options) -> str:
    with pytest.raises(cls) as err:
        gtscript.stencil(backend="numpy", definition=definition, **options)
    text = str(err.value)
    assert __file__.rsplit("/", 1)[-1] in text  # names the source file (and line)
    assert len(text) < 600  # never a list of every supported name
    return text


def test_stencil_parameter_used_inside_a_helper_is_named_as_such():
    @gtscript.function
    def tendency(x):
        return x * dt  # noqa: F821

    def st(a: gtscript.Field[float], *, dt: float):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = tendency(a)

    text = _error(st)
    assert "'dt' is a parameter of stencil 'st', which helper 'tendency' cannot see" in text
    assert "tendency(..., dt)" in text


UNIMPORTED_REGION = '''
from __GT__.gtscript import Field, computation, interval, PARALLEL

def definition(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = a
        with horizontal(region[I[0], :], region[:, J[-1]]):
            b = 0.0
'''


def test_horizontal_regions_resolve_without_import(backend):
    out = compare(UNIMPORTED_REGION, backend, fields("a", "b"), origin=ORIGIN, domain=DOMAIN)
    assert (out["b"][1, 1:5] == 0.0).all() and (out["b"][1:6, 4] == 0.0).all()


def test_helper_that_does_not_always_return():
    @gtscript.function
    def partial(x):
        if x > 0.0:
            return x

    def st(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = partial(a)

    assert "does not return a value on every path" in _error(st)


def test_plain_function_call_says_to_mark_it():
    def plain(x):
        return x

    def st(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = plain(a)

    assert "mark it with @gtscript.function" in _error(st)


def test_unsupported_call_and_expression_hints_are_short():
    def st(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = np.linalg.norm(a)

    assert "np.linalg.norm" in _error(st)

    def st2(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = [a, a]

    assert "list literals are not supported" in _error(st2)


def test_recursive_helper_is_an_error_not_a_hang():
    @gtscript.function
    def forever(x):
        return forever(x) + 1.0

    def st(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = forever(a)

    assert "recursive" in _error(st)


def test_helper_argument_errors():
    @gtscript.function
    def two(x, y):
        return x + y

    def missing(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = two(a)

    def unknown(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = two(a, z=a)

    def not_unpacked(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = pair(a)

    @gtscript.function
    def pair(x):
        return x, x

    assert "missing argument 'y'" in _error(missing)
    assert "has no parameter 'z'" in _error(unknown)
    assert "must be unpacked" in _error(not_unpacked)


def test_undefined_name_in_a_definition():
    def st(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = a + undefined_thing  # noqa: F821

    assert "name 'undefined_thing' is not defined" in _error(st)


def test_data_dimensions_of_gt4py_fields_are_read():
    def st(a: gt.Field[(np.float64, (3,))]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = 1.0  # every element, as in GT4Py

    a = np.zeros((2, 2, 2, 3))
    gtscript.stencil(backend="numpy", definition=st)(a)
    np.testing.assert_array_equal(a, 1.0)
    with pytest.raises(sk.ArgumentError, match="data dimensions"):
        gtscript.stencil(backend="numpy", definition=st)(np.zeros((2, 2, 2)))


def test_temporary_written_then_read_inside_one_if(backend):
    """Regression: the undefined-read rule rejected `if c: t = ...; b = t` (the read of `t`
    was checked before the writes of the same `if` statement)."""

    def st(a: gtscript.Field[float], b: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            if a > 0.5:
                t = 2.0 * a
                b = t + 1.0
            else:
                b = a

    compare_direct = gtscript.stencil(backend=backend, definition=st)
    a = rng.random(SHAPE)
    b = np.zeros_like(a)
    compare_direct(a, b)
    np.testing.assert_allclose(b, np.where(a > 0.5, 2.0 * a + 1.0, a), rtol=1e-15)


def test_read_before_write_inside_an_if_is_still_rejected():
    def st(a: gtscript.Field[float], b: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            if a > 0.5:
                b = t  # noqa: F821
                t = 2.0 * a

    with pytest.raises(sk.AccessRuleError, match="temporary 't' is read before"):
        gtscript.stencil(backend="numpy", definition=st)


TOP_LEVEL_IF = '''
from __GT__ import gtscript
from __GT__.gtscript import Field, computation, interval, PARALLEL, __INLINED

def definition(a: Field[float], b: Field["dtype"], *, alpha: "dtype" = 0.5):
    from __externals__ import FLAG
    if __INLINED(FLAG):
        with computation(PARALLEL), interval(...):
            b = alpha * a
    else:
        with computation(PARALLEL), interval(...):
            b = a - alpha
'''


@pytest.mark.parametrize("flag", [True, False])
def test_compile_time_choice_between_computations_and_symbolic_scalar(backend, flag):
    compare(TOP_LEVEL_IF, backend, fields("a", "b"), origin=ORIGIN, domain=DOMAIN,
            externals={"FLAG": flag}, dtypes={"dtype": np.float64})


def test_helper_call_in_a_while_condition_is_named():
    @gtscript.function
    def big(x):
        y = x * x
        return y > 1.0

    def st(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            while big(a):
                a = a / 2.0

    assert "helper call in a `while` condition" in _error(st)


def test_min_and_max_of_more_than_two_values(backend):
    def st(a: gtscript.Field[float], b: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            b = min(a, 0.5, 2.0 * a) + max(a, 0.2, 0.3)

    a = rng.random(SHAPE)
    b = np.zeros_like(a)
    gtscript.stencil(backend=backend, definition=st)(a, b)
    expected = np.minimum(np.minimum(a, 0.5), 2.0 * a) + np.maximum(np.maximum(a, 0.2), 0.3)
    np.testing.assert_allclose(b, expected, rtol=1e-15)


@gtscript.function
def _east_minus_centre(x):
    t = x[1, 0, 0] - x
    return t


def test_generated_code_names_the_helpers_own_lines():
    def st(a: gtscript.Field[float], b: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            b = _east_minus_centre(a)

    code = gtscript.stencil(backend="c", definition=st).generate()
    line = _east_minus_centre.func.__code__.co_firstlineno + 2
    assert f"test_gtscript_frontend.py:{line}  t = x[1, 0, 0] - x" in code


def test_helper_return_shape_errors():
    @gtscript.function
    def uneven(x):
        if x > 0.0:
            return x, x
        return x

    @gtscript.function
    def in_loop(x):
        while x > 1.0:
            return x
        return x

    def st(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = uneven(a)

    def st2(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = in_loop(a)

    assert "returns different numbers of values" in _error(st)
    assert "cannot return from inside a loop" in _error(st2)


def test_helper_defaults_are_compile_time_values(backend):
    @gtscript.function
    def maybe(x, y=None, scale=2.0):
        if __INLINED(y is None):  # noqa: F821
            r = scale * x
        else:
            r = x + y
        return r

    def st(a: gtscript.Field[float], b: gtscript.Field[float], c: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            b = maybe(a)
            c = maybe(a, y=b, scale=0.0)

    a, b, c = rng.random(SHAPE), np.zeros(SHAPE), np.zeros(SHAPE)
    gtscript.stencil(backend=backend, definition=st)(a, b, c)
    np.testing.assert_allclose(b, 2.0 * a, rtol=1e-15)
    np.testing.assert_allclose(c, 3.0 * a, rtol=1e-15)


def test_helper_default_none_that_is_used():
    @gtscript.function
    def maybe(x, y=None):
        return x + y

    def st(a: gtscript.Field[float]):
        with computation(PARALLEL), interval(...):  # noqa: F821
            a = maybe(a)

    assert "'y' is None and has no value" in _error(st)
