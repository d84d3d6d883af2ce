"""Column temporaries on layouts where K is not contiguous (storages with K outermost,
Fortran order): each iteration of the parallel loop keeps the row of columns it sweeps in
per-thread buffers (levels x row, level-major) instead of writing full 3-D temporaries.

Every backend runs these (the GPU lowerings keep such temporaries in memory); results must
equal the "numpy" backend's on odd sizes, domains smaller than the arrays,
K reads below and above the level, rows wider than the domain (a stage that needs a
horizontal extent), and on C order too (where the block-of-columns scheme applies).
"""

from __future__ import annotations

import contextlib
import io
import linecache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import stencilkit as sk
from stencilkit import BACKWARD, FORWARD, PARALLEL, Field, computation, interval

# GT4Py's spelling: cp and dp temporaries, read one level below in the forward sweep and at
# the level itself in the backward one
from stencilkit_apps.definitions import tridiagonal_temporaries as tridiag

from .requires import needs_c


def reach(a: Field[np.float64], out: Field[np.float64]):
    # t is read two levels below and one above where it is computed: its buffer keeps levels
    # [-2, nk + 1); the reads below the written levels see the first sweep's values
    with computation(FORWARD), interval(...):
        t = a * 2.0 + 1.0
    with computation(BACKWARD):
        with interval(-1, None):
            out = t
        with interval(2, -1):
            out = t[0, 0, -2] + t[0, 0, 1] - out[0, 0, 1] * 0.5
        with interval(0, 2):
            out = t + 0.25 * out[0, 0, 1]  # noqa: F841


def wide(inp: Field[np.float64], out: Field[np.float64]):
    # u is read at horizontal offsets, so the forward sweep computes it (and s) on the
    # domain plus a halo of one: s, read only in its column, has a row buffer that wide,
    # starting one column before the domain
    with computation(FORWARD):
        with interval(0, 1):
            s = inp
            u = 2.0 * s
        with interval(1, None):
            s = s[0, 0, -1] * 0.5 + inp
            u = 2.0 * s - inp[0, 0, -1]
    with computation(PARALLEL), interval(...):
        out = u[1, 0, 0] - u[-1, 0, 0] + u[0, 1, 0] - 0.5 * u[0, -1, 0]  # noqa: F841


LAYOUTS = {"storage": lambda x, be: sk.as_storage(x, backend=be),
           "fortran": lambda x, be: np.asfortranarray(x),
           "c-order": lambda x, be: np.ascontiguousarray(x)}


def _run(defn, backend, layout, base, **geo):
    make = LAYOUTS[layout]
    want = [np.array(x) for x in base]
    got = [make(x.copy(), backend) for x in base]
    sk.stencil(defn, backend="numpy")(*want, **geo)
    sk.stencil(defn, backend=backend)(*got, **geo)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-12, err_msg=layout)


def _fields(shape, n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.random(shape) + (4.0 if i == 1 else 0.0) for i in range(n)]



@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 7, 5), (5, 17, 2), (2, 9, 33)])
def test_tridiagonal_temporaries_match_numpy(backend, layout, shape):
    _run(tridiag, backend, layout, _fields(shape, 4) + [np.zeros(shape)])


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_domain_inside_larger_arrays(backend, layout):
    """Origins and domains that leave columns and levels untouched on every side: the row
    buffer is as wide as the domain's row, not the array's."""
    shape = (6, 11, 9)
    _run(tridiag, backend, layout, _fields(shape, 4, seed=1) + [np.zeros(shape)],
         origin=(1, 3, 2), domain=(4, 5, 6))


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("nk", [3, 4, 10])
def test_reads_below_and_above_the_level(backend, layout, nk):
    shape = (3, 6, nk)
    _run(reach, backend, layout, _fields(shape, 1, seed=nk) + [np.zeros(shape)])


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_rows_wider_than_the_domain(backend, layout):
    shape = (7, 9, 5)
    _run(wide, backend, layout, _fields(shape, 1, seed=3) + [np.zeros(shape)],
         origin=(2, 2, 0), domain=(3, 5, 5))


def test_storages_keep_the_temporaries_in_row_buffers():
    """The code built for K-outermost storages: cp and dp are per-thread row buffers, not
    arrays handed in by the caller (whose strides would be kernel parameters)."""
    needs_c()
    shape = (4, 6, 5)
    fields = [sk.as_storage(x, backend="c") for x in _fields(shape, 4) + [np.zeros(shape)]]
    assert fields[0].strides[2] > fields[0].strides[1] == 8  # K outermost, J contiguous
    st = sk.stencil(tridiag, backend="c")
    err = io.StringIO()
    sk.configure(dump="code")
    try:
        with contextlib.redirect_stderr(err):
            st(*fields)
    finally:
        sk.configure(dump=())
    src = err.getvalue()
    assert "cp_column_[j + " in src and "dp_column_[j + " in src, src
    assert "cp_stride" not in src and "dp_stride" not in src, src


# Random vertical solvers: temporaries carried down or up the column, read back by a second
# sweep at levels around the one it computes, on random geometries and all three layouts. The
# hand-written cases above pin known shapes; these look for the ones nobody thought of.


@st.composite
def solvers(draw):
    n_temps = draw(st.integers(1, 3))
    first = draw(st.sampled_from(["FORWARD", "BACKWARD"]))
    second = draw(st.sampled_from(["FORWARD", "BACKWARD", "PARALLEL"]))
    s = draw(st.integers(1, 2))  # levels the first sweep initializes
    init, rec = ((f"0, {s}", f"{s}, None") if first == "FORWARD" else (f"-{s}, None", f"0, -{s}"))
    back = -1 if first == "FORWARD" else 1
    coef = st.sampled_from(["0.5", "0.25", "-0.75", "1.5"])
    lines = ["def solver(p: Field[np.float64], q: Field[np.float64], out: Field[np.float64]):",
             f"    with computation({first}):", f"        with interval({init}):"]
    for i in range(n_temps):
        lines.append(f"            t{i} = {draw(coef)} * p + q" + (f" * t{i - 1}" if i else ""))
    lines.append(f"        with interval({rec}):")
    for i in range(n_temps):
        term = f" + {draw(coef)} * t{i - 1}" if i and draw(st.booleans()) else ""
        lines.append(f"            t{i} = {draw(coef)} * t{i}[0, 0, {back}] + p * q{term}")
    lines += [f"    with computation({second}):", "        with interval(0, 1):",
              "            out = t0 + q", "        with interval(1, -1):"]
    terms = [f"{draw(coef)} * t{draw(st.integers(0, n_temps - 1))}[0, 0, "
             f"{draw(st.integers(-1, 1))}]" for _ in range(draw(st.integers(1, 3)))]
    lines += ["            out = " + " + ".join(terms) + " - p",
              "        with interval(-1, None):",
              f"            out = t{n_temps - 1} * p  # noqa: F841"]
    ni, nj, nk = draw(st.integers(1, 6)), draw(st.integers(1, 11)), draw(st.integers(2 * s + 2, 9))
    oi, oj, ok = draw(st.integers(0, 2)), draw(st.integers(0, 3)), draw(st.integers(0, 1))
    shape = (ni + oi + draw(st.integers(0, 2)), nj + oj + draw(st.integers(0, 2)),
             nk + ok + draw(st.integers(0, 1)))
    return "\n".join(lines) + "\n", shape, (oi, oj, ok), (ni, nj, nk)


_modules = [0]


def _solver(text: str):
    import types

    _modules[0] += 1
    mod = types.ModuleType(f"random_solver_{_modules[0]}")
    mod.__dict__.update(np=np, Field=Field, computation=computation, interval=interval,
                        FORWARD=FORWARD, BACKWARD=BACKWARD, PARALLEL=PARALLEL)
    filename = f"<random-solver-{_modules[0]}>.py"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), mod.__dict__)
    return mod.solver


@settings(max_examples=25, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(solvers())
def test_random_vertical_solvers_match_numpy(solver):
    text, shape, origin, domain = solver
    note(text)
    note(f"shape {shape}, origin {origin}, domain {domain}")
    needs_c()
    defn = _solver(text)
    for layout in LAYOUTS:
        _run(defn, "c", layout, _fields(shape, 2, seed=len(text)) + [np.zeros(shape)],
             origin=origin, domain=domain)
