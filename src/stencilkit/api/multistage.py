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
from collections.abc import Callable
from dataclasses import dataclass
from types import FunctionType

import numpy as np

from .. import adapters, config, registry, storage
from ..analysis import geometry as geo_analysis
from ..analysis import schedule as sch
from ..analysis.geometry import Geometry
from ..build import cache
from ..compile import driver
from ..compile.declared import layout_key
from ..compile.hooks import dump
from ..compile.requests import ComputationRequest
from ..errors import ArgumentError, Location, StencilError, at_call
from ..frontend import aliasing
from ..frontend.computation import parameter_defaults, parse_computation
from ..ir import computation as c
from ..log import build_event
from ..lower.inline_temporaries import inline_temporaries
from ..runtime import hostile
from ..runtime.bound_computation import BoundComputationCall, plain
from ..runtime.computation_args import ComputationArguments

Origin = geo_analysis.Origin


@dataclass(frozen=True)
class Plan:
    """A definition as a backend compiles it, with its schedule."""

    definition: c.ComputationDef
    schedule: sch.Schedule


class ComputationStencil:
    """A multi-stage computation over an I, J, K iteration space (contract.md section 2)."""

    def __init__(self, func: FunctionType, *, backend: str | None = None,
                 externals: dict[str, object] | None = None,
                 dtypes: dict[str, object] | None = None,
                 fast_math: bool | None = None, autotune: str | None = None) -> None:
        self.func = func
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__
        self.backend = backend
        # contraction allowed (docs/numerics.md); None: sk.configure's default, read now
        code = func.__code__
        self.fast_math = config.checked_fast_math(
            fast_math, self.__name__, Location(code.co_filename, code.co_firstlineno, 1))
        # measured choices of the C backend; None: sk.configure's, read at each call
        self.autotune = config.checked_autotune(
            autotune, self.__name__, Location(code.co_filename, code.co_firstlineno, 1))
        self.externals, self.dtypes = externals, dtypes
        parsed, self.source = parse_computation(func, externals, dtypes)
        self._parsed = parsed
        # variants for calls passing one array as a written and a read field (GT4Py's Burgers
        # demo; frontend/aliasing.py), by the pairs of fields aliased
        self._alias_variants: dict[frozenset, ComputationStencil] = {}
        self._aliases: frozenset[tuple[str, str]] = frozenset()
        # the calls on device arrays bound per signature (``adapters.device_computation``;
        # None before the first): tried first, it answers False for a call it has not bound
        self._device: Callable[..., bool] | None = None
        self._setup(parsed)

    def _setup(self, parsed: c.ComputationDef) -> None:
        func = self.func
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
        self._rules = {inlines: geo_analysis.Rules(
            func.__name__, typed.loc, typed.parameter_fields, self.schedule, p.definition,
            p.schedule, tuple(typed.planes), typed.level_index)
            for inlines, p in self.plans.items()}
        self._builds: dict[tuple, object] = {}
        self._geo_cache: dict[tuple, Geometry] = {}
        # the caller passes every field but the 2-D temporaries, which calls allocate
        self._parameter_fields = typed.parameter_fields
        written = tuple(f.name for f in self._parameter_fields
                        if f.name in self.schedule.written)
        self._arguments = ComputationArguments(
            dataclasses.replace(typed, fields=self._parameter_fields), self.__name__,
            parsed.params[:func.__code__.co_argcount], parameter_defaults(func), written)
        # Temporaries are reused between calls, per thread: concurrent calls from several
        # threads must not share them.
        self._local = threading.local()

    def __reduce__(self):
        return adapters.reduce(self)  # by definition and options (dask.distributed, ...)

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
                "fast_math": self.fast_math or None, "autotune": self.autotune,
                "builds": len(self._builds) or None}

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
        return adapters.numba_type(self)

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
        device = self._device
        if device is not None and exec_info is None and \
                device(args, kwargs, origin, domain, validate_args):
            return None
        # the arrays, origin and domain of this thread's previous call: straight to its launch
        bound = getattr(self._local, "bound", None)
        options = (self.backend, self.autotune, self.fast_math)
        if bound is not None and exec_info is None:
            launch = bound.match(self._arguments, options, args, kwargs, origin, domain,
                                 validate_args)
            if launch is not None:
                return self._launched(launch)
        # MPI-distributed, device arrays, DataArrays: an adapter runs the call
        adapter = adapters.for_call(args, kwargs.values())
        if adapter is not None:
            return adapter.computation_call(self, args, kwargs, origin, domain, validate_args,
                                            exec_info)
        given_origin = origin
        values, fields, origin = self.bind_call(args, kwargs, origin, exec_info)

        def ran(run, ran_values, temps, geo) -> None:
            # bound only where nothing was copied or allocated for this call (aliased
            # fields' snapshots, aligned copies, 2-D temporaries)
            self._local.bound = None
            if self._aliases or any(ran_values[n] is not fields[n] for n in fields) \
                    or not (plain(given_origin) and plain(domain)):
                return
            self._local.bound = BoundComputationCall.of(
                self._arguments, options, args, kwargs, given_origin, domain, validate_args,
                run, ran_values, temps, geo)
        return self.run_bound(values, fields, origin, domain, validate_args, exec_info,
                              ran=ran)

    def bind_call(self, args: tuple, kwargs: dict, origin: object, exec_info: dict | None,
                  convert=None) -> tuple[dict[str, object], dict[str, object], object]:
        """A call's arguments by name, its fields (each through ``convert(name, axes,
        value)`` if given: an adapter's conversion to arrays) and its origin (GT4Py's
        ``__gt_origin__`` when the call gives none); starts ``exec_info``'s clock."""
        if exec_info is not None:
            if not isinstance(exec_info, dict):
                raise ArgumentError(f"exec_info must be a dict, got {type(exec_info).__name__}",
                                    stencil=self.__name__, loc=self.definition.loc,
                                    hint="pass exec_info={} (or None)")
            exec_info["call_start_time"] = time.perf_counter()
        if convert is not None:
            values = self._arguments.bind_names(args, kwargs)
            for f in self._parameter_fields:
                if values[f.name] is not None:
                    values[f.name] = convert(f.name, f.axes, values[f.name])
            args, kwargs = (), values
        values = self._arguments.bind(args, kwargs)
        if self._aliases:  # the read fields' copies (frontend/aliasing.py)
            values = aliasing.snapshot(values, self._aliases)
        fields = {f.name: values[f.name] for f in self._parameter_fields}
        if origin is None:
            origin = _gt_origins(self._parameter_fields, fields)
        return values, fields, origin

    def run_bound(self, values: dict[str, object], fields: dict[str, object], origin: object,
                  domain: object, validate_args: bool, exec_info: dict | None,
                  device: adapters.Adapter | None = None,
                  ran: Callable[..., None] | None = None) -> None:
        """The call on bound arguments (``bind_call``): NumPy fields, or the host stand-ins
        of fields on the ``device`` adapter's arrays, whose device views ``values`` holds.
        ``ran(run, values, temporaries, geometry)`` is told what ran, once it ran (the
        device adapter binds later calls of the signature to it)."""
        on_device = device is not None
        if not on_device and not self._aliases:
            # one array passed as a written field and a read one: GT4Py's semantics
            # (frontend/aliasing.py) through a variant whose read field is the written one
            pairs = aliasing.aliased_pairs(fields, self._arguments.written_fields)
            if pairs and aliasing.mergeable(self._parsed, pairs):
                variant = self._aliased(pairs)
                values = aliasing.snapshot(values, variant._aliases)
                fields = {f.name: values[f.name] for f in variant._parameter_fields}
                return variant.run_bound(values, fields, origin, domain, validate_args,
                                         exec_info)
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
        temps = self._temporaries(geo, plan, chosen, fields)
        if geo.plane_shapes:
            values, fields = self._planes(geo, chosen, values, fields, device)
        _, run = self._build(chosen, fields, None if on_device else (values, temps, geo))
        written: dict[str, np.ndarray] = {}
        if chosen.capabilities.compiled and not on_device:  # type: ignore[union-attr]
            values, written = self._arguments.aligned(values, fields)
        if exec_info is not None:
            exec_info["run_start_time"] = time.perf_counter()
        self._launched(lambda: run(values, temps, geo))
        for name, target in written.items():
            target[...] = values[name]
        if ran is not None and not geo.plane_shapes:  # planes are new per call: not bound
            ran(run, values, temps, geo)
        if exec_info is not None:
            exec_info["run_end_time"] = time.perf_counter()
            exec_info["call_end_time"] = time.perf_counter()
            exec_info["domain"] = geo.domain
            exec_info["origin"] = dict(geo.origins)
            exec_info["backend"] = chosen.name

    def _launched(self, launch: Callable[[], None]) -> None:
        try:
            launch()
        except (ValueError, TypeError, BufferError) as exc:
            if isinstance(exc, StencilError):
                raise
            # what the compiled entry point refuses (validate_args=False lets more through)
            raise ArgumentError(str(exc), stencil=self.__name__, loc=self.definition.loc,
                                hint="check the fields' dimensions and dtypes") from None

    def _aliased(self, pairs: frozenset[tuple[str, str]]) -> ComputationStencil:
        """This computation with the read field of each pair read as its written field."""
        variant = self._alias_variants.get(pairs)
        if variant is None:
            variant = object.__new__(type(self))  # not copy.copy: __reduce__ re-parses
            variant.__dict__.update(self.__dict__)
            variant._aliases = pairs
            variant._alias_variants = {}
            variant._setup(aliasing.merge_aliases(self._parsed, pairs))
            self._alias_variants[pairs] = variant
        return variant

    # ------------------------------------------------------------ geometry

    def geometry_rules(self, plan: Plan) -> geo_analysis.Rules:
        """What the geometry of a call compiled from ``plan`` (one of ``self.plans``)
        depends on."""
        rules = self._rules[plan is self.plans[True]]
        if rules.stencil != self.__name__:  # renamed since (update_wrapper, gtscript)
            rules = self._rules[plan is self.plans[True]] = dataclasses.replace(
                rules, stencil=self.__name__)
        return rules

    def _geometry(self, fields: dict[str, np.ndarray], origin: object, domain: object,
                  validate: bool, plan: Plan) -> Geometry:
        shapes = {f.name: np.shape(fields[f.name]) for f in self._parameter_fields}
        return geo_analysis.resolve(self.geometry_rules(plan), shapes, origin, domain, validate)

    def _temporaries(self, geo: Geometry, plan: Plan, backend: registry.Backend,
                     fields: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Zeroed temporaries of the geometry, kept between calls; a GPU backend's on its
        device (CuPy arrays), so that no call copies them there and back, with the unit
        stride on the axis of the fields' (lower.computation_gpu.
        temporaries_unit_axis: a warp's accesses coalesce on the storages too)."""
        gpu = backend.capabilities.device == "gpu"  # type: ignore[union-attr]
        unit = 2
        if gpu and fields is not None:
            from ..lower.computation import layout_of
            from ..lower.computation_gpu import temporaries_unit_axis

            unit = temporaries_unit_axis(plan.definition, layout_of(fields, plan.definition))
        key = (id(plan), gpu, unit, tuple(sorted(geo.temp_shapes.items())))
        cached = getattr(self._local, "temps", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        xp = storage.array_module(backend) if gpu else np

        def zeros(shape: tuple[int, ...], dtype) -> np.ndarray:
            if len(shape) != 3 or unit == 2:
                return xp.zeros(shape, dtype)
            order = [a for a in (2, 0, 1) if a != unit] + [unit]  # K outermost, unit last
            return xp.zeros([shape[a] for a in order], dtype).transpose(
                [order.index(a) for a in range(3)])

        temps = {t: zeros(geo.temp_shapes[t], dt) for t, dt in plan.definition.temporaries}
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
                fields: dict[str, object], device: adapters.Adapter | None
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
            if device is not None:
                values[f.name], fields[f.name] = device.upload(backend, host)
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
                                  self.fast_math, autotune=self.autotune)

    def _build(self, backend: registry.Backend, fields: dict[str, np.ndarray] | None,
               call: tuple | None = None):
        """(source, launcher) of the build for ``fields``' layout; ``call``: the (values,
        temporaries, geometry) of the call it is built for, which the C backend may time
        its variants on (the backend's tuner: registry/c_autotune.py)."""
        key = (backend.name, layout_key(backend, fields, self.definition))
        built = self._builds.get(key)
        if built is None:
            request = self._request(backend, fields)

            def build() -> tuple[str, Callable[..., None]]:
                started = time.perf_counter()
                artifact = driver.run(request)
                build_event("computation %r: built for backend %r in %.3f s", self.__name__,
                            backend.name, time.perf_counter() - started,
                            verbose=getattr(self, "verbose", False))
                return artifact.source, artifact.entry

            tune = backend.tuner("computation")  # the C backend's measured choice
            built = build() if call is None or tune is None else tune(request, call, build)
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
