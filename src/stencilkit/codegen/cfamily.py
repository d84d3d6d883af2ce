"""One printer for the C family (C/OpenMP today; CUDA and OpenCL differ by a few hooks).

Expressions are printed with an operator-precedence table, so parentheses appear only where
C needs them. Operations whose C meaning differs from Python's (floor division, modulo,
integer powers, shifts, checked indices) print as calls of small inline helpers that the
prelude defines once per type used.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..ir import kernel as k

# C operator precedence: higher binds tighter.
_PREC = {"||": 3, "&&": 4, "|": 5, "^": 6, "&": 7, "==": 8, "!=": 8, "<": 9, "<=": 9, ">": 9,
         ">=": 9, "+": 11, "-": 11, "*": 12, "/": 12, "%": 12}
_UNARY_PREC = 13
_HELPER_OPS = {"floordiv", "mod", "powi", "shl", "shr", "checked_offset", "wrap_index"}


def ctype(t: np.dtype) -> str:
    return dtypes.c_name(t)


def type_suffix(t: np.dtype) -> str:
    return {"float": "f32", "double": "f64", "float _Complex": "c64",
            "double _Complex": "c128", "bool": "b"}.get(ctype(t), ctype(t).replace("_t", ""))


def _guarded_conversion(source: np.dtype, target: np.dtype) -> bool:
    """Float to signed or narrow integer: C leaves NaN and out-of-range values undefined (GCC
    even folds ``(double)(int64_t)x`` into ``trunc(x)``), so a helper gives Numba's x86-64
    result. uint32/uint64 are left to the cast: Numba's own result depends on the CPU there."""
    return dtypes.is_float(source) and dtypes.is_int(target) and (
        not dtypes.is_unsigned(target) or target.itemsize <= 2)


class CFamilyPrinter:
    """Prints kernel IR as C. Subclasses override the hooks for their dialect."""

    restrict = "restrict"
    function_qualifier = ""

    def __init__(self) -> None:
        self.helpers: set[tuple[str, np.dtype]] = set()
        self.error_flag = False
        self.declared: set[str] = set()

    # ------------------------------------------------------------ constants

    def constant(self, c: k.Constant) -> str:
        t = c.dtype
        v = c.value
        if t == dtypes.BOOL:
            return "1" if v else "0"
        if dtypes.is_int(t):
            iv = int(v)
            if t == k.INDEX and abs(iv) < 2**31:
                return str(iv)
            if t == dtypes.INT64 and iv == -(2**63):
                return "INT64_MIN"
            suffix = "ULL" if dtypes.is_unsigned(t) else "LL"
            text = f"{iv}{suffix}" if t.itemsize == 8 else str(iv)
            return text if t.itemsize == 8 and t != dtypes.UINT64 else f"(({ctype(t)}){text})"
        if dtypes.is_float(t):
            return self.float_literal(float(v), t == dtypes.FLOAT32)
        re = self.float_literal(float(v.real), t == dtypes.COMPLEX64)
        im = self.float_literal(float(v.imag), t == dtypes.COMPLEX64)
        return f"{'CMPLXF' if t == dtypes.COMPLEX64 else 'CMPLX'}({re}, {im})"

    @staticmethod
    def float_literal(x: float, single: bool) -> str:
        if math.isnan(x):
            return "NAN"
        if math.isinf(x):
            return "INFINITY" if x > 0 else "(-INFINITY)"
        text = repr(float(np.float32(x))) if single else repr(x)
        if "e" not in text and "." not in text:
            text += ".0"
        return f"{text}f" if single else text

    # ------------------------------------------------------------ expressions

    def expr(self, e: k.Expr, parent: int = 0) -> str:
        match e:
            case k.Constant():
                text, p = self.constant(e), 20
                if text.startswith("(-") or text.startswith("-"):
                    p = _UNARY_PREC
            case k.Sym(symbol=s):
                return s.name
            case k.Literal(text=t):
                return t
            case k.Load(buffer=b, indices=idx):
                return f"{b.base.name}[{self.offset(b, idx)}]"
            case k.Convert(value=v) if _guarded_conversion(v.dtype, e.dtype):
                self.helpers.add(("f2i", e.dtype))
                return f"sk_f2i_{type_suffix(e.dtype)}({self.expr(v)})"
            case k.Convert(value=v):
                text, p = f"({ctype(e.dtype)}){self.expr(v, _UNARY_PREC)}", _UNARY_PREC
            case k.Select(cond=c, then=a, orelse=b):
                text = f"{self.expr(c, 3)} ? {self.expr(a, 3)} : {self.expr(b, 2)}"
                p = 2
            case k.Op(op=op, args=args) if op in _HELPER_OPS:
                return self.helper_call(op, args, e.dtype)
            case k.Op(op="neg", args=(a,)):
                text, p = f"-{self.expr(a, _UNARY_PREC + 1)}", _UNARY_PREC
            case k.Op(op="!" | "~" as op, args=(a,)):
                text, p = f"{op}{self.expr(a, _UNARY_PREC)}", _UNARY_PREC
            case k.Op(op=op, args=(a, b)):
                p = _PREC[op]
                text = f"{self.expr(a, p)} {op} {self.expr(b, p + 1)}"
            case k.MathCall(func=f, args=args):
                return self.math_call(f, args, e.dtype)
            case k.CCall(name=n, args=args):
                return f"{n}({', '.join(self.expr(a) for a in args)})"
            case _:
                raise TypeError(f"cannot print {e!r}")
        return f"({text})" if p < parent else text

    def offset(self, b: k.Buffer, indices: tuple[k.Expr, ...]) -> str:
        terms = []
        for idx, stride in zip(indices, b.strides):
            if isinstance(stride, k.Constant) and int(stride.value) == 1:
                terms.append(self.expr(idx, _PREC["+"]))
            else:
                terms.append(f"{self.expr(idx, _PREC['*'])} * {self.expr(stride, _PREC['*'] + 1)}")
        return " + ".join(terms) if terms else "0"

    def helper_call(self, op: str, args: tuple[k.Expr, ...], t: np.dtype) -> str:
        operand_t = args[0].dtype
        self.helpers.add((op, operand_t))
        printed = ", ".join(self.expr(a) for a in args)
        if op in ("checked_offset", "wrap_index"):
            self.error_flag = True
            return f"sk_{op}({printed}, &sk_error)"
        return f"sk_{op}_{type_suffix(operand_t)}({printed})"

    def math_call(self, func: str, args: tuple[k.Expr, ...], t: np.dtype) -> str:
        a = args[0].dtype
        printed = ", ".join(self.expr(x) for x in args)
        if func in ("min", "max", "minimum", "maximum", "abs", "sign"):
            if func == "abs" and dtypes.is_float(a):
                return f"{self._libm('fabs', a)}({printed})"
            if func == "abs" and dtypes.is_complex(a):
                return f"{'cabsf' if a == dtypes.COMPLEX64 else 'cabs'}({printed})"
            self.helpers.add((func, a))
            return f"sk_{func}_{type_suffix(a)}({printed})"
        if func in ("isnan", "isinf", "isfinite"):
            if dtypes.is_intlike(a):
                return "1" if func == "isfinite" else "0"
            if dtypes.is_complex(a):
                self.helpers.add((func, a))
                return f"sk_{func}_{type_suffix(a)}({printed})"
            return f"({func}({printed}) != 0)"
        return f"{self._libm(func, a)}({printed})"

    @staticmethod
    def _libm(func: str, t: np.dtype) -> str:
        name = {"gamma": "tgamma"}.get(func, func)  # C's gamma() is lgamma on glibc
        if t == dtypes.FLOAT32:
            return name + "f"
        if t == dtypes.COMPLEX64:
            return "c" + name + "f"
        if t == dtypes.COMPLEX128:
            return "c" + name
        return name

    # ------------------------------------------------------------ statements

    def stmts(self, body: tuple[k.Stmt, ...], indent: str) -> list[str]:
        out: list[str] = []
        for s in body:
            if s.source:
                out.append(f"{indent}/* {s.source.replace('*/', '* /')} */")
            out.extend(self.stmt(s, indent))
        return out

    def stmt(self, s: k.Stmt, indent: str) -> list[str]:
        match s:
            case k.Declare(symbol=sym, value=v):
                self.declared.add(sym.name)
                init = f" = {self.expr(v)}" if v is not None else ""
                return [f"{indent}{ctype(sym.dtype)} {sym.name}{init};"]
            case k.DeclareArray(buffer=b, size=n):
                self.declared.add(b.base.name)
                return [f"{indent}{ctype(b.element_type)} {b.base.name}[{self.expr(n)}];"]
            case k.SetSym(symbol=sym, value=v):
                return [f"{indent}{sym.name} = {self.expr(v)};"]
            case k.Store(buffer=b, indices=idx, value=v):
                return [f"{indent}{b.base.name}[{self.offset(b, idx)}] = {self.expr(v)};"]
            case k.Branch(cond=c, then=then, orelse=orelse):
                lines = [f"{indent}if ({self.expr(c)}) {{", *self.stmts(then, indent + "    ")]
                if orelse:
                    lines += [f"{indent}}} else {{", *self.stmts(orelse, indent + "    ")]
                return lines + [f"{indent}}}"]
            case k.WhileLoop(cond=c, body=body):
                return [f"{indent}while ({self.expr(c)}) {{", *self.stmts(body, indent + "    "),
                        f"{indent}}}"]
            case k.Loop():
                return self.loop(s, indent)
            case k.Section(title=title, body=body):
                return [f"{indent}/* --- {title} --- */", *self.stmts(body, indent)]
        raise TypeError(f"cannot print {s!r}")

    def loop(self, s: k.Loop, indent: str) -> list[str]:
        c = s.counter.name
        step = s.step
        if isinstance(step, k.Constant):
            n = int(step.value)
            cmp = "<" if n > 0 else ">"
            inc = f"++{c}" if n == 1 else f"{c} += {self.expr(step)}"
            cond = f"{c} {cmp} {self.expr(s.stop, 10)}"
        else:
            st = self.expr(step, 9)
            cond = (f"({st} > 0) ? ({c} < {self.expr(s.stop, 10)}) : "
                    f"({c} > {self.expr(s.stop, 10)})")
            inc = f"{c} += {self.expr(step)}"
        lines = self.loop_pragmas(s, indent)
        declare = "" if c in self.declared else f"{ctype(s.counter.dtype)} "
        lines.append(f"{indent}for ({declare}{c} = {self.expr(s.start)}; {cond}; {inc}) {{")
        lines += self.stmts(s.body, indent + "    ")
        lines.append(f"{indent}}}")
        return lines

    def loop_pragmas(self, s: k.Loop, indent: str) -> list[str]:
        return []
