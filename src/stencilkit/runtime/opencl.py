"""The OpenCL runtime: device choice, one context and queue per device, program builds.

PyOpenCL is imported on first use only, so that ``import stencilkit`` never needs it.

Device choice (``sk.configure(opencl_device=...)`` or ``STENCILKIT_OPENCL_DEVICE``): unset,
the first GPU of any platform, else the first CPU device, else the first device; ``"P:D"``
(integers) the device D of platform P, as PyOpenCL's ``PYOPENCL_CTX`` says it; any other
text, the first device whose "platform: device" name contains it (case-insensitive), so
``"pocl"``, ``"nvidia"`` or ``"cpu"``/``"gpu"`` (the device type) all work.

Programs are built once per (device, source, options) in memory. On disk, PyOpenCL leaves
caching to drivers that cache source builds themselves (PoCL in ``POCL_CACHE_DIR``, default
``~/.cache/pocl``; NVIDIA's), and otherwise keeps binaries in ``<stencilkit cache>/opencl``
(keyed by source, options and device).
"""

from __future__ import annotations

import functools
import re
import threading
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from ..config import current
from ..config import fast_math as config_fast_math
from ..errors import BackendError
from . import pocl_target

#: Build options: IEEE division and square root in single precision too. No contraction
#: into fused multiply-adds: the source says FP_CONTRACT OFF (PoCL contracts a * b + c
#: without it, whatever the options say), so that results match the NumPy and C backends.
BUILD_OPTIONS = ("-cl-fp32-correctly-rounded-divide-sqrt",)
#: ``fast_math=True`` (the source then says FP_CONTRACT ON): contraction and reassociation.
#: Not -cl-fast-relaxed-math: it implies -cl-finite-math-only, under which isnan() and
#: comparisons with NaN may be folded away.
FAST_MATH_OPTIONS = ("-cl-mad-enable", "-cl-unsafe-math-optimizations")
INSTALL_HINT = "pip install 'stencilkit[opencl]' (PyOpenCL with PoCL's CPU device)"


def pyopencl() -> ModuleType:
    """The pyopencl module, or a BackendError saying how to install it."""
    try:
        import pyopencl as cl
    except ImportError as exc:
        raise BackendError(f"pyopencl is not importable ({exc})", hint=INSTALL_HINT) from None
    return cl


def _all_devices(cl: ModuleType) -> list[tuple[int, int, object]]:
    out = []
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD at all: PyOpenCL raises PLATFORM_NOT_FOUND_KHR
        return []
    for p_i, p in enumerate(platforms):
        try:
            devices = p.get_devices()
        except cl.Error:  # a platform with no device raises DEVICE_NOT_FOUND
            continue
        out += [(p_i, d_i, d) for d_i, d in enumerate(devices)]
    return out


def describe(device: object) -> str:
    cl = pyopencl()
    kind = cl.device_type.to_string(device.type)  # type: ignore[attr-defined]
    return f"{device.platform.name.strip()}: {device.name.strip()} ({kind})"  # type: ignore[attr-defined]


def choose_device(selector: str | None) -> object:
    """The device ``selector`` names (see the module's docstring); BackendError if none."""
    cl = pyopencl()
    devices = _all_devices(cl)
    if not devices:
        raise BackendError("no OpenCL platform with a device was found",
                           hint=f"install an OpenCL driver (ICD), e.g. {INSTALL_HINT}")
    if not selector:
        for wanted in (cl.device_type.GPU, cl.device_type.CPU):
            for _, _, d in devices:
                if d.type & wanted:  # type: ignore[attr-defined]
                    return d
        return devices[0][2]
    head, _, tail = selector.partition(":")
    if head.strip().isdigit() and (not tail or tail.strip().isdigit()):
        p, dv = int(head), int(tail or 0)
        for p_i, d_i, d in devices:
            if (p_i, d_i) == (p, dv):
                return d
    else:
        for _, _, d in devices:
            if selector.lower() in describe(d).lower():
                return d
    names = "; ".join(f"{p}:{i} {describe(d)}" for p, i, d in devices)
    raise BackendError(f"no OpenCL device matches opencl_device={selector!r} (devices: {names})",
                       hint="set STENCILKIT_OPENCL_DEVICE (or sk.configure(opencl_device=...)) "
                            "to 'P:D' or to part of a device's name")


_PROBE_SOURCE = "__kernel void sk_probe(__global int *x) { x[get_global_id(0)] += 1; }"
_probed: dict[tuple[str | None, tuple[str, ...]], str | None] = {}


def probe() -> str | None:
    """None when a one-line kernel builds (with ``build_options()``) and runs on the
    configured device, else why not (for ``sk.backends()``); once per process per device and
    options. A device found is not enough: PoCL lists its CPU device on machines where it
    cannot build anything (``runtime/pocl_target.py``)."""
    key = (current().opencl_device, build_options())
    if key not in _probed:
        _probed[key] = _probe()
    return _probed[key]


def _probe() -> str | None:
    try:
        rt = device()
        try:
            prg = build(_PROBE_SOURCE, "probe")
        except BackendError as exc:
            why = first_error(exc.bare_message)
            pocl = pocl_target.explain() if pocl_target.UNKNOWN_CPU in why else None
            return (f"the OpenCL compiler of {rt.name} cannot build a one-line kernel "
                    f"({why})" + (f": {pocl}" if pocl else ""))
        cl = pyopencl()
        host = np.zeros(4, np.int32)
        buf = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                        hostbuf=host)
        prg.sk_probe(rt.queue, (4,), None, buf)  # type: ignore[attr-defined]
        cl.enqueue_copy(rt.queue, host, buf)
        rt.queue.finish()  # type: ignore[attr-defined]
        if host.tolist() != [1, 1, 1, 1]:
            return f"a one-line kernel gave a wrong result on {rt.name}"
    except BackendError as exc:
        return exc.bare_message
    except Exception as exc:  # pyopencl's errors (cl.Error) on a device that does not run
        return f"a one-line kernel does not run ({type(exc).__name__}: {first_error(str(exc))})"
    return None


def first_error(log: str) -> str:
    """The first line of a compiler's log that says ``error:``, else its first line."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    return next((ln for ln in lines if re.search(r"\berror\b:", ln)),
                lines[0] if lines else "no message")[:300]


def has_fp64(dev: object) -> bool:
    return bool(dev.double_fp_config) or "cl_khr_fp64" in dev.extensions  # type: ignore[attr-defined]


@dataclass
class Runtime:
    """One device with its context and in-order queue."""

    device: object
    context: object
    queue: object
    fp64: bool
    name: str


WORK_GROUP = 64  # work-items per group along the fastest dimension


def work_group(rt: Runtime) -> int:
    return min(WORK_GROUP, rt.device.max_work_group_size)  # type: ignore[attr-defined]


_runtimes: dict[str | None, Runtime] = {}
_lock = threading.Lock()


def device() -> Runtime:
    """The runtime of the configured device (made once per selector)."""
    selector = current().opencl_device
    rt = _runtimes.get(selector)
    if rt is None:
        with _lock:
            rt = _runtimes.get(selector)
            if rt is None:
                pocl_target.prepare()  # before PoCL first lists its devices
                cl = pyopencl()
                dev = choose_device(selector)
                ctx = cl.Context([dev])
                rt = Runtime(dev, ctx, cl.CommandQueue(ctx), has_fp64(dev), describe(dev))
                _runtimes[selector] = rt
    return rt


_programs: dict[tuple[int, str, tuple[str, ...]], object] = {}


def build_options() -> tuple[str, ...]:
    """stencilkit's build options (with the building stencil's ``fast_math``), then the
    configured ones (``opencl_options``)."""
    fast = FAST_MATH_OPTIONS if config_fast_math() else ()
    return BUILD_OPTIONS + fast + tuple(current().opencl_options)


def build(source: str, stencil: str) -> object:
    """The built program of ``source`` on the configured device with ``build_options()``:
    from memory, else from PyOpenCL's disk cache (keyed by source, options and device), else
    compiled now. A device without fp64 refuses double-precision source with a BackendError
    naming the stencil; a compile error shows the build log."""
    rt = device()
    options = build_options()
    key = (id(rt.context), source, options)
    prg = _programs.get(key)
    if prg is not None:
        return prg
    if not rt.fp64 and "double" in source:
        raise BackendError(f"the OpenCL device {rt.name} has no double precision (fp64), "
                           "which this kernel needs", stencil=stencil,
                           hint="use float32 arrays, or choose a device with cl_khr_fp64 "
                                "(STENCILKIT_OPENCL_DEVICE)")
    cl = pyopencl()
    from ..build.cache import root

    cache_dir = root() / "opencl"
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        prg = cl.Program(rt.context, source).build(options=list(options),
                                                   cache_dir=str(cache_dir))
    except cl.RuntimeError as exc:
        raise BackendError(f"the OpenCL compiler of {rt.name} rejected the generated code "
                           f"(options {' '.join(options)}):\n{exc}", stencil=stencil,
                           hint="report this with the generated source (obj.generate("
                                "backend='opencl')); meanwhile use another backend") from None
    _programs[key] = prg
    return prg


# ---------------------------------------------------------------- arrays


def is_device_array(a: object) -> bool:
    """A ``pyopencl.array.Array`` (without importing PyOpenCL when it is not loaded)."""
    return type(a).__module__ == "pyopencl.array" and hasattr(a, "base_data")


@dataclass(frozen=True)
class DeviceView:
    """An array on the device as the kernels see it: a buffer, shape and strides in
    elements, and the element offset of element [0, ...] in the buffer."""

    buffer: object
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0


def unit_last_stride(a: object) -> bool:
    shape, strides = a.shape, a.strides  # type: ignore[attr-defined]
    return not shape or shape[-1] <= 1 or strides[-1] == a.dtype.itemsize  # type: ignore[attr-defined]


def element_strides(a: object) -> tuple[int, ...]:
    item = a.dtype.itemsize  # type: ignore[attr-defined]
    return tuple(s // item for s in a.strides)  # type: ignore[attr-defined]


def empty_buffer(rt: Runtime, nbytes: int) -> object:
    cl = pyopencl()
    return cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, max(1, nbytes))


class Staging:
    """Device buffers for NumPy arrays copied in and out, reused from call to call (per
    thread, so that concurrent calls never share one): a call then costs the copies, not
    an allocation per array."""

    def __init__(self) -> None:
        self._local = threading.local()

    def buffer(self, rt: Runtime, slot: object, nbytes: int) -> object:
        bufs = getattr(self._local, "bufs", None)
        if bufs is None:
            bufs = self._local.bufs = {}
        hit = bufs.get(slot)
        if hit is None or hit[0] is not rt or hit[1].size < max(1, nbytes):
            hit = bufs[slot] = (rt, empty_buffer(rt, nbytes))
        return hit[1]


def to_device(rt: Runtime, a: np.ndarray, *, copy_in: bool = True,
              staging: Staging | None = None, slot: object = None
              ) -> tuple[DeviceView, np.ndarray]:
    """A C-contiguous device copy of ``a`` (its contents when ``copy_in``) and the host array
    it was copied from (``a`` itself when already C-contiguous). The copy is enqueued, not
    waited for (PyOpenCL keeps the host array alive until it is done)."""
    cl = pyopencl()
    host = np.ascontiguousarray(a)
    if staging is not None:
        buf = staging.buffer(rt, slot, host.nbytes)
        if copy_in and host.nbytes:
            cl.enqueue_copy(rt.queue, buf, host, is_blocking=False)
    elif copy_in and host.nbytes:
        buf = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                        hostbuf=host)
    else:
        buf = empty_buffer(rt, host.nbytes)
    return DeviceView(buf, host.shape, element_strides(host)), host


def from_device(rt: Runtime, view: DeviceView, host: np.ndarray, target: np.ndarray) -> None:
    """Copy the device buffer back into ``host`` and, if it is not ``target``, into ``target``."""
    cl = pyopencl()
    if host.nbytes:
        cl.enqueue_copy(rt.queue, host, view.buffer)
    if host is not target:
        # as the other backends write: into the memory, whatever an ndarray subclass's
        # __setitem__ would do
        np.copyto(np.ndarray.view(target, np.ndarray), host)


def device_view(a: object, stencil: str) -> DeviceView:
    """A ``pyopencl.array.Array`` as the kernels see it (no copy)."""
    rt = device()
    if a.context != rt.context:  # type: ignore[attr-defined]
        raise BackendError("a pyopencl array lives in another OpenCL context than stencilkit's",
                           stencil=stencil,
                           hint="make arrays on stencilkit.runtime.opencl.device().queue")
    item = a.dtype.itemsize  # type: ignore[attr-defined]
    if a.offset % item:  # type: ignore[attr-defined]
        raise BackendError("a pyopencl array starts at an offset that is not a whole number "
                           "of elements", stencil=stencil, hint="pass an aligned array")
    return DeviceView(a.base_data, tuple(a.shape), element_strides(a),  # type: ignore[attr-defined]
                      a.offset // item)  # type: ignore[attr-defined]


def device_copy(rt: Runtime, a: object) -> DeviceView:
    """A copy of a pyopencl array's whole allocation (the view keeps its layout), for an
    input that shares memory with the output."""
    cl = pyopencl()
    src = a.base_data  # type: ignore[attr-defined]
    buf = cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, src.size)
    cl.enqueue_copy(rt.queue, buf, src, byte_count=src.size)
    view = device_view(a, "")
    return DeviceView(buf, view.shape, view.strides, view.offset)


@functools.cache
def scalar_type(t: np.dtype) -> type:
    """The NumPy type a scalar kernel argument is passed as (bool travels as uchar)."""
    return np.uint8 if t == np.dtype(bool) else t.type
