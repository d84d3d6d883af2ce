"""Shared machinery of every IR: source locations, the node base, one bottom-up rewriter.

Invariants: nodes are frozen, slotted dataclasses; children are nodes or tuples of nodes;
``loc`` is keyword-only and excluded from equality, so structurally equal IR compares equal
wherever it came from.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar


class StrEnum(str, enum.Enum):
    """A string-valued enum that prints as its value (``enum.StrEnum`` is Python 3.11+, and
    stencilkit supports 3.10): members compare equal to, and format as, their strings."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(self, spec)


@dataclass(frozen=True, slots=True)
class Location:
    """A position in user source code."""

    filename: str
    line: int
    col: int = 0

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.col}" if self.col else f"{self.filename}:{self.line}"


class Node:
    """Marker base of IR nodes (each concrete node is a frozen dataclass)."""

    __slots__ = ()


N = TypeVar("N", bound=Node)


def _map_value(value: object, fn: Callable[[Node], Node]) -> object:
    if isinstance(value, Node):
        return fn(value)
    if isinstance(value, tuple) and value and any(isinstance(v, (Node, tuple)) for v in value):
        return tuple(_map_value(v, fn) for v in value)
    return value


def map_children(node: N, fn: Callable[[Node], Node]) -> N:
    """A copy of ``node`` with ``fn`` applied to each direct child (identity kept if unchanged)."""
    changes = {}
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        old = getattr(node, f.name)
        new = _map_value(old, fn)
        if new is not old and new != old:
            changes[f.name] = new
    return dataclasses.replace(node, **changes) if changes else node  # type: ignore[type-var]


def rewrite(node: N, fn: Callable[[Node], Node | None]) -> N:
    """Bottom-up rewrite: children first, then ``fn`` on the rebuilt node (None keeps it)."""

    def visit(n: Node) -> Node:
        n = map_children(n, visit)
        out = fn(n)
        return n if out is None else out

    return visit(node)  # type: ignore[return-value]


def walk(node: Node):
    """Every node below and including ``node``, parents before children."""
    yield node
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        yield from _walk_value(getattr(node, f.name))


def _walk_value(value: object):
    if isinstance(value, Node):
        yield from walk(value)
    elif isinstance(value, tuple):
        for v in value:
            yield from _walk_value(v)
