"""Computations (contract.md section 2) called from inside ``numba.njit`` functions.

``numba.typeof(comp)`` is a ``ComputationStencilType``: the point kernels' stencil type
(``numba_calls.py``) keyed by the computation's digest, with the same guard for callers
compiled with ``cache=True``. Typing a call ``comp(f_in, f_out, alpha=0.5)`` binds the
arguments as a call from Python does (same errors), checks what the types decide (fields'
dimensions, dtypes, writability; scalars' kinds) when the caller is compiled, and builds the
"numba" backend's computation for the fields' layouts, whatever the stencil's backend.

The call computes the default origin and domain from the fields' shapes at run time, with
``_geometry`` below: ``ComputationStencil._geometry`` for ``origin=None, domain=None``, driven by
tables made from the schedule when the call is typed (checked against the Python one in the
tests), raising the same errors (halo too small, domain below the regions' minimum). Then it
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
from typing import TYPE_CHECKING

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic
from numba.np.numpy_support import as_dtype

from . import registry
from .errors import ArgumentError
from .numba_calls import PointStencilType, _cache_guard, _loc_text, _overlap, _type_of, register

if TYPE_CHECKING:
    from .multistage import ComputationStencil

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
    defn, sched = comp.definition, comp.schedule
    fields = [f.name for f in defn.fields]
    temps = [t for t, _ in plan.definition.temporaries]
    has = np.array([[a in f.axes for a in "IJK"] for f in defn.fields], np.int64).reshape(-1, 3)
    own = np.array([comp._own_origin(f) for f in fields], np.int64).reshape(-1, 3)
    hi = np.array([(sched.extent(f)[1], sched.extent(f)[3], 0) for f in fields],
                  np.int64).reshape(-1, 3)
    ijk = np.array([f.axes == "IJK" for f in defn.fields], np.int64)
    order = np.array([["IJK".index(a) for a in f.axes] + [-1] * (3 - len(f.axes))
                      for f in defn.fields], np.int64).reshape(-1, 3)

    def k_table(schedule, names):
        rows = [(names.index(a.name), a.interval.start.offset, a.interval.start.from_end,
                 a.interval.end.offset, a.interval.end.from_end, a.dk_lo, a.dk_hi)
                for a in schedule.k_accesses if a.name in names]
        return np.array(rows, np.int64).reshape(-1, 7)

    t_ext = np.array([plan.schedule.extent(t)[:4] for t in temps], np.int64).reshape(-1, 4)
    return {"HAS": has, "OWN": own, "HI": hi, "IJK": ijk, "ORDER": order,
            "KF": k_table(sched, fields), "MIN": np.array(plan.schedule.min_domain, np.int64),
            "KT": k_table(plan.schedule, temps), "TEXT": t_ext}


@numba.njit(cache=True, nogil=True)
def _k_need(ka, idx, nk):
    """``ComputationStencil._k_need`` over a table of ``KAccess``es."""
    below = 0
    above = 0
    for r in range(ka.shape[0]):
        if ka[r, 0] != idx:
            continue
        k0 = max(0, ka[r, 1] + (nk if ka[r, 2] else 0))
        k1 = min(nk, ka[r, 3] + (nk if ka[r, 4] else 0))
        if k1 <= k0:
            continue
        below = max(below, -(k0 + ka[r, 5]))
        above = max(above, (k1 - 1 + ka[r, 6]) - (nk - 1))
    return below, above


@numba.njit(cache=True, nogil=True)
def _geometry(shapes, has, own, hi, ijk, order, kf, min_domain, kt, t_ext):
    """``ComputationStencil._geometry`` with the default origin and domain. ``shapes``: per
    field, its array's size along I, J, K (0 where it lacks the axis). Returns the status
    (0; 1: domain below the regions' minimum; 2: a halo too small), the status's values, the
    origins of the fields then the temporaries, the domain and the temporaries' shapes."""
    nf = shapes.shape[0]
    nt = t_ext.shape[0]
    info = np.zeros(7, np.int64)
    origins = np.zeros((nf + nt, 3), np.int64)
    origins[:nf] = own
    # the origin every equally shaped field shares
    found = False
    same = True
    ref = np.zeros(3, np.int64)
    for f in range(nf):
        if ijk[f]:
            if not found:
                ref[:] = shapes[f]
                found = True
            elif shapes[f, 0] != ref[0] or shapes[f, 1] != ref[1] or shapes[f, 2] != ref[2]:
                same = False
    if found and same:
        member = np.zeros(nf, np.bool_)
        shared = np.zeros(3, np.int64)
        for f in range(nf):
            member[f] = True
            for a in range(3):
                if has[f, a] and shapes[f, a] != ref[a]:
                    member[f] = False
            if member[f]:
                for a in range(3):
                    if has[f, a]:
                        shared[a] = max(shared[a], own[f, a])
        for f in range(nf):
            if member[f]:
                origins[f] = shared
    dom = np.zeros(3, np.int64)
    for a in range(3):
        found = False
        best = 0
        for f in range(nf):
            if has[f, a]:
                size = shapes[f, a] - origins[f, a] - hi[f, a]
                best = size if not found else min(best, size)
                found = True
        dom[a] = max(0, best) if found else 0
    nk = dom[2]
    for _ in range(4):  # the K halo above may depend on nk through interval bounds
        shrink = 0
        for f in range(nf):
            if has[f, 2]:
                _, above = _k_need(kf, f, nk)
                shrink = max(shrink, origins[f, 2] + nk + above - shapes[f, 2])
        if shrink <= 0:
            break
        nk = max(0, nk - shrink)
    dom[2] = nk
    t_shapes = np.zeros((nt, 3), np.int64)
    for a in range(2):
        if 0 < dom[a] < min_domain[a]:
            info[0], info[1], info[2] = a, dom[a], min_domain[a]
            return 1, info, origins, dom, t_shapes
    for f in range(nf):
        below, above = _k_need(kf, f, dom[2])
        for i in range(3):
            a = order[f, i]
            if a < 0:
                break
            lo = below if a == 2 else own[f, a]
            up = above if a == 2 else hi[f, a]
            o = origins[f, a]
            if o - lo < 0 or o + dom[a] + up > shapes[f, a]:
                info[0], info[1], info[2], info[3] = f, a, lo, up
                info[4], info[5], info[6] = o, dom[a], shapes[f, a]
                return 2, info, origins, dom, t_shapes
    for t in range(nt):
        below, above = _k_need(kt, t, dom[2])
        origins[nf + t, 0] = -t_ext[t, 0]
        origins[nf + t, 1] = -t_ext[t, 2]
        origins[nf + t, 2] = below
        t_shapes[t, 0] = dom[0] + t_ext[t, 1] - t_ext[t, 0]
        t_shapes[t, 1] = dom[1] + t_ext[t, 3] - t_ext[t, 2]
        t_shapes[t, 2] = dom[2] + below + above
    return 0, info, origins, dom, t_shapes


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
    for j, (t, _) in enumerate(plan.definition.temporaries):
        if t in run.buffers:
            namespace[f"_SK_T{j}"] = run.dtypes[t]
            # the code reads a temporary only where it wrote it in the same call
            lines.append(f"    _sk_t{j} = _np.empty((_sk_tshapes[{j}, 0], _sk_tshapes[{j}, 1], "
                         f"_sk_tshapes[{j}, 2]), _SK_T{j})")
    row = {n: i for i, n in enumerate(fields + temps)}
    buffer_args = [value[n] if n in fields else f"_sk_t{temps.index(n)}" for n in run.buffers]
    origin_args = [f"_sk_origins[{row[n]}, {'IJK'.index(a)}]"
                   for n in run.buffers for a in run.axes[n]]
    scalar_args = []
    for j, (s, t) in enumerate(run.scalar_types.items()):
        namespace[f"_SK_S{j}"] = t.type
        scalar_args.append(f"_SK_S{j}({value[s]})")
    call = ", ".join([*buffer_args, *origin_args, *scalar_args,
                      "_sk_dom[0]", "_sk_dom[1]", "_sk_dom[2]"])
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
    if kind == "geometry" and values[0] == 1:
        axis, n, least = values[1:4]
        return comp._min_domain_error("IJK"[axis], n, least)
    if kind == "geometry":
        f, axis, lo, hi, o, d, n = values[1:]
        return comp._halo_error(defn.fields[f].name, "IJK"[axis], lo, hi, o, d, n)
    from .analysis.schedule import variable_k_reads
    from .runtime.computation import k_offset_error

    built = comp._plan(registry.REGISTRY["numba"]).definition
    return k_offset_error(built, variable_k_reads(built))
