"""One printer for the C family (C/OpenMP today; CUDA and OpenCL differ by a few hooks).

It prints platform-lowered kernel IR (see ``ir/kernel.py``): what a parallel loop, an atomic
or a math function *means* in a language was decided by the platform (``lower/platforms``);
the printer refuses the abstract nodes. Expressions are printed with an operator-precedence
table, so parentheses appear only where C needs them. Operations whose C meaning differs
from Python's (floor division, modulo, integer powers, shifts, checked indices, min/max,
...) print as calls of small inline helpers that the prelude defines once per type used.

Hooks for a dialect (class attributes and methods a subclass overrides): ``restrict`` (the
keyword, "" where there is none), ``function_qualifier`` (CUDA's ``__global__``, OpenCL's
``__kernel``), ``internal_qualifier`` (``static inline``, CUDA's ``__device__``),
``return_type`` (C returns the status; a CUDA kernel is ``void``), ``pointer_qualifier``
(OpenCL's ``__global``), ``status_type``, ``ctype`` (a type's name: CUDA's complex structs),
``complex_literal`` (C99's CMPLX; CUDA's struct constructors; OpenCL has no complex type),
``signature``/``param`` (the entry's form).
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
#: operators printed as compound assignments when a store updates the element it loads
COMPOUND_OPS = frozenset({"+", "-", "*", "/"})
# runtime helpers: Op nodes printed as calls of sk_<op>_<operand type> (the index checks
# take the status: they clamp and report instead of reading out of bounds)
_HELPER_OPS = {"floordiv", "mod", "powi", "shl", "shr", "checked_offset", "wrap_index",
               "min", "max", "minimum", "maximum", "abs", "sign", "isnan", "isinf",
               "isfinite"}


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
    function_qualifier = ""  # before an entry function: CUDA's __global__, OpenCL's __kernel
    internal_qualifier = "static inline"  # before a function only the source calls
    pointer_qualifier = ""
    return_type = "int"  # what an entry function returns (the status, in C)
    status_type = "int"  # the error channel's variable (the helpers take an int *)

    def ctype(self, t: np.dtype) -> str:
        """The dialect's name of a type (CUDA names its complex structs)."""
        return ctype(t)

    def __init__(self, status: str = "sk_error") -> None:
        self.helpers: set[tuple[str, np.dtype]] = set()
        self.error_flag = False
        self.declared: set[str] = set()
        self.status = status  # the name of the error channel's variable

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
            return text if t.itemsize == 8 and t != dtypes.UINT64 else f"(({self.ctype(t)}){text})"
        if dtypes.is_float(t):
            return self.float_literal(float(v), t == dtypes.FLOAT32)
        re = self.float_literal(float(v.real), t == dtypes.COMPLEX64)
        im = self.float_literal(float(v.imag), t == dtypes.COMPLEX64)
        return self.complex_literal(re, im, t)

    def complex_literal(self, re: str, im: str, t: np.dtype) -> str:
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
                text, p = f"({self.ctype(e.dtype)}){self.expr(v, _UNARY_PREC)}", _UNARY_PREC
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
            case k.CCall(name=n, args=args) | k.Call(function=n, args=args):
                return f"{n}({', '.join(self.expr(a) for a in args)})"
            case k.Address(buffer=b, indices=idx):
                text, p = f"{b.base.name} + {self.offset(b, idx)}", _PREC["+"]
            case k.MathCall():
                raise TypeError(f"{e!r} is abstract: lower the kernel with a platform first")
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
            return f"sk_{op}({printed}, &{self.status})"
        return f"sk_{op}_{type_suffix(operand_t)}({printed})"

    # ------------------------------------------------------------ statements

    def stmts(self, body: tuple[k.Stmt, ...], indent: str) -> list[str]:
        out: list[str] = []
        for s in body:
            if s.source:
                out.append(f"{indent}/* {s.source.replace('*/', '* /')} */")
            out.extend(self.stmt(s, indent))
        return out

    def block(self, body: tuple[k.Stmt, ...], indent: str) -> list[str]:
        """``body`` as the statements of a nested C block (a branch, a loop's body): what
        it declares is out of scope after it, so a later loop over a counter declared in
        here declares its own."""
        outer = set(self.declared)
        try:
            return self.stmts(body, indent)
        finally:
            self.declared.intersection_update(outer)

    def stmt(self, s: k.Stmt, indent: str) -> list[str]:
        match s:
            case k.Declare(symbol=sym, value=v):
                self.declared.add(sym.name)
                init = f" = {self.expr(v)}" if v is not None else ""
                if sym.pointer:  # a pointer into a buffer (a ParLoop's direct argument)
                    const = "const " if sym.has(k.ReadOnly) else ""
                    return [f"{indent}{const}{self.ctype(sym.dtype)} *{sym.name}{init};"]
                t = self.status_type if sym.name == self.status else self.ctype(sym.dtype)
                return [f"{indent}{t} {sym.name}{init};"]
            case k.DeclareArray(buffer=b, size=n):
                self.declared.add(b.base.name)
                align = b.base.get(k.Alignment)
                aligned = f"_Alignas({align.byte_boundary}) " if align is not None else ""
                return [f"{indent}{aligned}{self.ctype(b.element_type)} {b.base.name}[{self.expr(n)}];"]
            case k.SetSym(symbol=sym, value=v):
                return [f"{indent}{sym.name} = {self.expr(v)};"]
            case k.Store(buffer=b, indices=idx,
                         value=k.Op(op=op, args=(k.Load(buffer=lb, indices=li), rhs))) if (
                    op in COMPOUND_OPS and lb == b and li == idx):
                # x op= y, not x = x op y: "#pragma omp atomic" accepts both forms only while
                # the compiler sees the two x as the same tree, which UBSan's instrumentation
                # of the index arithmetic breaks
                return [f"{indent}{b.base.name}[{self.offset(b, idx)}] {op}= {self.expr(rhs)};"]
            case k.Store(buffer=b, indices=idx, value=v):
                return [f"{indent}{b.base.name}[{self.offset(b, idx)}] = {self.expr(v)};"]
            case k.Branch(cond=c, then=then, orelse=orelse):
                lines = [f"{indent}if ({self.expr(c)}) {{", *self.block(then, indent + "    ")]
                if orelse:
                    lines += [f"{indent}}} else {{", *self.block(orelse, indent + "    ")]
                return lines + [f"{indent}}}"]
            case k.WhileLoop(cond=c, body=body):
                return [f"{indent}while ({self.expr(c)}) {{", *self.block(body, indent + "    "),
                        f"{indent}}}"]
            case k.Loop():
                return self.loop(s, indent)
            case k.Section(title=title, body=body):
                return [f"{indent}/* --- {title} --- */", *self.stmts(body, indent)]
            case k.Pragma(parts=parts):
                text = "".join(p if isinstance(p, str) else self.expr(p) for p in parts)
                return [f"{indent}#pragma {text}"]
            case k.Block(body=body):
                return [f"{indent}{{", *self.block(body, indent + "    "), f"{indent}}}"]
            case k.Return(value=v):
                return [f"{indent}return {self.expr(v)};"]
            case k.Evaluate(value=v):
                return [f"{indent}{self.expr(v)};"]
            case k.ParallelRegion() | k.AtomicUpdate() | k.SetError():
                raise TypeError(f"{type(s).__name__} is abstract: lower the kernel with a "
                                "platform first")
        raise TypeError(f"cannot print {s!r}")

    def loop(self, s: k.Loop, indent: str) -> list[str]:
        if s.parallel is not None or s.vectorize:
            raise TypeError(f"loop over {s.counter.name} is abstract: lower the kernel with a "
                            "platform first")
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
        declare = "" if c in self.declared else f"{self.ctype(s.counter.dtype)} "
        return [f"{indent}for ({declare}{c} = {self.expr(s.start)}; {cond}; {inc}) {{",
                *self.block(s.body, indent + "    "), f"{indent}}}"]

    def signature(self, kf: k.KernelFunction) -> str:
        params = ", ".join(self.param(p) for p in kf.params)
        qualifier = self.internal_qualifier if kf.internal else self.function_qualifier
        prefix = f"{qualifier} " if qualifier else ""
        return f"{prefix}{self.return_type} {kf.name}({params})"

    def function_text(self, kf: k.KernelFunction) -> str:
        return "\n".join([self.signature(kf), "{", *self.stmts(kf.body, "    "), "}"])

    def param(self, p: k.Symbol) -> str:
        """One parameter of a function's signature."""
        if not p.pointer:
            return f"{self.ctype(p.dtype)} {p.name}"
        const = "const " if p.has(k.ReadOnly) else ""
        restrict = f"{self.restrict} " if p.has(k.Restrict) and self.restrict else ""
        space = f"{self.pointer_qualifier} " if self.pointer_qualifier else ""
        return f"{space}{const}{self.ctype(p.dtype)} *{restrict}{p.name}"
