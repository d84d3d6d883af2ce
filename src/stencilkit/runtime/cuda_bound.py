"""A CUDA launch plan bound to one argument geometry: the launches worked out once, replayed.

What a plan's launches need besides the arrays' addresses — which launches run (host loops,
host-decided conditions), their grids and blocks, the values of shapes, strides, host loop
counters and the scalars the bounds read — depends only on the arrays' shapes and strides
and on those scalars. ``BoundPlan.build`` evaluates all of it on the first call with a
given ``signature`` (``ir.host_eval``, in Python); every later call with that signature
only puts this call's pointers and free scalars into the prepared argument tuples and
launches (``BoundPlan.run``): no binding, no evaluation, no allocation.

The status word and the scratch arrays are allocated when the plan is bound, so a bound
call allocates nothing (a CUDA graph capture may record it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import kernel as k
from ..ir.core import walk
from ..ir.host_eval import evaluate, host_launches
from ..ir.plan import HostLoop, Launch, LaunchPlan, Step

GridBlock = tuple[tuple[int, int, int], tuple[int, int, int]]

#: bound plans an entry keeps (the least recently bound dropped beyond it): a time loop
#: needs one, a code that cycles through many shapes rebinds now and then
BOUND_LIMIT = 64


def host_read_symbols(steps: tuple[Step, ...]) -> frozenset[str]:
    """The names of the symbols the host evaluates to walk ``steps``: host loop bounds,
    grid bounds, host-decided conditions. A scalar argument among them is part of a bound
    plan's signature; any other scalar is passed per call."""
    names: set[str] = set()

    def exprs(s: Step):
        if isinstance(s, HostLoop):
            yield from (s.start, s.stop, s.step)
            for b in s.body:
                yield from exprs(b)
        else:
            for d in s.dims:
                yield from (d.start, d.stop)
            if s.host_conditions:
                yield from s.conditions
            if s.shared is not None:  # sizes the block and the shared memory
                yield s.shared.per_thread

    for step in steps:
        for e in exprs(step):
            names.update(n.symbol.name for n in walk(e) if isinstance(n, k.Sym))
    return frozenset(names)


@dataclass(frozen=True)
class BoundLaunch:
    """One launch of a bound plan: ``template`` is its argument tuple with this geometry's
    values in place (shapes, strides, counters as NumPy scalars of their types, scratch
    arrays, the status word); a call puts its arrays at ``pointers`` (slot, argument
    position) and its free scalars at ``scalars`` (slot, argument position, type)."""

    function: Callable[..., object]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    template: tuple[object, ...]
    pointers: tuple[tuple[int, int], ...]
    scalars: tuple[tuple[int, int, type], ...]
    shared_mem: int = 0  # bytes of dynamic shared memory (``Launch.shared``)


@dataclass(frozen=True)
class BoundPlan:
    """The launches of one plan for one signature, and the scratch arrays a call zeroes."""

    launches: tuple[BoundLaunch, ...]
    scratch: tuple[object, ...]

    @staticmethod
    def build(plan: LaunchPlan, functions: Mapping[str, object], env: dict[str, object],
              positions: Mapping[str, int], free: frozenset[str], status: object,
              zeros: Callable[[int, np.dtype], object],
              config: Callable[[Launch, Mapping[str, object], bool], GridBlock | None]
              ) -> BoundPlan:
        """Walk ``plan`` with the parameter values ``env`` (this call's: ``runtime.cuda.
        bind``). ``positions``: the argument position each pointer and each free scalar
        parameter (``free``: those the host does not read) takes its value from per call;
        ``zeros`` allocates the scratch arrays, which the plan keeps; ``config`` sizes a
        launch's grid (``runtime.cuda.launch_config``)."""
        scratch = []
        for s in plan.scratch:
            env[s.symbol.name] = zeros(s.size, s.symbol.dtype)
            scratch.append(env[s.symbol.name])
        bound = []
        for launch in host_launches(plan.steps, env):
            grid_block = config(launch, env, plan.covering)
            if grid_block is None:
                continue
            template: list[object] = []
            pointers, scalars = [], []
            for slot, p in enumerate(launch.params):
                if p.pointer:
                    if p.name in positions:
                        pointers.append((slot, positions[p.name]))
                        template.append(None)
                    else:
                        template.append(env[p.name])  # a scratch array
                elif p.name in free:
                    scalars.append((slot, positions[p.name], np.dtype(p.dtype).type))
                    template.append(None)
                else:
                    template.append(np.dtype(p.dtype).type(env[p.name]))
            template.append(status)
            shared = 0
            if launch.shared is not None:
                threads = grid_block[1][0] * grid_block[1][1] * grid_block[1][2]
                shared = threads * launch.shared.bytes_per_thread(
                    int(evaluate(launch.shared.per_thread, env)))
            bound.append(BoundLaunch(functions[launch.name], *grid_block,  # type: ignore[arg-type]
                                     tuple(template), tuple(pointers), tuple(scalars),
                                     shared))
        return BoundPlan(tuple(bound), tuple(scratch))

    def settled(self, values: Sequence[object], positions: frozenset[int]) -> BoundPlan:
        """This plan with the free scalars taken from ``positions`` fixed to their values
        in ``values``: for a caller whose own signature fixes them (a computation's origins,
        a point kernel's border fill), so that its calls convert only the others."""
        launches = []
        for b in self.launches:
            template = list(b.template)
            for slot, i, t in b.scalars:
                if i in positions:
                    template[slot] = t(values[i])
            launches.append(dataclasses.replace(
                b, template=tuple(template),
                scalars=tuple(x for x in b.scalars if x[1] not in positions)))
        return BoundPlan(tuple(launches), self.scratch)

    def run(self, values: Sequence[object]) -> None:
        """Launch with this call's arrays and free scalars (``values``, by position)."""
        for s in self.scratch:
            s.fill(0)  # type: ignore[attr-defined]
        for b in self.launches:
            if b.pointers or b.scalars:
                args = list(b.template)
                for slot, i in b.pointers:
                    args[slot] = values[i]
                for slot, i, t in b.scalars:
                    args[slot] = t(values[i])
                args_t = tuple(args)
            else:
                args_t = b.template
            if b.shared_mem:
                b.function(b.grid, b.block, args_t, shared_mem=b.shared_mem)
            else:
                b.function(b.grid, b.block, args_t)


def positions_of(params: Sequence[k.Symbol], names: Sequence[k.ArgumentKey],
                 host_read: frozenset[str]) -> tuple[dict[str, int], frozenset[str],
                                                     tuple[int, ...]]:
    """For a plan whose parameters ``params`` bind to arguments named ``names``
    (``runtime.cuda.bind``): the argument position of each pointer and each free scalar
    parameter, the free scalars' names, and the positions of the scalar arguments the host
    reads (their values are part of the signature)."""
    index = {n: i for i, n in enumerate(names)}
    positions: dict[str, int] = {}
    free: set[str] = set()
    keyed: set[int] = set()
    for p in params:
        for prop in p.properties:
            match prop:
                case k.BasePointer(buffer=b):
                    positions[p.name] = index[b]
                case k.ScalarArgument(key=n):
                    if p.name in host_read:
                        keyed.add(index[n])
                    else:
                        positions[p.name] = index[n]
                        free.add(p.name)
    return positions, frozenset(free), tuple(sorted(keyed))


def signature(values: Sequence[Any], keyed: tuple[int, ...], array_type: Any) -> tuple:
    """What decides a bound plan: each array's shape and strides (``array_type``: the
    device arrays' class; ``values`` are the call's arguments on the device), and the value
    of each scalar argument at a position in ``keyed``."""
    key: list[object] = [(a.shape, a.strides) if isinstance(a, array_type) else None
                         for a in values]
    for i in keyed:
        key[i] = (values[i],)
    return tuple(key)
