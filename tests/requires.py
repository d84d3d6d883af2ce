"""Skips for tests that need one backend."""

from __future__ import annotations

import pytest

from stencilkit import registry


def needs_c() -> None:
    """Skip unless the C backend builds here. Its own probe only: ``sk.backends()`` would
    probe them all, and PyOpenCL's C++ exceptions abort under the sanitizer step's preloaded
    ASan runtime."""
    reason = registry.REGISTRY["c"].probe()
    if reason is not None:
        pytest.skip(f"backend c: {reason}")
