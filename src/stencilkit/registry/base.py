"""What a backend declares, and the steps every backend shares.

A backend module (``registry/numpy.py``, ``registry/c.py``, ...) defines one ``BACKEND``: a
``Backend`` with

- ``name``, ``description``, ``needs``: what ``sk.backends()`` reports (contract.md section 4);
- ``probe``: ``None`` when the backend runs here, else the reason it does not. A backend
  with a run-time compiler builds and runs a one-line kernel with it (once per process;
  ``build/verdicts.py`` remembers a success on disk), so that no backend is called available
  that cannot build; ``detail`` says what else the probe found (e.g. no OpenMP);
- ``capabilities``: the kinds it builds, the dtypes it computes on, its device, and the few
  facts the rest of the package asks instead of comparing names (does the generated code
  index arrays in elements? does it want temporaries inlined? ...);
- ``pieces``: its platform, the functions of each stage the compile driver runs per kind
  (``KindStages``) and its launchers, as ``"module:attribute"`` references imported on
  first use, so that declaring a backend imports none of its dependencies;
- ``gt4py_names``: the GT4Py backend names it stands in for (``gtscript.stencil(backend=)``).

A backend that is declared but not built (no capabilities, no pieces) is listed by
``sk.backends()`` with the reason its probe gives, and is refused by ``resolve``.

No backend composes a pipeline: ``compile/driver.py`` runs the stages a backend declares,
in the order of the kind's pipeline. Typing, scheduling, argument checks, the hooks and the
cache keys are shared and stay outside the backend modules.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import BackendError
from ..ir.abi import Device

if TYPE_CHECKING:
    from ..targets.base import Platform

#: The three kinds of kernels a backend may build.
KINDS = ("point", "computation", "parloop")


@dataclass(frozen=True)
class Capabilities:
    """What a backend can build and how its generated code treats arrays."""

    kinds: frozenset[str]  # a subset of KINDS
    dtypes: frozenset[np.dtype]  # element types its generated code computes on
    device: Device | str  # where its arrays live: a Device, or its value ("cpu", "gpu")
    #: The generated code is compiled and indexes arrays in elements: an array whose
    #: address or strides are not multiples of its item size runs on an aligned copy.
    compiled: bool = False
    #: Computations: build from the plan whose temporaries read at zero offset are
    #: recomputed in their readers (registers are free); False keeps them as arrays.
    inlines_temporaries: bool = False
    #: ParLoop kernels may be given as C source (``sk.Kernel(code, name)``).
    c_kernels: bool = False
    #: 3-D storages (``sk.empty`` ...) keep each IJ plane contiguous, K outermost.
    k_planes_storage: bool = False
    #: Its generated source is a C translation unit that ``sk.export`` can write out.
    exports_c: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "device", Device(self.device))


@dataclass(frozen=True)
class PerKind:
    """One ``"module:attribute"`` reference per kind (None: the kind is not built)."""

    point: str | None = None
    computation: str | None = None
    parloop: str | None = None

    def refs(self) -> tuple[str, ...]:
        return tuple(r for r in (self.point, self.computation, self.parloop) if r)


@dataclass(frozen=True)
class KindStages:
    """The functions one backend runs for one kind, one per stage of the kind's pipeline
    (``compile.driver.PIPELINES``), as ``"module:attribute"`` references; None: the backend
    has no such stage. Each is a function ``(request, work) -> work``; the driver calls
    them in the pipeline's order, ``transforms`` in the order given, each under its name;
    ``key`` is a function ``request -> tuple[str, ...]``, the identity of the toolchain
    (the driver makes the back key of it, the source and the work's ``key_inputs``).
    ``layout_key`` (not a stage): ``(fields, definition) -> tuple``, what beyond the
    definition a computation's code depends on."""

    print: str  # every backend prints
    lower: str | None = None
    lower_loop: str | None = None
    transforms: tuple[tuple[str, str], ...] = ()  # (stage name, reference)
    platform: str | None = None
    key: str | None = None
    toolchain: str | None = None
    launcher: str | None = None
    layout_key: str | None = None

    def refs(self) -> tuple[str, ...]:
        return tuple(r for r in (self.lower, self.lower_loop, *(r for _, r in self.transforms),
                                 self.platform, self.print, self.key, self.toolchain,
                                 self.launcher, self.layout_key) if r)


@dataclass(frozen=True)
class Stages:
    """A backend's stages per kind (None: the kind is not built)."""

    point: KindStages | None = None
    computation: KindStages | None = None
    parloop: KindStages | None = None

    def refs(self) -> tuple[str, ...]:
        return tuple(r for ks in (self.point, self.computation, self.parloop) if ks
                     for r in ks.refs())


@dataclass(frozen=True)
class Pieces:
    """Where each stage of a backend's pipeline lives (docs/architecture.md has the picture).

    ``platform``: the lowering of the kernel IR's abstract nodes (parallel loops, atomics,
    math per dtype) to the language (None: the backend prints from the definition IR);
    ``stages``: per kind, the functions the compile driver runs; ``launcher``: per kind,
    what runs an entry point at a call; ``array_module``: the array library its arrays
    come from; ``auto_race``: a function of a ParLoop's argument specs returning the
    ``RaceMode`` that ``race="auto"`` runs (None: colouring); ``tuner``: per kind, what
    builds a call (given the request, the call's own arguments and the function that
    builds it as it is) and may replace its entry by a variant measured on those
    arguments (the C backend's, issue 30; None: the call runs what was built).
    """

    platform: str | None
    stages: Stages
    launcher: PerKind
    array_module: str
    auto_race: str | None = None
    tuner: PerKind = PerKind()

    def refs(self) -> tuple[str, ...]:
        return ((self.platform,) if self.platform else ()) + self.stages.refs() + \
            self.launcher.refs() + ((self.auto_race,) if self.auto_race else ()) + \
            self.tuner.refs()


@functools.cache
def load(ref: str) -> object:
    """The object a ``"module:attribute.attribute"`` reference names."""
    module, _, attrs = ref.partition(":")
    obj: object = importlib.import_module(module)
    for attr in attrs.split(".") if attrs else ():
        obj = getattr(obj, attr)
    return obj


def not_built() -> str | None:
    return "not built yet in this version of stencilkit (see README, Status)"


def always() -> str | None:
    return None


def nothing() -> str | None:
    return None


@dataclass(frozen=True)
class Backend:
    """One backend's declaration (without capabilities and pieces: declared, not built)."""

    name: str
    description: str
    needs: str
    probe: Callable[[], str | None]  # None when available, else the reason it is not
    capabilities: Capabilities | None = None  # None: declared, not built
    pieces: Pieces | None = None
    gt4py_names: tuple[str, ...] = ()
    detail: Callable[[], str | None] = nothing  # what else the probe found, for sk.backends()

    @property
    def available(self) -> bool:
        return self.probe() is None

    @property
    def built(self) -> bool:
        """Whether this version of stencilkit generates code for it (the test suite runs
        on every built backend that is available)."""
        return self.capabilities is not None

    def __str__(self) -> str:
        return self.name

    # ------------------------------------------------------------ shared checks

    def require(self, kind: str, stencil: str | None,
                dtypes: tuple[np.dtype, ...] = ()) -> None:
        """A BackendError unless this backend builds ``kind`` on ``dtypes``."""
        caps = self.capabilities
        if caps is None or kind not in caps.kinds:
            raise BackendError(f"backend {self.name!r} does not build {_KIND_TEXT[kind]}",
                               stencil=stencil, hint="choose another backend (sk.backends() "
                                                     "lists them)")
        wrong = sorted({str(t) for t in dtypes if t not in caps.dtypes})
        if wrong:
            raise BackendError(f"backend {self.name!r} does not compute on {', '.join(wrong)}",
                               stencil=stencil, hint="use other dtypes, or another backend")

    def platform(self) -> Platform:
        """The platform this backend lowers kernel IR with (``lower/platforms``)."""
        assert self.pieces is not None and self.pieces.platform is not None, self.name
        return load(self.pieces.platform)()  # type: ignore[operator]

    def launcher(self, kind: str) -> object:
        """The launcher this backend declares for ``kind`` (imported on first use)."""
        assert self.pieces is not None
        ref = getattr(self.pieces.launcher, kind)
        assert ref is not None, (self.name, kind)
        return load(ref)

    def tuner(self, kind: str) -> Callable[..., Any] | None:
        """The tuner this backend declares for ``kind`` (``Pieces.tuner``), or None."""
        ref = getattr(self.pieces.tuner, kind) if self.pieces is not None else None
        return None if ref is None else load(ref)  # type: ignore[return-value]

    def _not_built(self, kind: str) -> BackendError:
        return BackendError(f"backend {self.name!r} does not build {_KIND_TEXT[kind]}",
                            hint="choose another backend (sk.backends() lists them)")


_KIND_TEXT = {"point": "point kernels", "computation": "computations",
              "parloop": "ParLoops"}
