"""``sk.synchronize()``: wait for the stencil calls still running on a device.

Calls on "cuda" whose arrays all live on the GPU return before their kernels finish (contract.md
section 9); their status words wait in ``runtime.cuda``. Importing that module pulls in the
CUDA planner, so this looks for it among the loaded modules: a process that never ran a
CUDA call has nothing to wait for.
"""

from __future__ import annotations

import sys


def synchronize() -> None:
    """Wait for every stencil call on a GPU and raise the first run-time error one of them
    reported (an ``sk.ArgumentError`` naming the stencil and its line)."""
    cuda = sys.modules.get("stencilkit.runtime.cuda")
    if cuda is not None:
        cuda.synchronize()
