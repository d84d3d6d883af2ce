"""Running OpenCL launch plans, and the point-kernel call on the OpenCL backend.

A plan runs in order on the device's in-order queue; the host evaluates loop bounds and
NDRange sizes from the parameters, and reads the one-element status buffer at the end
(which also waits for the device).
"""

from __future__ import annotations

import numpy as np

from ..codegen.opencl import offset_name
from ..errors import ArgumentError
from ..ir import kernel as k
from ..passes.lower_point import CVAL, FILL_BORDER
from ..passes.platforms.opencl import HostLoop, LaunchPlan, Step, evaluate
from . import opencl as ocl
from .launch import PointCall, check_shapes, status_error


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
        #: point kernels: (argument names, standard_indexing array positions, border)
        self.point_info: tuple = ((), (), ())

    def run(self, env: dict[str, object]) -> int:
        cl = ocl.pyopencl()
        q = self.rt.queue
        cl.enqueue_fill_buffer(q, self.status_buf, np.int32(0), 0, 4)
        self._steps(self.plan.steps, env)
        cl.enqueue_copy(q, self.status, self.status_buf)  # blocking: waits for the launches
        return int(self.status[0])

    def _steps(self, steps: tuple[Step, ...], env: dict[str, object]) -> None:
        cl = ocl.pyopencl()
        for s in steps:
            if isinstance(s, HostLoop):
                a, b, st = (evaluate(x, env) for x in (s.start, s.stop, s.step))
                for v in range(a, b, st) if st else ():
                    env[s.counter.name] = v
                    self._steps(s.body, env)
                continue
            sizes = tuple(evaluate(d.stop, env) - evaluate(d.start, env) for d in s.dims)
            if any(n <= 0 for n in sizes):
                continue
            # A fixed work-group size, the global size rounded up to it (the kernel guards
            # its bounds): PoCL compiles a kernel again for every new work-group size, which
            # it would pick per global size if left to choose.
            local = (self.group,) + (1,) * (len(sizes) - 1) if sizes else (1,)
            sizes = tuple(-(-n // g) * g for n, g in zip(sizes, local)) or (1,)
            kern = self.kernels[s.name]
            args = []
            for p in s.params:
                args.append(_arg(p, env[p.name]))
                if p.pointer:
                    args.append(np.int64(env[offset_name(p)]))
            kern.set_args(*args, self.status_buf)
            cl.enqueue_nd_range_kernel(self.rt.queue, kern, sizes, local)


def _arg(p: k.Symbol, value: object) -> object:
    if p.pointer:
        return value
    return ocl.scalar_type(p.dtype)(value)


def bind(params: tuple[k.Symbol, ...], views: dict[str, ocl.DeviceView],
         scalars: dict[str, object]) -> dict[str, object]:
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
                case k.ScalarArgument(name=n):
                    env[p.name] = scalars[n]
    return env


class OpenCLPointCall(PointCall):
    """One specialization of a point kernel on the OpenCL device. NumPy arrays are copied
    to the device (C-contiguous) and the result back; ``pyopencl.array.Array`` arguments
    are used in place, and the result is then a ``pyopencl.array.Array`` too."""

    __slots__ = ("params", "names", "standard_positions", "border", "staging")

    def __init__(self, entry: Executable, *args, **kwargs) -> None:
        super().__init__(entry, *args, **kwargs)  # type: ignore[arg-type]
        self.names, self.standard_positions, self.border = entry.point_info
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
        scalars: dict[str, object] = {}
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
            views["out"] = ocl.device_view(result, self.name)
            for i in self.array_positions:  # an input sharing the output's buffer: a copy
                if ocl.is_device_array(args[i]) and args[i].base_data == result.base_data:
                    views[self.names[i]] = ocl.device_copy(rt, args[i])
        else:
            views["out"], host = ocl.to_device(rt, result, copy_in=not fill,
                                               staging=self.staging, slot="out")
        scalars[FILL_BORDER] = fill
        scalars[CVAL] = self.cval
        entry: Executable = self.entry  # type: ignore[assignment]
        status = entry.run(bind(entry.plan.kernel.params, views, scalars))
        if host is not None:
            ocl.from_device(rt, views["out"], host, result)  # type: ignore[arg-type]
        if status:
            raise status_error(status, self.name, self.loc)
        return result

    def _check_standard(self, args: tuple) -> None:
        """An empty standard_indexing array with interior points: every read is out of range
        (the clamped element the kernel reads instead does not exist either)."""
        interior = all(n > hi - lo for n, (lo, hi) in zip(args[0].shape, self.border))
        for i in self.standard_positions:
            a = args[i]
            if interior and hasattr(a, "shape") and int(np.prod(a.shape)) == 0:
                raise ArgumentError(f"standard_indexing array '{self.names[i]}' is empty, so "
                                    "every read of it is out of range", stencil=self.name,
                                    loc=self.loc, hint="pass a non-empty array")


class OpenCLParLoop:
    """Runs the loop kernel of a ParLoop: Dats, Globals and maps copied to the device
    (maps once per Map version), written data copied back."""

    def __init__(self, source: str, kernel: str, specs, race: str, stencil: str) -> None:
        from ..codegen.opencl_parloop import WORK_GROUP

        cl = ocl.pyopencl()
        self.rt = ocl.device()
        self.program = ocl.build(source, stencil)
        self.kernel = cl.Kernel(self.program, kernel)
        self.specs = specs
        self.race = race
        self.group = min(WORK_GROUP, ocl.work_group(self.rt))
        self.reduces = [i for i, s in enumerate(specs)
                        if s.kind == "global" and s.mode != "READ"]
        self.status = np.zeros(1, np.int32)
        self.status_buf = cl.Buffer(self.rt.context, cl.mem_flags.READ_WRITE, 4)
        self._maps: dict[int, tuple[object, object]] = {}  # id(values) -> (values, buffer)
        self.staging = ocl.Staging()

    def _map_buffer(self, values: np.ndarray) -> object:
        hit = self._maps.get(id(values))
        if hit is not None and hit[0] is values:
            return hit[1]
        buf = ocl.to_device(self.rt, values)[0].buffer
        self._maps[id(values)] = (values, buf)
        return buf

    def run(self, n: int, data: list, maps: list, colours: list[np.ndarray] | None) -> int:
        cl = ocl.pyopencl()
        q = self.rt.queue
        cl.enqueue_fill_buffer(q, self.status_buf, np.int32(0), 0, 4)
        views = [ocl.to_device(self.rt, d, staging=self.staging, slot=i)
                 for i, d in enumerate(data)]
        args: list[object] = []
        partial_slots = {}
        for i, s in enumerate(self.specs):
            args.append(views[i][0].buffer)
            if maps[i] is not None:
                args.append(self._map_buffer(maps[i]))
            if i in self.reduces:
                partial_slots[i] = len(args)
                args += [None, cl.LocalMemory(self.group * s.local_size * s.dtype.itemsize)]
        args.append(self.status_buf)
        results = {i: [] for i in self.reduces}
        launches = ([(len(b), ocl.to_device(self.rt, b)[0].buffer) for b in colours]
                    if colours is not None else [(n, None)])
        for count, blocks in launches:
            if count == 0:
                continue
            size = -(-count // self.group) * self.group  # a fixed work-group size (see above)
            partials = {}
            for i in self.reduces:
                s = self.specs[i]
                partials[i] = np.empty((size // self.group, s.local_size), s.dtype)
                args[partial_slots[i]] = ocl.empty_buffer(self.rt, partials[i].nbytes)
            head = [np.int64(count)] + ([blocks] if blocks is not None else [])
            self.kernel.set_args(*head, *args)
            cl.enqueue_nd_range_kernel(q, self.kernel, (size,), (self.group,))
            for i in self.reduces:
                cl.enqueue_copy(q, partials[i], args[partial_slots[i]])
                results[i].append(partials[i])
        for i, s in enumerate(self.specs):
            if s.mode == "READ" or s.kind == "global":
                continue
            ocl.from_device(self.rt, views[i][0], views[i][1], data[i])
        for i in self.reduces:
            s = self.specs[i]
            if not results[i]:
                continue
            parts = np.concatenate(results[i])
            target = data[i].reshape(-1)
            if s.mode == "INC":
                target += parts.sum(axis=0, dtype=s.dtype)
            elif s.mode == "MIN":
                target[...] = np.minimum(target, parts.min(axis=0))
            else:
                target[...] = np.maximum(target, parts.max(axis=0))
        cl.enqueue_copy(q, self.status, self.status_buf)
        return int(self.status[0])


def run_parloop(loop, fn: OpenCLParLoop) -> None:
    """The ParLoop launcher: the loop's data, maps and (when colouring) blocks by colour."""
    from .parloop_blocks import coloring

    data = [a.obj._data for a in loop.args]
    maps: list[np.ndarray | None] = []
    for a in loop.args:
        if a.kind in ("indirect", "entry"):
            maps.append(a.map.values)
        elif a.kind == "mat":
            maps.append(a.obj.sparsity.lmap)
        else:
            maps.append(None)
    colours = coloring(loop) if loop.race_mode() == "color" else None
    loop.check_status(fn.run(loop.iterset.size, data, maps, colours))
