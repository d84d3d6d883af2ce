"""The computation lowering for GPUs (CUDA, and OpenCL's subclass): a thread per column for
FORWARD/BACKWARD multistages.

The CPU lowering (``lower_computation``) jams blocks of columns under the K loop and keeps
column temporaries in C99 variable-length arrays; CUDA has neither VLAs nor a use for the
jamming (the warp is the vector). Here every "columns" group is two parallel loops over the
horizontal axes (the unit-stride one innermost, so it lands on ``threadIdx.x``) around the
K loops: one thread per column, the K loop inside, temporaries read only at zero offset in
registers (as GridTools does), the others in the 3-D temporaries the runtime allocates.
PARALLEL stages are loop nests whose every loop is parallel (a grid of up to three
dimensions); "planes" multistages are the CPU lowering's. The K loops of FORWARD/BACKWARD
sweeps are never marked parallel: the GPU platforms make threads of marked loops only.
"""

from __future__ import annotations

from ..analysis.schedule import MultiStage, Stage
from ..ir import kernel as k
from .lower_computation import ComputationLowering, _const, origin_key, stage_union


class GpuComputationLowering(ComputationLowering):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # column buffers are the CPU's jammed VLAs: keep those temporaries in memory instead
        for name in sorted(self.columns):
            dtype = dict(self.defn.temporaries)[name]
            self.buffers[name] = self.ctx.buffer(name, dtype, 3, unit_stride_last=False,
                                                 restrict=True, read_only=False,
                                                 unit_dim=self.unit_axes.get(name),
                                                 marks=frozenset({k.Temporary()}))
            self.origins[name] = [self.ctx.user_symbol(
                f"{name}_origin_{a}", k.INDEX,
                properties=frozenset({k.ScalarArgument(origin_key(name, a))}))
                for a in self.axes[name]]
        self.columns = {}

    def columns_group(self, group: list[tuple[int, MultiStage]]) -> k.Stmt:
        title = "; ".join(f"multistage {m_i}: {ms.policy}" for m_i, ms in group) + \
            ", a thread per column"
        stages = [st for _, ms in group for isched in ms.intervals for st in isched.stages]
        ext = stage_union(stages)
        kc = self.counters[2]
        per_level: list[k.Stmt] = []
        for _, ms in group:
            for isched in ms.intervals:
                k0, k1 = self.k_bounds(isched.interval)
                inner: list[k.Stmt] = []
                for st in isched.stages:
                    inner += list(self.guarded(st, ext))
                units = tuple(u for st in isched.stages for u in st.units)
                body = self.register_decls(units) + tuple(inner)
                per_level.append(self.k_loop(kc, k0, k1, ms.policy, body))
        nest: tuple[k.Stmt, ...] = tuple(per_level)
        for axis in reversed([a for a in self.loop_order() if a != 2]):
            start, stop = self.horizontal_range(axis, ext)
            nest = (k.Loop(self.counters[axis], start, stop, _const(1), nest,
                           parallel=k.Parallel()),)
        return k.Section(title, nest)

    def stage_nest(self, stage: Stage, k_range: tuple[k.Expr, k.Expr] | None,
                   parallel: bool, workshare: bool = False) -> k.Stmt:
        # every loop of a stage's nest writes disjoint points (the access rules): all
        # parallel, so that the grid covers the whole nest, not just its outermost loop
        body: tuple[k.Stmt, ...] = self.register_decls(stage.units) + self.stmts(stage.units)
        order = self.loop_order() if k_range is not None else [a for a in self.loop_order()
                                                               if a != 2]
        for axis in reversed(order):
            if axis == 2:
                assert k_range is not None  # (K is in the order only with a range)
                start, stop = k_range
            else:
                start, stop = self.horizontal_range(axis, stage.extent)
            body = (k.Loop(self.counters[axis], start, stop, _const(1), body,
                           parallel=k.Parallel()),)
        return body[0]
