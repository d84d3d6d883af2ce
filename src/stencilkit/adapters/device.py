"""The device-array adapter: point kernels and computations called with device arrays (CuPy, anything with
``__cuda_array_interface__``, or a CUDA ``__dlpack__``): built from host stand-ins, run on
the arrays in place.

The build steps and the argument checks want NumPy arrays only for their dtype, shape,
strides and writability, so each device array is stood in for by a NumPy view of one
element with the same shape and strides (never read). The specialization is cached per
signature like a NumPy call's; the entry then gets the device arrays themselves. A
point kernel's ``out`` is allocated by the backend's array module, laid out as its first
argument. What the stand-ins
cannot show is checked here on the device pointers: alignment, and overlap of a written
field with another (refused) or of a point kernel's ``out`` with an input (the input is
copied first, as on the host). Host and device arrays are not mixed in one call (ArgumentError).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import registry, storage
from ..arrays import is_device
from ..config import current
from ..errors import ArgumentError
from . import Adapter, _device_like, register


def cuda_view(chosen, value: object) -> object:
    """``value`` itself if it has ``__cuda_array_interface__``; a DLPack-only device array
    as a view of the backend's array module (CuPy's ``from_dlpack``: the same memory)."""
    if hasattr(type(value), "__cuda_array_interface__"):
        return value
    return storage.array_module(chosen).from_dlpack(value)


def _geometry(value: object) -> tuple[np.dtype, tuple[int, ...], tuple[int, ...], int, bool]:
    """(dtype, shape, strides in bytes, device address, read-only) of a device array."""
    memory = getattr(value, "data", None)
    if hasattr(memory, "ptr"):  # CuPy's ndarray (never read-only): no interface dict built
        return (value.dtype, value.shape, value.strides,  # type: ignore[attr-defined]
                int(memory.ptr), False)  # type: ignore[union-attr]
    cai = value.__cuda_array_interface__  # type: ignore[attr-defined]
    dtype = np.dtype(cai["typestr"])
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    if strides is None:  # C-contiguous
        strides, step = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= max(n, 1)
    address, read_only = cai["data"]
    return dtype, shape, tuple(int(x) for x in strides), int(address), bool(read_only)


def stand_in(value: object, writable: bool = False) -> np.ndarray:
    """A NumPy view with the dtype, shape and strides of a device array (one element of
    memory behind it: never read, nor written); ``writable`` as the device array is when
    asked (the computations' writability check reads it)."""
    dtype, shape, strides, _, read_only = _geometry(value)
    return np.lib.stride_tricks.as_strided(np.empty(1, dtype), shape, strides,
                                           writeable=writable and not read_only)


def _bytes(value: object) -> tuple[int, int] | None:
    """The device addresses [first, last) a device array spans; None when it is empty."""
    dtype, shape, strides, address, _ = _geometry(value)
    span = _span(dtype.itemsize, shape, strides)
    return None if span is None else (address + span[0], address + span[1])


@functools.lru_cache(maxsize=1024)
def _span(itemsize: int, shape: tuple[int, ...], strides: tuple[int, ...]
          ) -> tuple[int, int] | None:
    """The bytes [first, last) an array of this geometry spans relative to its address;
    None when it is empty (per geometry: a time loop asks the same every call)."""
    if 0 in shape:
        return None
    return (sum(min(0, (n - 1) * s) for n, s in zip(shape, strides)),
            sum(max(0, (n - 1) * s) for n, s in zip(shape, strides)) + itemsize)


def computation_fields(comp, values: dict[str, object], fields: dict[str, object]
                       ) -> tuple[dict[str, object], dict[str, np.ndarray]]:
    """A computation call whose fields include device arrays: (the values with each
    device field as a CUDA array, the host stand-ins of the fields) after the checks the
    stand-ins cannot make. The caller checks and builds on the stand-ins and runs on the
    values."""
    name, loc = comp.__name__, comp.definition.loc
    chosen = registry.resolve(comp.backend, name)
    if chosen.capabilities.device != "gpu":  # type: ignore[union-attr]
        raise ArgumentError(f"device arrays need a GPU backend, not {chosen.name!r}",
                            stencil=name, loc=loc,
                            hint="build the computation with a GPU backend (sk.backends() "
                                 "lists them), or copy the fields to the host")
    host = sorted(n for n, a in fields.items() if not is_device(a))
    if host:
        on = sorted(set(fields) - set(host))
        raise ArgumentError(f"field(s) {', '.join(map(repr, host))} are on the host and "
                            f"{', '.join(map(repr, on))} on the GPU", stencil=name, loc=loc,
                            hint="pass all fields on one device (cupy.asarray(...) copies a "
                                 "NumPy array there)")
    values = dict(values)
    for n in fields:
        values[n] = fields[n] = cuda_view(chosen, fields[n])
    for n, a in fields.items():
        dtype, _, strides, address, _ = _geometry(a)
        if address % dtype.itemsize or any(s % dtype.itemsize for s in strides):
            raise ArgumentError(f"field '{n}' is not aligned to its item size ({dtype}) on "
                                "the device", stencil=name, loc=loc,
                                hint=f"pass an aligned copy of '{n}' (cupy.ascontiguousarray)")
    written = comp._arguments.written_fields
    spans = {n: _bytes(a) for n, a in fields.items()}
    for w in written:
        for other, span in spans.items():
            mine = spans[w]
            if other != w and mine and span and mine[0] < span[1] and span[0] < mine[1]:
                raise ArgumentError(
                    f"field '{w}' is written and shares memory with field '{other}'",
                    stencil=name, loc=loc, hint="pass separate arrays (copy one of them)")
    hosts = {}
    for n, a in fields.items():
        dtype, shape, strides, _, read_only = _geometry(a)
        hosts[n] = _field_stand_in(n, dtype, shape, strides, not read_only)
    return values, hosts


@functools.lru_cache(maxsize=1024)
def _field_stand_in(name: str, dtype: np.dtype, shape: tuple[int, ...],
                    strides: tuple[int, ...], writable: bool) -> np.ndarray:
    """A computation field's stand-in (``stand_in``), kept per name and geometry: a time
    loop's calls reuse it; fields of one call have distinct names, so distinct stand-ins
    (nothing compares them by memory, but two fields must never look like one array)."""
    return np.lib.stride_tricks.as_strided(np.empty(1, dtype), shape, strides,
                                           writeable=writable)


def point_call(st, args: tuple, out: object):
    """``st(*args, out=out)`` where some argument (or ``out``) lives on a GPU."""
    fast_key = _fast_key(st, args, out)
    if fast_key is not None:
        fast = _fast_calls(st).get(fast_key)
        if fast is not None:
            return fast(args, out)
    return _point_call(st, args, out, fast_key)


class DevicePointCalls:
    """A stencil's device calls by ``_fast_key``, each bound by an earlier call with that
    key (beside its signature cache ``_specs``, which holds its specializations only). The
    stencil holds it as ``_device`` and calls it first: a call whose key it has not bound
    returns None (the general path decides)."""

    __slots__ = ("st", "calls")

    def __init__(self, st) -> None:
        self.st = st
        self.calls: dict[tuple, _BoundPointCall] = {}

    def __call__(self, args: tuple, out: Any) -> object | None:
        # _fast_key, inline: this runs first on every call of the stencil
        st = self.st
        try:
            key = (st.backend or current().backend,
                   tuple([_SCALAR_KEY[0](a) if type(a) in _SCALARS else
                          (type(a), a.dtype, a.shape, a.strides) for a in args]),
                   None if out is None else (type(out), out.dtype, out.shape, out.strides))
        except Exception:  # noqa: BLE001 - not an array of a module: the general path decides
            return None
        call = self.calls.get(key)
        return None if call is None else call(args, out)


def _fast_calls(st) -> dict[tuple, _BoundPointCall]:
    """The stencil's bound device calls (``DevicePointCalls``), made on its first device
    call."""
    device = st.__dict__.get("_device")
    if device is None:
        device = st.__dict__["_device"] = DevicePointCalls(st)
    return device.calls


_SCALARS = (int, float, bool, complex)
_SCALAR_KEY: list = []  # stencil._scalar_key


def _fast_key(st, args: tuple[Any, ...], out: Any) -> tuple | None:
    """(``DevicePointCalls.__call__`` computes the same key inline.) What a call's checks
    and specialization depend on, when every array is an ndarray of
    an array module (CuPy's, say) and every other argument a Python number: the backend,
    each array's type, dtype, shape and strides, each number's type; else None."""
    if not _SCALAR_KEY:  # stencil imports the adapters: bound on first use, not per call
        from ..api.stencil import _scalar_key

        _SCALAR_KEY.append(_scalar_key)
    scalar_key = _SCALAR_KEY[0]
    try:
        return (st.backend or current().backend,
                tuple([scalar_key(a) if type(a) in _SCALARS else
                       (type(a), a.dtype, a.shape, a.strides) for a in args]),
                None if out is None else (type(out), out.dtype, out.shape, out.strides))
    except Exception:  # noqa: BLE001 - not an array of a module: the general path decides
        return None


class _BoundPointCall:
    """A device call whose specialization and checks were settled by an earlier call with
    the same ``_fast_key``: only what depends on the arrays' addresses is left (an input
    overlapping ``out`` is copied first, as ``_unaliased`` does), ``out`` is allocated in
    the first argument's layout when not given, and the entry's launches bound to the
    signature run directly (``runtime.cuda_calls.DeviceLaunch``)."""

    __slots__ = ("call", "name", "xp", "spans", "out_span", "layout", "launch")

    def __init__(self, call, name: str, xp, args: tuple, out: object | None,
                 layout: tuple[tuple[int, ...], tuple[int, ...], np.dtype] | None) -> None:
        self.call, self.name, self.xp, self.layout = call, name, xp, layout
        # each array argument's span in bytes relative to its address (None: a number, or
        # an empty array, which overlaps nothing)
        self.spans = tuple(_relative_span(a) if type(a) not in _SCALARS else None
                           for a in args)
        self.out_span = None if out is None else _relative_span(out)
        self.launch: Any = None  # the entry's bound launches, found on the first use

    def __call__(self, args: tuple, out: object) -> object:
        call = self.call
        if out is None:
            shape, inverse, dtype = self.layout  # type: ignore[misc]
            out = self.xp.empty(shape, dtype).transpose(inverse)
            fill = True
        else:
            fill = call.has_cval
            if self.out_span is not None:
                args = self._unaliased(args, out)
        values = (*args, out, fill, call.cval)
        launch = self.launch
        if launch is None:
            # the border fill and cval follow from the key: never compared per call
            n = len(args)
            launch = self.launch = _device_launch(call.entry, values,
                                                  frozenset({n + 1, n + 2}))
            if launch is None:  # not a CUDA entry: called as any entry
                status = call.entry(*values)
                if status:
                    from ..runtime.launch import status_error

                    raise status_error(status, self.name, call.loc)
                return out
        launch.run(values)
        return out

    def _unaliased(self, args: tuple, out: object) -> tuple:
        base = out.data.ptr  # type: ignore[attr-defined]  # bound for CuPy arrays only
        lo, hi = base + self.out_span[0], base + self.out_span[1]  # type: ignore[index]
        copied = None
        for i, (a, span) in enumerate(zip(args, self.spans)):
            if span is not None:
                at = a.data.ptr
                if at + span[0] < hi and lo < at + span[1]:
                    copied = list(args) if copied is None else copied
                    copied[i] = a.copy()
        return args if copied is None else tuple(copied)


def _device_launch(entry, values: tuple, settled: frozenset[int]) -> object | None:
    """The bound launches of a CUDA ``entry`` for ``values`` (``runtime.cuda_calls``); None
    for any other entry. (Imported here: the CUDA runtime pulls in the GPU planner.)"""
    from ..runtime.cuda import CudaEntry, _cupy
    from ..runtime.cuda_calls import DeviceLaunch

    if not isinstance(entry, CudaEntry):
        return None
    return DeviceLaunch(entry, _cupy(), values, settled)


def _address(a: object) -> int:
    """A device array's address: CuPy's pointer, else its ``__cuda_array_interface__``'s."""
    try:
        return a.data.ptr  # type: ignore[attr-defined]
    except AttributeError:
        return int(a.__cuda_array_interface__["data"][0])  # type: ignore[attr-defined]


def _relative_span(a: object) -> tuple[int, int] | None:
    """The bytes [first, last) a device array spans relative to its address; None when it
    is empty."""
    span = _bytes(a)
    if span is None:
        return None
    at = _address(a)
    return span[0] - at, span[1] - at


def _point_call(st, args: tuple, out: object, fast_key: tuple | None):
    from ..api.stencil import _array_key, _scalar_key
    from ..runtime.launch import status_error

    given = args  # as the caller passed them: a fast call takes them so (_fast_key)
    chosen = registry.resolve(st.backend, st.__name__)
    if chosen.capabilities.device != "gpu":  # type: ignore[union-attr]
        raise ArgumentError(f"device arrays need a GPU backend, not {chosen.name!r}",
                            stencil=st.__name__,
                            hint="build the stencil with a GPU backend (sk.backends() lists "
                                 "them), or copy the arrays to the host")
    args = tuple(cuda_view(chosen, a) if is_device(a) else a for a in args)
    if out is not None and is_device(out):
        out = cuda_view(chosen, out)
    hosts = tuple(stand_in(a) if is_device(a) else a for a in args)
    if any(isinstance(a, np.ndarray) and not is_device(a) for a in args) or (
            out is not None and not is_device(out)):
        raise ArgumentError("some arrays are on the GPU and some on the host",
                            stencil=st.__name__, hint="pass all arrays on one device")
    out_host = None if out is None else stand_in(out)
    key = ("device", tuple(_array_key(a) if isinstance(a, np.ndarray) else _scalar_key(a)
                           for a in hosts))

    def specialization(okey: tuple | None):
        call = st._specs.get((key, okey))
        if call is None:
            call = st._build(hosts, okey, None, out is not None)
            st._specs[(key, okey)] = call
        return call

    call = specialization(None if out_host is None else _array_key(out_host))
    from ..runtime.launch import check_shapes

    check_shapes(hosts, out_host, call.relative_positions, st.__name__, call.loc)
    xp = storage.array_module(chosen)
    layout = None
    if out is None:
        out = _empty_in_layout(xp, hosts[0], call.out_dtype)
        fill = True
        laid = _array_key(stand_in(out))
        if not laid[2]:  # its last stride is not one: the kernels built for such an output
            call = specialization(laid)
        from ..runtime.cuda import device_layout

        order = device_layout(hosts[0])  # as _empty_in_layout
        layout = (tuple(hosts[0].shape[i] for i in order),
                  tuple(int(i) for i in np.argsort(order)), call.out_dtype)
    else:
        fill = call.has_cval
        args = _unaliased(args, out)
    status = call.entry(*args, out, fill, call.cval)
    if status:
        raise status_error(status, st.__name__, call.loc)
    # bound only after a call that passed every check (the entry's own included)
    if fast_key is not None and all(type(a) in _SCALARS or type(a) is xp.ndarray
                                    for a in (*given, out)):
        _fast_calls(st)[fast_key] = _BoundPointCall(call, st.__name__, xp, args,
                                                    out if layout is None else None, layout)
    return out


def _empty_in_layout(xp, like: np.ndarray, dtype: np.dtype) -> object:
    """An uninitialized device array of ``like``'s shape whose axes nest in memory as
    ``like``'s do (NumPy's ``empty_like`` with order "K"): on a storage whose unit stride is
    J the result's is J too, so that the kernel's threads, which follow the output's
    unit-stride axis, also read the input along its own."""
    from ..runtime.cuda import device_layout

    order = device_layout(like)
    inverse = tuple(int(i) for i in np.argsort(order))
    return xp.empty(tuple(like.shape[i] for i in order), dtype).transpose(inverse)


def _unaliased(args: tuple, out: object) -> tuple:
    """``args`` with every device array that shares memory with ``out`` copied on the
    device, as the host path copies it (``runtime.launch.unaliased``): each point then
    reads the inputs as they were before the call, and no input the kernel reads through a
    read-only (``const __restrict__``, non-coherently loaded) pointer is written during the
    launch."""
    mine = _bytes(out)
    if mine is None:
        return args
    copied = []
    for a in args:
        span = _bytes(a) if is_device(a) else None
        copied.append(a.copy() if span and span[0] < mine[1] and mine[0] < span[1] else a)
    return tuple(copied)


def dat_data(size: int, dim: int, data: object, dtype: np.dtype | None) -> object:
    """The device array a Dat on the GPU holds: ``data`` itself (no copy: the Dat and the
    caller share it), once its shape, dtype and layout are what a Dat's must be."""
    if not hasattr(type(data), "__cuda_array_interface__"):
        raise ArgumentError("a Dat on the GPU needs an array with __cuda_array_interface__",
                            hint="view it as a CuPy array first (cupy.from_dlpack(x))")
    host = stand_in(data)
    shape = (size,) if dim == 1 else (size, dim)
    if dtype is not None and host.dtype != dtype:
        raise ArgumentError(f"Dat data on the GPU is {host.dtype}, not the dtype={dtype} "
                            "asked for (a device array is not converted)",
                            hint="convert it on the device first (x.astype(...))")
    if host.shape != shape or not host.flags.c_contiguous:
        raise ArgumentError(f"Dat data on the GPU has shape {host.shape}"
                            f"{'' if host.flags.c_contiguous else ' (not C-contiguous)'}, "
                            f"expected C-contiguous {shape}",
                            hint="reshape or copy it on the device (cupy.ascontiguousarray)")
    from ..dtypes import as_dtype

    as_dtype(host.dtype)
    return data


class DeviceAdapter(Adapter):
    """CuPy (``__cuda_array_interface__``) and CUDA DLPack arrays run in place on a GPU
    backend; ParLoop ``Dat``s hold them uncopied."""

    name = "device"
    priority = 20

    def claims_type(self, cls: type) -> bool:
        return _device_like(cls)

    def claims(self, value: object) -> bool:
        return is_device(value)

    def point_call(self, st, args: tuple, out: object) -> object:
        return point_call(st, args, out)

    def computation_call(self, st, args: tuple, kwargs: dict, origin: object, domain: object,
                         validate_args: bool, exec_info: dict | None) -> None:
        from .device_computation import BoundComputationCall, computation_key, dispatcher

        key = None
        if exec_info is None and not st._aliases:
            key = computation_key(st, args, kwargs, origin, domain, validate_args)
        values, fields, given_origin = st.bind_call(args, kwargs, origin, exec_info)
        values, fields = computation_fields(st, values, fields)
        ran = None
        if key is not None and (origin is not None or given_origin is None):
            def ran(run, values: dict, temps: dict, geo) -> None:
                bound = BoundComputationCall.of(st, args, kwargs, run, values, temps, geo)
                if bound is not None:
                    dispatcher(st).keep(key, bound)
        return st.run_bound(values, fields, given_origin, domain, validate_args, exec_info,
                            device=self, ran=ran)

    def upload(self, backend, host: np.ndarray) -> tuple[object, np.ndarray]:
        value = cuda_view(backend, storage.array_module(backend).asarray(host))
        return value, stand_in(value, writable=True)

    def dat_data(self, size: int, dim: int, data: object, dtype) -> object:
        return dat_data(size, dim, data, dtype)

    def host_view(self, value: object, writable: bool = False) -> np.ndarray:
        return stand_in(value, writable)

    def byte_span(self, value: object) -> tuple[int, int] | None:
        return _bytes(value)

    def bound_parloop(self, loop, call, fn):
        from .device_parloop import BoundDeviceLoop

        return BoundDeviceLoop.of(loop, call, fn)


register(DeviceAdapter())
