"""``ParLoop``: generation separate from execution, cached; race-free parallel execution.

``generate()`` builds the source from the kernel and the arguments' *structure* (kind, mode,
dtype, local shape) only, so one generated loop serves every mesh. ``compute()`` generates
on first use, then runs. Shared targets written through maps are protected by colouring or
atomics (``sk.configure(race="color" | "atomic")``, or ``race=`` on the loop). Colouring is
PyOP2's block colouring: contiguous blocks of elements, coloured so that blocks of one
colour share no target entry; each block runs its elements in order, without atomics. "auto"
picks colouring on the CPU: on the 1,000,000-cell INC benchmark it ran in 1.0 ms against 8.1 ms
with atomics (x86 has no atomic floating-point add, so each update is a compare-and-swap loop);
a backend may declare its own choice (``Pieces.auto_race``: "cuda" picks atomics for INCs of
the element types it adds natively).
RW, MIN and MAX through a map, and complex values, always use colouring; so does every
ParLoop on the "numba" backend, which has no atomics (``race="atomic"`` colours there).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from .. import adapters, registry
from ..analysis.typing import ArgType, type_point_kernel
from ..compile import driver
from ..compile.requests import ParLoopRequest
from ..config import RACE_MODES, current
from ..errors import ArgumentError, StencilError, StencilTypeError, at_call
from ..ir import definition as d
from ..ir.abi import ArgKind, Device, LoopArgumentValues, ParLoopCall, RaceMode
from ..ir.core import walk
from ..lower import parloop as lpl
from ..registry import Backend
from ..registry.base import load
from ..runtime import lazy

# The schedulers' helpers, where the tests and the benchmarks have always found them
from ..runtime.parloop_blocks import BLOCK, block_coloring, even_blocks  # noqa: F401
from ..runtime.parloop_numpy import element_rounds, scatter_add  # noqa: F401
from .parloop import MAX, MIN, READ, RW, Arg, Kernel, Map, MapEntry, Set, check_args
from .parloop_checks import check_objects


def _specs(args: tuple[Arg, ...]) -> tuple[lpl.ArgSpec, ...]:
    out = []
    for a in args:
        arity = 0
        entry = 0
        if a.kind is ArgKind.INDIRECT:
            arity = a.path.arity  # type: ignore[union-attr]
        elif a.kind is ArgKind.ENTRY:
            arity, entry = a.path.map.arity, a.path.index  # type: ignore[union-attr]
        index = a.map.values.dtype if a.map is not None else np.dtype(np.int32)
        out.append(lpl.ArgSpec(a.kind, a.mode, a.obj.dtype, a.obj.dim, a.local_shape,
                               arity, entry, index))
    return tuple(out)


def _stores(node: object) -> list[d.Store]:
    return [n for n in walk(node) if isinstance(n, d.Store)]


def _truncates(store: d.Store, explicit: set[int], target: np.dtype) -> bool:
    """A float value stored into an integer argument by an implicit conversion (one the
    kernel did not write as int(...), np.int32(...), ...)."""
    v = store.value
    return (target.kind in "iub" and isinstance(v, d.Cast) and id(store) not in explicit
            and v.value.dtype is not None and v.value.dtype.kind in "fc")



class ParLoop:
    """A parallel loop of ``kernel`` over ``iterset`` with ``args`` (PyOP2's backend API)."""

    def __init__(self, kernel: Kernel, iterset: Set, *args: Arg, backend: str | None = None,
                 race: str | None = None) -> None:
        if not isinstance(kernel, Kernel):
            if callable(kernel):
                kernel = Kernel(kernel)  # type: ignore[arg-type]
            else:
                raise StencilError(f"{kernel!r} is not a kernel", hint="use @sk.kernel")
        if not isinstance(iterset, Set):
            raise StencilError(f"{iterset!r} is not an sk.Set", stencil=kernel.name)
        if not args:
            raise ArgumentError("a ParLoop needs at least one argument", stencil=kernel.name,
                                hint="pass the Dats and Globals the kernel works on")
        if race not in (None, *RACE_MODES):
            raise ArgumentError(f"race={race!r} is not one of {RACE_MODES}",
                                stencil=kernel.name, hint="race='color' or race='atomic'")
        check_args(kernel, iterset, args)
        self.kernel, self.iterset, self.args = kernel, iterset, tuple(args)
        self.backend = backend or kernel.backend
        self.race = race
        self.specs = _specs(self.args)
        shared = [s for s in self.specs if s.writes_shared]
        # what the race mode depends on besides the configured one: fixed by the arguments
        self._race_fixed: RaceMode | None = RaceMode.NONE if not shared else (
            RaceMode.COLOUR if any(s.mode in (RW, MIN, MAX) and s.kind is not ArgKind.MAT
                                   for s in shared) or any(s.dtype.kind == "c" for s in shared)
            else None)
        # the maps whose values a bound call holds (a Mat: its row map): new values, a new
        # binding
        self._maps: tuple[Map, ...] = tuple(_written_map(a) for a in self.args
                                            if a.kind.shares_targets)
        self._bound: tuple[tuple, ParLoopCall] | None = None
        # the run on device data bound by the latest GPU run (adapters.device_parloop;
        # None: none), tried first: it answers False when the arguments have changed
        self._device: Callable[[ParLoop], bool] | None = None
        self.loc = None
        self._src = None  # the kernel's source, when written in Python
        self._typed = self._analyse() if kernel.func is not None else None

    # ------------------------------------------------------------ analysis

    def _analyse(self) -> d.PointKernel:
        from ..frontend.parloop_kernel import parse_kernel
        from ..lower.single_exit import RESULT

        parsed, self._src = parse_kernel(self.kernel.func)
        name = parsed.name
        self.loc = parsed.loc
        if len(parsed.params) != len(self.args):
            raise ArgumentError(f"the kernel takes {len(parsed.params)} arguments, the loop "
                                f"passes {len(self.args)}", stencil=name, loc=parsed.loc,
                                hint="pass one argument per kernel parameter")
        # a dummy result lets the point-kernel typer run unchanged
        body = parsed.body + (d.Assign(RESULT, d.Const(0, dtype=np.dtype(np.int64))),)
        import dataclasses

        types = tuple(ArgType(a.obj.dtype, len(a.local_shape)) for a in self.args)
        typed = type_point_kernel(dataclasses.replace(parsed, body=body), types)
        typed = dataclasses.replace(typed, body=typed.body[:-1], local_types=tuple(
            (n, t) for n, t in typed.local_types if n != RESULT))
        shapes = dict(zip(typed.params, (a.local_shape for a in self.args)))
        modes = dict(zip(typed.params, (a.mode for a in self.args)))
        typed_of = dict(zip(typed.params, (a.obj.dtype for a in self.args)))
        # typing keeps statements in order, so the n-th store is the n-th store as written
        explicit = {id(t) for t, p in zip(_stores(typed), _stores(parsed))
                    if isinstance(p.value, d.Cast)}
        for n in walk(typed):
            if isinstance(n, (d.Index, d.Store)):
                arr = n.array
                if isinstance(n, d.Store) and modes[arr] is READ:
                    raise StencilTypeError(f"argument '{arr}' is passed READ but the kernel "
                                           "writes it", stencil=name, loc=n.loc,
                                           hint="pass it as WRITE, RW or INC")
                if isinstance(n, d.Store) and _truncates(n, explicit, typed_of[arr]):
                    # e.g. `count[0] += 0.5` into an int Dat would silently add 0
                    raise StencilTypeError(
                        f"the kernel stores a {n.value.value.dtype} value into '{arr}', whose Dat "
                        f"holds {typed_of[arr]}: the fraction would be dropped silently",
                        stencil=name, loc=n.loc,
                        hint="give the Dat a float dtype, or convert explicitly with int(...)")
                for x, size in zip(n.index, shapes[arr]):
                    if isinstance(x, d.Const) and not -size <= int(x.value) < size:
                        raise StencilTypeError(
                            f"index {int(x.value)} is out of range for '{arr}', which has "
                            f"shape {shapes[arr]} here", stencil=name, loc=n.loc,
                            hint="check the map arity and the Dat's dim against the kernel")
        return typed

    # ------------------------------------------------------------ code

    def race_mode(self, backend: Backend | None = None) -> RaceMode:
        """How shared targets are protected: none (no shared write), colouring or atomics;
        "auto" is what ``backend`` declares (``Pieces.auto_race``), else colouring."""
        race = self.race or current().race
        if race not in RACE_MODES:
            raise ArgumentError(f"race mode {race!r} (sk.configure or STENCILKIT_RACE) is not "
                                f"one of {RACE_MODES}", stencil=self.kernel.name,
                                hint="race='color' or race='atomic'")
        if self._race_fixed is not None:
            return self._race_fixed
        if race == "auto" and backend is not None and backend.pieces is not None \
                and backend.pieces.auto_race is not None:
            return load(backend.pieces.auto_race)(self.specs)  # type: ignore[operator]
        return RaceMode.ATOMIC if race == RaceMode.ATOMIC else RaceMode.COLOUR

    def _key(self, backend: Backend) -> tuple:
        return (backend.name, self.kernel.name, self.kernel.code or self.kernel.func,
                self.specs, self.race_mode(backend), self.kernel.fast_math)

    def generate(self, backend: str | None = None) -> str:
        """The generated source (rendered: nothing is compiled), independent of sizes."""
        chosen = registry.resolve(backend or self.backend, self.kernel.name, generate=True)
        return driver.render(self._request(chosen)).source

    def _built(self, backend: str | None):
        """(source, entry point), cached in memory and on disk."""
        chosen = registry.resolve(backend or self.backend, self.kernel.name)
        key = self._key(chosen)
        built = _GENERATED.get(key)
        if built is None:
            artifact = driver.run(self._request(chosen))
            built = _GENERATED[key] = (artifact.source, artifact.entry)
        return built

    def _request(self, backend: Backend) -> ParLoopRequest:
        name = self.kernel.name
        backend.require("parloop", name, tuple(s.dtype for s in self.specs))
        if self._typed is None and not backend.capabilities.c_kernels:  # type: ignore[union-attr]
            able = [n for n, b in registry.REGISTRY.items()
                    if b.built and b.capabilities.c_kernels]  # type: ignore[union-attr]
            raise StencilError(f"C-string kernels need a backend that compiles C "
                               f"({', '.join(map(repr, able))}), not {backend.name!r}",
                               stencil=name, hint=f"use backend={able[0]!r} or write the "
                                                  "kernel in Python")
        return ParLoopRequest(backend, name, self._typed, self.specs, self._src,
                              self.kernel.code, self.race_mode(backend) is RaceMode.ATOMIC,
                              self.kernel.fast_math)

    # ------------------------------------------------------------ execution

    def _details(self) -> dict[str, object]:
        return {"over": f"Set({self.iterset.size})",
                "args": ", ".join(f"{a.obj.name}({a.mode.value}"
                                  + (", map" if a.kind is not ArgKind.DIRECT else "") + ")"
                                  for a in self.args)}

    def __repr__(self) -> str:
        from .show import describe

        return describe("ParLoop", self.kernel.func, self.kernel.name, self.backend,
                        self._details())

    def _repr_html_(self) -> str:
        from .show import html_table

        return html_table("ParLoop", self.kernel.func, self.kernel.name, self.backend,
                          self._details())

    def compute(self) -> None:
        """Run the loop now (after anything queued before it)."""
        try:
            lazy.flush()
            device = self._device
            if device is not None and device(self):
                return
            chosen = registry.resolve(self.backend, self.kernel.name)
            _, fn = self._built(chosen.name)
            gpu = chosen.capabilities.device is Device.GPU  # type: ignore[union-attr]
            check_objects(self, gpu)
            call = self.bind(chosen)
            chosen.launcher("parloop")(call, fn)
            if gpu:  # the next runs on the same device arrays launch only (the adapter's)
                self._device = adapters.bound_parloop(self, call, fn)
        except StencilError as exc:
            raise at_call(exc, sys._getframe(1)) from exc.__cause__

    def bind(self, backend: Backend | None = None) -> ParLoopCall:
        """This run's values (arrays, maps, the set's size, the race mode on ``backend``), as
        the launchers take them: they see no ParLoop, Dat or Map. The same call while the
        race mode and the maps' values are (a Dat's array is its own for life: assignments
        copy into it)."""
        race = self.race_mode(backend)
        key = (race, *(m.version for m in self._maps))
        if self._bound is None or self._bound[0] != key:
            self._bound = key, ParLoopCall(self.kernel.name, self.loc, self.iterset.size, race,
                                           tuple(_values(a) for a in self.args))
        return self._bound[1]


def _written_map(a: Arg) -> Map:
    """The map an argument that shares targets writes through (a Mat: its row map)."""
    m = a.path[0] if isinstance(a.path, tuple) else a.map
    assert m is not None
    return m


def _values(a: Arg) -> LoopArgumentValues:
    """One argument's values: its array; the map the loop function takes (a Mat: its local
    map into the CSR values); and what its elements write through, for colouring (a Mat: its
    row map, whose colourings it shares)."""
    if a.kind is ArgKind.MAT:
        rowmap = _written_map(a)
        return LoopArgumentValues(a.kind, a.mode, a.obj._data, a.local_shape, a.obj.dim,
                                  a.obj.sparsity.lmap, None,  # type: ignore[union-attr]
                                  rowmap.values, rowmap.version, rowmap.to_set.size,
                                  rowmap._colorings)
    m = a.map
    if m is None:
        return LoopArgumentValues(a.kind, a.mode, a.obj._data, a.local_shape, a.obj.dim)
    entry = a.path.index if isinstance(a.path, MapEntry) else None
    return LoopArgumentValues(a.kind, a.mode, a.obj._data, a.local_shape, a.obj.dim,
                              m.values, entry, m.values if entry is None else m.values[:, [entry]],
                              m.version, m.to_set.size, m._colorings)


_GENERATED: dict[tuple, tuple[str, object]] = {}


def par_loop(kernel: Kernel, iterset: Set, *args: Arg, backend: str | None = None,
             race: str | None = None) -> ParLoop:
    """Generate if needed and run (or queue, with ``sk.configure(lazy=True)``)."""
    try:
        loop = ParLoop(kernel, iterset, *args, backend=backend, race=race)
        if current().lazy:
            lazy.enqueue(loop.compute)
        else:
            loop.compute()
    except StencilError as exc:
        raise at_call(exc, sys._getframe(1)) from exc.__cause__
    return loop


def flush() -> None:
    """Run every queued loop (lazy mode)."""
    lazy.flush()

