"""Computations lowered for OpenCL: the loop structure a device wants.

Requires what ``ComputationLowering`` requires. Ensures a kernel function in which:
- PARALLEL stages are loop nests whose every loop is parallel (a 3-D NDRange each);
- FORWARD/BACKWARD multistages run "by columns" as a 2-D parallel nest over I and J with
  the K loops inside (one work-item per column; temporaries read only at zero offset are
  registers, as GridTools does); there are no column buffers (OpenCL has no variable-length
  arrays; such temporaries stay 3-D arrays);
- "planes" multistages (a horizontal dependency inside a sweep) are serial K loops whose
  stages are parallel plane nests: the host runs the K loop and launches each stage per
  level, so that every stage sees the whole plane of the one before.
"""

from __future__ import annotations

from ..analysis.schedule import MultiStage, Stage
from ..ir import kernel as k
from .lower_computation import ComputationLowering, _const, stage_union


class OpenCLComputationLowering(ComputationLowering):
    # No per-thread column buffers: set by the base class, always empty here.
    columns = property(lambda self: {}, lambda self, value: None)

    def stage_nest(self, stage: Stage, k_range: tuple[k.Expr, k.Expr] | None,
                   parallel: bool, workshare: bool = False) -> k.Stmt:
        body: tuple[k.Stmt, ...] = self.register_decls(stage.units) + self.stmts(stage.units)
        order = self.loop_order() if k_range is not None else [a for a in self.loop_order()
                                                               if a != 2]
        for axis in reversed(order):
            start, stop = k_range if axis == 2 else self.horizontal_range(axis, stage.extent)
            body = (k.Loop(self.counters[axis], start, stop, _const(1), body, parallel=k.Parallel()),)
        return body[0]

    def columns_group(self, group: list[tuple[int, MultiStage]]) -> k.Stmt:
        title = "; ".join(f"multistage {m_i}: {ms.policy}" for m_i, ms in group) + ", by columns"
        stages = [st for _, ms in group for isched in ms.intervals for st in isched.stages]
        ext = stage_union(stages)
        per_level: list[k.Stmt] = []
        for _, ms in group:
            for isched in ms.intervals:
                k0, k1 = self.k_bounds(isched.interval)
                inner: list[k.Stmt] = []
                for st in isched.stages:
                    inner += list(self.guarded(st, ext))
                units = tuple(u for st in isched.stages for u in st.units)
                per_level.append(self.k_loop(self.counters[2], k0, k1, ms.policy,
                                             self.register_decls(units) + tuple(inner)))
        body: tuple[k.Stmt, ...] = tuple(per_level)
        for axis in reversed([a for a in self.loop_order() if a != 2]):
            start, stop = self.horizontal_range(axis, ext)
            body = (k.Loop(self.counters[axis], start, stop, _const(1), body, parallel=k.Parallel()),)
        return k.Section(title, body)
