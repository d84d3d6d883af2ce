"""Adapters: how stencils run on other libraries' arrays, and how stencil objects pickle.

An :class:`Adapter` claims argument types (MPI-distributed arrays, device arrays, dask
arrays and xarray objects, a third party's own array type) and runs a call of a stencil on
them: split or convert the arguments, call the stencil on NumPy (or device) arrays, and
reassemble. The user objects (``PointStencil``, ``ComputationStencil``, ``ParLoop``'s
``Dat``) ask :func:`for_call` which adapter, if any, claims a call's arguments and hand the
call to it; pickling asks :func:`reduce`. This module is the only part of the adapter layer
the user objects import; adapters import the user objects, never the reverse.

Registration is lazy, so that ``import stencilkit`` imports no optional library: the
built-in adapters are named here by the module of the argument types they claim (``dask``,
``xarray``, ``stencilkit.distributed``) or by a structural test (device arrays), and their
module is imported the first time a call passes an argument of such a type. What a type's
lookup found is kept per type; a plain NumPy array or Python number is never looked up.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable

import numpy as np

from ..arrays import is_device  # re-exported: the device adapter's test of a value
from ..errors import StencilError

__all__ = ["Adapter", "for_call", "for_value", "host_view", "is_device", "numba_type", "reduce",
           "register", "register_lazy", "unregister"]


class Adapter:
    """One plug-in. Subclasses override what applies to them; the defaults claim nothing.

    ``priority`` orders adapters that claim arguments of one call: the lowest runs the call
    (MPI before device arrays before dask/xarray), so that a call mixing a distributed array
    with anything else is split across ranks first."""

    name: str = "adapter"
    priority: int = 100

    def claims_type(self, cls: type) -> bool:
        """Whether values of ``cls`` may be this adapter's (asked once per type)."""
        return False

    def claims(self, value: object) -> bool:
        """Whether this value, of a type :meth:`claims_type` accepted, is this adapter's
        (a type whose instances differ, as DLPack arrays on the CPU or on a GPU do)."""
        return True

    def point_call(self, st, args: tuple, out: object) -> object:
        """``st(*args, out=out)`` for a point kernel ``st`` (a ``PointStencil``)."""
        raise _unsupported(self, st, "point kernels")

    def computation_call(self, st, args: tuple, kwargs: dict, origin: object, domain: object,
                         validate_args: bool, exec_info: dict | None) -> None:
        """``st(*args, origin=..., domain=..., **kwargs)`` for a ``ComputationStencil``."""
        raise _unsupported(self, st, "computations")

    def dat_data(self, size: int, dim: int, data: object, dtype: object) -> object:
        """The array a ParLoop ``Dat`` of ``size`` x ``dim`` holds for ``data``."""
        raise _unsupported(self, None, "ParLoop datasets")

    def upload(self, backend, host: np.ndarray) -> tuple[object, np.ndarray]:
        """A copy of ``host`` on this adapter's device for ``backend``: (what the kernel
        runs on, its writable host stand-in for the checks)."""
        raise _unsupported(self, None, "arrays the stencil allocates")

    def host_view(self, value: object, writable: bool = False) -> np.ndarray:
        """A NumPy stand-in with ``value``'s dtype, shape and strides (its memory never
        read): what checks of a value that lives elsewhere read (ParLoop's Dat checks)."""
        raise _unsupported(self, None, "host checks")

    def bound_parloop(self, loop, call, fn) -> Callable[[object], bool] | None:
        """What runs ``loop`` again without its checks and binding while its arguments hold
        the arrays of the run of ``call`` through ``fn`` that just ended (None: nothing;
        each run takes the general path)."""
        return None

    def byte_span(self, value: object) -> tuple[int, int] | None:
        """The addresses [first, last) ``value``'s memory spans on its device (None when
        empty): what the overlap checks of written arguments compare."""
        raise _unsupported(self, None, "overlap checks")

    def reduce(self, obj: object) -> tuple | None:
        """``obj.__reduce__()`` for a stencil object this adapter pickles, or None."""
        return None

    def numba_type(self, obj: object) -> object | None:
        """The Numba type of a stencil object this adapter lets jitted code call, or None."""
        return None


def _unsupported(adapter: Adapter, st, what: str):
    from ..errors import ArgumentError

    return ArgumentError(f"{adapter.name} arguments are not supported for {what}",
                         stencil=getattr(st, "__name__", None),
                         hint="convert the arguments to NumPy arrays first")


# Never looked up: what most calls pass. (A subclass of ndarray is looked up once per type.)
_PLAIN = frozenset({np.ndarray, int, float, bool, complex, type(None)})

# built-in adapters: the module prefix of the argument types -> the module registering one
_LAZY: dict[str, str] = {
    "stencilkit.distributed": "stencilkit.adapters.mpi",
    "dask": "stencilkit.adapters.dask_xarray",
    "xarray": "stencilkit.adapters.dask_xarray",
    "pyopencl": "stencilkit.adapters.opencl_arrays",
}
# structural: types that expose device memory whatever library defines them
_LAZY_STRUCTURAL: list[tuple[Callable[[type], bool], str]] = []
# what pickles the library's own stencil objects: imported on the first pickling
_PICKLER = "stencilkit.adapters.pickling"
# what types them for Numba: imported the first time numba.typeof asks (numba is loaded)
_NUMBA = "stencilkit.adapters.numba"

_adapters: list[Adapter] = []
_by_type: dict[type, tuple[Adapter, ...]] = {}
_loaded: set[str] = set()
_lock = threading.RLock()


def register(adapter: Adapter) -> Adapter:
    """Add ``adapter`` (an instance); later lookups of every type see it."""
    with _lock:
        if adapter not in _adapters:
            _adapters.append(adapter)
            _adapters.sort(key=lambda a: a.priority)
        _by_type.clear()
    return adapter


def unregister(adapter: Adapter) -> None:
    with _lock:
        if adapter in _adapters:
            _adapters.remove(adapter)
        _by_type.clear()


def register_lazy(module_prefix: str, import_path: str) -> None:
    """Import ``import_path`` (which calls :func:`register`) the first time a call passes a
    value whose type's module is ``module_prefix`` or lies under it."""
    with _lock:
        _LAZY[module_prefix] = import_path
        _by_type.clear()


def _load_for(cls: type) -> None:
    module = getattr(cls, "__module__", None) or ""
    wanted = [path for prefix, path in _LAZY.items()
              if module == prefix or module.startswith(prefix + ".")]
    wanted += [path for test, path in _LAZY_STRUCTURAL if test(cls)]
    for path in wanted:
        if path not in _loaded:
            importlib.import_module(path)
            _loaded.add(path)


def _candidates(cls: type) -> tuple[Adapter, ...]:
    found = _by_type.get(cls)
    if found is None:
        with _lock:
            _load_for(cls)
            found = tuple(a for a in _adapters if a.claims_type(cls))
            _by_type[cls] = found
    return found


def for_value(value: object) -> Adapter | None:
    """The adapter that claims ``value``, or None (NumPy arrays, numbers, unclaimed types)."""
    cls = type(value)
    if cls in _PLAIN:
        return None
    for adapter in _candidates(cls):
        if adapter.claims(value):
            return adapter
    return None


def bound_parloop(loop, call, fn) -> Callable[[object], bool] | None:
    """The bound run (``Adapter.bound_parloop``) of the adapter of ``loop``'s first
    argument held elsewhere (a device array), if any."""
    for a in loop.args:
        adapter = for_value(a.obj._data)
        if adapter is not None:
            return adapter.bound_parloop(loop, call, fn)
    return None


def for_call(*groups: Iterable[object]) -> Adapter | None:
    """The adapter that runs a call with the values of ``groups`` (positional arguments,
    keyword values, ``out``): the claiming adapter of lowest priority, or None."""
    best: Adapter | None = None
    for group in groups:
        for value in group:
            cls = type(value)
            if cls in _PLAIN:
                continue
            for adapter in _candidates(cls):
                if adapter.claims(value):
                    if best is None or adapter.priority < best.priority:
                        best = adapter
                    break
    return best


def host_view(value: object) -> object:
    """``value``, or the host stand-in its adapter gives for it (a device array's dtype,
    shape and strides as a NumPy view): what renders a kernel for such an argument."""
    adapter = for_value(value)
    if adapter is None:
        return value
    try:
        return adapter.host_view(value)
    except StencilError:  # an adapter without stand-ins: the caller refuses the value
        return value


def _load(path: str) -> None:
    if path not in _loaded:
        with _lock:
            importlib.import_module(path)
            _loaded.add(path)


def reduce(obj: object) -> tuple:
    """``obj.__reduce__()`` for a stencil object (``PointStencil``, ``ComputationStencil``,
    ParLoop ``Kernel``, gtscript function): the first adapter that pickles it."""
    _load(_PICKLER)
    for adapter in list(_adapters):
        reduced = adapter.reduce(obj)
        if reduced is not None:
            return reduced
    raise TypeError(f"no adapter pickles {type(obj).__name__} objects")


def numba_type(obj: object) -> object:
    """The Numba type of a stencil object (``numba.typeof`` reads its ``_numba_type_``),
    from the first adapter that types it: jitted code calls stencils through it."""
    _load(_NUMBA)
    for adapter in list(_adapters):
        found = adapter.numba_type(obj)
        if found is not None:
            return found
    raise TypeError(f"no adapter gives {type(obj).__name__} objects a Numba type")


# ---------------------------------------------------------------- device arrays

def _device_like(cls: type) -> bool:
    """Types whose values may live on a GPU: ``__cuda_array_interface__`` or ``__dlpack__``
    outside NumPy (whose arrays have ``__dlpack_device__`` too: the CPU, never asked)."""
    return hasattr(cls, "__cuda_array_interface__") or (
        cls.__module__ != "numpy" and hasattr(cls, "__dlpack_device__"))


_LAZY_STRUCTURAL.append((_device_like, "stencilkit.adapters.device"))
