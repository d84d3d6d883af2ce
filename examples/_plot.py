"""The examples' one shared helper: matplotlib without a display, or None without matplotlib."""

from __future__ import annotations


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only), or None where it is missing."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
