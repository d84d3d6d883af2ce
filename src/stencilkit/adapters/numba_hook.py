"""Lets ``@njit`` code build stencils (``sk.stencil(lambda a: ...)(x)``), whichever of numba
and stencilkit is imported first, without importing numba here.

Numba replaces a call of ``numba.stencil`` in jitted code during an untyped pass
(``InlineClosureCallPass._inline_stencil``); ``arm`` extends that hook to
``stencilkit.stencil`` (the replacement itself is ``numba_calls.replace_by_stencil``) as soon
as Numba's module defining the pass exists: now, or right after Numba imports it. Jitted code
can only name ``stencilkit.stencil`` once stencilkit is imported, so that is early enough; no
``numba_extensions`` entry point, which would import stencilkit into every Numba program.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys

_MODULE = "numba.core.inline_closurecall"


def install(module: object = None) -> None:
    """Extend Numba's stencil hook to stencilkit's ``stencil`` (once)."""
    module = module if module is not None else sys.modules.get(_MODULE)
    if module is None:
        import numba.core.inline_closurecall as module
    cls = module.InlineClosureCallPass  # type: ignore[attr-defined]
    original = cls._inline_stencil
    if getattr(original, "_stencilkit", False):
        return

    def _inline_stencil(self, instr, call_name, func_def):
        if call_name is not None and call_name[0] == "stencil" and call_name[1] in (
                "stencilkit", "stencilkit.api.stencil"):
            from .numba_calls import replace_by_stencil

            return replace_by_stencil(self.func_ir, instr)
        return original(self, instr, call_name, func_def)

    _inline_stencil._stencilkit = True  # type: ignore[attr-defined]
    cls._inline_stencil = _inline_stencil


class _AfterImport(importlib.abc.MetaPathFinder):
    """Installs the hook right after Numba imports the module of the pass."""

    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            install(module)

        spec.loader.exec_module = exec_module
        return spec


def arm() -> None:
    if _MODULE in sys.modules:
        install(sys.modules[_MODULE])
    elif not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
