"""The applications' one error: bad input on the command line."""

from __future__ import annotations


class UsageError(Exception):
    """Bad command-line input to ``stencilkit demo`` or ``stencilkit bench``: the CLI reports
    it as one line on stderr with exit status 2."""
