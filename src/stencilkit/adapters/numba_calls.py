"""Point kernels called from inside ``numba.njit`` functions (contract.md section 1).

A stencil's Numba type (``numba.typeof(blur)``, through ``PointStencil._numba_type_``) is a
``PointStencilType``: a function type keyed by the stencil's name and the digest of its
definition and options, so that a function compiled with ``cache=True`` that takes the stencil
as an argument is never served machine code compiled for another definition (the types of
the arguments are part of Numba's cache key; a stencil captured in a closure is hashed into
it through its pickle, which carries the digest; a caller using a stencil of another module
is not cached at all, see ``_cache_guard``).

Typing a call ``blur(a, b, out=o)`` runs the stencil's own checks on the argument types (the
same ``StencilError``s as a call from Python, raised when the caller is compiled) and builds
the kernel of the "numba" backend for those types, whatever the stencil's backend. The call is
an ``@overload`` with ``inline="always"``: its implementation, and the kernel's ``inline``
variant inside it, are inlined into the caller before Numba's parallel passes run, so the
kernel's ``prange`` loops run in parallel exactly when the caller has ``parallel=True`` (as
``numba.stencil`` does), and serially in a plain ``njit`` function. What only values decide
(``out``'s shape, secondary arrays' shapes, indices out of range) is checked at run time and
raises the same ``ArgumentError`` as from Python.
"""

from __future__ import annotations

import operator
import weakref
from typing import TYPE_CHECKING

import numba
import numpy as np
from numba import types
from numba.core.typing.templates import make_overload_template
from numba.extending import NativeValue, intrinsic, models, register_model, unbox
from numba.np.numpy_support import as_dtype

from .. import dtypes
from ..analysis.typing import ArgType
from ..errors import ArgumentError, Location, StencilError
from ..runtime.launch import out_shape_error, secondary_shape_error, status_error

if TYPE_CHECKING:
    from ..api.stencil import PointStencil

#: The live stencils by digest (typing a call finds its stencil here).
_LIVE: weakref.WeakValueDictionary[str, PointStencil] = weakref.WeakValueDictionary()


class PointStencilType(types.Function):
    """The Numba type of a point kernel: one per definition (name and digest). Subclasses
    (``numba_computation_calls.ComputationStencilType``) change what is looked up and how a
    call is typed."""

    kind = "stencilkit.PointStencil"
    label = "stencilkit.stencil"
    #: whether Numba checks the implementation's signature against the typing function's
    strict = True

    def __init__(self, name: str, digest: str) -> None:
        self.stencil_key = (self.kind, name, digest)
        self.arity_known = digest in self.live()
        super().__init__(self._template())
        self.name = f"{self.label}({name}, {digest[:16]})"

    @staticmethod
    def live() -> weakref.WeakValueDictionary:
        """The live stencils of this kind by digest (typing a call finds its stencil here)."""
        return _LIVE

    def typer(self):
        return _typer(*self.stencil_key[1:])

    def _template(self):
        return make_overload_template(self.stencil_key, self.typer(), {}, self.strict,
                                      "always")

    def get_call_type(self, context, args, kws):
        if not self.arity_known and self.stencil_key[2] in self.live():
            # made (unpickled from a cache index) before its stencil was defined here
            self.templates = (self._template(),)
            self.arity_known = True
        return super().get_call_type(context, args, kws)

    @property
    def key(self):
        return self.stencil_key

    def __reduce__(self):
        return (_type_of, (*self.stencil_key[1:], type(self)))


def register(cls: type[PointStencilType]) -> type[PointStencilType]:
    """Gives a stencil type Numba's data model and unboxing (looked up by exact class)."""
    register_model(cls)(models.OpaqueModel)

    @unbox(cls)
    def _unbox(typ, obj, c):
        # The type says everything: the value passed at run time is not looked at.
        return NativeValue(c.context.get_dummy_value())

    return cls


register(PointStencilType)

_TYPES: dict[tuple[type, str], PointStencilType] = {}


def _type_of(name: str, digest: str, cls: type[PointStencilType] = PointStencilType
             ) -> PointStencilType:
    t = _TYPES.get((cls, digest))
    if t is None:
        t = _TYPES[cls, digest] = cls(name, digest)
    return t


def stencil_type(st: PointStencil) -> PointStencilType:
    _LIVE[st.digest] = st
    return _type_of(st.__name__, st.digest)


# ----------------------------------------------------------------------------- typing


def _typer(name: str, digest: str):
    """The typing function of the stencil's calls: positional arguments then ``out=``,
    generated with the stencil's own arity (Numba folds arguments by the signature)."""
    def resolve(args: tuple, out: object):
        st = _LIVE.get(digest)
        if st is None:
            raise StencilError("this stencil no longer exists in this process", stencil=name,
                               hint="keep a reference to the stencil while jitted code "
                                    "that calls it is compiled")
        return _implementation(st, args, out)

    live = _LIVE.get(digest)
    if live is None:
        # A type unpickled from a cache index for a definition this process does not have:
        # it is never called (the entry is not used), only compared.
        def typer(*args, out=None):
            return resolve(args, out)
        return typer
    kernel, _ = live._parse()
    params = [f"x{i}" for i in range(len(kernel.params))]
    text = (f"def typer({', '.join(params)}, out=None):\n"
            f"    return resolve(({', '.join(params)},), out)\n")
    namespace: dict[str, object] = {"resolve": resolve}
    exec(text, namespace)
    return namespace["typer"]


def _arg_type(st: PointStencil, param: str, t: types.Type) -> ArgType:
    if isinstance(t, types.Array):
        dt = as_dtype(t.dtype)
        if dt not in dtypes.SUPPORTED:
            raise ArgumentError(f"argument '{param}' has unsupported dtype {dt}",
                                stencil=st.__name__, loc=st._parse()[0].loc,
                                hint="use bool, (u)int8-64, float32/64 or complex64/128")
        return ArgType(dt, t.ndim)
    if isinstance(t, types.IntegerLiteral):
        return ArgType(dtypes.of_python_value(int(t.literal_value)))
    if isinstance(t, types.BooleanLiteral):
        return ArgType(dtypes.BOOL)
    if isinstance(t, (types.Boolean, types.Integer, types.Float, types.Complex)):
        return ArgType(as_dtype(t))
    raise ArgumentError(f"argument '{param}' is {t}, not an array or a number",
                        stencil=st.__name__, loc=st._parse()[0].loc,
                        hint="pass NumPy arrays (or numbers for scalar parameters)")


def _implementation(st: PointStencil, args: tuple, out: object):
    kernel, _ = st._parse()
    arg_types = tuple(_arg_type(st, p, t) for p, t in zip(kernel.params, args))
    if out is None or isinstance(out, (types.NoneType, types.Omitted)):
        okey = None
    elif isinstance(out, types.Array):
        if not out.mutable:
            raise ArgumentError("'out' is read-only", stencil=st.__name__, loc=kernel.loc,
                                hint="pass a writable array as out=")
        okey = (as_dtype(out.dtype), out.ndim, True)
        if okey[0] not in dtypes.SUPPORTED:
            raise ArgumentError(f"'out' has unsupported dtype {okey[0]}", stencil=st.__name__,
                                loc=kernel.loc, hint="pass out= as an array of bool, "
                                "(u)int8-64, float32/64 or complex64/128")
    else:
        raise ArgumentError("'out' must be a NumPy array", stencil=st.__name__,
                            loc=kernel.loc, hint="pass out= as a NumPy array")
    spec = st._typed_call(arg_types, okey)
    _, module = st._numba_module(spec.typed, spec.out_dtype)
    return _generated_impl(st, len(args), okey is not None, spec, module.inline, kernel.loc)


def _generated_impl(st: PointStencil, n: int, has_out: bool, spec, kernel_fn,
                    loc: Location | None):
    """The implementation of one typed call, as Python source with the stencil's arity:
    allocate or check ``out``, copy inputs that overlap it, run the kernel, raise on its
    status."""
    xs = [f"x{i}" for i in range(n)]
    lines = [f"def impl({', '.join(xs)}, out=None):", "    pin()"]
    first = xs[0]
    for i in spec.relative:
        if i:
            lines += [f"    if _smaller({xs[i]}.shape, {first}.shape):",
                      f"        raise _JitArgumentError('secondary', NAME, LOC, {i}, "
                      f"{xs[i]}.shape, {first}.shape)"]
    if has_out:
        lines += [f"    if out.shape != {first}.shape:",
                  f"        raise _JitArgumentError('out', NAME, LOC, out.shape, {first}.shape)"]
        # an input sharing memory with out is read as it was before the call
        for i in spec.arrays:
            lines.append(f"    {xs[i]} = {xs[i]}.copy() if _overlap({xs[i]}, out) else {xs[i]}")
        target, fill = "out", "HAS_CVAL"
    else:
        lines.append(f"    result = _np.empty({first}.shape, OUT_DTYPE)")
        target, fill = "result", "True"
    lines += [f"    status = kernel({', '.join(xs)}, {target}, {fill}, CVAL)",
              "    if status != 0:",
              "        raise _JitArgumentError('status', NAME, LOC, status)",
              f"    return {target}"]
    namespace: dict[str, object] = {
        "_np": np, "kernel": kernel_fn, "pin": _cache_guard(st), "_smaller": _smaller, "_overlap": _overlap,
        "_JitArgumentError": JitArgumentError, "NAME": st.__name__, "LOC": _loc_text(loc),
        "OUT_DTYPE": spec.out_dtype, "CVAL": spec.out_dtype.type(spec.cval),
        "HAS_CVAL": st.cval is not None}
    exec("\n".join(lines) + "\n", namespace)
    return namespace["impl"]


def _cache_guard(st: object):
    """An intrinsic the call runs first, which makes a caller compiled with ``cache=True``
    uncached when the stencil comes from another module. Numba checks a cached function
    against its own file only: a stencil of the caller's module is covered by that check, and
    one passed as an argument or captured in a closure also by its digest (the argument's
    type, the closure's pickle), but a stencil imported from another module could change
    without any of them noticing. A dynamic address makes Numba refuse to cache the caller
    (with a NumbaWarning); it is compiled and runs as usual."""
    module = getattr(st, "__module__", None)

    @intrinsic
    def pin(typingctx):
        def codegen(context, builder, signature, args):
            caller = getattr(getattr(context, "fndesc", None), "modname", None)
            if caller is None or caller != module:
                context.add_dynamic_addr(builder, id(st), info=f"stencil {st.__name__}")
                # an atomic load keeps the global through LLVM's dead-code elimination:
                # Numba looks for it in the optimized module
                gv = builder.module.get_global(f"numba.dynamic.globals.{id(st):x}")
                builder.load_atomic(gv, "monotonic", 8)
            return context.get_dummy_value()
        return types.none(), codegen

    return pin


def _loc_text(loc: Location | None) -> tuple[str, int, int] | None:
    # a plain tuple: constant arguments of exceptions raised in jitted code are pickled
    return None if loc is None else (loc.filename, loc.line, loc.col)


@numba.njit(inline="always")
def _smaller(shape, first):
    for n, m in zip(shape, first):
        if n < m:
            return True
    return False


@numba.njit
def _extent(a):
    lo = a.ctypes.data
    hi = lo
    for dim in range(a.ndim):
        if a.shape[dim] == 0:
            return lo, lo
        span = (a.shape[dim] - 1) * a.strides[dim]
        if span < 0:
            lo += span
        else:
            hi += span
    return lo, hi + a.itemsize


@numba.njit
def _overlap(a, b):
    """Whether the memory spans of two arrays meet (NumPy's ``may_share_memory``)."""
    lo1, hi1 = _extent(a)
    lo2, hi2 = _extent(b)
    return lo1 < hi2 and lo2 < hi1 and lo1 != hi1 and lo2 != hi2


class JitArgumentError(ArgumentError):
    """An ``ArgumentError`` raised inside jitted code: Numba builds it from the check's kind
    and the values it saw, and it reads exactly as the same error raised from Python."""

    def __init__(self, kind: str, stencil: str, loc: tuple[str, int, int] | None,
                 *values: object) -> None:
        where = None if loc is None else Location(*loc)
        if kind == "out":
            err = out_shape_error(values[0], values[1], stencil, where)
        elif kind == "secondary":
            err = secondary_shape_error(values[0], values[1], values[2], stencil, where)
        else:
            err = status_error(int(values[0]), stencil, where)
        super().__init__(err.bare_message, stencil=stencil, loc=where, hint=err.hint)


# ----------------------------------------------------------------------------- stencils built
# inside jitted code

#: the stencils built by jitted functions, by (code or function, options): kept alive, since
#: the compiled callers find them by digest (``_LIVE`` holds them weakly)
_BUILT: dict[tuple, PointStencil] = {}
_OPTIONS = ("neighborhood", "cval", "standard_indexing", "backend", "fast_math")


def replace_by_stencil(func_ir, instr) -> bool:
    """Numba's untyped pass that inlines closures (``InlineClosureCallPass``) replaces a call
    of ``numba.stencil`` on a lambda by a constant ``StencilFunc``; ``numba_hook`` has it
    call this for ``stencilkit.stencil``, which makes the call the ``PointStencil`` built from
    the lambda's code (with the caller's globals) or from the function, whose calls are
    typed as any stencil's (above). Options must be constants."""
    import types as pytypes

    from numba.core import ir
    from numba.core.ir_utils import get_definition, guard

    from ..api.stencil import stencil as make_stencil  # stencil.py imports this module lazily

    expr = instr.value
    where = Location(expr.loc.filename, expr.loc.line, (expr.loc.col or 0) + 1)
    if len(expr.args) != 1 or expr.vararg is not None:
        raise StencilError("stencil() in jitted code takes the kernel as its one positional "
                           "argument", loc=where, hint="pass options by keyword")
    kernel = guard(get_definition, func_ir, expr.args[0])
    caller_globals = func_ir.func_id.func.__globals__
    if isinstance(kernel, ir.Expr) and kernel.op == "make_function":
        if kernel.closure is not None or kernel.defaults is not None:
            raise StencilError("a lambda that stencil() builds in jitted code cannot use the "
                               "jitted function's variables or defaults", loc=where,
                               hint="use module-level names, or build the stencil outside "
                                    "and pass it in")
        code = kernel.code
        key_of: object = code
        func = pytypes.FunctionType(code, caller_globals, code.co_name)
    elif isinstance(kernel, (ir.Global, ir.FreeVar)) and isinstance(
            kernel.value, pytypes.FunctionType):
        func = key_of = kernel.value
    else:
        raise StencilError("stencil() in jitted code takes a lambda or a function",
                           loc=where, hint="write stencil(lambda a: ...) or stencil(kernel) "
                                           "with kernel a module-level function")
    options: dict[str, object] = {}
    for name, var in expr.kws:
        value = _constant(func_ir, var) if name in _OPTIONS else _NOT_CONSTANT
        if value is _NOT_CONSTANT:
            raise StencilError(f"option '{name}' of stencil() in jitted code must be a "
                               f"constant, one of {', '.join(_OPTIONS)}", loc=where,
                               hint="write the option's value literally in the call")
        options[name] = value
    key = (key_of, tuple(sorted((k, repr(v)) for k, v in options.items())))
    st = _BUILT.get(key)
    if st is None:
        st = _BUILT[key] = make_stencil(func, **options)
    built = ir.Global("stencil", st, expr.loc)
    func_ir._definitions[instr.target.name] = [built]
    instr.value = built
    return True


_NOT_CONSTANT = object()


def _constant(func_ir, var) -> object:
    """The value of ``var`` where the IR makes it from constants only (tuples of them, as
    ``neighborhood=((-1, 1),)`` is built), else ``_NOT_CONSTANT``."""
    from numba.core import ir
    from numba.core.ir_utils import get_definition, guard

    node = guard(get_definition, func_ir, var)
    if isinstance(node, (ir.Const, ir.Global, ir.FreeVar)):
        return node.value
    if isinstance(node, ir.Expr) and node.op == "build_tuple":
        items = tuple(_constant(func_ir, v) for v in node.items)
        return _NOT_CONSTANT if _NOT_CONSTANT in items else items
    if isinstance(node, ir.Expr) and node.op == "unary" and node.fn in ("-", operator.neg):
        inner = _constant(func_ir, node.value)
        return _NOT_CONSTANT if inner is _NOT_CONSTANT else -inner
    return _NOT_CONSTANT

