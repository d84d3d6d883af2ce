"""The "cuda" backend: CUDA C compiled at run time, on CuPy arrays.

Declared, not built yet: ``sk.backends()`` lists it with the reason. Building it means
filling in this module: capabilities (device "gpu"), pieces (a platform mapping parallel
loops to thread indices, the C-family printer"s CUDA hooks, a launcher on CuPy arrays,
array module cupy) and the build steps of ``base.Backend``.
"""

from __future__ import annotations

from .base import Backend, not_built

BACKEND = Backend("cuda", "CUDA C on CuPy arrays", needs="cupy, an NVIDIA GPU", probe=not_built,
                  gt4py_names=("cuda", "gt:gpu", "dace:gpu"))
