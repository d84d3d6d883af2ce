"""The vectorized NumPy backend printer: one array operation per IR operation.

It prints from the typed definition IR rather than from kernel IR, because it operates on
whole interior regions at once instead of single elements: a relative access becomes a
shifted view, control flow becomes masks (``np.where``), and a ``for`` loop over a range
stays a Python loop over its iterations — never over elements.
"""

from __future__ import annotations

import math

from .. import dtypes
from ..errors import BackendError
from ..ir import border_modes
from ..ir import definition as d
from ..ir.core import walk
from ..ir.definition import RESULT

_UFUNC = {
    "math.sqrt": "np.sqrt", "math.exp": "np.exp", "math.log": "np.log", "math.log10": "np.log10",
    "math.log2": "np.log2", "math.log1p": "np.log1p", "math.expm1": "np.expm1",
    "math.sin": "np.sin", "math.cos": "np.cos", "math.tan": "np.tan", "math.asin": "np.arcsin",
    "math.acos": "np.arccos", "math.atan": "np.arctan", "math.sinh": "np.sinh",
    "math.cosh": "np.cosh", "math.tanh": "np.tanh", "math.asinh": "np.arcsinh",
    "math.acosh": "np.arccosh", "math.atanh": "np.arctanh", "math.fabs": "np.fabs",
    "math.isnan": "np.isnan", "math.isinf": "np.isinf", "math.isfinite": "np.isfinite",
    "math.pow": "np.power", "math.atan2": "np.arctan2", "math.hypot": "np.hypot",
    "math.copysign": "np.copysign", "math.fmod": "np.fmod", "abs": "np.abs",
    "math.erf": "_rt.erf", "math.erfc": "_rt.erfc", "math.gamma": "_rt.gamma",
    "min": "_rt.py_min", "max": "_rt.py_max",
    "np.sign": "_rt.sign", "np.power": "_rt.power", "np.floor_divide": "np.floor_divide",
}


def _name(e: d.Expr) -> str:
    """The NumPy name of a typed expression's dtype."""
    assert e.dtype is not None, f"printing an untyped expression {e!r}"
    return e.dtype.name


def _const(c: d.Const) -> str:
    t = c.dtype
    assert t is not None, "printing an untyped constant"
    v = c.value
    if t == dtypes.BOOL:
        return f"np.bool_({bool(v)})"
    if dtypes.is_float(t) and isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return f"np.{t.name}({str(float(v))!r})"
    if dtypes.is_complex(t):
        return f"np.{t.name}(complex({v.real!r}, {v.imag!r}))"
    return f"np.{t.name}({v!r})"


class NumpyPrinter:
    def __init__(self, kernel: d.PointKernel, border: tuple[tuple[int, int], ...],
                 mode: border_modes.Mode = "constant") -> None:
        self.kernel = kernel
        self.border = border
        self.mode = mode
        self.lines: list[str] = []
        self.counter = 0
        self.loop_vars: set[str] = set()

    @staticmethod
    def var(name: str) -> str:
        """A local variable: the user's ``x`` is ``v_x``; the compiler's ``@result`` is
        ``_result`` (internal names start with ``_``, user names with a letter and ``_``)."""
        return f"v_{name}" if name.isidentifier() else "_" + name.lstrip("@")

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"_{stem}{self.counter}"

    # ------------------------------------------------------------ expressions

    def expr(self, e: d.Expr) -> str:
        match e:
            case d.Const():
                return _const(e)
            case d.Name(id=n):
                if n in self.loop_vars:
                    return f"np.int64({self.var(n)})"
                return self.var(n) if n not in self.kernel.params else f"p_{n}"
            case d.Access(field=f, offset=off):
                parts = ", ".join(self.expr(o) for o in off)
                return f"_reg.shifted(p_{f}, ({parts},))"
            case d.Index(array=a, index=idx):
                parts = ", ".join(self.expr(o) for o in idx)
                return f"_rt.gather(p_{a}, ({parts},), _shape)"
            case d.Cast(value=v):
                return f"_rt.cast({self.expr(v)}, np.{_name(e)})"
            case d.BinOp(op=op, left=l, right=r):
                a, b = self.expr(l), self.expr(r)
                if op == "//":
                    return f"np.floor_divide({a}, {b})"
                if op == "%":
                    return f"np.remainder({a}, {b})"
                if op == "**":
                    return f"_rt.power({a}, {b})"
                if op in ("<<", ">>"):
                    return f"_rt.{'shl' if op == '<<' else 'shr'}({a}, {b})"
                return f"({a} {op} {b})"
            case d.Compare(op=op, left=l, right=r):
                return f"({self.expr(l)} {op} {self.expr(r)})"
            case d.BoolOp(op=op, left=l, right=r):
                a, b = self.expr(l), self.expr(r)
                if e.dtype == dtypes.BOOL:
                    return f"np.logical_{op}({a}, {b})"
                if op == "and":
                    return f"np.where(_rt.truth({a}), {b}, {a})"
                return f"np.where(_rt.truth({a}), {a}, {b})"
            case d.UnaryOp(op=op, operand=x):
                a = self.expr(x)
                if op == "-":
                    return f"np.negative({a})"
                if op == "+":
                    return a
                if op == "not" or e.dtype == dtypes.BOOL:
                    return f"np.logical_not({a})"
                return f"np.invert({a})"
            case d.IfExp(cond=c, body=b, orelse=o):
                return f"_rt.where({self.expr(c)}, {self.expr(b)}, {self.expr(o)})"
            case d.Call(func=f, args=args):
                printed = ", ".join(self.expr(a) for a in args)
                if f in ("math.floor", "math.ceil", "math.trunc"):
                    return f"_rt.cast(np.{f[5:]}({printed}), np.int64)"
                func = _UFUNC.get(f, f)
                if f in ("min", "max") and len(args) > 2:
                    acc = self.expr(args[0])
                    for arg in args[1:]:
                        acc = f"{func}({acc}, {self.expr(arg)})"
                    return acc
                return f"_rt.cast({func}({printed}), np.{_name(e)})"
        raise TypeError(f"cannot print {e!r}")

    # ------------------------------------------------------------ statements

    def emit(self, indent: str, text: str) -> None:
        self.lines.append(indent + text)

    def stmts(self, body: tuple[d.Stmt, ...], indent: str, mask: str | None) -> None:
        for s in body:
            if s.loc is not None:
                self.emit(indent, f"# line {s.loc.line}")
            match s:
                case d.Assign(target=t, value=v):
                    value = self.expr(v)
                    if mask is None:
                        self.emit(indent, f"{self.var(t)} = {value}")
                    else:
                        self.emit(indent, f"{self.var(t)} = _rt.where({mask}, {value}, "
                                          f"{self.var(t)})")
                case d.If(cond=c, body=b, orelse=o):
                    cond = self.fresh("c")
                    self.emit(indent, f"{cond} = {self.expr(c)}")
                    then = self.fresh("m")
                    other = self.fresh("m")
                    both = f"{mask} & {cond}" if mask else cond
                    self.emit(indent, f"{then} = {both}")
                    self.emit(indent, f"if np.any({then}):")
                    self.stmts(b, indent + "    ", then)
                    self.emit(indent + "    ", "pass")
                    if o:
                        neg = f"{mask} & ~{cond}" if mask else f"~{cond}"
                        self.emit(indent, f"{other} = {neg}")
                        self.emit(indent, f"if np.any({other}):")
                        self.stmts(o, indent + "    ", other)
                        self.emit(indent + "    ", "pass")
                case d.For(var=v, start=a, stop=b, step=c, body=body):
                    for bound in (a, b, c):
                        if any(isinstance(n, (d.Access, d.Index)) for n in walk(bound)):
                            raise BackendError(
                                "the numpy backend needs range() bounds that do not depend on "
                                "array values", stencil=self.kernel.name, loc=s.loc,
                                hint="use the 'c' backend for data-dependent loop bounds")
                    self.loop_vars.add(v)
                    self.emit(indent, f"for {self.var(v)} in _rt.checked_range({self.expr(a)}, "
                                      f"{self.expr(b)}, {self.expr(c)}):")
                    self.stmts(body, indent + "    ", mask)
                    self.emit(indent + "    ", "pass")
                case d.While(cond=c, body=body):
                    active = self.fresh("w")
                    self.emit(indent, "while True:")
                    inner = indent + "    "
                    cond = self.expr(c)
                    self.emit(inner, f"{active} = ({mask}) & ({cond})" if mask
                              else f"{active} = {cond}")
                    self.emit(inner, f"if not np.any({active}):")
                    self.emit(inner + "    ", "break")
                    self.stmts(body, inner, active)

    def function(self, name: str) -> str:
        k = self.kernel
        self.loop_vars = {n.var for n in walk(k) if isinstance(n, d.For)}
        params = ", ".join(f"p_{p}" for p in k.params)
        lo = tuple(-b[0] for b in self.border)
        hi = tuple(b[1] for b in self.border)
        self.emit("", f"def {name}({params}, out, fill_border, cval):")
        ind = "    "
        self.emit(ind, f'"""point kernel {k.name}, border {list(self.border)}, '
                       f'mode {self.mode!r}"""')
        self.emit(ind, f"_lo = {lo!r}")
        self.emit(ind, f"_hi = {hi!r}")
        self.emit(ind, f"_shape = p_{k.params[0]}.shape")
        if border_modes.any_constant(self.mode):
            # the whole border: the boxes of the remapped axes then overwrite their points
            self.emit(ind, "if fill_border:")
            self.emit(ind + "    ", "_rt.fill_border(out, _lo, _hi, cval)")
        # the interior; in the remapping modes also the border, in boxes (numpy_regions)
        self.emit(ind, f"for _reg in _rg.regions(_shape, _lo, _hi, {self.mode!r}):")
        body = ind + "    "
        for var, t in k.local_types:
            if var not in self.loop_vars:
                self.emit(body, f"{self.var(var)} = np.zeros((), np.{t.name})[()]")
        self.emit(body, "with np.errstate(all='ignore'):")
        self.stmts(k.body, body + "    ", None)
        self.emit(body + "    ", f"_reg.store(out, {self.var(RESULT)})")
        self.emit(ind, "return 0")
        return "\n".join(self.lines) + "\n"


def kernel_source(kernel: d.PointKernel, border: tuple[tuple[int, int], ...], name: str,
                  mode: border_modes.Mode = "constant") -> str:
    header = (f"# Generated by stencilkit from point kernel '{kernel.name}'.\n"
              "import numpy as np\nfrom stencilkit.runtime import numpy_support as _rt\n"
              "from stencilkit.runtime import numpy_regions as _rg\n\n\n")
    return header + NumpyPrinter(kernel, border, mode).function(name)
