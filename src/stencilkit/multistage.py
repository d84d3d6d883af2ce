"""``@sk.stencil`` on a ``with computation(...)`` definition: the GridTools execution model.

The definition is parsed, typed, checked against the access rules and scheduled when the
stencil is defined (so an ``AccessRuleError`` surfaces at definition time); code is built per
backend and argument layout on first call. A call resolves ``origin``/``domain``, checks the
halo every field needs, allocates (and keeps) temporaries, and runs the generated code.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import threading
import time
from dataclasses import dataclass, field
from types import FunctionType

import numpy as np

from . import config, integrations, registry, storage
from .analysis import schedule as sch
from .build import cache
from .compile import driver
from .compile.declared import layout_key
from .compile.hooks import dump
from .compile.requests import ComputationRequest
from .distributed.array import involved
from .errors import ArgumentError, Location, StencilError, at_call, did_you_mean
from .frontend.computation import parameter_defaults, parse_computation
from .ir import computation as c
from .log import build_event
from .passes.inline_temporaries import inline_temporaries
from .runtime import hostile
from .runtime.computation_args import ComputationArguments

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
    # the shapes of the fields the stencil allocates: 2-D temporaries (I, J), the level
    # index (K)
    plane_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)


class ComputationStencil:
    """A multi-stage computation over an I, J, K iteration space (contract.md section 2)."""

    def __init__(self, func: FunctionType, *, backend: str | None = None,
                 externals: dict[str, object] | None = None,
                 dtypes: dict[str, object] | None = None,
                 fast_math: bool | None = None) -> None:
        self.func = func
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__
        self.backend = backend
        # contraction allowed (docs/numerics.md); None: sk.configure's default, read now
        code = func.__code__
        self.fast_math = config.checked_fast_math(
            fast_math, self.__name__, Location(code.co_filename, code.co_firstlineno, 1))
        self.externals, self.dtypes = externals, dtypes
        parsed, self.source = parse_computation(func, externals, dtypes)
        dump("ir", self.__name__, c.format_computation(parsed))
        typed = sch.type_computation(parsed)
        sch.check_access_rules(typed)
        self.definition = typed
        self.schedule = sch.build_schedule(typed)
        # Compiled backends recompute inlined temporaries in registers; NumPy would materialize
        # every recomputed subexpression, so it keeps the temporaries.
        inlined = inline_temporaries(typed)
        # Keyed by the backends' capability ``inlines_temporaries``.
        self.plans = {False: Plan(typed, self.schedule),
                      True: Plan(inlined, sch.build_schedule(inlined))}
        dump("typed", self.__name__, sch.format_schedule(typed, self.schedule))
        self._builds: dict[tuple, object] = {}
        self._geo_cache: dict[tuple, Geometry] = {}
        # the caller passes every field but the 2-D temporaries, which calls allocate
        self._parameter_fields = typed.parameter_fields
        written = tuple(f.name for f in self._parameter_fields
                        if any(f.name in ms.written for ms in self.schedule.multistages))
        self._arguments = ComputationArguments(
            dataclasses.replace(typed, fields=self._parameter_fields), self.__name__,
            parsed.params[:func.__code__.co_argcount], parameter_defaults(func), written)
        # Temporaries are reused between calls, per thread: concurrent calls from several
        # threads must not share them.
        self._local = threading.local()

    def __reduce__(self):
        from .integrations.pickling import reduce_computation

        return reduce_computation(self)  # by definition and options (dask.distributed, ...)

    # ------------------------------------------------------------ introspection

    @property
    def ir(self) -> str:
        """The definition with its schedule; then the one of the backends that inline
        temporaries, if inlining changed it."""
        text = sch.format_schedule(self.definition, self.schedule)
        compiled = self.plans[True]
        if compiled.definition != self.definition:
            names = [n for n, b in registry.REGISTRY.items()
                     if b.built and b.capabilities.inlines_temporaries]  # type: ignore[union-attr]
            text += (f"\n\n{', '.join(map(repr, names))} backend"
                     f"{'s' if len(names) > 1 else ''}, after inlining temporaries into "
                     "their readers:\n" + sch.format_schedule(compiled.definition,
                                                               compiled.schedule))
        return text

    def _details(self) -> dict[str, object]:
        return {"fields": ", ".join(f.name for f in self.definition.fields),
                "multistages": len(self.schedule.multistages)
                if hasattr(self.schedule, "multistages") else None,
                "fast_math": self.fast_math or None, "builds": len(self._builds) or None}

    def __repr__(self) -> str:
        from .show import describe

        return describe("ComputationStencil", self.func, self.__name__, self.backend,
                        self._details())

    def _repr_html_(self) -> str:
        from .show import html_table

        details = {**self._details(), "extents": self.extents}
        return html_table("ComputationStencil", self.func, self.__name__, self.backend,
                          details)

    @property
    def extents(self) -> dict[str, c.Extent]:
        return dict(self.schedule.extents)

    @functools.cached_property
    def digest(self) -> str:
        """A digest of the definition (with the constants it captured) and of how its
        parameters are passed: what the computation's Numba type is keyed by, so that a
        function compiled with ``cache=True`` never runs a changed computation."""
        text = "\n".join([c.format_computation(self.definition),
                          repr(self._arguments.positional),
                          repr(sorted((k, repr(v)) for k, v in self._arguments.defaults.items()))])
        return cache.key("computation-definition", text)

    @property
    def _numba_type_(self):
        """The Numba type of this computation (read by ``numba.typeof``: numba is imported)."""
        from .numba_computation_calls import computation_type

        return computation_type(self)

    def generate(self, backend: str | None = None) -> str:
        chosen = registry.resolve(backend or self.backend, self.__name__, generate=True)
        return driver.render(self._request(chosen, None)).source

    # ------------------------------------------------------------ calls

    def __call__(self, /, *args: object, origin: object = None, domain: object = None,
                 validate_args: bool = True, exec_info: dict | None = None,
                 **kwargs: object) -> None:
        try:
            return self._call(args, kwargs, origin, domain, validate_args, exec_info)
        except StencilError as exc:
            raise at_call(exc, sys._getframe(1)) from exc.__cause__
        except Exception as exc:  # an argument's own code raised: say which one
            fields = {f.name for f in self.definition.fields}
            named = [(f"{'field' if n in fields else 'argument'} '{n}'", v) for n, v in
                     (*zip(self._arguments.positional, args), *kwargs.items())]
            named += [("origin=", origin), ("domain=", domain)]
            blamed = hostile.blame(exc, named, self.__name__, self.definition.loc)
            if blamed is None:
                raise
            raise at_call(blamed, sys._getframe(1)) from exc

    def _call(self, args: tuple, kwargs: dict, origin: object, domain: object,
              validate_args: bool, exec_info: dict | None) -> None:
        if involved(args, kwargs.values()):  # MPI: halo exchange, then this call per rank
            from .distributed import computation

            return computation.call(self, args, kwargs, origin, domain, validate_args,
                                    exec_info)
        if exec_info is not None:
            if not isinstance(exec_info, dict):
                raise ArgumentError(f"exec_info must be a dict, got {type(exec_info).__name__}",
                                    stencil=self.__name__, loc=self.definition.loc,
                                    hint="pass exec_info={} (or None)")
            exec_info["call_start_time"] = time.perf_counter()
        values = self._arguments.bind(args, kwargs)
        fields = {f.name: values[f.name] for f in self._parameter_fields}
        if origin is None:
            origin = _gt_origins(self._parameter_fields, fields)
        on_device = any(map(integrations.is_device, fields.values()))
        if on_device:  # CuPy arrays: checked and built on host stand-ins, run in place
            from .integrations import device

            values, fields = device.computation_fields(self, values, fields)
        if validate_args:
            self._arguments.check_fields(fields, overlap=not on_device)
        else:  # unchecked types are the caller's risk; memory safety is not
            self._arguments.check_arrays(fields)
        chosen = registry.resolve(self.backend, self.__name__)
        plan = self._plan(chosen)
        try:
            geo_key = (id(plan), tuple(a.shape for a in fields.values()),
                       _hashable(origin), _hashable(domain))
            geo = self._geo_cache.get(geo_key)
        except (TypeError, ValueError):  # malformed origin/domain: _geometry says what
            geo_key, geo = None, None
        if geo is None:
            # The halos are checked whatever validate_args says: they keep every access of
            # the generated code inside the arrays.
            geo = self._geometry(fields, origin, domain, True, plan)
            if geo_key is not None:
                self._geo_cache[geo_key] = geo
        temps = self._temporaries(geo, plan, chosen)
        if geo.plane_shapes:
            values, fields = self._planes(geo, chosen, values, fields, on_device)
        _, run = self._build(chosen, fields)
        written: dict[str, np.ndarray] = {}
        if chosen.capabilities.compiled and not on_device:  # type: ignore[union-attr]
            values, written = self._arguments.aligned(values, fields)
        if exec_info is not None:
            exec_info["run_start_time"] = time.perf_counter()
        try:
            run(values, temps, geo)
        except (ValueError, TypeError, BufferError) as exc:
            if isinstance(exc, StencilError):
                raise
            # what the compiled entry point refuses (validate_args=False lets more through)
            raise ArgumentError(str(exc), stencil=self.__name__, loc=self.definition.loc,
                                hint="check the fields' dimensions and dtypes") from None
        for name, target in written.items():
            target[...] = values[name]
        if exec_info is not None:
            exec_info["run_end_time"] = time.perf_counter()
            exec_info["call_end_time"] = time.perf_counter()
            exec_info["domain"] = geo.domain
            exec_info["origin"] = dict(geo.origins)
            exec_info["backend"] = chosen.name

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
        params = self._parameter_fields
        given: dict[str, tuple[int, ...]] = {}
        names = {f.name for f in params} | {"_all_"}
        if isinstance(origin, dict):
            for k, v in origin.items():
                if k not in names:
                    raise ArgumentError(f"origin names '{k}', which is not a field"
                                        + did_you_mean(k, names - {"_all_"}),
                                        stencil=self.__name__, loc=defn.loc,
                                        hint=f"use field names from {sorted(names - {'_all_'})}")
                given[k] = self._int_tuple(v, f"origin of '{k}'", (1, 2, 3))
        elif origin is not None:
            o = self._int_tuple(origin, "origin", (1, 2, 3))
            given = {f.name: o for f in params}
        origins: dict[str, Origin] = {}
        defaults = {f.name: self._own_origin(f.name) for f in params}
        shared = _shared_origin(params, fields, defaults)
        for f in params:
            default = shared.get(f.name, defaults[f.name])
            if f.name in given:
                o = given[f.name]
                o3 = _expand(o, f.axes) if len(o) != 3 else o
                origins[f.name] = tuple(int(x) for x in o3)  # type: ignore[assignment]
            elif "_all_" in given:
                o = given["_all_"]
                origins[f.name] = _expand(o, f.axes) if len(o) != 3 else o  # type: ignore
            else:
                origins[f.name] = default
        if domain is not None:
            dom = self._int_tuple(domain, "domain", (3,))
            if any(x < 0 for x in dom):
                raise ArgumentError(f"domain {dom} has a negative size", stencil=self.__name__,
                                    loc=defn.loc, hint="pass three sizes >= 0")
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
        plane_shapes: dict[str, tuple[int, ...]] = {}
        for t in defn.planes:
            ext = plan.schedule.extent(t)
            origins[t] = (-ext[0], -ext[2], 0)
            plane_shapes[t] = (dom[0] + ext[1] - ext[0], dom[1] + ext[3] - ext[2])
        if defn.level_index:  # read shifted through helpers: levels beyond the domain too
            below, above = self._k_need(defn.level_index, dom[2], plan.schedule)
            origins[defn.level_index] = (0, 0, below)
            plane_shapes[defn.level_index] = (dom[2] + below + above,)
        return Geometry(origins, dom, temp_shapes, plane_shapes)  # type: ignore[arg-type]

    def _own_origin(self, name: str) -> Origin:
        """The default origin: the horizontal halo the field needs, and 0 in K. Intervals
        name levels counted from the origin, so a K default moved by the vertical halo would
        change what every interval of the definition means (``interval(...)`` would skip
        level 0); a vertical halo the field lacks is an error, as in GT4Py."""
        ext = self.schedule.extent(name)
        return (-ext[0], -ext[2], 0)

    def _int_tuple(self, value: object, what: str, lengths: tuple[int, ...]
                   ) -> tuple[int, ...]:
        """``value`` as a tuple of Python ints of one of ``lengths``, or an ArgumentError."""
        try:
            if isinstance(value, (str, bytes)):
                raise TypeError
            out = tuple(value)  # type: ignore[arg-type]
        except TypeError:
            out = None
        if out is None or len(out) not in lengths or not all(
                isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))
                for x in out):
            raise ArgumentError(f"{what} must be a tuple of {' or '.join(map(str, lengths))} "
                                f"integers, got {value!r}", stencil=self.__name__,
                                loc=self.definition.loc, hint=f"pass e.g. {what.split()[0]}="
                                                              f"{(0,) * lengths[-1]}")
        ints = tuple(int(x) for x in out)
        if any(abs(x) >= 2**62 for x in ints):
            raise ArgumentError(f"{what} {ints} is out of range", stencil=self.__name__,
                                loc=self.definition.loc, hint="pass sizes that fit the arrays")
        return ints

    def _default_domain(self, fields, origins) -> tuple[int, int, int]:
        dom = []
        for axis_i, axis in enumerate("IJK"):
            best = None
            for f in self._parameter_fields:
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
            for f in self._parameter_fields:
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
                raise self._min_domain_error(axis, n, least)

    def _min_domain_error(self, axis: str, n: int, least: int) -> ArgumentError:
        return ArgumentError(
            f"the domain has {n} point(s) along {axis}, but its horizontal regions "
            f"read from one end of the domain as far as the other: at least {least} "
            "are needed", stencil=self.__name__, loc=self.definition.loc,
            hint=f"use a domain of at least {least} points along {axis}")

    def _check_halos(self, fields, origins, dom) -> None:
        for f in self._parameter_fields:
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
                    raise self._halo_error(f.name, axis, lo, hi, o[ai], dom[ai], n)

    def _halo_error(self, name: str, axis: str, lo: int, hi: int, o: int, d: int, n: int
                    ) -> ArgumentError:
        return ArgumentError(
            f"field '{name}' lacks the halo the stencil needs along {axis}: "
            f"it reads {lo} point(s) before and {hi} after the domain "
            f"(origin {o}, domain {d}, extent {n})",
            stencil=self.__name__, loc=self.definition.loc,
            hint=f"give '{name}' an origin of at least {lo} and a size of at "
                 f"least origin + domain + {hi} along {axis}")

    def _temporaries(self, geo: Geometry, plan: Plan, backend: registry.Backend
                     ) -> dict[str, np.ndarray]:
        """Zeroed temporaries of the geometry, kept between calls; a GPU backend's on its
        device (CuPy arrays), so that no call copies them there and back."""
        gpu = backend.capabilities.device == "gpu"  # type: ignore[union-attr]
        key = (id(plan), gpu, tuple(sorted(geo.temp_shapes.items())))
        cached = getattr(self._local, "temps", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        xp = storage.array_module(backend) if gpu else np
        temps = {t: xp.zeros(geo.temp_shapes[t], dt) for t, dt in plan.definition.temporaries}
        self._local.temps = (key, temps)  # keep only the latest geometry's buffers
        return temps

    def refuse_planes(self, where: str) -> None:
        """The calls that bind fields without ``__call__`` (from jitted code, over MPI) do not
        allocate 2-D temporaries or the level index yet: they refuse such a definition."""
        internal = self.definition.fields[len(self._parameter_fields):]
        if internal:
            raise ArgumentError(f"{where} cannot run a computation with 2-D temporaries or K "
                                f"read as a value ({', '.join(f.name for f in internal)}) yet",
                                stencil=self.__name__, loc=self.definition.loc,
                                hint="call the stencil from Python on NumPy arrays, or pass "
                                     "the plane as a Field[IJ, ...] parameter")

    def _planes(self, geo: Geometry, backend: registry.Backend, values: dict[str, object],
                fields: dict[str, object], on_device: bool
                ) -> tuple[dict[str, object], dict[str, object]]:
        """``values`` and ``fields`` with the fields the stencil allocates: the 2-D
        temporaries, zeroed planes new for each call (a plane carries values across levels
        and computations within one call only; zeroing one costs a fraction of the call),
        and the level index (level k of the domain holds k)."""
        values, fields = dict(values), dict(fields)
        level = self.definition.level_index
        for f in self.definition.fields:
            if f.name not in geo.plane_shapes:
                continue
            host = np.zeros(geo.plane_shapes[f.name], f.dtype)
            if f.name == level:
                host[:] = np.arange(host.size) - geo.origins[level][2]
            if on_device:
                from .integrations import device

                xp = storage.array_module(backend)
                values[f.name] = device.cuda_view(backend, xp.asarray(host))
                fields[f.name] = device.stand_in(values[f.name], writable=True)
            else:
                values[f.name] = fields[f.name] = host
        return values, fields

    # ------------------------------------------------------------ code

    def _plan(self, backend: registry.Backend) -> Plan:
        return self.plans[backend.capabilities.inlines_temporaries]  # type: ignore[union-attr]

    def _request(self, backend: registry.Backend, fields: dict[str, np.ndarray] | None
                 ) -> ComputationRequest:
        backend.require("computation", self.__name__,
                        tuple({f.dtype for f in self.definition.fields}
                              | {s.dtype for s in self.definition.scalars}))
        plan = self._plan(backend)
        return ComputationRequest(backend, plan.definition, plan.schedule, self.source, fields,
                                  self.fast_math)

    def _build(self, backend: registry.Backend, fields: dict[str, np.ndarray] | None):
        """(source, launcher) of the build for ``fields``' layout."""
        key = (backend.name, layout_key(backend, fields, self.definition))
        built = self._builds.get(key)
        if built is None:
            request = self._request(backend, fields)
            started = time.perf_counter()
            artifact = driver.run(request)
            build_event("computation %r: built for backend %r in %.3f s", self.__name__,
                        backend.name, time.perf_counter() - started,
                        verbose=getattr(self, "verbose", False))
            built = (artifact.source, artifact.entry)
            self._builds[key] = built
        return built


def _hashable(value: object) -> object:
    if isinstance(value, dict):
        return tuple(sorted((k, tuple(v)) for k, v in value.items()))
    if value is None:
        return None
    return tuple(value)  # type: ignore[arg-type]


def _gt_origins(params: tuple[c.FieldDecl, ...], fields: dict[str, object]) -> dict | None:
    """GT4Py's storage protocol: a field carrying ``__gt_origin__`` (``stencilkit.storage``
    with ``aligned_index=``, or another library's storage) has that origin when the call
    gives none; the grid axes' entries only (data dimensions follow them)."""
    found = {}
    for f in params:
        o = getattr(fields[f.name], "__gt_origin__", None)
        if o is not None:
            found[f.name] = tuple(int(x) for x in o)[:len(f.axes)]
    return found or None


def _shared_origin(params: tuple[c.FieldDecl, ...], fields: dict[str, np.ndarray],
                   own: dict[str, Origin]) -> dict[str, Origin]:
    """When every 3-D field has one shape: the origin they share (per axis, the largest halo
    any of them needs), so that equally shaped arrays are indexed alike; 2-D and 1-D fields of
    the same sizes along their axes share it too."""
    shapes = {np.shape(fields[f.name])[:3] for f in params if f.axes == "IJK"}
    if len(shapes) != 1:
        return {}
    shape = shapes.pop()
    members = [f for f in params
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
