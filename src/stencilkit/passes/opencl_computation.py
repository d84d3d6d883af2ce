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

from .lower_computation_gpu import GpuComputationLowering


class OpenCLComputationLowering(GpuComputationLowering):
    """FORWARD/BACKWARD groups a work-item per column and PARALLEL stages every loop
    parallel (both ``GpuComputationLowering``'s)."""

    # No per-thread column buffers: set by the base class, always empty here.
    columns = property(lambda self: {}, lambda self, value: None)
