"""PoCL on a processor LLVM cannot name (pocl/pocl#1049), simulated in every Python process
started with this directory on PYTHONPATH and SK_SIMULATED_POCL set (tests/test_probes.py).

This machine's PoCL can name its CPU, and LLVM's detection reads CPUID, which nothing outside
a virtual machine can change; so PyOpenCL's program build is replaced by one that fails as
PoCL fails there, with PyOpenCL's own exception and message. SK_SIMULATED_POCL=3.0 is the
PoCL of the pyopencl wheels (no override: every build fails); SK_SIMULATED_POCL=5.0 reads
POCL_LLVM_CPU_NAME when PoCL first lists its devices, as PoCL 5.0 does, and builds for real
once it names a CPU LLVM knows.
"""

import os

if os.environ.get("SK_SIMULATED_POCL"):
    import pyopencl as cl
    from pyopencl import _cl

    _version = os.environ["SK_SIMULATED_POCL"]
    _real_build = cl.Program.build
    _real_get_platforms = cl.get_platforms
    _cpu_name: list[str | None] = []  # what PoCL read when it first listed its devices

    def _get_platforms():
        if not _cpu_name:
            _cpu_name.append(os.environ.get("POCL_LLVM_CPU_NAME") if _version != "3.0" else None)
        return _real_get_platforms()

    def _build(self, *args, **kwargs):
        name = _cpu_name[0] if _cpu_name else None
        if name and name != "generic":
            return _real_build(self, *args, **kwargs)
        device = self._context.devices[0]
        log = ("error: unknown target CPU 'generic'\n"
               f"Device {device.name} failed to build the program, log: error: unknown "
               "target CPU 'generic'")
        failed = "clBuildProgram failed: BUILD_PROGRAM_FAILURE"
        raise _cl.RuntimeError(_cl._ErrorRecord(
            msg=f"{failed} - {failed} - {failed}\n\nBuild on {device!r}:\n\n{log}",
            code=-11, routine="clBuildProgram"))

    cl.get_platforms = _get_platforms
    cl.Program.build = _build
