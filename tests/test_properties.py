"""Property-based differential tests: random point kernels on every backend against
``numba.stencil`` (values and dtypes).

The kernels mix what Numba users write: several arrays of several dtypes, scalar arguments,
locals bound to integer constants used as relative indices, ``for`` loops over ``range``,
``if``/``else`` with returns in branches, conditional expressions, ``min``/``max``/``abs``,
and lambdas. ``STENCILKIT_HYPOTHESIS_EXAMPLES`` raises the number of examples (default 100).
"""

from __future__ import annotations

import linecache
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stencilkit as sk

numba = pytest.importorskip("numba", reason="numba is the reference")

EXAMPLES = int(os.environ.get("STENCILKIT_HYPOTHESIS_EXAMPLES", "100"))
DTYPES = [np.float64, np.float32, np.int64, np.int32]
_counter = [0]
_numba_results: dict[tuple, object] = {}  # (source, data) -> numba's result or error


class Scope:
    """What an expression may use at the point where it is drawn."""

    def __init__(self, arrays: list[str], ndim: int, scalar: str | None) -> None:
        self.arrays = arrays
        self.ndim = ndim
        self.scalar = scalar
        self.consts: list[str] = []     # locals bound to integer constants
        self.values: list[str] = []     # locals holding values
        self.loop_var: str | None = None


@st.composite
def expressions(draw, scope: Scope, depth: int = 0) -> str:
    if depth >= 3 or draw(st.integers(0, 3)) == 0:
        kind = draw(st.sampled_from(["access", "access", "access", "const", "scalar", "local",
                                     "loop"]))
        if kind == "scalar" and scope.scalar:
            return scope.scalar
        if kind == "local" and scope.values:
            return draw(st.sampled_from(scope.values))
        if kind == "loop" and scope.loop_var:
            return scope.loop_var
        if kind == "const":
            return repr(draw(st.sampled_from([0.5, 1.0, 2.0, -3.0, 0.25, 1, 2, -1, 3])))
        array = draw(st.sampled_from(scope.arrays))
        parts = []
        for _ in range(scope.ndim):
            if scope.consts and draw(st.booleans()):
                parts.append(draw(st.sampled_from(scope.consts)))
            else:
                parts.append(str(draw(st.integers(-2, 2))))
        return f"{array}[{', '.join(parts)}]"
    op = draw(st.sampled_from(["+", "-", "*", "max", "min", "abs", "if"]))
    left = draw(expressions(scope, depth + 1))
    if op == "abs":
        return f"abs({left})"
    right = draw(expressions(scope, depth + 1))
    if op in ("max", "min"):
        return f"{op}({left}, {right})"
    if op == "if":
        cond = draw(expressions(scope, depth + 1))
        return f"({left} if {cond} > {draw(st.sampled_from(['0', '0.5', '1']))} else {right})"
    return f"({left} {op} {right})"


@st.composite
def kernels(draw) -> tuple[str, str, int, list[str], str | None]:
    """(source, kernel name, ndim, array names, scalar name or None)."""
    ndim = draw(st.integers(1, 3))
    arrays = ["a", "b", "c"][:draw(st.integers(1, 3))]
    scalar = draw(st.sampled_from([None, "s"]))
    params = ", ".join(arrays + ([scalar] if scalar else []))
    scope = Scope(arrays, ndim, scalar)
    _counter[0] += 1
    name = f"hyp_kernel_{_counter[0]}"
    if draw(st.integers(0, 3)) == 0:
        body = draw(expressions(scope))
        if "a[" not in body:
            body = f"a[{', '.join(['0'] * ndim)}] + {body}"
        return f"{name} = lambda {params}: {body}\n", name, ndim, arrays, scalar
    lines = [f"def {name}({params}):"]
    for k in range(draw(st.integers(0, 2))):
        lines.append(f"    t{k} = {draw(st.integers(-2, 2))}")
        scope.consts.append(f"t{k}")
    lines.append(f"    x = a[{', '.join(['0'] * ndim)}] + {draw(expressions(scope))}")
    scope.values.append("x")
    if draw(st.booleans()):
        lines.append(f"    for i in range({draw(st.integers(1, 3))}):")
        scope.loop_var = "i"
        lines.append(f"        x = x + {draw(expressions(scope))}")
        scope.loop_var = None
    if draw(st.booleans()):
        lines.append(f"    if {draw(expressions(scope))} > {draw(st.sampled_from(['0', '0.5']))}:")
        lines.append(f"        y = {draw(expressions(scope))}")
        if draw(st.booleans()):
            lines.append("        return y - x")
        lines.append("    else:")
        lines.append(f"        y = {draw(expressions(scope))}")
        scope.values.append("y")
    lines.append(f"    return {draw(expressions(scope))}")
    return "\n".join(lines) + "\n", name, ndim, arrays, scalar


def _load(source: str, name: str):
    filename = f"<hypothesis-{name}>.py"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


def _numba(source: str, func, args: tuple, key: tuple):
    if key not in _numba_results:  # hypothesis replays examples while shrinking
        try:
            _numba_results[key] = numba.stencil(func)(*args)
        except Exception as exc:  # noqa: BLE001 - Numba's verdict, compared below
            _numba_results[key] = exc
    return _numba_results[key]


def check(source: str, name: str, ndim: int, arrays: list[str], scalar: str | None,
          shape: tuple[int, ...], seed: int, dtypes: list, scalar_value: object) -> None:
    """Every backend gives numba.stencil's values and dtype (or an error where it errors)."""
    func = _load(source, name)
    rng = np.random.default_rng(seed)
    args: list = []
    for t in dtypes:
        values = rng.random(shape) * 4 - 2 if np.dtype(t).kind == "f" else \
            rng.integers(-5, 6, shape)
        args.append(values.astype(t))
    if scalar:
        args.append(scalar_value)
    key = (source, shape, seed, tuple(map(str, dtypes)), repr(scalar_value))
    ref = _numba(source, func, tuple(args), key)
    for backend in sk.registry.implemented():
        if not sk.registry.REGISTRY[backend].available:
            continue
        if backend == "numba" and seed % 4:
            # a Numba compile per example costs seconds: a quarter of the examples (chosen
            # by their seed) run on the numba backend, to keep the suite under budget
            continue
        if isinstance(ref, Exception):
            # Numba rejects it: so must we, with a StencilError
            with pytest.raises(sk.StencilError):
                sk.stencil(func, backend=backend)(*args)
            continue
        ours = sk.stencil(func, backend=backend)(*args)
        assert ours.dtype == ref.dtype, f"{backend}: {ours.dtype} != {ref.dtype}\n{source}"
        np.testing.assert_array_equal(ours, ref, err_msg=f"{backend}:\n{source}")


@st.composite
def cases(draw) -> tuple:
    source, name, ndim, arrays, scalar = draw(kernels())
    shape = tuple(draw(st.integers(3, 6)) for _ in range(ndim))
    seed = draw(st.integers(0, 1000))
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in arrays]
    scalar_value = draw(st.sampled_from([2, -1, 0.5, 3.0])) if scalar else None
    return source, name, ndim, arrays, scalar, shape, seed, dtypes, scalar_value


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases())
def test_random_kernels_match_numba(case):
    check(*case)
