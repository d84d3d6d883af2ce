"""``@sk.stencil`` on a ``with computation(...)`` definition: the GridTools execution model.

The definition is parsed, typed, checked against the access rules and scheduled when the
stencil is defined (so an ``AccessRuleError`` surfaces at definition time); code is built per
backend and argument layout on first call. A call resolves ``origin``/``domain``, checks the
halo every field needs, allocates (and keeps) temporaries, and runs the generated code.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import FunctionType

import numpy as np

from . import backends
from .analysis import schedule as sch
from .build.extension import exec_generated
from .codegen import numpy_computation
from .errors import ArgumentError
from .frontend.computation import parameter_defaults, parse_computation
from .ir import computation as c
from .passes.inline_temporaries import inline_temporaries
from .passes.pipeline import dump

Origin = tuple[int, int, int]


@dataclass(frozen=True)
class Plan:
    """A definition as a backend compiles it, with its schedule."""

    definition: c.ComputationDef
    schedule: sch.Schedule


@dataclass(frozen=True)
class Geometry:
    """Origins of every field and temporary, the domain, and the temporaries' shapes."""

    origins: dict[str, Origin]
    domain: tuple[int, int, int]
    temp_shapes: dict[str, tuple[int, int, int]]


class ComputationStencil:
    """A multi-stage computation over an I, J, K iteration space (API.md section 2)."""

    def __init__(self, func: FunctionType, *, backend: str | None = None,
                 externals: dict[str, object] | None = None,
                 dtypes: dict[str, object] | None = None) -> None:
        self.func = func
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__
        self.backend = backend
        parsed, self.source = parse_computation(func, externals, dtypes)
        self._positional = parsed.params[:func.__code__.co_argcount]
        self._defaults = parameter_defaults(func)
        dump("ir", self.__name__, c.format_computation(parsed))
        typed = sch.type_computation(parsed)
        sch.check_access_rules(typed)
        self.definition = typed
        self.schedule = sch.build_schedule(typed)
        # Compiled backends recompute inlined temporaries in registers; NumPy would materialize
        # every recomputed subexpression, so it keeps the temporaries.
        inlined = inline_temporaries(typed)
        self.plans = {"numpy": Plan(typed, self.schedule),
                      "c": Plan(inlined, sch.build_schedule(inlined))}
        dump("typed", self.__name__, sch.format_schedule(typed, self.schedule))
        self._builds: dict[tuple, object] = {}
        self._geo_cache: dict[tuple, Geometry] = {}
        self._written_fields = tuple(
            f.name for f in typed.fields
            if any(f.name in ms.written for ms in self.schedule.multistages))
        self._temps: dict[tuple, dict[str, np.ndarray]] = {}

    # ------------------------------------------------------------ introspection

    @property
    def ir(self) -> str:
        """The definition with its schedule; then the C backend's, if inlining changed it."""
        text = sch.format_schedule(self.definition, self.schedule)
        compiled = self.plans["c"]
        if compiled.definition != self.definition:
            text += ("\n\nC backend, after inlining temporaries into their readers:\n"
                     + sch.format_schedule(compiled.definition, compiled.schedule))
        return text

    @property
    def extents(self) -> dict[str, c.Extent]:
        return dict(self.schedule.extents)

    def generate(self, backend: str | None = None) -> str:
        chosen = backends.resolve(backend or self.backend, self.__name__)
        return self._build(chosen, None)[0]

    # ------------------------------------------------------------ calls

    def __call__(self, *args: object, origin: object = None, domain: object = None,
                 validate_args: bool = True, exec_info: dict | None = None,
                 **kwargs: object) -> None:
        if exec_info is not None:
            exec_info["call_start_time"] = time.perf_counter()
        values = self._bind(args, kwargs)
        fields = {f.name: values[f.name] for f in self.definition.fields}
        if validate_args:
            self._check_fields(fields)
        chosen = backends.resolve(self.backend, self.__name__)
        plan = self.plans["numpy" if chosen == "numpy" else "c"]
        geo_key = (id(plan), tuple(a.shape for a in fields.values()),
                   _hashable(origin), _hashable(domain))
        geo = self._geo_cache.get(geo_key)
        if geo is None:
            geo = self._geometry(fields, origin, domain, validate_args, plan)
            if validate_args:  # only validated geometries are reused
                self._geo_cache[geo_key] = geo
        temps = self._temporaries(geo, plan)
        _, run = self._build(chosen, fields)
        if exec_info is not None:
            exec_info["run_start_time"] = time.perf_counter()
        run(values, temps, geo)
        if exec_info is not None:
            exec_info["run_end_time"] = time.perf_counter()
            exec_info["call_end_time"] = time.perf_counter()
            exec_info["domain"] = geo.domain
            exec_info["origin"] = dict(geo.origins)
            exec_info["backend"] = chosen

    def _bind(self, args: tuple, kwargs: dict) -> dict[str, object]:
        """Arguments by position (up to the keyword-only ones) or name; defaults fill the rest."""
        params = self.definition.params
        positional = self._positional
        if len(args) > len(positional):
            kw_only = params[len(positional):]
            raise ArgumentError(f"takes {len(positional)} positional arguments, {len(args)} "
                                "given", stencil=self.__name__, loc=self.definition.loc,
                                hint=f"the parameters are {', '.join(params)}" + (
                                    f"; pass {', '.join(kw_only)} by name" if kw_only else ""))
        values = dict(zip(positional, args))
        for k, v in kwargs.items():
            if k not in params:
                raise ArgumentError(f"unexpected argument '{k}'", stencil=self.__name__,
                                    loc=self.definition.loc,
                                    hint=f"the parameters are {', '.join(params)}")
            if k in values:
                raise ArgumentError(f"argument '{k}' given twice", stencil=self.__name__)
            values[k] = v
        for p in params:
            if p not in values and p in self._defaults:
                values[p] = self._defaults[p]
        missing = [p for p in params if p not in values]
        if missing:
            raise ArgumentError(f"missing argument(s) {missing}", stencil=self.__name__,
                                loc=self.definition.loc)
        for f in self.definition.fields:
            if values[f.name] is None:
                raise ArgumentError(f"field '{f.name}' is None but the stencil uses it",
                                    stencil=self.__name__, loc=self.definition.loc,
                                    hint=f"pass an array for '{f.name}'")
        for s in self.definition.scalars:
            v = values[s.name]
            if isinstance(v, np.ndarray) or not isinstance(v, (bool, int, float, complex,
                                                                  np.generic)):
                raise ArgumentError(f"scalar parameter '{s.name}' got a {type(v).__name__}",
                                    stencil=self.__name__, hint="pass a number")
        return values

    def _check_fields(self, fields: dict[str, object]) -> None:
        for f in self.definition.fields:
            a = fields[f.name]
            if not isinstance(a, np.ndarray):
                raise ArgumentError(f"field '{f.name}' must be an array, got "
                                    f"{type(a).__name__}", stencil=self.__name__,
                                    hint="pass a NumPy array (or an sk.zeros storage)")
            if a.ndim != f.ndim or a.shape[len(f.axes):] != f.data_dims:
                dims = f" with data dimensions {f.data_dims}" if f.data_dims else ""
                raise ArgumentError(f"field '{f.name}' is Field[{f.axes}]{dims} but the array "
                                    f"has shape {a.shape}", stencil=self.__name__,
                                    loc=self.definition.loc,
                                    hint=f"pass a {f.ndim}-D array" + (
                                        f" whose last dimensions are {f.data_dims}"
                                        if f.data_dims else ""))
            if a.dtype != f.dtype:
                raise ArgumentError(f"field '{f.name}' is declared {f.dtype} but the array is "
                                    f"{a.dtype}", stencil=self.__name__,
                                    loc=self.definition.loc,
                                    hint=f"pass a {f.dtype} array (a.astype(np.{f.dtype}))")
        for name in self._written_fields:
            for other, b in fields.items():
                if other != name and np.may_share_memory(fields[name], b):
                    raise ArgumentError(
                        f"field '{name}' is written and shares memory with field '{other}'",
                        stencil=self.__name__, loc=self.definition.loc,
                        hint="pass separate arrays (copy one of them)")

    # ------------------------------------------------------------ geometry

    def _k_need(self, name: str, nk: int, schedule: sch.Schedule | None = None
                ) -> tuple[int, int]:
        below = above = 0
        for acc in (schedule or self.schedule).k_accesses:
            if acc.name != name:
                continue
            k0, k1 = acc.interval.bounds(nk)
            if k1 <= k0:
                continue
            below = max(below, -(k0 + acc.dk_lo))
            above = max(above, (k1 - 1 + acc.dk_hi) - (nk - 1))
        return below, above

    def _geometry(self, fields: dict[str, np.ndarray], origin: object, domain: object,
                  validate: bool, plan: Plan) -> Geometry:
        defn = self.definition
        given: dict[str, tuple[int, ...]] = {}
        if isinstance(origin, dict):
            given = {k: tuple(v) for k, v in origin.items()}
        elif origin is not None:
            given = {f.name: tuple(origin) for f in defn.fields}  # type: ignore[arg-type]
        origins: dict[str, Origin] = {}
        defaults = {f.name: self._own_origin(f.name) for f in defn.fields}
        shared = _shared_origin(defn, fields, defaults)
        for f in defn.fields:
            default = shared.get(f.name, defaults[f.name])
            if f.name in given:
                o = given[f.name]
                o3 = _expand(o, f.axes) if len(o) != 3 else o
                origins[f.name] = tuple(int(x) for x in o3)  # type: ignore[assignment]
            elif "_all_" in given:
                origins[f.name] = given["_all_"]  # type: ignore[assignment]
            else:
                origins[f.name] = default
        if domain is not None:
            dom = tuple(int(x) for x in domain)  # type: ignore[union-attr]
            if len(dom) != 3:
                raise ArgumentError(f"domain must have 3 entries, got {dom}",
                                    stencil=self.__name__)
        else:
            dom = self._default_domain(fields, origins)
        self._check_min_domain(dom, plan)
        if validate:
            self._check_halos(fields, origins, dom)
        temp_shapes = {}
        for t, _ in plan.definition.temporaries:
            ext = plan.schedule.extent(t)
            below, above = self._k_need(t, dom[2], plan.schedule)
            origins[t] = (-ext[0], -ext[2], below)
            temp_shapes[t] = (dom[0] + ext[1] - ext[0], dom[1] + ext[3] - ext[2],
                              dom[2] + below + above)
        return Geometry(origins, dom, temp_shapes)  # type: ignore[arg-type]

    def _own_origin(self, name: str) -> Origin:
        ext = self.schedule.extent(name)
        below, _ = self._k_need(name, 1 << 20)
        return (-ext[0], -ext[2], below)

    def _default_domain(self, fields, origins) -> tuple[int, int, int]:
        dom = []
        for axis_i, axis in enumerate("IJK"):
            best = None
            for f in self.definition.fields:
                if axis not in f.axes:
                    continue
                n = fields[f.name].shape[f.axes.index(axis)]
                ext = self.schedule.extent(f.name)
                hi = (ext[1], ext[3], 0)[axis_i]
                size = n - origins[f.name][axis_i] - hi
                best = size if best is None else min(best, size)
            dom.append(0 if best is None else max(0, best))
        nk = dom[2]
        for _ in range(4):  # K halo above may depend on nk through interval bounds
            shrink = 0
            for f in self.definition.fields:
                if "K" in f.axes:
                    _, above = self._k_need(f.name, nk)
                    n = fields[f.name].shape[f.axes.index("K")]
                    shrink = max(shrink, origins[f.name][2] + nk + above - n)
            if shrink <= 0:
                break
            nk = max(0, nk - shrink)
        dom[2] = nk
        return tuple(dom)  # type: ignore[return-value]

    def _check_min_domain(self, dom: tuple[int, ...], plan: Plan) -> None:
        for axis, n, least in zip("IJ", dom, plan.schedule.min_domain):
            if 0 < n < least:
                raise ArgumentError(
                    f"the domain has {n} point(s) along {axis}, but its horizontal regions "
                    f"read from one end of the domain as far as the other: at least {least} "
                    "are needed", stencil=self.__name__, loc=self.definition.loc,
                    hint=f"use a domain of at least {least} points along {axis}")

    def _check_halos(self, fields, origins, dom) -> None:
        for f in self.definition.fields:
            a = fields[f.name]
            ext = self.schedule.extent(f.name)
            below, above = self._k_need(f.name, dom[2])
            o = origins[f.name]
            needs = {"I": (-ext[0], ext[1]), "J": (-ext[2], ext[3]), "K": (below, above)}
            for axis in f.axes:
                ai = "IJK".index(axis)
                lo, hi = needs[axis]
                n = a.shape[f.axes.index(axis)]
                if o[ai] - lo < 0 or o[ai] + dom[ai] + hi > n:
                    raise ArgumentError(
                        f"field '{f.name}' lacks the halo the stencil needs along {axis}: "
                        f"it reads {lo} point(s) before and {hi} after the domain "
                        f"(origin {o[ai]}, domain {dom[ai]}, extent {n})",
                        stencil=self.__name__, loc=self.definition.loc,
                        hint=f"give '{f.name}' an origin of at least {lo} and a size of at "
                             f"least origin + domain + {hi} along {axis}")

    def _temporaries(self, geo: Geometry, plan: Plan) -> dict[str, np.ndarray]:
        key = tuple(sorted(geo.temp_shapes.items()))
        temps = self._temps.get(key)
        if temps is None:
            temps = {t: np.zeros(geo.temp_shapes[t], dt)
                     for t, dt in plan.definition.temporaries}
            self._temps = {key: temps}  # keep only the latest geometry's buffers
        return temps

    # ------------------------------------------------------------ code

    def _build(self, backend: str, fields: dict[str, np.ndarray] | None):
        if backend == "numpy":
            key: tuple = (backend,)
        else:
            from .codegen.c_computation import layout_of

            key = (backend, tuple(sorted(layout_of(fields, self.definition).items())))
        built = self._builds.get(key)
        if built is None:
            plan = self.plans["numpy" if backend == "numpy" else "c"]
            if backend == "numpy":
                built = _build_numpy(plan.definition, plan.schedule)
            else:
                from .codegen.c_computation import build_c

                built = build_c(plan.definition, plan.schedule, self.source, fields)
            dump("code", f"{self.__name__} [{backend}]", built[0])
            self._builds[key] = built
        return built


def _hashable(value: object) -> object:
    if isinstance(value, dict):
        return tuple(sorted((k, tuple(v)) for k, v in value.items()))
    if value is None:
        return None
    return tuple(value)  # type: ignore[arg-type]


def _shared_origin(defn: c.ComputationDef, fields: dict[str, np.ndarray],
                   own: dict[str, Origin]) -> dict[str, Origin]:
    """When every 3-D field has one shape: the origin they share (per axis, the largest halo
    any of them needs), so that equally shaped arrays are indexed alike; 2-D and 1-D fields of
    the same sizes along their axes share it too."""
    shapes = {np.shape(fields[f.name])[:3] for f in defn.fields if f.axes == "IJK"}
    if len(shapes) != 1:
        return {}
    shape = shapes.pop()
    members = [f for f in defn.fields
               if all(i < np.ndim(fields[f.name]) and
                      np.shape(fields[f.name])[i] == shape["IJK".index(a)]
                      for i, a in enumerate(f.axes))]
    origin = tuple(max((own[f.name][a] for f in members if "IJK"[a] in f.axes), default=0)
                   for a in range(3))
    return {f.name: origin for f in members}  # type: ignore[misc]


def _expand(o: tuple[int, ...], axes: str) -> Origin:
    full = [0, 0, 0]
    for v, a in zip(o, axes):
        full["IJK".index(a)] = v
    return tuple(full)  # type: ignore[return-value]


def k_offset_error(defn: c.ComputationDef, culprits: list) -> ArgumentError:
    """The error after a call in which a read at a run-time K offset left its field."""
    first = culprits[0]
    where = ", ".join(sorted({f"'{a.field}' (line {a.loc.line})" if a.loc else f"'{a.field}'"
                              for a in culprits}))
    return ArgumentError(
        f"a read at a run-time vertical offset fell outside the field: {where}; that level "
        "was not read (the results of the call are incomplete)", stencil=defn.name,
        loc=first.loc or defn.loc, hint="keep k + offset within the field's levels (give it "
                                        "more levels, or bound the offset expression)")


def _build_numpy(defn: c.ComputationDef, sched: sch.Schedule):
    fname = "sk_" + defn.name
    source, printer = numpy_computation.computation_printer(defn, sched, fname)
    k_reads = list(printer.k_reads)
    fn = exec_generated("numpy-computation", source, fname, defn.name)
    names = [f.name for f in defn.fields]
    temps = [t for t, _ in defn.temporaries]
    scalars = [s.name for s in defn.scalars]
    scalar_types = {s.name: s.dtype for s in defn.scalars}

    def run(values, temp_arrays, geo: Geometry) -> None:
        args = [values[n] for n in names] + [temp_arrays[t] for t in temps]
        args += [scalar_types[s].type(values[s]) for s in scalars]
        failed = fn(*args, geo.origins, geo.domain)
        if failed:
            raise k_offset_error(defn, [k_reads[i] for i in failed])

    return source, run
