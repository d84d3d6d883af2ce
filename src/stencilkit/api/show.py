"""How stencilkit's user objects show themselves: ``repr`` (GT4Py's style,
``<StencilObject: module.name> [backend="numpy"]``) and an HTML table for notebooks."""

from __future__ import annotations

import html


def _qualname(func: object, name: str) -> str:
    module = getattr(func, "__module__", None)
    return f"{module}.{name}" if module and module != "__main__" else name


def _backend(chosen: str | None) -> str:
    from ..config import current

    return chosen or current().backend or "default"


def describe(kind: str, func: object, name: str, backend: str | None,
             details: dict[str, object]) -> str:
    """``<kind: module.name> [backend="c", key=value, ...]``."""
    items = [f'backend="{_backend(backend)}"'] + [f"{k}={v!r}" for k, v in details.items()
                                                  if v is not None]
    return f"<{kind}: {_qualname(func, name)}> [{', '.join(items)}]"


def html_table(kind: str, func: object, name: str, backend: str | None,
               details: dict[str, object]) -> str:
    rows = [("backend", _backend(backend)), *((k, v) for k, v in details.items()
                                               if v is not None)]
    body = "".join(f"<tr><th style='text-align:left'>{html.escape(str(k))}</th>"
                   f"<td style='text-align:left'><code>{html.escape(str(v))}</code></td></tr>"
                   for k, v in rows)
    return (f"<div><b>{html.escape(kind)}</b> <code>{html.escape(_qualname(func, name))}</code>"
            f"<table>{body}</table></div>")
