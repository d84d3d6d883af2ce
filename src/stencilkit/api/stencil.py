"""``@sk.stencil``: point-kernel objects with a lazy build per argument signature.

The first call with a new signature (dtypes, ndims, unit-stride layout of each array,
scalar types, ``out`` dtype) runs the pipeline and builds code; later calls look the
signature up and go straight to the compiled entry (``runtime.launch.PointCall``).
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from types import FunctionType
from typing import NamedTuple

import numpy as np

from .. import adapters, config, dtypes, registry
from ..analysis.neighborhood import MAX_OFFSET, Neighborhood
from ..analysis.typing import ArgType
from ..build import cache
from ..compile import driver
from ..compile.point import TypedPointKernel, analyse
from ..compile.requests import PointRequest
from ..errors import (
    ArgumentError,
    Location,
    StencilError,
    StencilSyntaxError,
    StencilTypeError,
    at_call,
    definition_trimmed,
    did_you_mean,
)
from ..frontend.computation import is_computation
from ..frontend.point_kernel import parse_point_kernel
from ..frontend.source import SourceFunction
from ..ir import border_modes
from ..ir import definition as d
from ..log import build_event
from ..lower.point import Layout
from ..runtime import hostile
from ..runtime.launch import PointCall, check_shapes

_POINT_OPTIONS = {"neighborhood", "cval", "standard_indexing", "func_or_mode", "backend",
                  "fast_math", "dims", "autotune"}
_COMPUTATION_OPTIONS = {"backend", "externals", "dtypes", "fast_math", "autotune"}
_SCALAR_TYPES = (bool, int, float, complex, np.generic)


_I64 = 2**63
_I64_MIN = -(2**63)  # a constant: the call path compares with it per int argument


def _array_key(a: np.ndarray) -> tuple:
    """Must equal the key ``PointStencil.__call__`` computes inline (for NumPy arrays)."""
    return (a.dtype, a.ndim, a.strides[-1] == a.itemsize)


def _scalar_key(a: object) -> object:
    """Must equal the key ``PointStencil.__call__`` computes inline: a Python int outside
    int64 is typed uint64 (as Numba does), so it may not share int64's specialization."""
    if type(a) is int and not _I64_MIN <= a < _I64:
        return _int_key(a)
    return type(a)


def _int_key(a: int) -> str:
    return "uint64" if _I64 <= a < 2**64 else "overflow"


def _location(func: object):
    code = getattr(func, "__code__", None)
    return None if code is None else Location(code.co_filename, code.co_firstlineno, 1)


def _checked_neighborhood(neighborhood: object, func: object) -> Neighborhood | None:
    """``neighborhood=`` as a tuple of integer (lo, hi) pairs, or a StencilTypeError."""
    if neighborhood is None:
        return None
    name = getattr(func, "__name__", "stencil")
    hint = "pass neighborhood=((lo, hi), ...) with one pair of integers per dimension, lo <= hi"
    try:
        pairs = tuple(tuple(p) for p in neighborhood)  # type: ignore[union-attr]
    except TypeError:
        pairs = None
    if not pairs or any(len(p) != 2 for p in pairs) or any(
            isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer))
            for p in pairs for x in p):
        raise StencilTypeError(f"malformed neighborhood={neighborhood!r}", stencil=name,
                               loc=_location(func), hint=hint)
    out = tuple((int(lo), int(hi)) for lo, hi in pairs)
    for lo, hi in out:
        if lo > hi or max(abs(lo), abs(hi)) > _MAX_OFFSET:
            raise StencilTypeError(
                f"neighborhood pair {(lo, hi)} " + ("has lo > hi" if lo > hi else
                                                    f"exceeds {_MAX_OFFSET} in magnitude"),
                stencil=name, loc=_location(func), hint=hint)
    return out


def _caller_location() -> Location | None:
    """Where the user called ``stencil(...)`` (the first frame outside this module)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return None if frame is None else Location(frame.f_code.co_filename, frame.f_lineno, 1)


def _checked_dims(dims: object, func: object) -> tuple[str, ...] | None:
    """``dims=`` as a tuple of distinct dimension names, or a StencilTypeError."""
    if dims is None:
        return None
    names = (dims,) if isinstance(dims, str) else dims
    try:
        names = tuple(names)  # type: ignore[arg-type]
    except TypeError:
        names = None  # type: ignore[assignment]
    if (not names or not all(isinstance(n, str) for n in names)
            or len(set(names)) != len(names)):
        raise StencilTypeError(f"malformed dims={dims!r}",
                               stencil=getattr(func, "__name__", "stencil"),
                               hint="pass dims=(\"name\", ...) with one distinct dimension name "
                                    "per axis of the kernel, e.g. dims=(\"latitude\", \"longitude\")")
    return names


_MAX_OFFSET = MAX_OFFSET
# whether ``PointStencil``'s call slot is a C module's ``sk_tp_call`` (``_install_fast_call``)
_SLOT = [False]


class PointStencil:
    """A Numba-compatible point kernel (contract.md section 1)."""

    def __init__(self, func: FunctionType, *, neighborhood: Neighborhood | None = None,
                 cval: object = None, standard_indexing: tuple[str, ...] | list[str] = (),
                 backend: str | None = None, mode: border_modes.Mode = "constant",
                 dims: tuple[str, ...] | None = None, fast_math: bool | None = None,
                 autotune: str | None = None) -> None:
        self.func = func
        self.__name__ = getattr(func, "__name__", "stencil")
        # xarray: the dimension names the kernel's axes run over (contract.md section 9)
        self.dims = _checked_dims(dims, func)
        self.__doc__ = func.__doc__
        self.__wrapped__ = func
        self.explicit_neighborhood = _checked_neighborhood(neighborhood, func)
        self.cval = cval
        self.standard_indexing = tuple(standard_indexing or ())
        self.backend = backend
        # the border mode (func_or_mode): one name, or a tuple of one per axis (ir.border_modes)
        self.mode = mode
        # contraction allowed (docs/numerics.md); None: sk.configure's default, read now
        self.fast_math = config.checked_fast_math(fast_math, self.__name__, _location(func))
        # measured choices of the C backend (docs/performance.md); None: sk.configure's,
        # read at each call
        self.autotune = config.checked_autotune(autotune, self.__name__, _location(func))
        self._neighborhood: Neighborhood | None = self.explicit_neighborhood
        self._parsed: tuple[d.PointKernel, SourceFunction] | None = None
        self._specs: dict[tuple, PointCall] = {}
        # The C specialization of the latest call with out= whose arrays all have a unit last
        # stride, and the exact argument types (and dtype objects) of that call: the next
        # call with the same types goes straight to its entry (``codegen.c.exact_entry``).
        self._exact: tuple[PointCall, tuple] | None = None
        self._last: tuple[str, TypedPointKernel, str] | None = None
        # what the C call slot runs for a call with out= (``_install_fast_call``)
        self._sk_fast: tuple | None = None
        # the calls on device arrays bound per signature (``adapters.device``; None before
        # the first): tried first, it answers None for a call it has not bound
        self._device: Callable[[tuple, object], object] | None = None

    def _details(self) -> dict[str, object]:
        return {"mode": self.mode, "neighborhood": self._neighborhood, "cval": self.cval,
                "dims": self.dims, "fast_math": self.fast_math or None,
                "autotune": self.autotune,
                "specializations": len(self._specs) or None}

    def __repr__(self) -> str:
        from .show import describe

        return describe("PointStencil", self.func, self.__name__, self.backend,
                        self._details())

    def _repr_html_(self) -> str:
        from .show import html_table

        return html_table("PointStencil", self.func, self.__name__, self.backend,
                          self._details())

    def __reduce__(self):
        return adapters.reduce(self)  # by definition and options (dask.distributed, ...)

    # ------------------------------------------------------------ introspection

    @property
    def neighborhood(self) -> Neighborhood | None:
        """The neighbourhood: as given, or as inferred by the first call (None before)."""
        return self._neighborhood

    @property
    def ir(self) -> str:
        """The typed definition IR of the latest specialization (the parsed IR before any call)."""
        if self._last is not None:
            return d.format_point_kernel(self._last[1].kernel)
        return d.format_point_kernel(self._parse()[0])

    def generate(self, *args: object, backend: str | None = None, out: object = None) -> str:
        """Generated source for ``args`` (default: the arguments of the latest call)."""
        if args:
            arrays = self._normalize(tuple(adapters.host_view(a) for a in args))
            okey = _array_key(out) if isinstance(out, np.ndarray) else None
            return self._build(arrays, okey, backend, out is not None, generate=True,
                               render=True)
        if self._last is None:
            raise StencilError("the stencil has not been called yet, so its argument types "
                               "are unknown", stencil=self.__name__,
                               hint="call it once, or pass example arguments: "
                                    "st.generate(a, b, ...)")
        if backend is None or backend == self._last[0]:
            return self._last[2]
        # another backend, for the argument types of the latest call
        typed, layout, out_dtype, types = self._last_build
        chosen = registry.resolve(backend, self.__name__, generate=True)
        chosen.require("point", self.__name__, (*(t.dtype for t in types), out_dtype))
        _, src = self._parse()
        return driver.render(PointRequest(chosen, typed, layout, src, out_dtype, types,
                                          self.mode, self.fast_math)).source

    # ------------------------------------------------------------ the call path

    def __call__(self, *args: object, out: np.ndarray | None = None, **kwargs: object):
        if kwargs:
            raise ArgumentError(f"unexpected keyword argument(s) {sorted(kwargs)}",
                                stencil=self.__name__, hint="only out= may be passed by name")
        try:
            device = self._device
            if device is not None:
                result = device(args, out)
                if result is not None:
                    return result
            exact = self._exact
            if exact is not None and out is not None:
                call = exact[0]
                try:
                    status = call.exact(exact[1], *args, out, call.has_cval, call.cval)
                except (TypeError, ValueError, BufferError, OverflowError):
                    pass  # other types, or a refusal: the keyed path below decides and reports
                else:
                    return call._after(status, args, out) if status else out
            try:
                # The signature: (dtype, ndim, unit last stride) per array, the type of a scalar.
                key = tuple([(a.dtype, a.ndim, a.strides[-1] == a.itemsize)
                             if type(a) is np.ndarray else type(a) if type(a) is not int
                             or _I64_MIN <= a < _I64 else _int_key(a) for a in args])
                call = self._specs.get(
                    (key, None if out is None else (out.dtype, out.ndim,
                                                    out.strides[-1] == out.itemsize)))
            except Exception:  # noqa: BLE001 - out is no array, a 0-d array, or raises when read
                call = None
            if call is None:
                return self._first_call(args, out)
            if out is None or type(call) is not PointCall:  # subclasses check in Python
                return call(args, out)
            if call.exact is not None and out.strides[-1] == out.itemsize and \
                    all(k[2] if type(k) is tuple else type(k) is not str for k in key):
                # not for an int outside int64 (its key is a string): its specialization
                # converts differently, and the type alone (int) would not tell the two apart
                self._exact = (call, tuple(x for a in (*args, out, call.has_cval, call.cval)
                                           for x in (type(a), a.dtype if type(a) is np.ndarray
                                                     else None)))
                self._install_fast_call(call, self._exact[1])
            # A C entry point with the caller's out, called here rather than through
            # PointCall.__call__ (one Python frame less per call): it checks the arguments
            # itself before running anything, so on a refusal the PointCall runs it again and
            # reports.
            try:
                status = call.entry(*args, out, call.has_cval, call.cval)
            except (ValueError, BufferError, TypeError):
                return call(args, out)
            return call._after(status, args, out) if status else out
        except StencilError as exc:
            raise at_call(exc, sys._getframe(1)) from exc.__cause__
        except Exception as exc:  # an argument's own code raised: say which one
            blamed = self._blame(exc, args, out)
            if blamed is None:
                raise
            raise at_call(blamed, sys._getframe(1)) from exc

    def _blame(self, exc: Exception, args: tuple, out: object):
        """An ArgumentError naming the argument whose own code raised ``exc``, or None."""
        code = getattr(self.func, "__code__", None)
        names = code.co_varnames[:code.co_argcount] if code is not None else ()
        named = [(f"argument {i + 1}" + (f" ('{names[i]}')" if i < len(names) else ""), a)
                 for i, a in enumerate(args)] + [("'out'", out)]
        return hostile.blame(exc, named, self.__name__, _location(self.func))

    def _install_fast_call(self, call: PointCall, expected: tuple) -> None:
        """Calls with the types of this one (and ``out=``) skip the Python ``__call__``: the
        instance's ``_sk_fast`` names this specialization's C entry, which the class's call
        slot (``codegen.c.call_slot``: ``sk_tp_call``, installed on ``PointStencil`` once by
        the first C module that can) runs after its exact-type test.

        Only plain ``PointStencil`` objects bind (a subclass may define its own ``__call__``:
        its slot is Python's, which never reads the state)."""
        if type(self) is not PointStencil or call.exact is None:
            return
        if not _SLOT[0]:
            install = getattr(getattr(call.entry, "__self__", None), "install_slot", None)
            if install is None:
                return
            install(PointStencil)
            _SLOT[0] = True
        self._sk_fast = (call.exact, expected, call.has_cval, call.cval, call._after)

    def _first_call(self, args: tuple[object, ...], out: object):
        # MPI-distributed, device (CuPy, pyopencl), dask and xarray arrays: an adapter runs
        # the call (a call with NumPy arrays only never asks)
        adapter = adapters.for_call(args, (out,))
        if adapter is not None:
            return adapter.point_call(self, args, out)
        if out is not None and not isinstance(out, np.ndarray):
            raise ArgumentError("'out' must be a NumPy array", stencil=self.__name__,
                                hint="pass out= as a NumPy array")
        args = self._normalize(args)
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray) and a.ndim == 0:
                raise ArgumentError(f"argument {i + 1} is a 0-dimensional array",
                                    stencil=self.__name__,
                                    hint="pass a number for a scalar, or an array with dimensions")
        if out is not None and out.ndim == 0:
            raise ArgumentError("'out' is a 0-dimensional array", stencil=self.__name__,
                                hint="pass out= with the shape of the first argument")
        key = tuple(_array_key(a) if type(a) is np.ndarray else _scalar_key(a) for a in args)
        okey = None if out is None else _array_key(out)
        call = self._specs.get((key, okey))
        if call is None:
            call = self._specialize(args, out, key, okey)
        return call(args, out)

    def _normalize(self, args: tuple[object, ...]) -> tuple[object, ...]:
        out = []
        for i, a in enumerate(args):
            if type(a) is np.ndarray or isinstance(a, _SCALAR_TYPES):
                out.append(a)
            elif isinstance(a, np.ndarray):  # a subclass (memmap, ...): a plain view, so that
                out.append(a.view(np.ndarray))  # the signature key sees its dtype and layout
            elif isinstance(a, (list, tuple)) or hasattr(a, "__array_interface__") \
                    or hasattr(a, "__array__") or hasattr(a, "__dlpack__"):
                try:
                    out.append(np.asarray(a))
                except (ValueError, TypeError, OverflowError) as exc:
                    raise ArgumentError(f"argument {i + 1} does not convert to an array: {exc}",
                                        stencil=self.__name__, loc=_location(self.func),
                                        hint="pass a NumPy array (lists must be rectangular "
                                             "and hold numbers)") from None
            else:
                raise ArgumentError(f"argument {i + 1} is a {type(a).__name__}, not an array or "
                                    "a number", stencil=self.__name__,
                                    hint="pass NumPy arrays (or numbers for scalar parameters)")
        # Non-native byte order: a native copy, computed on like any other array.
        return tuple(a.astype(a.dtype.newbyteorder("="))
                     if isinstance(a, np.ndarray) and not a.dtype.isnative else a for a in out)

    def _specialize(self, args, out, key, okey) -> PointCall:
        if out is not None and out.dtype not in dtypes.SUPPORTED:
            native = "" if out.dtype.isnative else " (non-native byte order)"
            raise ArgumentError(f"'out' has unsupported dtype {out.dtype}{native}",
                                stencil=self.__name__, loc=_location(self.func),
                                hint="pass out= as a native-byte-order array of bool, (u)int8-64, "
                                     "float32/64 or complex64/128")
        call = self._build(args, okey, None, out is not None, out=out)
        self._specs[(key, okey)] = call
        return call

    def _parse(self) -> tuple[d.PointKernel, SourceFunction]:
        if self._parsed is None:
            self._parsed = parse_point_kernel(self.func, self.standard_indexing)
        return self._parsed

    def _arg_types(self, args: tuple[object, ...]) -> tuple[ArgType, ...]:
        kernel, _ = self._parse()
        if len(args) != len(kernel.params):
            raise ArgumentError(f"the kernel takes {len(kernel.params)} argument(s) "
                                f"({', '.join(kernel.params)}), {len(args)} given",
                                stencil=self.__name__, loc=kernel.loc,
                                hint=f"call it with {len(kernel.params)} arguments")
        types = []
        for p, a in zip(kernel.params, args):
            if isinstance(a, np.ndarray):
                if a.dtype not in dtypes.SUPPORTED:
                    raise ArgumentError(f"argument '{p}' has unsupported dtype {a.dtype}",
                                        stencil=self.__name__, loc=kernel.loc,
                                        hint="use bool, (u)int8-64, float32/64 or complex64/128")
                types.append(ArgType(a.dtype, a.ndim))
            elif type(a) is int and not -_I64 <= a < 2**64:
                raise ArgumentError(f"argument '{p}' = {a} does not fit in a 64-bit integer",
                                    stencil=self.__name__, loc=kernel.loc,
                                    hint="pass an integer in [-2**63, 2**64) (or a float)")
            else:
                types.append(ArgType(dtypes.of_python_value(a)))
        return tuple(types)

    def _build(self, args, okey, backend: str | None, has_out: bool,
               generate: bool = False, render: bool = False, out: np.ndarray | None = None):
        """The call of this signature built (``generate``: for a backend that need not run
        here; ``render``: its source only, nothing compiled); ``out``: the first call's, which
        the backend's tuner may time its candidates on."""
        try:
            return self._build_unguarded(args, okey, backend, has_out, generate, render, out)
        except RecursionError:
            # Long operator chains are split when parsed; what remains too deep is nesting
            # inside conditional expressions or and/or chains.
            raise StencilSyntaxError(
                "an expression is nested too deeply to compile (a conditional expression or "
                "an and/or chain of many hundreds of terms)", stencil=self.__name__,
                loc=_location(self.func),
                hint="split the expression into several assignments to local variables"
            ) from None

    def _build_unguarded(self, args, okey, backend: str | None, has_out: bool,
                         generate: bool = False, render: bool = False,
                         out: np.ndarray | None = None):
        kernel, src = self._parse()
        name = self.__name__
        types = self._arg_types(args)
        typed, out_dtype, cval, arrays, relative = self._typed_call(types, okey)
        check_shapes(args, None, relative, name, kernel.loc)
        chosen = registry.resolve(backend or self.backend, name, generate=generate)
        chosen.require("point", name, (*(t.dtype for t in types), out_dtype))
        layout = Layout(tuple(bool(isinstance(a, np.ndarray) and _array_key(a)[2])
                              for a in args),
                        okey[2] if okey is not None else True)
        request = PointRequest(chosen, typed, layout, src, out_dtype, types, self.mode,
                               self.fast_math, autotune=self.autotune)
        self._last_build = (typed, layout, out_dtype, types)
        if render:
            source = driver.render(request).source
            self._last = (chosen.name, typed, source)
            return source

        def build() -> PointCall:
            started = time.perf_counter()
            built = driver.run(request)
            source, entry = built.source, built.entry
            build_event("point kernel %r: built for backend %r (%s) in %.3f s", name,
                        chosen.name, ", ".join(str(t) for t in types),
                        time.perf_counter() - started)
            self._last = (chosen.name, typed, source)
            return chosen.launcher("point")(
                entry, out_dtype, cval,
                self.cval is not None and border_modes.any_constant(self.mode),
                name, kernel.loc, launch=built.launch, source=source)

        tune = chosen.tuner("point")  # the C backend's measured choice, if any
        return build() if tune is None else tune(request, args, build, out)

    def axis_modes(self, ndim: int) -> tuple[str, ...]:
        """The border mode of each of ``ndim`` axes; a StencilTypeError when
        ``func_or_mode`` is a tuple of another length."""
        try:
            return border_modes.per_axis(self.mode, ndim)
        except ValueError as exc:
            raise StencilTypeError(str(exc), stencil=self.__name__, loc=self._parse()[0].loc,
                                   hint=f"give func_or_mode one mode per dimension: {ndim}"
                                   ) from None

    def _typed_call(self, types: tuple[ArgType, ...], okey: tuple | None) -> TypedCall:
        """What a call with arguments of ``types`` (and ``out`` of ``okey``: dtype, ndim,
        unit stride) computes, checked as far as types decide: the typed kernel, the output
        dtype, the converted cval, the positions of the arrays and of the relative ones."""
        kernel, _ = self._parse()
        name = self.__name__
        typed = analyse(kernel, types, self.explicit_neighborhood)
        if self._neighborhood is None:
            self._neighborhood = typed.neighborhood.neighborhood
        rt = typed.kernel.return_type
        out_dtype = okey[0] if okey is not None else rt
        if okey is not None and okey[1] != typed.kernel.ndim:
            raise ArgumentError(f"'out' is {okey[1]}-D but the first argument is "
                                f"{typed.kernel.ndim}-D", stencil=name, loc=kernel.loc,
                                hint="pass out= with the shape of the first argument")
        if dtypes.is_complex(rt) and not dtypes.is_complex(out_dtype):
            raise ArgumentError(f"the kernel returns {rt} but 'out' is {out_dtype}",
                                stencil=name, loc=kernel.loc, hint="pass a complex out= array")
        self.axis_modes(typed.kernel.ndim)
        # cval applies along "constant" axes only; the other modes compute every element
        cval = (self._converted_cval(rt, out_dtype, kernel)
                if border_modes.any_constant(self.mode) else 0)
        arrays = tuple(i for i, t in enumerate(types) if t.is_array)
        relative = tuple(i for i, p in enumerate(kernel.params) if p in kernel.relative
                         and types[i].is_array)
        return TypedCall(typed, out_dtype, cval, arrays, relative)

    def _numba_module(self, typed: TypedPointKernel, out_dtype: np.dtype):
        """The generated module of the "numba" backend for one typed call (what a call from
        inside jitted code inlines, whatever the stencil's backend)."""
        _, src = self._parse()
        layout = Layout(tuple(True for _ in typed.kernel.params), True)  # (Numba's own)
        built = driver.run(PointRequest(registry.REGISTRY["numba"], typed, layout, src,
                                        out_dtype, (), self.mode, self.fast_math))
        return built.source, built.entry

    @functools.cached_property
    def digest(self) -> str:
        """A digest of the definition (the parsed IR, with the constants it captured) and the
        options: what the stencil's Numba type is keyed by, so that a function compiled with
        ``cache=True`` never runs a stencil whose definition has changed since."""
        kernel, _ = self._parse()
        text = "\n".join([d.format_point_kernel(kernel), repr(self.explicit_neighborhood),
                          repr(self.cval), repr(type(self.cval)), repr(self.standard_indexing),
                          repr(self.mode)])
        return cache.key("point-definition", text)

    @property
    def _numba_type_(self):
        """The Numba type of this stencil (read by ``numba.typeof``: numba is imported)."""
        return adapters.numba_type(self)

    def _converted_cval(self, rt: np.dtype, out_dtype: np.dtype, kernel: d.PointKernel):
        cval = 0 if self.cval is None else self.cval
        if isinstance(cval, int) and not -_I64 <= cval < 2**64:
            raise StencilTypeError(f"cval {cval!r} does not fit in a 64-bit number",
                                   stencil=self.__name__, loc=kernel.loc,
                                   hint=f"give a cval that converts to {rt}")
        if not dtypes.can_hold(cval, rt):
            raise StencilTypeError(f"cval {cval!r} does not convert to the stencil's return "
                                   f"type {rt}", stencil=self.__name__, loc=kernel.loc,
                                   hint=f"give a cval that converts to {rt}")
        if dtypes.is_int(out_dtype) and isinstance(cval, (float, np.floating)) \
                and not np.isfinite(cval):
            raise StencilTypeError(f"cval {cval!r} has no value in the integer result type "
                                   f"{out_dtype}", stencil=self.__name__, loc=kernel.loc,
                                   hint="use a finite cval, or a float result")
        with np.errstate(all="ignore"):
            return np.array(cval).astype(out_dtype).item()


_NOT_GIVEN = object()  # stencil()'s func_or_mode when only a keyword (or nothing) gives it


class TypedCall(NamedTuple):
    typed: TypedPointKernel
    out_dtype: np.dtype
    cval: object
    arrays: tuple[int, ...]
    relative: tuple[int, ...]


def stencil(func_or_mode: object = _NOT_GIVEN, /, **options: object):
    """Decorator: ``@sk.stencil``, ``@sk.stencil(...)`` or ``sk.stencil(func, **options)``.

    ``func_or_mode`` is, as in Numba, either the kernel or the border mode: "constant"
    (Numba's: border elements are ``cval``), or scipy.ndimage's "nearest", "reflect",
    "mirror", "wrap" (every element computed, reads outside an array remapped into it), or
    a tuple of one of these per axis. It may be given by position or by name, not both."""
    if "func_or_mode" in options:
        if func_or_mode is not _NOT_GIVEN:
            raise StencilError("func_or_mode given both by position and by name",
                               stencil=getattr(func_or_mode, "__name__", None),
                               loc=_caller_location(),
                               hint="pass the kernel (or the border mode) once: "
                                    "sk.stencil(f, ...) or sk.stencil(func_or_mode='wrap')")
        func_or_mode = options.pop("func_or_mode")
    elif func_or_mode is _NOT_GIVEN:
        func_or_mode = "constant"
    if isinstance(func_or_mode, (str, tuple, list)):
        mode_value, func = func_or_mode, None
    else:
        mode_value, func = "constant", func_or_mode
    try:
        mode = border_modes.normalize(mode_value)
    except ValueError as exc:
        raise StencilError(str(exc), loc=_caller_location(),
                           hint="use func_or_mode= one of " + ", ".join(
                               map(repr, border_modes.MODES)) + ", or a tuple of them, one "
                           "per axis") from None
    unknown = sorted(set(options) - _POINT_OPTIONS - _COMPUTATION_OPTIONS)
    if unknown:
        known = _POINT_OPTIONS | _COMPUTATION_OPTIONS
        raise StencilError(f"unknown stencil option(s) {unknown}"
                           + did_you_mean(unknown[0], known), hint=f"use {sorted(known)}")

    def wrap(f: object):
        if not isinstance(f, FunctionType):
            raise StencilSyntaxError(f"@stencil needs a Python function, got {f!r}")
        if is_computation(f):
            from .multistage import ComputationStencil

            wrong = sorted(set(options) - _COMPUTATION_OPTIONS)
            if mode != "constant":
                wrong.append("func_or_mode")
            if wrong:
                raise StencilError(f"option(s) {wrong} do not apply to computations",
                                   stencil=f.__name__,
                                   hint="use backend=, externals=, dtypes=, fast_math= "
                                        "and autotune=")
            comp = ComputationStencil(f, **options)  # type: ignore[arg-type]
            functools.update_wrapper(comp, f, updated=())
            return comp
        if "externals" in options:
            raise StencilError("externals= applies to computations only", stencil=f.__name__)
        st = PointStencil(f, **options, mode=mode)  # type: ignore[arg-type]
        functools.update_wrapper(st, f, updated=())
        return st

    trimmed = definition_trimmed(wrap)
    return trimmed(func) if func is not None else trimmed
