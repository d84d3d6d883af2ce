"""The "numba" backend: generated Python loops compiled by Numba (``parallel=True``).

Point kernels: the kernel IR is printed as a Python module (``codegen/numba.py``: parallel
loops become ``numba.prange``, operations whose Python meaning differs go through helpers
twin to the C backend's), stored as a verified file in the cache and imported
(``build/numba_module.py``), so that Numba's ``cache=True`` keeps the machine code across
processes. The same module is what a call from inside jitted code inlines
(``numba_calls.py``), whatever the stencil's backend. Computations and ParLoops are not built
yet (``require`` refuses them with a BackendError).
"""

from __future__ import annotations

import functools
import importlib.util

from .. import dtypes
from ..build import numba_module  # its import installs the finder of generated modules
from .base import Backend, Capabilities, PerKind, Pieces


@functools.cache
def probe() -> str | None:
    # found without importing it (importing numba takes most of a second)
    if importlib.util.find_spec("numba") is None:
        return "numba is not installed (pip install numba)"
    return None


class NumbaBackend(Backend):
    def point_module(self, typed, src, out_dtype, mode="constant"):
        """(source, module) of one typed point kernel: the module's ``parallel``,
        ``serial`` and ``inline`` dispatchers run it."""
        from ..codegen import numba as numba_codegen
        from ..passes import pipeline
        from ..passes.lower_point import CVAL, FILL_BORDER, OUT, Layout

        kernel = typed.kernel
        # Numba indexes arrays itself: the layout (constant unit strides) does not matter
        layout = Layout(tuple(True for _ in kernel.params), True)
        kf = pipeline.lower(typed, layout, src.line_text, src.filename.rsplit("/", 1)[-1],
                            out_dtype, mode)
        source = numba_codegen.kernel_module(kf, (*kernel.params, OUT, FILL_BORDER, CVAL))
        return source, numba_module.load_module("point", source)

    def build_point(self, typed, layout, src, out_dtype, types, mode="constant"):
        return self.point_module(typed, src, out_dtype, mode)


BACKEND = NumbaBackend(
    name="numba",
    description="generated loops compiled by Numba (parallel=True)",
    needs="numba",
    probe=probe,
    capabilities=Capabilities(
        kinds=frozenset({"point"}),
        dtypes=dtypes.SUPPORTED,
        device="cpu",
    ),
    pieces=Pieces(
        # no platform module yet: the printer maps parallel loops to prange itself
        platform="stencilkit.codegen.numba:NumbaPrinter.loop",
        printer=PerKind(point="stencilkit.codegen.numba:NumbaPrinter"),
        toolchain="stencilkit.build.numba_module:load_module",
        launcher=PerKind(point="stencilkit.runtime.launch:NumbaPointCall"),
        array_module="numpy",
    ),
    gt4py_names=("numba",),
)
