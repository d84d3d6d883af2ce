"""Running OpenCL launch plans, and the point-kernel call on the OpenCL backend.

A plan runs in order on the device's in-order queue; the host evaluates loop bounds,
NDRange sizes and the conditions the planner left to it (``ir.host_eval``: an ``out=`` call
that fills no border is one launch) from the parameters, and reads the one-element status
buffer at the end (which also waits for the device).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..codegen.opencl import offset_name
from ..errors import ArgumentError
from ..ir import abi
from ..ir import kernel as k
from ..ir.abi import ParLoopCall, RaceMode, Role
from ..ir.host_eval import extents, host_launches
from ..ir.plan import HostLoop, LaunchPlan, Step, Variant
from . import opencl as ocl
from .computation import AXES, computation_status_error
from .cuda_variants import Variants, choose_elements
from .launch import PointCall, StandardArrays, check_shapes, status_error


class Executable:
    """A built program with its plan: ``run(env)`` launches it, returns the status."""

    def __init__(self, plan: LaunchPlan, source: str, stencil: str) -> None:
        self.plan = plan
        self.source = source
        self.stencil = stencil
        self.program = ocl.build(source, stencil)
        cl = ocl.pyopencl()
        self.kernels = {launch.name: cl.Kernel(self.program, launch.name)
                        for launch in plan.launches()}
        self.rt = ocl.device()
        self.group = ocl.work_group(self.rt)
        self.status = np.zeros(1, np.int32)
        self.status_buf = ocl.pyopencl().Buffer(
            self.rt.context, ocl.pyopencl().mem_flags.READ_WRITE, 4)
        self.standard: StandardArrays | None = None  # a point kernel's (checked per call)
        #: a point kernel's or computation's other specializations by layout and index
        #: width (built on first use, as CUDA's: runtime.cuda_variants); this one is
        #: ``variants.own``
        self.variants: Variants | None = None
        self._variants: dict[Variant, Executable] = {}

    def variant(self, views: dict[str, ocl.DeviceView]) -> Executable:
        """The executable specialized for the layout and sizes of the device views of a
        call: this one, or one built now and kept."""
        if self.variants is None:
            return self
        geometry = {n: (v.shape, v.strides) for n, v in views.items()}
        # NDRanges are rounded up to whole work-groups: they always cover the extents
        wanted = self.variants.relevant(dataclasses.replace(
            choose_elements(geometry, self.variants.out), covering=False))
        if wanted == self.variants.own:
            return self
        exe = self._variants.get(wanted)
        if exe is None:
            plan, source = self.variants.build(wanted)
            exe = Executable(plan, source, self.stencil)
            exe.standard = self.standard
            self._variants[wanted] = exe
        return exe

    def run(self, env: dict[str, object]) -> int:
        cl = ocl.pyopencl()
        q = self.rt.queue
        cl.enqueue_fill_buffer(q, self.status_buf, np.int32(0), 0, 4)
        for sc in self.plan.scratch:  # the kernel's top-level local arrays, per call
            env[sc.symbol.name] = ocl.empty_buffer(self.rt, sc.size * sc.symbol.dtype.itemsize)
            env[offset_name(sc.symbol)] = 0
        self._steps(self.plan.steps, env)
        cl.enqueue_copy(q, self.status, self.status_buf)  # blocking: waits for the launches
        return int(self.status[0])

    def _steps(self, steps: tuple[Step, ...], env: dict[str, object]) -> None:
        cl = ocl.pyopencl()
        for s in host_launches(steps, env):
            sizes = extents(s, env)
            if any(n <= 0 for n in sizes):
                continue
            # A fixed work-group size, the global size rounded up to it (the kernel guards
            # its bounds): PoCL compiles a kernel again for every new work-group size, which
            # it would pick per global size if left to choose.
            local = (self.group,) + (1,) * (len(sizes) - 1) if sizes else (1,)
            sizes = tuple(-(-n // g) * g for n, g in zip(sizes, local)) or (1,)
            kern = self.kernels[s.name]
            groups = int(np.prod([n // g for n, g in zip(sizes, local)]))
            for part in s.partials:  # the groups' results, combined by a later launch
                env[part.buffer.name] = ocl.empty_buffer(
                    self.rt, groups * part.size * part.buffer.dtype.itemsize)
                env[offset_name(part.buffer)] = 0
                env[part.groups.name] = groups
            args = []
            for p in s.params:
                args.append(_arg(p, env[p.name]))
                if p.pointer:
                    args.append(np.int64(env[offset_name(p)]))
            for part in s.partials:
                args.append(cl.LocalMemory(int(np.prod(local)) * part.size
                                           * part.local.dtype.itemsize))
            kern.set_args(*args, self.status_buf)
            cl.enqueue_nd_range_kernel(self.rt.queue, kern, sizes, local)


def _arg(p: k.Symbol, value: object) -> object:
    if p.pointer:
        return value
    return ocl.scalar_type(p.dtype)(value)


def bind(params: tuple[k.Symbol, ...], views: dict[str, ocl.DeviceView],
         scalars: dict[k.ArgumentKey, object]) -> dict[str, object]:
    """The value of each kernel parameter: buffers, their shapes and strides (in elements)
    from ``views``, scalar arguments from ``scalars`` (by argument key)."""
    env: dict[str, object] = {}
    for p in params:
        for prop in p.properties:
            match prop:
                case k.BasePointer(buffer=b):
                    env[p.name] = views[b].buffer
                    env[offset_name(p)] = views[b].offset
                case k.ShapeOf(buffer=b, dim=dim):
                    env[p.name] = views[b].shape[dim]
                case k.StrideOf(buffer=b, dim=dim):
                    env[p.name] = views[b].strides[dim]
                case k.ScalarArgument(key=n):
                    env[p.name] = scalars[n]
    return env


class OpenCLPointCall(PointCall):
    """One specialization of a point kernel on the OpenCL device. NumPy arrays are copied
    to the device (C-contiguous) and the result back; ``pyopencl.array.Array`` arguments
    are used in place, and the result is then a ``pyopencl.array.Array`` too. The device
    views and scalars are keyed as the launch description keys the kernel's parameters: the
    caller's arguments by name (its call order), the output by its key."""

    __slots__ = ("names", "out_key", "staging")

    def __init__(self, entry: Executable, *args, **kwargs) -> None:
        super().__init__(entry, *args, **kwargs)  # type: ignore[arg-type]
        self.names = self.launch.call_order
        (out,) = self.launch.with_role(Role.OUTPUT)
        self.out_key = out.key
        self.staging = ocl.Staging()

    def __call__(self, args: tuple, out: object) -> object:
        rt = ocl.device()
        on_device = any(ocl.is_device_array(a) for a in (*args, out))
        if out is not None and not ocl.is_device_array(out) and not out.flags.writeable:
            raise ArgumentError("'out' is read-only", stencil=self.name, loc=self.loc,
                                hint="pass a writable array as out=")
        check_shapes(args, out, self.relative_positions, self.name, self.loc)
        self._check_standard(args)
        views: dict[str, ocl.DeviceView] = {}
        scalars: dict[k.ArgumentKey, object] = {}
        for name, a in zip(self.names, args):
            if ocl.is_device_array(a):
                views[name] = ocl.device_view(a, self.name)
            elif isinstance(a, np.ndarray):
                views[name] = ocl.to_device(rt, a, staging=self.staging, slot=name)[0]
            else:
                scalars[name] = a
        fill = out is None or self.has_cval
        result = out
        host = None
        if out is None:
            if on_device:
                import pyopencl.array as cla
                result = cla.empty(rt.queue, args[0].shape, self.out_dtype)
            else:
                result = np.empty(args[0].shape, self.out_dtype)
        if ocl.is_device_array(result):
            views[self.out_key] = ocl.device_view(result, self.name)
            for i in self.array_positions:  # an input sharing the output's buffer: a copy
                if ocl.is_device_array(args[i]) and args[i].base_data == result.base_data:
                    views[self.names[i]] = ocl.device_copy(rt, args[i])
        else:
            views[self.out_key], host = ocl.to_device(rt, result, copy_in=not fill,
                                                      staging=self.staging, slot="out")
        scalars[k.BorderFill()] = fill
        scalars[k.FillValue()] = self.cval
        entry = self.entry.variant(views)  # type: ignore[attr-defined]
        status = entry.run(bind(entry.plan.kernel.params, views, scalars))
        if host is not None:
            ocl.from_device(rt, views[self.out_key], host, result)  # type: ignore[arg-type]
        if status:
            raise status_error(status, self.name, self.loc)
        return result

    def _check_standard(self, args: tuple) -> None:
        standard = self.entry.standard  # type: ignore[attr-defined]
        if standard is not None:
            standard.check(args)


class OpenCLComputationCall:
    """A computation on the OpenCL device, called as ``call(values, temporaries,
    geometry)``: the arrays its launch description lists copied to the device (temporaries
    live there only), its origins, scalars and extents bound by their keys, the plan run,
    and the fields it says are written copied back. The plan is the executable's variant
    for the call's arrays (32-bit indices where they fit, as CUDA's)."""

    def __init__(self, exe: Executable, defn, launch: abi.LaunchDescription) -> None:
        self.exe, self.defn = exe, defn
        self.field_names = frozenset(f.name for f in defn.fields)
        self.arrays = tuple(p.key for p in launch.arguments if p.pointer)
        self.written = launch.written & self.field_names
        self.origins = tuple((p.key, p.field, AXES.index(p.axis))  # type: ignore[arg-type]
                             for p in launch.with_role(Role.ORIGIN))
        self.scalars = tuple((p.key, p.dtype) for p in launch.with_role(Role.SCALAR))
        self.domain = tuple((p.key, AXES.index(p.axis))  # type: ignore[arg-type]
                            for p in launch.with_role(Role.DOMAIN_EXTENT))
        self.staging = ocl.Staging()

    def __call__(self, values, temps, geo) -> None:
        rt, staging = ocl.device(), self.staging
        views: dict[k.ArgumentKey, ocl.DeviceView] = {}
        hosts = {}
        for n in self.arrays:
            if n in self.field_names:
                views[n], hosts[n] = ocl.to_device(rt, values[n], staging=staging, slot=n)
            else:  # a temporary: device memory only, per thread
                t = temps[n]
                buf = staging.buffer(rt, ("temporary", n), t.nbytes)
                views[n] = ocl.DeviceView(buf, t.shape, ocl.element_strides(t))
        scalars: dict[k.ArgumentKey, object] = {}
        for key, field, axis in self.origins:
            scalars[key] = geo.origins[field][axis]
        for key, t in self.scalars:
            scalars[key] = t.type(values[key])
        for key, axis in self.domain:
            scalars[key] = geo.domain[axis]
        exe = self.exe.variant(views)  # type: ignore[arg-type]
        status = exe.run(bind(exe.plan.kernel.params, views, scalars))  # type: ignore[arg-type]
        for n in self.written:
            ocl.from_device(rt, views[n], hosts[n], values[n])
        if status:
            raise computation_status_error(status, self.defn)


class OpenCLParLoop:
    """Runs the launch plan of a ParLoop's loop (``LoopLowering`` -> OpenCL platform): Dats,
    Globals and maps copied to the device once per call (maps once per Map version, the
    blocks of every colour once per colouring), the plan run once per colour (blocks of
    elements; one element per block without colouring), written data copied back. Its
    program takes buffers without offsets (``program_source(offsets=False)``). A colour
    changes only the launches' block count, blocks and group counts:
    their other arguments are set once per call (colourings of many small colours spend
    their time in these host calls)."""

    def __init__(self, exe: Executable, race: str) -> None:
        self.exe = exe
        self.race = race  # "color": the launcher colours; else blocks of one element
        self.rt = exe.rt
        self._maps: dict[int, tuple[object, object]] = {}  # id(values) -> (values, buffer)
        self._blocks: tuple[object, list[object]] | None = None  # (parts, device copies)
        self._elements: tuple[int, list[np.ndarray]] | None = None
        self.staging = ocl.Staging()
        params = exe.plan.kernel.params
        self.pointers = [p for p in params if p.pointer]
        self.blocks = next(p for p in self.pointers if p.has(k.BlockList))
        self.nblocks = next(p for p in params
                            if p.get(k.ScalarArgument) == k.ScalarArgument(k.BlockCount()))
        # the plan's shape, as LoopLowering makes it: launches in order (no host loops), each
        # of one work-item or of one per block
        assert all(not isinstance(s, HostLoop) for s in exe.plan.steps)
        assert all(not s.dims or len(s.dims) == 1 and isinstance(s.dims[0].stop, k.Sym)
                   and s.dims[0].stop.symbol == self.nblocks for s in exe.plan.launches())

    def element_blocks(self, n: int) -> list[np.ndarray]:
        """A block per element (no colouring), the same list while ``n`` is (so that its
        device copy is kept)."""
        from .parloop_blocks import even_blocks

        if self._elements is None or self._elements[0] != n:
            self._elements = (n, [even_blocks(n, 1)])
        return self._elements[1]

    def _map_buffer(self, values: np.ndarray) -> object:
        hit = self._maps.get(id(values))
        if hit is not None and hit[0] is values:
            return hit[1]
        buf = ocl.to_device(self.rt, values)[0].buffer
        self._maps[id(values)] = (values, buf)
        return buf

    def _blocks_buffers(self, parts: list[np.ndarray]) -> list[object]:
        """Each colour's blocks on the device; kept while the launcher passes the same
        (cached) colouring."""
        if self._blocks is not None and self._blocks[0] is parts:
            return self._blocks[1]
        bufs = [ocl.to_device(self.rt, np.ascontiguousarray(p, np.int64))[0].buffer
                for p in parts]
        self._blocks = (parts, bufs)
        return bufs

    def run(self, arrays: list[np.ndarray], maps: set[int], parts: list[np.ndarray]) -> int:
        """``arrays``: what the pointer parameters after the blocks take, in order (those
        at positions ``maps`` are maps); ``parts``: the blocks of each colour."""
        cl = ocl.pyopencl()
        exe, q = self.exe, self.rt.queue
        cl.enqueue_fill_buffer(q, exe.status_buf, np.int32(0), 0, 4)
        env: dict[str, object] = {}
        back = []
        for i, (p, a) in enumerate(zip(self.pointers[1:], arrays)):
            if i in maps:
                env[p.name] = self._map_buffer(a)
            else:
                view, host = ocl.to_device(self.rt, a, staging=self.staging, slot=i)
                env[p.name] = view.buffer
                if not p.has(k.ReadOnly):
                    back.append((view, host, a))
        for sc in exe.plan.scratch:
            env[sc.symbol.name] = self.staging.buffer(self.rt, ("scratch", sc.symbol.name),
                                                      sc.size * sc.symbol.dtype.itemsize)
        blocks = self._blocks_buffers(parts)
        env[self.blocks.name] = blocks[0] if blocks else None
        most = max((len(p) for p in parts), default=0)
        group = exe.group
        launches = []
        for s in exe.plan.launches() if most else ():
            env[self.nblocks.name] = most
            for part in s.partials:  # sized for the largest colour
                groups = -(-most // group)
                env[part.buffer.name] = self.staging.buffer(
                    self.rt, ("partial", part.buffer.name),
                    groups * part.size * part.buffer.dtype.itemsize)
                env[part.groups.name] = groups
            args: list[object] = []
            changing: list[tuple[int, str]] = []  # (position, what): set per colour
            for p in s.params:  # pointers without offsets (codegen.opencl: offsets=False)
                if p.name == self.nblocks.name or p.name in {x.groups.name for x in s.partials}:
                    changing.append((len(args), p.name))
                if p.name == self.blocks.name:
                    changing.append((len(args), self.blocks.name))
                args.append(_arg(p, env[p.name]))
            for part in s.partials:
                args.append(cl.LocalMemory(group * part.size * part.local.dtype.itemsize))
            kern = exe.kernels[s.name]
            kern.set_args(*args, exe.status_buf)
            launches.append((s, kern, changing))
        group_counts = {p.groups.name for s in exe.plan.launches() for p in s.partials}
        for i, part in enumerate(parts):
            count = len(part)
            if not count:
                continue
            size = -(-count // group) * group
            value = {self.nblocks.name: np.int64(count), self.blocks.name: blocks[i]}
            for name in group_counts:
                value[name] = np.int64(size // group)
            for s, kern, changing in launches:
                for pos, what in changing:
                    kern.set_arg(pos, value[what])
                if s.dims:
                    cl.enqueue_nd_range_kernel(q, kern, (size,), (group,))
                else:
                    cl.enqueue_nd_range_kernel(q, kern, (1,), (1,))
        for view, host, a in back:
            ocl.from_device(self.rt, view, host, a)
        cl.enqueue_copy(q, exe.status, exe.status_buf)  # blocking: waits for the launches
        return int(exe.status[0])


def run_parloop(call: ParLoopCall, fn: OpenCLParLoop) -> None:
    """The ParLoop launcher: the loop's data, maps and (when colouring) blocks by colour."""
    from .parloop_blocks import check_status, coloring

    arrays: list[np.ndarray] = []
    maps: set[int] = set()
    for a in call.arguments:
        arrays.append(a.data)
        if a.map_values is not None:
            maps.add(len(arrays))
            arrays.append(a.map_values)
    # built with colouring (race "color", or "atomic" where an element type has no atomic
    # add): blocks by colour; else a block per element, all at once
    colour = RaceMode(fn.race) is RaceMode.COLOUR and call.race is not RaceMode.NONE
    parts = coloring(call) if colour else fn.element_blocks(call.set_size)
    check_status(call, fn.run(arrays, maps, parts))
