"""The number of threads the CPU backends use: ``sk.set_num_threads`` / ``sk.get_num_threads``.

The C backend's modules are separate shared objects, each with its own statics, so the count
lives in one process-wide integer that every module reads at each parallel region: its
address travels in a capsule (``TEAM_CELL``) that a module's ``PyInit`` imports
(``codegen/c.py`` ``module_footer``). Zero means "not set": a module then falls back to its
own default (``OMP_NUM_THREADS``'s first entry, else the CPUs the process may use). An
exported kernel (``sk.export``) has no capsule and keeps that default.

Numba keeps its own count, per calling thread (``numba.set_num_threads``): it is set here when
Numba is loaded and again when the "numba" backend first loads it. NumPy runs one thread.
"""

from __future__ import annotations

import ctypes
import os
import sys

# the capsule's name must be the dotted path of the attribute PyCapsule_Import looks up
_CAPSULE_NAME = ctypes.c_char_p(b"stencilkit.runtime.threads.TEAM_CELL")
_team = ctypes.c_int(0)


def _capsule() -> object:
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    return new(ctypes.addressof(_team), _CAPSULE_NAME, None)


TEAM_CELL = _capsule()


def default_num_threads() -> int:
    """What the C backend uses when nothing was set: OMP_NUM_THREADS's first entry, else
    the CPUs this process may run on (OpenMP's own default)."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if first.isdigit() and int(first) > 0:
        return int(first)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_num_threads(n: int) -> None:
    """Use ``n`` threads (``n >= 1``) on every CPU backend from now on: the C backend's
    parallel regions and Numba's ``prange`` loops (at most the threads Numba started with,
    ``NUMBA_NUM_THREADS``; Numba's count is per calling thread, as in Numba)."""
    import operator

    try:
        count = operator.index(n)
    except TypeError:
        raise ValueError(f"set_num_threads: the number of threads is an integer >= 1, "
                         f"not {n!r}") from None
    if isinstance(n, bool) or count < 1 or count > 1 << 16:
        raise ValueError(f"set_num_threads: the number of threads is an integer from 1 to "
                         f"65536, not {n!r}")
    _team.value = count
    sync_numba()


def get_num_threads() -> int:
    """The number of threads the CPU backends use: the last ``set_num_threads``, else the
    default (``OMP_NUM_THREADS``, else the CPUs this process may use)."""
    return _team.value or default_num_threads()


def sync_numba() -> None:
    """Hand the count to Numba, if it is loaded (importing it costs most of a second: a
    backend that loads it calls this afterwards)."""
    if _team.value <= 0 or "numba" not in sys.modules:
        return
    numba = sys.modules["numba"]
    limit = getattr(getattr(numba, "config", None), "NUMBA_NUM_THREADS", None)
    setter = getattr(numba, "set_num_threads", None)
    if setter is None or not limit:
        return
    setter(min(_team.value, int(limit)))
