"""What the driver does around every stage: dump, verify, time.

- **dump**: ``STENCILKIT_DUMP=ir,typed,kernel,code`` (``sk.configure(dump=...)``) prints the
  output of the stages it names to stderr as they run;
- **verify**: a checker of kernel IR run on the output of every stage that produces kernel
  IR. On with ``STENCILKIT_VERIFY=1`` (the checker: ``DEFAULT_VERIFIER``) or inside
  ``verifying(check)``; a checker raises to reject what a stage produced;
- **timing**: the wall time of every stage, logged on the ``stencilkit`` logger at DEBUG
  and kept in the artifact (``Artifact.timings``).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator

from ..log import dump  # noqa: F401 (the dump hook: in the base layer, passes print with it)

#: ``check(kf, *, platform_lowered, keeps)``: ``platform_lowered`` after the platform's stage
#: (no abstract node may be left but those in ``keeps``, which the printer handles)
Verifier = Callable[..., None]

#: The checker ``STENCILKIT_VERIFY=1`` runs ("module:function"): the kernel-IR verifier.
DEFAULT_VERIFIER = "stencilkit.ir.verify:verify_kernel"

logger = logging.getLogger("stencilkit")

_verifier: contextvars.ContextVar[Verifier | None] = contextvars.ContextVar(
    "stencilkit_verifier", default=None)
_warned_missing = False


@contextlib.contextmanager
def verifying(check: Verifier) -> Iterator[None]:
    """Builds inside run ``check`` on the kernel IR after every stage that produces it (in
    this thread or task only)."""
    token = _verifier.set(check)
    try:
        yield
    finally:
        _verifier.reset(token)


def verifier() -> Verifier | None:
    """The checker to run now: ``verifying``'s, else ``DEFAULT_VERIFIER`` under
    ``STENCILKIT_VERIFY=1``, else None."""
    check = _verifier.get()
    if check is not None or os.environ.get("STENCILKIT_VERIFY", "0") in ("", "0"):
        return check
    module, _, name = DEFAULT_VERIFIER.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        global _warned_missing
        if not _warned_missing:
            _warned_missing = True
            warnings.warn(f"STENCILKIT_VERIFY=1, but the verifier {DEFAULT_VERIFIER} does not "
                          f"load ({exc}); building unverified", RuntimeWarning, stacklevel=2)
        return None


def timed(kind: str, name: str, backend: str, stage: str, seconds: float) -> None:
    logger.debug("%s %r [%s]: stage %s took %.6f s", kind, name, backend, stage, seconds)
