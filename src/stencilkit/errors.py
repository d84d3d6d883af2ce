"""The exception hierarchy of the contract (contract.md section 6).

Every error is a ``ValueError`` so that code written against ``numba.stencil`` (which raises
``ValueError`` subclasses) keeps working. Messages name the stencil, the source location and
what to change; :func:`located` builds them uniformly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

from .ir.core import Location

T = TypeVar("T")
R = TypeVar("R")

__all__ = ["Location", "StencilError", "StencilSyntaxError", "StencilTypeError",
           "AccessRuleError", "ArgumentError", "BackendError", "UndefinedReadWarning"]


class StencilError(ValueError):
    """Base class of every error raised by stencilkit."""

    def __init__(self, message: str, *, stencil: str | None = None, loc: Location | None = None,
                 hint: str | None = None) -> None:
        self.stencil = stencil
        self.loc = loc
        self.hint = hint
        self.bare_message = message
        parts = []
        if stencil:
            parts.append(f"stencil '{stencil}'")
        if loc is not None:
            parts.append(f"at {loc}")
        head = (" ".join(parts) + ": ") if parts else ""
        text = head + message
        if hint:
            text += f"\n  fix: {hint}"
        super().__init__(text)


class StencilSyntaxError(StencilError):
    """The kernel uses a Python construct that stencilkit does not support."""


class StencilTypeError(StencilError):
    """Type inference failed, or a value cannot be converted to the required type."""


class AccessRuleError(StencilError):
    """A computation violates the access rules of the GridTools execution model."""


class ArgumentError(StencilError):
    """Arguments given at call time do not fit the stencil (shape, dtype, halo, count)."""


class BackendError(StencilError):
    """A compiler or device is missing, or compilation failed."""


class UndefinedReadWarning(UserWarning):
    """A temporary may be read where no statement wrote it (written in one branch of an
    ``if`` only, and read outside it): the definition runs, but the value read there is
    undefined, as in GT4Py."""

    def __init__(self, message: str, *, stencil: str | None = None, loc: Location | None = None,
                 hint: str | None = None) -> None:
        super().__init__(str(StencilError(message, stencil=stencil, loc=loc, hint=hint)))


def did_you_mean(word: str, choices: object) -> str:
    """"; did you mean 'x'?" for the closest of ``choices`` to a misspelt ``word``, or ""."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], 1)  # type: ignore
    return f"; did you mean {close[0]!r}?" if close else ""


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _env_full_tracebacks() -> bool:
    return os.environ.get("STENCILKIT_FULL_TRACEBACKS", "0") not in ("", "0")


#: Whether errors keep stencilkit's own frames. The configuration (which imports this
#: module, so this module cannot import it) installs its reader with
#: :func:`set_full_tracebacks`; until then, the environment decides, as its default does.
_full_tracebacks: Callable[[], bool] = _env_full_tracebacks


def set_full_tracebacks(reader: Callable[[], bool]) -> None:
    """Install what :func:`at_call` asks whether to keep stencilkit's frames."""
    global _full_tracebacks
    _full_tracebacks = reader


def at_call(exc: StencilError, caller: FrameType | None, *, note_call: bool = True
            ) -> StencilError:
    """``exc`` as it reaches the code that called a stencil: the call's file and line added
    to the message (a call-time error names the definition's line; the call may be anywhere
    else), and, as Numba does with its own, the library's frames cut from the traceback, so
    that the caller's line is the last but one (``STENCILKIT_FULL_TRACEBACKS=1`` keeps them:
    for reports of stencilkit's own bugs)."""
    while caller is not None and caller.f_code.co_filename.startswith(_PACKAGE_DIR):
        caller = caller.f_back  # a stencil called by stencilkit itself: its caller's line
    if note_call and caller is not None and getattr(exc, "call_loc", None) is None:
        where = Location(caller.f_code.co_filename, caller.f_lineno, 1)
        exc.call_loc = where  # type: ignore[attr-defined]
        if exc.args and isinstance(exc.args[0], str) and (
                exc.loc is None or (exc.loc.filename, exc.loc.line) != (where.filename,
                                                                         where.line)):
            exc.args = (f"{exc.args[0]}\n  called at {where.filename}:{where.line}",
                        *exc.args[1:])
    if not _full_tracebacks():
        exc.with_traceback(None)
    return exc


def definition_trimmed(wrap: Callable[[T], R]) -> Callable[[T], R]:
    """A decorator's ``wrap(function)`` whose StencilErrors reach the user's definition line
    without the library's frames (the message names the definition already)."""

    def trimmed(func: T) -> R:
        try:
            return wrap(func)
        except StencilError as exc:
            raise at_call(exc, sys._getframe(1), note_call=False) from exc.__cause__

    return trimmed
