"""Random point kernels as Python source (a hypothesis strategy), shared by the property
tests against Numba (test_properties.py) and the border-mode tests (test_border_modes.py).

The kernels mix what Numba users write: several arrays, scalar arguments, locals bound to
integer constants used as relative indices (-2..2), ``for`` loops over ``range``,
``if``/``else`` with returns in branches, conditional expressions, ``min``/``max``/``abs``,
and lambdas; and what third-party code adds (issue 28): casts with Numba's type objects
(``numba.float32(x)``), ``np.signbit``, tuple comparisons and a captured module array ``W``
indexed by a constant or the loop variable.
"""

from __future__ import annotations

import importlib.util
import linecache

import numpy as np
from hypothesis import strategies as st

#: the array kernels capture (a constant, as in Numba)
W = np.array([0.5, -1.25, 2.0, 0.75])
_HAVE_NUMBA = importlib.util.find_spec("numba") is not None

_counter = [0]


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
    op = draw(st.sampled_from(["+", "-", "*", "max", "min", "abs", "if", "cast", "signbit",
                               "captured", "tuple"]))
    left = draw(expressions(scope, depth + 1))
    if op == "abs":
        return f"abs({left})"
    if op == "cast" and _HAVE_NUMBA:
        return f"numba.{draw(st.sampled_from(['float32', 'float64']))}({left})"
    if op == "signbit":
        return f"(np.signbit({left}) * {left})"
    if op == "captured":
        index = scope.loop_var if scope.loop_var and draw(st.booleans()) else str(
            draw(st.integers(-4, 3)))
        return f"(W[{index}] * {left})"
    right = draw(expressions(scope, depth + 1))
    if op in ("max", "min"):
        return f"{op}({left}, {right})"
    if op == "tuple":
        cond = draw(expressions(scope, depth + 1))
        compare = draw(st.sampled_from(["==", "!=", "<", ">="]))
        return f"({left} if ({left}, {cond}) {compare} ({right}, 0.5) else {right})"
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
    namespace: dict = {"np": np, "W": W}
    if _HAVE_NUMBA:
        import numba

        namespace["numba"] = numba
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]
