"""The "numba" backend printer: kernel IR as a Python module compiled by Numba.

The module defines the kernel as a plain Python function over NumPy arrays (arrays are
indexed natively, so strides and layouts are Numba's business) and compiles it twice:

- ``parallel``: ``numba.njit(parallel=True, cache=True)``, what a call from Python runs; the
  parallel loops of the kernel IR are ``numba.prange``; ``serial``, the same without
  ``parallel=True``, runs calls on fewer than ``PARALLEL_MIN_WORK`` points (as the C backend's
  OpenMP ``if`` clause), where starting threads costs more than it saves (and compiling it
  costs a third of the parallel one's time);
- ``inline``: ``numba.njit(inline="always")``, what a call from inside a user's jitted
  function runs: its IR is inlined into the caller, so the ``prange`` loops run in parallel
  exactly when the caller is compiled with ``parallel=True`` (as ``numba.stencil`` does).

The module is written to a file and imported (``build/numba_module.py``), so that Numba's
on-disk cache works across processes. Every expression keeps the dtype the kernel IR gives it:
constants are typed, and integer results narrower than 64 bits are converted back, since
Numba widens them (``int32 + int32 -> int64``). Operations whose Python meaning differs from
the other backends' go through the helpers of ``numba_helpers``.
"""

from __future__ import annotations

import math
from string import Template

import numpy as np

from .. import dtypes
from ..ir import kernel as k
from .numba_helpers import guarded_conversion, helper_name, helper_source, numpy_type
from .numba_names import numba_safe

#: below this many points a call from Python runs the ``serial`` dispatcher. Numba's own
#: (2^15, as the C backend's was): starting Numba's threading layer is not libgomp's team,
#: and the C backend's lower threshold (``lower.point.PARALLEL_MIN_WORK``) was measured on
#: C kernels only
PARALLEL_MIN_WORK = 1 << 15

# Python operator precedence: higher binds tighter. Comparisons do not associate (Python
# chains them), so a comparison operand of a comparison is always parenthesized.
_PREC = {"or": 1, "and": 2, "not": 3, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
         "|": 5, "^": 6, "&": 7, "+": 9, "-": 9, "*": 10, "/": 10}
_COMPARE = {"==", "!=", "<", "<=", ">", ">="}
_UNARY = 11
_ATOM = 20
_BOOL_OPS = {"&&": "and", "||": "or"}
_HELPER_OPS = {"floordiv", "mod", "powi", "shl", "shr"}
# Types whose arithmetic Numba does in the type itself, when the operands have it (as the
# kernel IR's operands do): no conversion is needed to store such a value
_EXACT = (dtypes.FLOAT64, dtypes.COMPLEX128, dtypes.INT64)

# IR math function -> (module attribute for floats, for complex numbers); None: a helper
_MATH = {
    **{f: (f"_math.{f}", f"_cmath.{f}") for f in (
        "sqrt", "exp", "log", "log10", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
        "cosh", "tanh", "asinh", "acosh", "atanh")},
    **{f: (f"_math.{f}", None) for f in (
        "log1p", "expm1", "fabs", "erf", "erfc", "gamma", "atan2", "hypot", "copysign")},
    "fmod": ("_np.fmod", None),  # Numba has no math.fmod
    "log2": ("_np.log2", "_np.log2"), "exp2": ("_np.exp2", "_np.exp2"),
    "cbrt": ("_np.cbrt", None), "rint": ("_np.rint", None), "floor": ("_np.floor", None),
    "ceil": ("_np.ceil", None), "trunc": ("_np.trunc", None), "fmin": ("_np.fmin", None),
    "fmax": ("_np.fmax", None),
}

PRELUDE = '''\
import cmath as _cmath
import math as _math

import numba as _nb
import numpy as _np

_helper = _nb.njit(error_model="numpy", cache=True, nogil=True)
'''

EPILOGUE = '''

# What a call from Python runs: the parallel loops on Numba's threads, or, below
# $min_work points (where starting the threads costs more than it saves), serially.
parallel = _nb.njit(parallel=True, error_model="numpy", cache=True, nogil=True)($name)
serial = _nb.njit(error_model="numpy", cache=True, nogil=True)($name)
# What a call from inside a jitted function runs: inlined into the caller, whose own
# parallel=True (or not) decides whether the prange loops run in parallel.
inline = _nb.njit(inline="always", error_model="numpy")($name)
'''


def _constant(c: k.Constant) -> tuple[str, int]:
    t, v = c.dtype, c.value
    if t == dtypes.BOOL:
        return ("True" if v else "False"), _ATOM
    if dtypes.is_int(t):
        iv = int(v)
        if t == dtypes.INT64:
            return (str(iv), _ATOM) if iv >= 0 else (f"({iv})", _ATOM)
        return f"{numpy_type(t)}({iv})", _ATOM
    if dtypes.is_float(t):
        text = _float(float(v))
        return (text if t == dtypes.FLOAT64 else f"_np.float32({text})"), _ATOM
    text = f"complex({_float(float(v.real))}, {_float(float(v.imag))})"
    return (text if t == dtypes.COMPLEX128 else f"_np.complex64({text})"), _ATOM


def _float(x: float) -> str:
    if math.isnan(x):
        return "_math.nan"
    if math.isinf(x):
        return "_math.inf" if x > 0 else "(-_math.inf)"
    return repr(x) if x >= 0 else f"({x!r})"


def _widened(op: str, t: np.dtype) -> bool:
    """Whether Numba's result of ``op`` on operands of type ``t`` may have another type than
    ``t`` (small integers widen to 64 bits; negation and inversion of unsigned ones too)."""
    return dtypes.is_int(t) and t != dtypes.INT64 and op not in _COMPARE


class NumbaPrinter:
    """Prints one ``KernelFunction`` (point kernel) as the Python source of a module."""

    def __init__(self, kernel: k.KernelFunction) -> None:
        # every numba path prints through here: names Numba's renamings cannot collide with
        self.kernel = kernel = numba_safe(kernel)
        self.helpers: set[tuple[str, np.dtype]] = set()
        self.status = "status"  # the error channel: a one-element int32 array
        self.uses_status = kernel.uses_error_flag

    # ------------------------------------------------------------ expressions

    def expr(self, e: k.Expr, parent: int = 0) -> str:
        text, p = self._expr(e)
        return f"({text})" if p < parent else text

    def _expr(self, e: k.Expr) -> tuple[str, int]:
        match e:
            case k.Constant():
                return _constant(e)
            case k.Sym(symbol=s):
                return s.name, _ATOM
            case k.Literal(text=t):
                return t, _ATOM
            case k.Load(buffer=b, indices=idx):
                return f"{b.base.name}[{', '.join(self.expr(i) for i in idx)}]", _ATOM
            case k.Convert(value=v):
                return self.convert(v, e.dtype), _ATOM
            case k.Select(cond=c, then=a, orelse=b):
                return f"{self.expr(a, 1)} if {self.expr(c, 1)} else {self.expr(b, 0)}", 0
            case k.Op(op=op, args=args) if op in _HELPER_OPS:
                return self.helper(op, args, e.dtype), _ATOM
            case k.Op(op="checked_offset" | "wrap_index" as op, args=args):
                self.helpers.add((op, k.INDEX))
                self.uses_status = True
                printed = ", ".join(self.expr(a) for a in args)
                return f"{helper_name(op, k.INDEX)}({printed}, {self.status})", _ATOM
            case k.Op(op="/", args=(a, b)):
                return self.helper("div", (a, b), e.dtype), _ATOM
            case k.Op(op="neg" | "~" | "!" as op, args=(a,)):
                if op == "!":
                    return f"not {self.expr(a, _PREC['not'])}", _PREC["not"]
                sym = "-" if op == "neg" else "~"
                return self.typed(op, f"{sym}{self.expr(a, _UNARY)}", _UNARY, e.dtype)
            case k.Op(op=op, args=(a, b)):
                op = _BOOL_OPS.get(op, op)
                p = _PREC[op]
                left = p + 1 if op in _COMPARE else p
                text = f"{self.expr(a, left)} {op} {self.expr(b, p + 1)}"
                return self.typed(op, text, p, e.dtype)
            case k.MathCall(func=f, args=args):
                return self.math_call(f, args, e.dtype), _ATOM
            case k.CCall(name=n, args=args):
                return f"{n}({', '.join(self.expr(a) for a in args)})", _ATOM
        raise TypeError(f"cannot print {e!r}")

    def typed(self, op: str, text: str, prec: int, t: np.dtype) -> tuple[str, int]:
        if _widened(op, t):
            return f"{numpy_type(t)}({text})", _ATOM
        return text, prec

    def convert(self, v: k.Expr, t: np.dtype) -> str:
        if guarded_conversion(v.dtype, t):
            self.helpers.add(("f2i", t))
            return f"{helper_name('f2i', t)}({self.expr(v)})"
        if t == dtypes.BOOL:
            return f"{self.expr(v, _PREC['!='] + 1)} != 0"
        return f"{numpy_type(t)}({self.expr(v)})"

    def helper(self, op: str, args: tuple[k.Expr, ...], t: np.dtype) -> str:
        operand = args[0].dtype
        self.helpers.add((op, operand))
        call = f"{helper_name(op, operand)}({', '.join(self.expr(a) for a in args)})"
        return call if operand == t else f"{numpy_type(t)}({call})"

    def math_call(self, func: str, args: tuple[k.Expr, ...], t: np.dtype) -> str:
        a = args[0].dtype
        printed = ", ".join(self.expr(x) for x in args)
        if func in ("min", "max", "minimum", "maximum", "sign") or (
                func == "abs" and dtypes.is_int(a)):
            return self.helper(func, args, t)
        if func == "abs":
            return f"{numpy_type(t)}(abs({printed}))"
        if func in ("isnan", "isinf", "isfinite"):
            if dtypes.is_intlike(a):
                return "True" if func == "isfinite" else "False"
            return f"{'_cmath' if dtypes.is_complex(a) else '_math'}.{func}({printed})"
        if func == "pow":
            return f"{numpy_type(t)}({self.expr(args[0], 12)} ** {self.expr(args[1], 12)})"
        real, cplx = _MATH[func]
        name = cplx if dtypes.is_complex(a) else real
        if name is None:
            raise TypeError(f"no complex implementation of {func}")
        return f"{numpy_type(t)}({name}({printed}))"

    # ------------------------------------------------------------ statements

    def stmts(self, body: tuple[k.Stmt, ...], indent: str) -> list[str]:
        out: list[str] = []
        for s in body:
            if s.source:
                out.append(f"{indent}# {s.source}")
            out.extend(self.stmt(s, indent))
        return out or [f"{indent}pass"]

    def stmt(self, s: k.Stmt, indent: str) -> list[str]:
        match s:
            case k.Declare(symbol=sym, value=v):
                value = v if v is not None else k.Constant(sym.dtype.type(0), dtype=sym.dtype)
                return [f"{indent}{sym.name} = {self.value(value, sym.dtype)}"]
            case k.SetSym(symbol=sym, value=v):
                return [f"{indent}{sym.name} = {self.value(v, sym.dtype)}"]
            case k.Store(buffer=b, indices=idx, value=v):
                index = ", ".join(self.expr(i) for i in idx)
                return [f"{indent}{b.base.name}[{index}] = {self.value(v, b.element_type)}"]
            case k.Branch(cond=c, then=then, orelse=orelse):
                lines = [f"{indent}if {self.expr(c)}:", *self.stmts(then, indent + "    ")]
                if orelse:
                    lines += [f"{indent}else:", *self.stmts(orelse, indent + "    ")]
                return lines
            case k.WhileLoop(cond=c, body=body):
                return [f"{indent}while {self.expr(c)}:", *self.stmts(body, indent + "    ")]
            case k.Loop():
                return self.loop(s, indent)
            case k.Section(title=title, body=body):
                return [f"{indent}# --- {title} ---", *self.stmts(body, indent)]
            case _ if type(s).__name__ == "SetError":
                # the error channel node of the one-kernel-IR refactor (issue 10)
                self.uses_status = True
                return [f"{indent}{self.status}[0] = {int(s.code)}"]  # type: ignore[attr-defined]
        raise TypeError(f"cannot print {s!r}")

    def value(self, v: k.Expr, t: np.dtype) -> str:
        """``v`` as a value of type ``t`` (the IR gives it that type; Numba might not)."""
        text = self.expr(v)
        if isinstance(v, (k.Load, k.Sym, k.Constant, k.Convert)) and v.dtype == t:
            return text
        if t == dtypes.BOOL:
            return text
        return f"{numpy_type(t)}({text})"

    def loop(self, s: k.Loop, indent: str) -> list[str]:
        c = s.counter.name
        start, stop = self.expr(s.start), self.expr(s.stop)
        body = self.stmts(s.body, indent + "    ")
        if s.parallel:
            return [f"{indent}for {c} in _nb.prange({start}, {stop}):", *body]
        if isinstance(s.step, k.Constant):
            step = int(s.step.value)
            bounds = f"{start}, {stop}" if step == 1 else f"{start}, {stop}, {step}"
            return [f"{indent}for {c} in range({bounds}):", *body]
        # range() with a run-time step of 0: Python raises; report it as the C backend does
        step_text = self.expr(s.step)
        self.uses_status = True
        return [f"{indent}if {step_text} == 0:", f"{indent}    {self.status}[0] = 4",
                f"{indent}else:", f"{indent}    for {c} in range({start}, {stop}, {step_text}):",
                *["    " + line for line in body]]

    # ------------------------------------------------------------ the module

    def function(self, arguments: tuple[k.ArgumentKey, ...]) -> str:
        """The kernel as a Python function taking ``arguments`` (the keys of the kernel's
        parameters, in order: user arguments, then the compiler's)."""
        kf = self.kernel
        names = []
        for i, key in enumerate(arguments):
            names.append(next((p.name for p in kf.params if _belongs(p, key)), f"unused{i}"))
        body = self.stmts(kf.body, "    ")
        prologue = [f'    """{kf.doc}"""']
        if self.uses_status:
            prologue.append(f"    {self.status} = _np.zeros(1, _np.int32)")
        for p in kf.params:
            shape = p.get(k.ShapeOf)
            if shape is not None:
                base = next(b.base.name for b in kf.buffers if b.name == shape.buffer)
                prologue.append(f"    {p.name} = {base}.shape[{shape.dim}]")
        ret = f"    return {self.status}[0]" if self.uses_status else "    return 0"
        return "\n".join([f"def {kf.name}({', '.join(names)}):", *prologue, *body, ret])

    def module(self, arguments: tuple[k.ArgumentKey, ...], header: str) -> str:
        fn = self.function(arguments)
        helpers = [f"@_helper\n{helper_source(op, t)}\n"
                   for op, t in sorted(self.helpers, key=lambda h: (h[0], str(h[1])))]
        return "\n".join([header, PRELUDE, *helpers, "", fn,
                          Template(EPILOGUE).substitute(name=self.kernel.name,
                                                        min_work=PARALLEL_MIN_WORK)])


def _belongs(p: k.Symbol, key: k.ArgumentKey) -> bool:
    """Whether parameter symbol ``p`` is the argument ``key`` (its array or its value)."""
    return any(isinstance(q, k.BasePointer) and q.buffer == key
               or isinstance(q, k.ScalarArgument) and q.key == key for q in p.properties)


class NumbaModulePrinter(NumbaPrinter):
    """Prints platform-lowered kernel IR (``targets/numba.py``): computations and
    ParLoops. The platform has made the status an array the body declares and returns, the
    parallel loops ``prange`` pragmas and the local arrays flat; this printer adds NumPy's
    spelling of local arrays (``_np.empty``), of pointers into an array (a view from the
    element on) and of calls between the module's functions."""

    def __init__(self, kernel: k.KernelFunction) -> None:
        super().__init__(kernel)
        self.uses_status = False  # the platform declares it
        if self.kernel.status is not None:
            self.status = self.kernel.status.name

    def _expr(self, e: k.Expr) -> tuple[str, int]:
        match e:
            case k.Address(buffer=b, indices=(i,)):
                return f"{b.base.name}[{self.expr(i)}:]", _ATOM
            case k.Call(function=f, args=args):
                return f"{f}({', '.join(self.expr(a) for a in args)})", _ATOM
            case k.Load(buffer=b, indices=idx) if len(idx) > 1:
                return f"{b.base.name}[{self.indices(idx)}]", _ATOM
            case k.Op(op="/" | "%" as op, args=(a, b)) if dtypes.is_int(e.dtype):
                # C's truncating index arithmetic of the lowerings (an element of a local
                # block): a non-negative index by a positive constant, where Python's
                # floored // and % agree with it
                assert isinstance(b, k.Constant) and int(b.value) > 0, e
                py = "//" if op == "/" else "%"
                return f"{self.expr(a, _PREC['*'])} {py} {self.expr(b, _PREC['*'] + 1)}", \
                    _PREC["*"]
            case k.Op(op="/", args=(a, b)) if dtypes.is_float(e.dtype) or \
                    dtypes.is_complex(e.dtype):
                # the module is compiled with NumPy's error model and never inlined into a
                # caller's: '/' by zero gives inf/nan without the helper
                return f"{self.expr(a, _PREC['/'])} / {self.expr(b, _PREC['/'] + 1)}", \
                    _PREC["/"]
            case k.MathCall(func="min" | "max" as f, args=(a, b)) if e.dtype == k.INDEX \
                    and a.dtype == k.INDEX and b.dtype == k.INDEX:
                return f"{f}({self.expr(a)}, {self.expr(b)})", _ATOM  # no NaN to order
        return super()._expr(e)

    def value(self, v: k.Expr, t: np.dtype) -> str:
        if v.dtype == t and t in _EXACT:
            return self.expr(v)  # Numba computes these types as the IR does
        return super().value(v, t)

    def stmts(self, body: tuple[k.Stmt, ...], indent: str) -> list[str]:
        out: list[str] = []
        prange = False
        for s in body:
            if isinstance(s, k.Pragma):
                assert s.parts == ("prange",), s.parts
                prange = True
                continue
            if s.source:
                out.append(f"{indent}# {s.source}")
            if prange:
                assert isinstance(s, k.Loop), s
                out.extend(self.loop(s, indent, parallel=True))
                prange = False
            else:
                out.extend(self.stmt(s, indent))
        return out or [f"{indent}pass"]

    def indices(self, idx: tuple[k.Expr, ...]) -> str:
        """Indices of an array handed in, as unsigned integers: the geometry keeps them
        non-negative, and Numba then skips the negative-index wraparound it would test on
        every access (which keeps LLVM from vectorizing the loop)."""
        return ", ".join(f"_np.uint64({self.expr(i)})" for i in idx)

    def stmt(self, s: k.Stmt, indent: str) -> list[str]:
        match s:
            case k.Store(buffer=b, indices=idx, value=v) if len(idx) > 1:
                return [f"{indent}{b.base.name}[{self.indices(idx)}] = "
                        f"{self.value(v, b.element_type)}"]
            case k.Declare(symbol=sym, value=v) if sym.pointer:
                assert v is not None
                return [f"{indent}{sym.name} = {self.expr(v)}"]
            case k.DeclareArray(buffer=b, size=n):
                return [f"{indent}{b.base.name} = _np.empty({self.expr(n)}, "
                        f"{numpy_type(b.element_type)})"]
            case k.Return(value=v):
                return [f"{indent}return {self.expr(v)}"]
            case k.Evaluate(value=v):
                return [f"{indent}{self.expr(v)}"]
            case k.Block(body=body):
                return self.stmts(body, indent)
        return super().stmt(s, indent)

    def loop(self, s: k.Loop, indent: str, parallel: bool = False) -> list[str]:
        assert s.parallel is None, "platform-lowered IR has no parallel loops"
        if not parallel:
            return super().loop(s, indent)
        assert isinstance(s.step, k.Constant) and int(s.step.value) == 1, s.step
        body = self.stmts(s.body, indent + "    ")
        return [f"{indent}for {s.counter.name} in _nb.prange({self.expr(s.start)}, "
                f"{self.expr(s.stop)}):", *body]

    def function(self, arguments: tuple[k.ArgumentKey, ...] | None = None) -> str:
        """The function; ``arguments``: the keys of its parameters in the caller's order
        (None: the kernel's parameters as they are, for a function the module calls)."""
        kf = self.kernel
        if arguments is None:
            names = [p.name for p in kf.params]
        else:
            names = [next((p.name for p in kf.params if _belongs(p, key)), f"unused{i}")
                     for i, key in enumerate(arguments)]
        lines = [f"def {kf.name}({', '.join(names)}):", *_docstring(kf.doc)]
        for p in kf.params:
            shape = p.get(k.ShapeOf)
            if shape is not None:
                base = next(b.base.name for b in kf.buffers if b.name == shape.buffer)
                lines.append(f"    {p.name} = {base}.shape[{shape.dim}]")
            elif p.has(k.ScalarArgument) and p.name in names and p.dtype not in (
                    dtypes.INT64, dtypes.FLOAT64, dtypes.BOOL):
                # Python numbers arrive as int64/float64: give them the parameter's type
                lines.append(f"    {p.name} = {numpy_type(p.dtype)}({p.name})")
        return "\n".join(lines + self.stmts(kf.body, "    "))


def _docstring(doc: str) -> list[str]:
    lines = doc.replace("\\", "\\\\").replace('"""', "'''").splitlines() or [""]
    if len(lines) == 1:
        return [f'    """{lines[0]}"""']
    return [f'    """{lines[0]}', *(f"    {x}" if x else "" for x in lines[1:]), '    """']


KERNEL_DECORATOR = ('_kernel = _nb.njit(error_model="numpy", cache=True, nogil=True, '
                    'inline="always")\n'
                    '_kernel_not_inlined = _nb.njit(error_model="numpy", cache=True, nogil=True)\n')
#: CPython compiles a call with more positional arguments than this as f(*args), and Numba
#: cannot inline a call made that way ("Calling a closure with *args is unsupported")
MAX_INLINED_ARGUMENTS = 30


def lowered_module(functions: tuple[tuple[k.KernelFunction, tuple[k.ArgumentKey, ...] | None],
                                     ...],
                   header: str) -> str:
    """A module of platform-lowered kernel functions: each internal one compiled for the
    others to call, the last one (called with the argument keys given with it) compiled as
    the module's ``parallel`` entry point."""
    helpers: set[tuple[str, np.dtype]] = set()
    texts = []
    for kf, arguments in functions:
        printer = NumbaModulePrinter(kf)
        text = printer.function(arguments)
        helpers |= printer.helpers
        decorator = ("@_kernel\n" if len(kf.params) <= MAX_INLINED_ARGUMENTS
                     else "@_kernel_not_inlined\n")
        texts.append((decorator if kf.internal else "") + text)
    helper_defs = [f"@_helper\n{helper_source(op, t)}\n"
                   for op, t in sorted(helpers, key=lambda h: (h[0], str(h[1])))]
    entry = functions[-1][0].name
    return "\n".join([header, PRELUDE + KERNEL_DECORATOR, *helper_defs, "",
                      "\n\n\n".join(texts), "", "",
                      "# What a call from Python runs: the prange loops on Numba's threads, or",
                      "# serially where the kernel IR's run-in-parallel condition fails (a ParLoop",
                      "# colour of one block; compiled on first use).",
                      f'parallel = _nb.njit(parallel=True, error_model="numpy", cache=True, '
                      f"nogil=True)({entry})",
                      f'serial = _nb.njit(error_model="numpy", cache=True, nogil=True)({entry})',
                      ""])


def kernel_module(kernel: k.KernelFunction, arguments: tuple[k.ArgumentKey, ...]) -> str:
    """The generated module of a lowered point kernel."""
    header = (f"# Generated by stencilkit: {kernel.doc}.\n"
              "# Compiled by Numba; edits are overwritten.")
    return NumbaPrinter(kernel).module(arguments, header)
