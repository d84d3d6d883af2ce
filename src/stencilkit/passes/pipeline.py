"""Moved: the point kernels' analyses are ``compile.point``, the dump hook
``compile.hooks.dump``, the lowering a stage (``registry.shared_stages.lower``) and the
pipeline the driver's (``compile.driver``). These names stay
importable from here for the modules and tests that import them."""

from __future__ import annotations

from ..compile.hooks import dump
from ..compile.point import TypedPointKernel, analyse
from ..registry.shared_stages import lower

__all__ = ["TypedPointKernel", "analyse", "dump", "lower"]
