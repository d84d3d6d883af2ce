"""The compile driver: every kind on every backend through one sequence of named stages.

A kind's stages are data (``PIPELINES``); a backend declares, per kind, the function of each
stage it has (``registry.base.KindStages``, as "module:attribute" references) and the driver
calls them in order. A stage is a function ``(request, work) -> work`` of the request and
what the stages before it produced (``Work``, frozen). Around every stage the driver runs
the hooks of ``compile.hooks``: the dump, the verifier of kernel IR, the timer.

``render`` stops after "print": it needs no compiler, no Numba, no GPU package, so any
backend's source can be generated anywhere. ``run`` goes on to the back key, the toolchain
and the launcher. Rendered work is kept under the request's front key
(``compile.keys``): building what was rendered, or rendering it again, starts at "key".
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from .. import config
from ..ir import abi
from ..ir.kernel import KernelFunction
from . import hooks
from .declared import kind_stages, load
from .keys import back_key, front_key
from .requests import Kind, Request


class Stage(str, Enum):
    """The stages a kind's pipeline may have, each a function of the backend's."""

    LOWER = "lower"  # definition IR -> kernel IR (the kernel)
    LOWER_LOOP = "lower_loop"  # ParLoops: the loop over the set around the kernel
    TRANSFORM = "transform"  # the backend's own kernel-IR passes, each a stage of its name
    PLATFORM = "platform"  # abstract nodes -> the language's (GPU: a launch plan)
    PRINT = "print"  # -> source text
    KEY = "key"  # -> the back key of the binary (source, toolchain identity, key_inputs)
    TOOLCHAIN = "toolchain"  # source -> a callable entry point (compiled, cached)
    LAUNCHER = "launcher"  # entry point -> what a call runs


_ALL = (Stage.LOWER, Stage.TRANSFORM, Stage.PLATFORM, Stage.PRINT, Stage.KEY,
        Stage.TOOLCHAIN, Stage.LAUNCHER)

#: Each kind's stages in order; a backend leaves out those it does not need (the "numpy"
#: backend prints from the definition IR: no lowering, no platform).
PIPELINES: Mapping[Kind, tuple[Stage, ...]] = MappingProxyType({
    Kind.POINT: _ALL,
    Kind.COMPUTATION: _ALL,
    Kind.PARLOOP: (Stage.LOWER, Stage.LOWER_LOOP, *_ALL[1:]),
})

#: Stages whose output is kernel IR: the verifier runs after each.
KERNEL_STAGES = frozenset({Stage.LOWER, Stage.LOWER_LOOP, Stage.TRANSFORM, Stage.PLATFORM})


@dataclass(frozen=True)
class Work:
    """What the stages have produced so far."""

    kernels: tuple[KernelFunction, ...] = ()  # kernel IR
    plan: Any = None  # the GPU platforms' launch plan
    source: str = ""  # the generated source: what ``generate()`` returns
    key_inputs: tuple[str, ...] = ()  # what else goes into the binary (the entry's wrapper)
    back_key: str = ""
    #: the calling convention the launchers bind by (``ir.abi``), from the kernel IR before
    #: the platform's lowering; None for a backend that prints without kernel IR
    launch: abi.LaunchDescription | None = None
    entry: Any = None  # what the toolchain built, then what the launcher made of it
    #: what a stage leaves for later ones (the lowering's buffers, the wrapper's arguments)
    facts: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def described(self) -> abi.LaunchDescription:
        """``launch``, for the stages after the lowering that bind by it."""
        if self.launch is None:
            raise RuntimeError("a stage needs the launch description, which only a backend "
                               "that lowers to kernel IR has (a stencilkit bug)")
        return self.launch

    def but(self, **changes: Any) -> Work:
        """This work with ``changes``; ``facts=`` entries are added to the existing ones."""
        if "facts" in changes:
            changes["facts"] = MappingProxyType({**self.facts, **changes["facts"]})
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class NamedStage:
    name: str  # the stage's name in dumps, timings and errors ("lower", "collapse_rows", ...)
    stage: Stage
    #: "module:attribute" of the function (request, work) -> work; for "key", of the
    #: function request -> the toolchain's identity (a tuple of strings)
    ref: str


@dataclass(frozen=True)
class Artifact:
    """A rendered (``entry`` None) or built request."""

    kind: Kind
    backend: str
    source: str
    entry: object
    front_key: str
    back_key: str  # "" when rendered, or where the backend has no "key" stage
    timings: tuple[tuple[str, float], ...]  # (stage name, seconds) in the order they ran
    work: Work

    @property
    def launch(self) -> abi.LaunchDescription | None:
        """The entry point's calling convention (what the launcher binds by)."""
        return self.work.launch


def stages(backend: Any, kind: Kind | str) -> tuple[NamedStage, ...]:
    """The stages ``backend`` runs for ``kind``, in order."""
    declared = kind_stages(backend, kind)
    out = []
    for stage in PIPELINES[Kind(kind)]:
        if stage is Stage.TRANSFORM:
            out += [NamedStage(name, stage, ref) for name, ref in declared.transforms]
            continue
        ref = getattr(declared, stage.value)
        if ref is not None:
            out.append(NamedStage(stage.value, stage, ref))
    return tuple(out)


#: rendered work by front key, the most recently used last; bounded, since each entry holds
#: kernel IR and plans (a long session specializes many kernels)
_RENDERED: OrderedDict[str, Work] = OrderedDict()
_RENDERED_MAX = 256
_rendered_lock = threading.Lock()


def _remembered(front: str) -> Work | None:
    with _rendered_lock:
        work = _RENDERED.get(front)
        if work is not None:
            _RENDERED.move_to_end(front)
        return work


def _remember(front: str, work: Work) -> None:
    with _rendered_lock:
        _RENDERED[front] = work
        while len(_RENDERED) > _RENDERED_MAX:
            _RENDERED.popitem(last=False)


def forget_rendered() -> None:
    """Drop the rendered work kept in memory (the next build or render runs every stage)."""
    with _rendered_lock:
        _RENDERED.clear()


def render(request: Request) -> Artifact:
    """The generated source of ``request``: the stages up to "print" only."""
    return _drive(request, build=False)


def run(request: Request) -> Artifact:
    """``request`` built: every stage, the entry point in ``Artifact.entry``."""
    return _drive(request, build=True)


def _drive(request: Request, build: bool) -> Artifact:
    named = stages(request.backend, request.kind)
    printed = next(i for i, s in enumerate(named) if s.stage is Stage.PRINT) + 1
    front = front_key(request)
    timings: list[tuple[str, float]] = []
    with config.building(request.fast_math):
        # with a dump asked for, the stages run again so that they print what they make
        work = None if config.current().dump else _remembered(front)
        if work is None:
            work = _run_stages(request, named[:printed], Work(), timings)
            _remember(front, work)
        if build:
            work = _run_stages(request, named[printed:], work, timings)
    return Artifact(request.kind, request.backend.name, work.source,
                    work.entry if build else None, front, work.back_key, tuple(timings), work)


def _run_stages(request: Request, named: tuple[NamedStage, ...], work: Work,
                timings: list[tuple[str, float]]) -> Work:
    check = hooks.verifier()
    kind, name, backend = request.kind.value, request.name, request.backend.name
    ir_stages = [i for i, s in enumerate(named)
                 if s.stage in (Stage.LOWER, Stage.LOWER_LOOP, Stage.TRANSFORM)]
    lowerings = [i for i, s in enumerate(named) if s.stage in (Stage.LOWER, Stage.LOWER_LOOP)]
    for i, s in enumerate(named):
        started = time.perf_counter()
        if s.stage is Stage.KEY:  # the backend declares its toolchain's identity
            identity = load(s.ref)(request)
            new = work.but(back_key=back_key(f"{backend}-{kind}", work.source, identity,
                                             *work.key_inputs))
        else:
            new = load(s.ref)(request, work)
        seconds = time.perf_counter() - started
        timings.append((s.name, seconds))
        hooks.timed(kind, name, backend, s.name, seconds)
        if check is not None and s.stage in KERNEL_STAGES:
            lowered = s.stage is Stage.PLATFORM
            keeps = request.backend.platform().keeps if lowered else ()
            for kf in new.kernels:
                if not any(kf is o for o in work.kernels):
                    try:
                        check(kf, platform_lowered=lowered, keeps=keeps)
                    except Exception as exc:
                        _add_note(exc, f"stencilkit: the kernel IR of {kind} {name!r} after "
                                       f"stage {s.name!r} on backend {backend!r}")
                        raise
        if lowerings and i == lowerings[-1]:
            # described once lowered, so that the backend's transforms (its entry's
            # arguments) can read it; they and the platform keep the parameters
            new = new.but(launch=describe(request, new.kernels))
            if "abi" in config.current().dump:
                hooks.dump("abi", name, abi_text(new.launch))
        elif s.stage in (Stage.TRANSFORM, Stage.PLATFORM):
            _check_parameters(new, s.name, kind, name, backend)
        if ir_stages and i == ir_stages[-1]:  # the kernel IR before the platform's lowering
            from ..codegen.kernel_text import kernel_ir_text

            for i, kf in enumerate(new.kernels):  # titled as the stage dumps before it
                hooks.dump("kernel", name if i == 0 else f"{name} ({kf.name})",
                           kernel_ir_text(kf))
        if s.stage is Stage.PRINT:
            hooks.dump("code", f"{name} [{backend}]", new.source)
        work = new
    return work


def describe(request: Request, kernels: tuple[KernelFunction, ...]) -> abi.LaunchDescription:
    """The launch description of the request's entry point (the last kernel: a ParLoop's
    loop), with what only the request knows: the device, a ParLoop's access modes and race
    mode, a point kernel's call order."""
    kf = kernels[-1]
    caps = request.backend.capabilities
    device = abi.Device(caps.device) if caps is not None else abi.Device.CPU
    kind = abi.Kind(request.kind.value)
    match request.kind:
        case Kind.POINT:
            params = request.typed.kernel.params  # type: ignore[union-attr]
            # the domain is the first argument's shape, whichever arrays the kernel reads
            return abi.describe(kf, kind, device=device, primary=params[0], call_order=params)
        case Kind.PARLOOP:
            specs = request.specs  # type: ignore[union-attr]
            # as lowered: a backend may colour where atomics were asked for
            race = abi.race_of(kf, frozenset(i for i, s in enumerate(specs)
                                             if s.writes_shared))
            return abi.describe(kf, kind, device=device, race=race,
                                modes=tuple(s.mode for s in specs))
    return abi.describe(kf, kind, device=device)


def _check_parameters(work: Work, stage: str, kind: str, name: str, backend: str) -> None:
    """The launch description holds after ``stage``: the entry point's kernel still has the
    parameters it describes (a stage that changed them would have launchers bind wrong)."""
    if work.launch is None or not work.kernels:
        return
    described = tuple(p.name for p in work.launch.parameters)
    now = tuple(p.name for p in work.kernels[-1].params)
    if now != described:
        raise RuntimeError(f"stage {stage!r} of {kind} {name!r} on backend {backend!r} changed "
                           f"the entry point's parameters from {described} to {now}, which "
                           "its launch description lists (a stencilkit bug: a stage after "
                           "the lowering must keep them)")


def abi_text(launch: abi.LaunchDescription | None) -> str:
    """A description as the ``abi`` dump prints it: one line per parameter."""
    if launch is None:
        return "(no kernel IR: no launch description)"
    head = f"{launch.kind.value} {launch.function} [{launch.device.value}, race {launch.race.value}]"
    lines = [f"  {p.name}: {p.role.value}" + (f", {p.access.name}" if p.access else "")
             + f" ({abi.explain(p)})" for p in launch.parameters]
    return "\n".join([head, *lines])


def _add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)`` (Python 3.11+); on 3.10 the notes list by hand, as 3.11 keeps
    it."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:
        exc.__notes__ = [*getattr(exc, "__notes__", ()), note]  # type: ignore[attr-defined]
