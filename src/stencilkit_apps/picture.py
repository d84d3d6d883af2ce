"""The demo's picture: a matplotlib figure (title, colour bar) where matplotlib is installed,
else the field alone as a PNG from ``png`` (``pip install 'stencilkit[apps]'`` for the
figure and its other formats)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

from . import png
from .errors import UsageError


def _have_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def formats() -> list[str]:
    """The picture formats (file suffixes, without the dot) that can be written here."""
    if not _have_matplotlib():
        return ["png"]
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    return sorted(Figure().canvas.get_supported_filetypes())


def check_output(out: Path) -> None:
    """Refuse, before a long run, a picture that could not be written."""
    if out.is_dir():
        raise UsageError(f"--output {out} is a directory; give a file name such as {out}/demo.png")
    known = formats()
    if out.suffix.lower().lstrip(".") not in known:
        more = "" if len(known) > 1 else " (more with matplotlib: pip install 'stencilkit[apps]')"
        raise UsageError(f"--output {out}: unknown picture format {out.suffix or '(none)'!r}; "
                         f"use one of {', '.join('.' + f for f in known)}{more}")
    parent = out.parent
    if not parent.is_dir():
        raise UsageError(f"--output {out}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or out.exists() and not os.access(out, os.W_OK):
        raise UsageError(f"--output {out}: not writable; choose another file")


def write(u: np.ndarray, out: Path, title: str) -> None:
    """Write the 2-D field ``u`` to ``out`` and say so on stdout."""
    try:
        if _have_matplotlib():
            _figure(u, title).savefig(out, dpi=100)
        else:
            out.write_bytes(png.encode(png.colour(u), title))
    except OSError as exc:
        raise UsageError(f"--output {out}: cannot write it ({exc.strerror or exc})") from None
    print(f"wrote {out}")


def _figure(u: np.ndarray, title: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    im = ax.imshow(u, cmap="inferno", origin="lower")
    fig.colorbar(im, ax=ax, label="temperature")
    ax.set_title(title)
    fig.tight_layout()
    return fig
