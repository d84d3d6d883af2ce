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
    text = source(module, flavour)
    filename = str(HERE / f"{module}.py") if flavour == "gt4py" \
        else str(HERE / f"{module}.py[stencilkit]")
    name = f"corpus_{flavour}_{module}"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    mod = types.ModuleType(name)
    mod.__file__ = filename
    sys.modules[name] = mod  # gtscript helpers may look their module up
    exec(compile(text, filename, "exec"), mod.__dict__)
    return mod
