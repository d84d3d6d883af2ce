"""Point kernels called with device arrays (CuPy, or anything with
``__cuda_array_interface__``): built from host stand-ins, run on the arrays in place.

The build steps want NumPy arrays only for their dtype, shape and strides, so each device
array is stood in for by a NumPy view of one element with the same shape and strides (never
read). The specialization is cached per signature like a NumPy call's; the entry then gets
the device arrays themselves, and ``out`` is allocated by the backend's array module.
"""

from __future__ import annotations

import numpy as np

from .. import registry, storage
from ..errors import ArgumentError
from . import is_device


def stand_in(value: object) -> np.ndarray:
    """A NumPy view with the dtype, shape and strides of a device array (one element of
    memory behind it: never read)."""
    cai = value.__cuda_array_interface__  # type: ignore[attr-defined]
    dtype = np.dtype(cai["typestr"])
    shape = tuple(cai["shape"])
    strides = cai.get("strides")
    if strides is None:  # C-contiguous
        strides, step = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
    return np.lib.stride_tricks.as_strided(np.empty(1, dtype), shape, tuple(strides),
                                           writeable=False)


def point_call(st, args: tuple, out: object):
    """``st(*args, out=out)`` where some argument (or ``out``) lives on a GPU."""
    from ..runtime.launch import status_error
    from ..stencil import _array_key, _scalar_key

    chosen = registry.resolve(st.backend, st.__name__)
    if chosen.capabilities.device != "gpu":  # type: ignore[union-attr]
        raise ArgumentError(f"device arrays need a GPU backend, not {chosen.name!r}",
                            stencil=st.__name__,
                            hint="build the stencil with a GPU backend (sk.backends() lists "
                                 "them), or copy the arrays to the host")
    hosts = tuple(stand_in(a) if is_device(a) else a for a in args)
    if any(isinstance(a, np.ndarray) and not is_device(a) for a in args) or (
            out is not None and not is_device(out)):
        raise ArgumentError("some arrays are on the GPU and some on the host",
                            stencil=st.__name__, hint="pass all arrays on one device")
    out_host = None if out is None else stand_in(out)
    key = ("device", tuple(_array_key(a) if isinstance(a, np.ndarray) else _scalar_key(a)
                           for a in hosts))
    okey = None if out_host is None else _array_key(out_host)
    call = st._specs.get((key, okey))
    if call is None:
        call = st._build(hosts, okey, None, out is not None)
        st._specs[(key, okey)] = call
    from ..runtime.launch import check_shapes

    check_shapes(hosts, out_host, call.relative_positions, st.__name__, call.loc)
    if out is None:
        out = storage.array_module(chosen).empty(hosts[0].shape, call.out_dtype)
        fill = True
    else:
        fill = call.has_cval
    status = call.entry(*args, out, fill, call.cval)
    if status:
        raise status_error(status, st.__name__, call.loc)
    return out
