"""Load a corpus module as written for GT4Py, or with its imports rewritten to stencilkit.

The rewrite is textual (``gt4py.cartesian`` -> ``stencilkit``), keeps every line where it
was, and registers the text in ``linecache`` under its own filename, so ``inspect.getsource``
works for both frontends and error messages point at the corpus file's lines.
"""

from __future__ import annotations

import linecache
import sys
import types
from pathlib import Path

HERE = Path(__file__).parent
FLAVOURS = ("gt4py", "stencilkit")


def source(module: str, flavour: str) -> str:
    text = (HERE / f"{module}.py").read_text()
    if flavour == "stencilkit":
        text = text.replace("gt4py.cartesian", "stencilkit")
    return text


def load(module: str, flavour: str) -> types.ModuleType:
    """Execute ``tests/corpus/<module>.py`` in a fresh module object (not cached)."""
    filename = str(HERE / f"{module}.py") if flavour == "gt4py" \
        else str(HERE / f"{module}.py[stencilkit]")
    return exec_module(source(module, flavour), filename, f"corpus_{flavour}_{module}")


def exec_module(text: str, filename: str, name: str) -> types.ModuleType:
    """Run ``text`` as module ``name``, its lines findable under ``filename``."""
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    mod = types.ModuleType(name)
    mod.__file__ = filename
    sys.modules[name] = mod  # gtscript helpers may look their module up
    exec(compile(text, filename, "exec"), mod.__dict__)
    return mod


def our_stencil(definition: object, backend: str, externals: dict | None = None):
    """Build with ``stencilkit.gtscript.stencil`` where it exists (the drop-in), else with
    ``stencilkit.api.stencil``."""
    import stencilkit as sk
    import stencilkit.gtscript as skg

    externals = externals or {}
    if hasattr(skg, "stencil"):
        return skg.stencil(backend=backend, definition=definition, externals=externals)
    return sk.stencil(definition, backend=backend, externals=externals)
