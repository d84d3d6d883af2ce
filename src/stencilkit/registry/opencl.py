"""The "opencl" backend: OpenCL C via PyOpenCL (any OpenCL device, e.g. PoCL on the CPU).

Declared, not built yet: ``sk.backends()`` lists it with the reason. Building it means
filling in this module: capabilities, pieces (a platform mapping parallel loops to
work-items, the C-family printer"s OpenCL hooks, a launcher on PyOpenCL buffers) and the
build steps of ``base.Backend``.
"""

from __future__ import annotations

from .base import Backend, not_built

BACKEND = Backend("opencl", "OpenCL C via PyOpenCL", needs="pyopencl", probe=not_built,
                  gt4py_names=("opencl",))
