"""The pyopencl-array adapter: ``pyopencl.array.Array`` arguments of an "opencl" point
kernel run in place on the device, and the result is a ``pyopencl.array.Array`` too.

As with CUDA device arrays (``adapters.device``), the build steps and the argument checks
see each device array through a host stand-in: a NumPy view of one element with the
array's dtype, shape and strides (never read). The specialization is cached per signature
like a NumPy call's, under a key that says which arguments live on the device (their layout
reaches the kernel unchanged, where a NumPy array is copied in C order); the launcher
(``runtime.opencl_launch.OpenCLPointCall``) then gets the device arrays themselves.
"""

from __future__ import annotations

import numpy as np

from .. import registry
from ..errors import ArgumentError
from ..runtime.opencl import is_device_array
from . import Adapter, register

_DEVICE = "pyopencl"  # the key's tag: never a key of a NumPy call (see PointStencil.__call__)


def stand_in(a: object) -> np.ndarray:
    """A NumPy view with the dtype, shape and strides of a pyopencl array (one element of
    memory behind it). The stride of an axis of one element is never used to address
    anything: it is the item size here, as NumPy's C order has it."""
    dtype = np.dtype(a.dtype)  # type: ignore[attr-defined]
    shape = tuple(a.shape)  # type: ignore[attr-defined]
    strides = tuple(s if n > 1 else dtype.itemsize
                    for n, s in zip(shape, a.strides))  # type: ignore[attr-defined]
    return np.lib.stride_tricks.as_strided(np.empty(1, dtype), shape, strides, writeable=False)


class OpenCLArrayAdapter(Adapter):
    name = "pyopencl"
    priority = 25  # after MPI and CUDA device arrays, before dask/xarray

    def claims_type(self, cls: type) -> bool:
        return cls.__module__ == "pyopencl.array"

    def claims(self, value: object) -> bool:
        return is_device_array(value)

    def host_view(self, value: object, writable: bool = False) -> np.ndarray:
        return stand_in(value)

    def point_call(self, st, args: tuple, out: object) -> object:
        """``st(*args, out=out)`` where some argument (or ``out``) is a pyopencl array."""
        from ..api.stencil import _array_key, _scalar_key

        name = st.__name__
        chosen = registry.resolve(st.backend, name)
        if chosen.name != "opencl":
            raise ArgumentError(f"pyopencl arrays need the 'opencl' backend, not "
                                f"{chosen.name!r}", stencil=name,
                                hint="build the stencil with backend='opencl', or pass "
                                     "NumPy arrays (x.get() copies one to the host)")
        if out is not None and not isinstance(out, np.ndarray) and not is_device_array(out):
            raise ArgumentError("'out' must be a NumPy array or a pyopencl array",
                                stencil=name, hint="pass out= as an array")
        on_device = tuple(is_device_array(a) for a in args)
        for i, (a, device) in enumerate(zip(args, on_device)):
            if device and a.ndim == 0:
                raise ArgumentError(f"argument {i + 1} is a 0-dimensional array",
                                    stencil=name,
                                    hint="pass a number for a scalar, or an array with "
                                         "dimensions")
        # the other arguments as a NumPy call converts them (lists, subclasses, byte order)
        hosts = st._normalize(tuple(stand_in(a) if device else a
                                    for a, device in zip(args, on_device)))
        for i, a in enumerate(hosts):
            if isinstance(a, np.ndarray) and a.ndim == 0:
                raise ArgumentError(f"argument {i + 1} is a 0-dimensional array",
                                    stencil=name,
                                    hint="pass a number for a scalar, or an array with "
                                         "dimensions")
        out_host: np.ndarray | None = (None if out is None else stand_in(out)
                                       if is_device_array(out) else out)  # type: ignore[assignment]
        if out_host is not None and out_host.ndim == 0:
            raise ArgumentError("'out' is a 0-dimensional array", stencil=name,
                                hint="pass out= with the shape of the first argument")
        key = (_DEVICE, tuple((*_array_key(h), device) if isinstance(h, np.ndarray)
                              else _scalar_key(h) for h, device in zip(hosts, on_device)))
        okey = None if out_host is None else _array_key(out_host)
        call = st._specs.get((key, okey))
        if call is None:
            call = st._specialize(hosts, out_host, key, okey)
        real = tuple(a if device else h for a, h, device in zip(args, hosts, on_device))
        return call(real, out)


register(OpenCLArrayAdapter())
