"""The exception hierarchy of the contract (contract.md section 6).

Every error is a ``ValueError`` so that code written against ``numba.stencil`` (which raises
``ValueError`` subclasses) keeps working. Messages name the stencil, the source location and
what to change; :func:`located` builds them uniformly.
"""

from __future__ import annotations

from .ir.core import Location

__all__ = ["Location", "StencilError", "StencilSyntaxError", "StencilTypeError",
           "AccessRuleError", "ArgumentError", "BackendError"]


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


def did_you_mean(word: str, choices: object) -> str:
    """"; did you mean 'x'?" for the closest of ``choices`` to a misspelt ``word``, or ""."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], 1)  # type: ignore
    return f"; did you mean {close[0]!r}?" if close else ""
