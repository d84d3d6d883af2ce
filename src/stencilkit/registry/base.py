"""What a backend declares, and the steps every backend shares.

A backend module (``registry/numpy.py``, ``registry/c.py``, ...) defines one ``BACKEND``: a
``Backend`` (or a subclass of it that implements the build steps) with

- ``name``, ``description``, ``needs``: what ``sk.backends()`` reports (contract.md section 4);
- ``probe``: ``None`` when the backend runs here, else the reason it does not. A backend
  with a run-time compiler builds and runs a one-line kernel with it (once per process;
  ``build/verdicts.py`` remembers a success on disk), so that no backend is called available
  that cannot build; ``detail`` says what else the probe found (e.g. no OpenMP);
- ``capabilities``: the kinds it builds, the dtypes it computes on, its device, and the few
  facts the rest of the package asks instead of comparing names (does the generated code
  index arrays in elements? does it want temporaries inlined? ...);
- ``pieces``: where each stage of its pipeline lives, as ``"module:attribute"`` references
  imported on first use, so that declaring a backend imports none of its dependencies;
- ``gt4py_names``: the GT4Py backend names it stands in for (``gtscript.stencil(backend=)``).

A backend that is declared but not built (no capabilities, no pieces) is listed by
``sk.backends()`` with the reason its probe gives, and is refused by ``resolve``.

The build steps (``build_point``, ``computation_key``, ``build_computation``,
``build_parloop``) return the generated source and the entry point; the launchers
(``runtime/``) turn an entry point into what a call runs. Typing, scheduling, argument
checks and the cache are shared and stay outside the backend modules.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import BackendError
from ..ir.abi import Device

if TYPE_CHECKING:
    from ..analysis.schedule import Schedule
    from ..analysis.typing import ArgType
    from ..frontend.source import SourceFunction
    from ..ir.computation import ComputationDef
    from ..ir.definition import PointKernel
    from ..passes.lower_parloop import ArgSpec
    from ..passes.lower_point import Layout
    from ..passes.pipeline import TypedPointKernel
    from ..passes.platforms.base import Platform

Fields = dict[str, np.ndarray]

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
class Pieces:
    """Where each stage of a backend's pipeline lives (docs/architecture.md has the picture).

    ``platform``: the lowering of the kernel IR's abstract nodes (parallel loops, atomics,
    math per dtype) to the language (None: the backend prints from the definition IR);
    ``printer``: per kind, what prints source; ``toolchain``: what turns source into a
    callable; ``launcher``: per kind, what runs an entry point; ``array_module``: the array
    library its arrays come from.
    """

    platform: str | None
    printer: PerKind
    toolchain: str
    launcher: PerKind
    array_module: str

    def refs(self) -> tuple[str, ...]:
        return ((self.platform,) if self.platform else ()) + self.printer.refs() + (
            self.toolchain,) + self.launcher.refs()


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
    """One backend's declaration. Subclasses implement the build steps of the kinds their
    capabilities name; this base builds nothing (a declared, not yet built backend)."""

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
        """The platform this backend lowers kernel IR with (``passes/platforms``)."""
        assert self.pieces is not None and self.pieces.platform is not None, self.name
        return load(self.pieces.platform)()  # type: ignore[operator]

    def launcher(self, kind: str) -> object:
        """The launcher this backend declares for ``kind`` (imported on first use)."""
        assert self.pieces is not None
        ref = getattr(self.pieces.launcher, kind)
        assert ref is not None, (self.name, kind)
        return load(ref)

    # ------------------------------------------------------------ build steps

    def build_point(self, typed: TypedPointKernel, layout: Layout, src: SourceFunction,
                    out_dtype: np.dtype, types: tuple[ArgType, ...], mode: str = "constant"
                    ) -> tuple[str, Callable[..., object]]:
        """(source, entry point) of one point-kernel specialization with border ``mode``
        (``func_or_mode``: "constant" fills the border with cval, the others compute it)."""
        raise self._not_built("point")

    def computation_key(self, fields: Fields | None, defn: ComputationDef) -> tuple:
        """What, beyond the definition, the built computation depends on (e.g. which axis
        of each field has unit stride); one build per distinct key."""
        return ()

    def build_computation(self, defn: ComputationDef, sched: Schedule, src: SourceFunction,
                          fields: Fields | None) -> tuple[str, Callable[..., None]]:
        """(source, launcher) of a scheduled computation; the launcher runs
        ``(values, temporaries, geometry)``."""
        raise self._not_built("computation")

    def build_parloop(self, name: str, typed: PointKernel | None, specs: tuple[ArgSpec, ...],
                      src: SourceFunction | None, code: str | None, atomic: bool
                      ) -> tuple[str, Callable[..., object]]:
        """(source, entry point) of a ParLoop: ``typed`` is the typed Python kernel, or None
        when the kernel is C source ``code`` (only with ``capabilities.c_kernels``)."""
        raise self._not_built("parloop")

    def _not_built(self, kind: str) -> BackendError:
        return BackendError(f"backend {self.name!r} does not build {_KIND_TEXT[kind]}",
                            hint="choose another backend (sk.backends() lists them)")


_KIND_TEXT = {"point": "point kernels", "computation": "computations",
              "parloop": "ParLoops"}
