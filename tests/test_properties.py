"""Property-based differential tests: random kernels on every backend against a NumPy loop."""

from __future__ import annotations

import linecache

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stencilkit as sk

_counter = [0]


@st.composite
def expressions(draw, ndim: int, depth: int = 0):
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        if draw(st.booleans()):
            off = [draw(st.integers(-2, 2)) for _ in range(ndim)]
            return f"a[{', '.join(map(str, off))}]"
        if draw(st.booleans()):
            off = [draw(st.integers(-1, 1)) for _ in range(ndim)]
            return f"b[{', '.join(map(str, off))}]"
        return repr(draw(st.sampled_from([0.5, 1.0, 2.0, -3.0, 0.25])))
    op = draw(st.sampled_from(["+", "-", "*", "max", "min", "if"]))
    left = draw(expressions(ndim, depth + 1))
    right = draw(expressions(ndim, depth + 1))
    if op in ("max", "min"):
        return f"{op}({left}, {right})"
    if op == "if":
        cond = draw(expressions(ndim, depth + 1))
        return f"({left} if {cond} > 0.5 else {right})"
    return f"({left} {op} {right})"


def _make_kernel(body: str, ndim: int):
    _counter[0] += 1
    name = f"hyp_kernel_{_counter[0]}"
    filename = f"<hypothesis-{_counter[0]}>.py"
    source = f"def {name}(a, b):\n    return {body}\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def _reference(func, a, b):
    """A plain loop over interior points, calling the kernel on relative-index views."""
    st_ = sk.stencil(func, backend="numpy")
    st_(a, b)
    nb = st_.neighborhood
    out = np.zeros(a.shape)

    class Rel:
        def __init__(self, arr, centre):
            self.arr, self.centre = arr, centre

        def __getitem__(self, idx):
            idx = idx if isinstance(idx, tuple) else (idx,)
            return float(self.arr[tuple(c + i for c, i in zip(self.centre, idx))])

    ranges = [range(-lo, n - hi) for n, (lo, hi) in zip(a.shape, nb)]
    for centre in np.ndindex(*[len(r) for r in ranges]):
        c = tuple(r[i] for r, i in zip(ranges, centre))
        out[c] = func(Rel(a, c), Rel(b, c))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), ndim=st.integers(1, 3))
def test_random_kernels_match_a_loop(data, ndim):
    body = data.draw(expressions(ndim))
    if "a[" not in body:
        body = f"a[{', '.join(['0'] * ndim)}] + {body}"
    func = _make_kernel(body, ndim)
    shape = tuple(data.draw(st.integers(3, 7)) for _ in range(ndim))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    a, b = rng.random(shape), rng.random(shape)
    ref = _reference(func, a, b)
    for backend in sk.backends.IMPLEMENTED:
        if not sk.backends.REGISTRY[backend].available:
            continue
        ours = sk.stencil(func, backend=backend)(a, b)
        np.testing.assert_allclose(ours, ref, rtol=1e-13, atol=1e-13, err_msg=f"{backend}: {body}")
