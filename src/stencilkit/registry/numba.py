"""The "numba" backend: generated Python loops compiled by Numba (``parallel=True``).

Declared, not built yet: ``sk.backends()`` lists it with the reason. Building it means
filling in this module: capabilities, pieces (a platform mapping parallel loops to
``numba.prange``, a Python printer, a launcher importing the generated module) and the
build steps of ``base.Backend`` (docs/architecture.md, "How to add a backend").
"""

from __future__ import annotations

from .base import Backend, not_built

BACKEND = Backend("numba", "generated loops compiled by Numba", needs="numba", probe=not_built,
                  gt4py_names=("numba",))
