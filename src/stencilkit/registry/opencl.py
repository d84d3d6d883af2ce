"""The "opencl" backend: OpenCL C via PyOpenCL (any OpenCL device, e.g. PoCL on the CPU).

Every kind is lowered to kernel IR (computations with the OpenCL loop structure of
``passes.opencl_computation``), split into launches by the OpenCL platform
(``passes.platforms.opencl``: parallel loop nests -> NDRanges, host loops), printed by the
C-family printer's OpenCL hooks and built by PyOpenCL per device (``runtime.opencl``).
NumPy arrays are copied to the device and back; point kernels also take pyopencl arrays in
place. OpenCL C has no complex types, so the dtypes exclude them.
"""

from __future__ import annotations

from .. import dtypes
from .base import Backend, Capabilities, PerKind, Pieces


def probe() -> str | None:
    from ..runtime.opencl import probe as device_probe

    return device_probe()


class OpenCLBackend(Backend):
    def build_point(self, typed, layout, src, out_dtype, types, mode="constant"):
        from ..build import opencl

        return opencl.build_point(typed, layout, src, out_dtype, types, mode)

    def build_computation(self, defn, sched, src, fields):
        from ..build import opencl

        return opencl.build_computation(defn, sched, src, fields)

    def build_parloop(self, name, typed, specs, src, code, atomic):
        from ..build import opencl

        shared = any(s.writes_shared for s in specs)
        race = "atomic" if atomic else "color" if shared else "none"
        return opencl.build_parloop(name, typed, specs, src, race)


BACKEND = OpenCLBackend(
    name="opencl",
    description="OpenCL C via PyOpenCL (any OpenCL device, e.g. PoCL on the CPU)",
    needs="pyopencl",
    probe=probe,
    capabilities=Capabilities(
        kinds=frozenset({"point", "computation", "parloop"}),
        dtypes=frozenset(t for t in dtypes.SUPPORTED if not dtypes.is_complex(t)),
        device="cpu",  # where its arrays live: NumPy arrays are copied to the device
        compiled=True,
        inlines_temporaries=True,
    ),
    pieces=Pieces(
        platform="stencilkit.passes.platforms.opencl:OpenCLPlatform",
        printer=PerKind(point="stencilkit.codegen.opencl:program_source",
                        computation="stencilkit.codegen.opencl:program_source",
                        parloop="stencilkit.codegen.opencl:program_source"),
        toolchain="stencilkit.runtime.opencl:build",
        launcher=PerKind(point="stencilkit.runtime.opencl_launch:OpenCLPointCall",
                         computation="stencilkit.runtime.opencl_launch:Executable",
                         parloop="stencilkit.runtime.opencl_launch:run_parloop"),
        array_module="numpy",
    ),
    gt4py_names=("opencl",),
)
