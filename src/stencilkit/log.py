"""stencilkit's log: ``logging.getLogger("stencilkit")``.

Events, each with the stencil's name: which backend a stencil builds for and how long its
build took (INFO), cache hits and misses of compiled code (DEBUG). Nothing is printed unless
the application configures logging (``logging.basicConfig(level=logging.INFO)``), or a
stencil was made with GT4Py's ``verbose=True``: its build events then go to stderr too.
"""

from __future__ import annotations

import logging
import sys

from .config import current

logger = logging.getLogger("stencilkit")


def dump(stage: str, title: str, text: str) -> None:
    """Print ``text``, the output of ``stage``, when ``STENCILKIT_DUMP`` names the stage
    (``sk.configure(dump=...)``)."""
    if stage in current().dump:
        bar = "-" * 20
        print(f"{bar} {stage}: {title} {bar}\n{text}\n", file=sys.stderr)


def build_event(message: str, *args: object, verbose: bool = False) -> None:
    """An INFO record; with ``verbose``, also on stderr when no handler would show it."""
    logger.info(message, *args)
    if verbose and not (logger.isEnabledFor(logging.INFO) and logger.hasHandlers()):
        print("stencilkit: " + (message % args if args else message), file=sys.stderr)
