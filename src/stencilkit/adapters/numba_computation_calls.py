"""Computations (contract.md section 2) called from inside ``numba.njit`` functions.

``numba.typeof(comp)`` is a ``ComputationStencilType``: the point kernels' stencil type
(``numba_calls.py``) keyed by the computation's digest, with the same guard for callers
compiled with ``cache=True``. Typing a call ``comp(f_in, f_out, alpha=0.5)`` binds the
arguments as a call from Python does (same errors), checks what the types decide (fields'
dimensions, dtypes, writability; scalars' kinds) when the caller is compiled, and builds the
"numba" backend's computation for the fields' layouts, whatever the stencil's backend.

The call computes the default origin and domain from the fields' shapes at run time, with
``_geometry`` below: ``analysis.geometry.default_geometry`` compiled by Numba, the table form
of the one geometry analysis for ``origin=None, domain=None``, driven by tables made from the
schedule when the call is typed (checked against ``geometry.resolve`` in the tests), raising
the same errors (``geometry.table_error``: halo too small, domain below the regions' minimum). Then it
allocates the temporaries and calls the built entry point, the same ``parallel`` dispatcher a
call from Python runs: the computation is not inlined into the caller, so its arithmetic is
compiled with the backend's own flags (NumPy's error model, whatever the caller's
``error_model`` or ``fastmath``) and its values are those of the call from Python bit for
bit; its loops run on Numba's threads from a plain ``njit`` caller too, as from Python.
(Called inside a caller's ``prange`` loop, that is nested parallelism, which Numba's
``workqueue`` threading layer does not support.)

``origin=``, ``domain=``, ``validate_args=`` and ``exec_info=`` are refused when the caller is
compiled: call the computation from Python for those.
"""

from __future__ import annotations

import weakref
from types import FunctionType
from typing import TYPE_CHECKING

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic
from numba.np.numpy_support import as_dtype

from .. import registry
from ..analysis import geometry
from ..errors import ArgumentError
from ..ir.abi import Role
from .numba_calls import PointStencilType, _cache_guard, _loc_text, _overlap, _type_of, register

if TYPE_CHECKING:
    from ..api.multistage import ComputationStencil

#: The live computations by digest.
_LIVE_COMPUTATIONS: weakref.WeakValueDictionary[str, ComputationStencil] = \
    weakref.WeakValueDictionary()

#: Arguments of a call from Python that a call from jitted code does not take.
PYTHON_ONLY = ("origin", "domain", "validate_args", "exec_info")


@register
class ComputationStencilType(PointStencilType):
    """The Numba type of a computation: one per definition (name and digest)."""

    kind = "stencilkit.ComputationStencil"
    label = "stencilkit.computation"
    strict = False  # the typing function takes *args, **kwargs and binds them itself

    @staticmethod
    def live() -> weakref.WeakValueDictionary:
        return _LIVE_COMPUTATIONS

    def typer(self):
        _, name, digest = self.stencil_key

        def typer(*args, **kwargs):
            comp = _LIVE_COMPUTATIONS.get(digest)
            if comp is None:
                raise ArgumentError("this computation no longer exists in this process",
                                    stencil=name, hint="keep a reference to the computation "
                                    "while jitted code that calls it is compiled")
            return _implementation(comp, args, kwargs)
        return typer


def computation_type(comp: ComputationStencil) -> ComputationStencilType:
    _LIVE_COMPUTATIONS[comp.digest] = comp
    return _type_of(comp.__name__, comp.digest, ComputationStencilType)  # type: ignore


# ----------------------------------------------------------------------------- typing


def _given(t: object) -> bool:
    return t is not None and not isinstance(t, (types.NoneType, types.Omitted))


def _check_field(comp: ComputationStencil, f, t: object) -> None:
    arguments = comp._arguments
    if not _given(t):
        raise arguments.none_error(f.name)
    if not isinstance(t, types.Array):
        raise ArgumentError(f"field '{f.name}' must be an array, got {t}", stencil=comp.__name__,
                            loc=comp.definition.loc, hint="pass a NumPy array")
    if t.ndim != f.ndim:
        raise arguments.shape_error(f, f"{t.ndim} dimension{'s' if t.ndim != 1 else ''}")
    if as_dtype(t.dtype) != f.dtype:
        raise arguments.dtype_error(f, as_dtype(t.dtype))
    if f.name in arguments.written_fields and not t.mutable:
        raise arguments.read_only_error(f.name)


_KINDS = ((types.Boolean, "b"), (types.Integer, "i"), (types.Float, "f"), (types.Complex, "c"))


def _check_scalar(comp: ComputationStencil, s, t: object) -> None:
    """Kinds as ``ComputationArguments.check_scalar``: what the type decides."""
    allowed = {"b": "b", "i": "biu", "u": "biu", "f": "biuf", "c": "biufc"}[s.dtype.kind]
    if isinstance(t, types.IntegerLiteral):
        comp._arguments.check_scalar(s.name, s.dtype, int(t.literal_value))
        return
    if isinstance(t, types.BooleanLiteral):
        comp._arguments.check_scalar(s.name, s.dtype, bool(t.literal_value))
        return
    kind = next((k for cls, k in _KINDS if isinstance(t, cls)), None)
    if kind is None or kind not in allowed:
        raise ArgumentError(f"scalar parameter '{s.name}' ({s.dtype}) got a {t}",
                            stencil=comp.__name__, loc=comp.definition.loc,
                            hint=f"pass a number that converts to {s.dtype} without loss of "
                                 "kind")


def _implementation(comp: ComputationStencil, args: tuple, kwargs: dict):
    comp.refuse_planes("a call from jitted code")  # typing the call: raised as it is
    params = comp.definition.params
    if len(args) == len(params) + len(PYTHON_ONLY) and not kwargs:
        # Numba's inliner types the call again with the arguments folded by the
        # implementation's signature (omitted ones as Omitted): the call as written was
        # bound (and its errors raised) when the caller was typed
        kwargs = {p: t for p, t in zip((*params, *PYTHON_ONLY), args)
                  if not isinstance(t, types.Omitted)}
        args = ()
    for name in PYTHON_ONLY:
        if name in kwargs and _given(kwargs[name]):
            raise ArgumentError(f"{name}= is not supported in a call from jitted code",
                                stencil=comp.__name__, loc=comp.definition.loc,
                                hint="a call inside numba.njit code runs on the default origin "
                                     "and domain; call the computation from Python to give "
                                     f"{name}=")
    kwargs = {k: v for k, v in kwargs.items() if k not in PYTHON_ONLY}
    bound = comp._arguments.bind_names(args, kwargs)
    defn = comp.definition
    for f in defn.fields:
        _check_field(comp, f, bound[f.name])
    given = {p for p in defn.params if isinstance(bound[p], types.Type) and _given(bound[p])}
    for s in defn.scalars:
        if s.name in given:
            _check_scalar(comp, s, bound[s.name])
        else:  # a Python default: checked as from Python
            comp._arguments.check_scalar(s.name, s.dtype, bound[s.name])
    backend = registry.REGISTRY["numba"]
    fields = {}
    for f in defn.fields:
        t = bound[f.name]
        if t.layout in "CF":  # a stand-in of that layout: the build only reads strides
            fields[f.name] = np.empty((2,) * f.ndim, f.dtype, order=t.layout)
    _, run = comp._build(backend, fields)
    plan = comp._plan(backend)
    return _generated_impl(comp, plan, run, bound, given)


# ----------------------------------------------------------------------------- geometry


def geometry_tables(comp: ComputationStencil, plan) -> dict[str, np.ndarray]:
    """What ``_geometry`` needs of the definition and schedule, as int64 arrays."""
    return geometry.tables(comp.geometry_rules(plan))


_k_need = numba.njit(cache=True, nogil=True)(geometry.table_k_need)
# ``geometry.default_geometry`` compiled as it is, its global ``table_k_need`` the jitted one
_geometry = numba.njit(cache=True, nogil=True)(FunctionType(
    geometry.default_geometry.__code__,
    {**geometry.default_geometry.__globals__, "table_k_need": _k_need},
    geometry.default_geometry.__name__))


# ----------------------------------------------------------------------------- the call


@intrinsic
def _threads(typingctx):
    """Makes the caller start Numba's threads when it is loaded from Numba's cache. The entry
    point's ``prange`` loops are compiled into the caller's code (linked in), but a caller
    without ``parallel=True``, or whose entry point came from the cache itself, would not
    record that it needs the threading layer: loaded from the cache in a fresh process, it
    would call into a thread pool never started (a segmentation fault)."""
    def codegen(context, builder, signature, args):
        from numba.core.typed_passes import _reload_parfors

        library = getattr(context, "active_code_library", None)
        if library is not None:
            library._reload_init.add(_reload_parfors)  # what Numba adds for a parfor
        return context.get_dummy_value()
    return types.none(), codegen



def _generated_impl(comp: ComputationStencil, plan, run, bound: dict, given: set):
    """The implementation of one typed call, as Python source: run-time checks, the
    geometry, the temporaries, the entry point."""
    defn = comp.definition
    params = defn.params
    fields = [f.name for f in defn.fields]
    temps = [t for t, _ in plan.definition.temporaries]
    namespace: dict[str, object] = {
        "_np": np, "_sk_pin": _cache_guard(comp), "_sk_threads": _threads, "_sk_overlap": _overlap,
        "_sk_geometry": _geometry, "_sk_entry": run.entry, "_SkError": JitComputationError,
        "_SK_KEY": (comp.digest, comp.__name__, _loc_text(defn.loc))}
    for k, v in geometry_tables(comp, plan).items():
        namespace[f"_SK_{k}"] = v
    value = {p: p if p in given else f"_SK_DEFAULT_{i}" for i, p in enumerate(params)}
    for i, p in enumerate(params):
        if p not in given:
            namespace[f"_SK_DEFAULT_{i}"] = bound[p]
    lines = [f"def impl({', '.join(f'{p}=None' for p in (*params, *PYTHON_ONLY))}):",
             "    _sk_pin()", "    _sk_threads()"]
    for i, f in enumerate(defn.fields):
        if f.data_dims:
            n = len(f.axes)
            tail = " or ".join(f"{f.name}.shape[{n + j}] != {d}"
                               for j, d in enumerate(f.data_dims))
            lines += [f"    if {tail}:",
                      f"        raise _SkError(_SK_KEY, 'shape', {i}, {f.name}.shape)"]
    for name in comp._arguments.written_fields:
        for j, other in enumerate(fields):
            if other != name:
                lines += [f"    if _sk_overlap({name}, {other}):",
                          f"        raise _SkError(_SK_KEY, 'overlap', {fields.index(name)}, "
                          f"{j})"]
    for j, s in enumerate(defn.scalars):
        t = bound[s.name]
        if s.name in given and s.dtype.kind in "iu" and isinstance(t, types.Integer) \
                and not isinstance(t, types.IntegerLiteral):
            info = np.iinfo(s.dtype)
            lines += [f"    if {s.name} < {int(info.min)} or {s.name} > {int(info.max)}:",
                      f"        raise _SkError(_SK_KEY, 'range', {j}, {s.name})"]
    # element by element, not np.zeros: a parallel=True caller would make that a parfor,
    # and starting Numba's threads for it costs more than the call's own parallel loops gain
    # on a loaded machine
    lines.append(f"    _sk_shapes = _np.empty(({len(fields)}, 3), _np.int64)")
    for i, f in enumerate(defn.fields):
        for a in range(3):
            size = f"{f.name}.shape[{f.axes.index('IJK'[a])}]" if "IJK"[a] in f.axes else "0"
            lines.append(f"    _sk_shapes[{i}, {a}] = {size}")
    lines += ["    _sk_status, _sk_info, _sk_origins, _sk_dom, _sk_tshapes = _sk_geometry(",
              "        _sk_shapes, _SK_HAS, _SK_OWN, _SK_HI, _SK_IJK, _SK_ORDER, _SK_KF, _SK_MIN,",
              "        _SK_KT, _SK_TEXT)",
              "    if _sk_status != 0:",
              "        raise _SkError(_SK_KEY, 'geometry', _sk_status, _sk_info[0], _sk_info[1], "
              "_sk_info[2], _sk_info[3], _sk_info[4], _sk_info[5], _sk_info[6])"]
    # the entry's arguments, in its order, as its launch description lists them
    arguments = run.launch.arguments
    arrays = {p.key: p.dtype for p in arguments if p.pointer}
    for j, (t, _) in enumerate(plan.definition.temporaries):
        if t in arrays:
            namespace[f"_SK_T{j}"] = arrays[t]
            # the code reads a temporary only where it wrote it in the same call
            lines.append(f"    _sk_t{j} = _np.empty((_sk_tshapes[{j}, 0], _sk_tshapes[{j}, 1], "
                         f"_sk_tshapes[{j}, 2]), _SK_T{j})")
    row = {n: i for i, n in enumerate(fields + temps)}
    args = []
    for j, p in enumerate(arguments):
        if p.pointer:
            args.append(value[p.key] if p.key in fields else f"_sk_t{temps.index(p.key)}")
        elif p.role is Role.ORIGIN:
            args.append(f"_sk_origins[{row[p.field]}, {'IJK'.index(p.axis)}]")
        elif p.role is Role.SCALAR:
            namespace[f"_SK_S{j}"] = p.dtype.type
            args.append(f"_SK_S{j}({value[p.key]})")
        else:  # a domain extent
            args.append(f"_sk_dom[{'IJK'.index(p.axis)}]")
    call = ", ".join(args)
    lines += [f"    if _sk_entry({call}):",
              "        raise _SkError(_SK_KEY, 'k_offset')"]
    exec("\n".join(lines) + "\n", namespace)
    return namespace["impl"]


class JitComputationError(ArgumentError):
    """An ``ArgumentError`` raised inside jitted code by a computation's call: Numba builds it
    from the check's kind and the values it saw, and it reads as the same error raised from
    Python (the computation, found by its digest, words it)."""

    def __init__(self, key: tuple, kind: str, *values) -> None:
        digest, name, loc = key
        comp = _LIVE_COMPUTATIONS.get(digest)
        if comp is None:
            err = ArgumentError(f"a call from jitted code failed its {kind} check {values}",
                                stencil=name)
        else:
            err = _error(comp, kind, [v if isinstance(v, tuple) else int(v) for v in values])
        super().__init__(err.bare_message, stencil=err.stencil, loc=err.loc, hint=err.hint)


def _error(comp: ComputationStencil, kind: str, values: list) -> ArgumentError:
    defn, arguments = comp.definition, comp._arguments
    if kind == "shape":
        return arguments.shape_error(defn.fields[values[0]], tuple(values[1]))
    if kind == "overlap":
        return arguments.overlap_error(defn.fields[values[0]].name, defn.fields[values[1]].name)
    if kind == "range":
        s = defn.scalars[values[0]]
        return arguments.range_error(s.name, s.dtype, values[1])
    if kind == "geometry":
        rules = comp.geometry_rules(comp._plan(registry.REGISTRY["numba"]))
        return geometry.table_error(rules, values[0], values[1:])
    from ..analysis.schedule import variable_k_reads
    from ..runtime.computation import k_offset_error

    built = comp._plan(registry.REGISTRY["numba"]).definition
    return k_offset_error(built, variable_k_reads(built))
