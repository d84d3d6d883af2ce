"""The host evaluator of kernel IR: the value of a plan's host-side expressions (grid
bounds, host loop bounds and steps, conditions decided before launching) from the values of
scalar parameters and host loop counters, as the generated code would compute them.

One evaluator for every GPU runtime (``runtime.cuda``, ``runtime.opencl_launch``): they walk
a plan with ``host_launches`` (host loops run here, launches whose host conditions are
false skipped) and size grids with ``extents``; the planner asks ``host_computable`` which
conditions it may leave to the host. It accepts both the
abstract form of the min/max of indices (``MathCall("min")``) and the platform-lowered one
(``Op("min")``): a bound is the same expression before and after platform lowering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping

from . import kernel as k
from .core import walk
from .plan import HostLoop, Launch, Step


def _floordiv(a, b):
    # the IR's floordiv helper (sk_floordiv_*) is Python's floor division, 0 on a zero divisor
    return 0 if b == 0 else a // b


_OPS: dict[str, Callable[..., object]] = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "floordiv": _floordiv,
    "min": min, "max": max, "minimum": min, "maximum": max,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "&&": lambda a, b: bool(a and b), "||": lambda a, b: bool(a or b),
    "!": lambda a: not a, "neg": lambda a: -a,
}

def evaluate(e: k.Expr, env: Mapping[str, object]) -> int | float | bool:
    """The value of ``e`` with the symbols' values from ``env`` (by name). Raises
    NotImplementedError on what only the device can compute (loads, calls, literals)."""
    match e:
        case k.Constant(value=v):
            return v.item()
        case k.Sym(symbol=s):
            return env[s.name]  # type: ignore[return-value]
        case k.Convert(value=v):
            x = evaluate(v, env)
            return int(x) if e.dtype.kind in "iu" else bool(x) if e.dtype.kind == "b" else x
        case k.Select(cond=c, then=a, orelse=b):
            return evaluate(a, env) if evaluate(c, env) else evaluate(b, env)
        case k.Op(op=op, args=args) | k.MathCall(func=op, args=args) if op in _OPS:
            return _OPS[op](*(evaluate(a, env) for a in args))  # type: ignore[return-value]
    raise NotImplementedError(f"cannot evaluate {e!r} on the host")


def host_computable(e: k.Expr, scalars: frozenset[str] | set[str]) -> bool:
    """Whether ``evaluate`` computes ``e`` given values for the symbols named ``scalars``
    only (no loads, calls or device built-ins)."""
    for n in walk(e):
        match n:
            case k.Constant() | k.Convert() | k.Select():
                continue
            case k.Sym(symbol=s) if s.name in scalars:
                continue
            case k.Op(op=op) | k.MathCall(func=op) if op in _OPS:
                continue
        return False
    return True


def host_launches(steps: tuple[Step, ...], env: MutableMapping[str, object]
                  ) -> Iterator[Launch]:
    """The launches of ``steps`` in the order the host runs them: host loops iterated here,
    with ``env`` holding their counters' current values while their launches are yielded;
    launches whose host-decided conditions are false left out."""
    for s in steps:
        if isinstance(s, HostLoop):
            start, stop, step = (int(evaluate(x, env)) for x in (s.start, s.stop, s.step))
            for i in range(start, stop, step) if step else ():
                env[s.counter.name] = i
                yield from host_launches(s.body, env)
        elif not s.host_conditions or all(evaluate(c, env) for c in s.conditions):
            yield s


def extents(launch: Launch, env: Mapping[str, object]) -> tuple[int, ...]:
    """The number of points along each of the launch's dimensions (dimension 0 first;
    zero or negative: nothing to run)."""
    return tuple(int(evaluate(d.stop, env)) - int(evaluate(d.start, env)) for d in launch.dims)
