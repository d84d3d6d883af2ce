"""GT4Py's axis syntax in computations: offsets written ``f[K + 1]``, ``a[I - 1, J + 1]``
(an axis per index, the others at offset 0), and ``K`` read as a value (the level index).

Axes are ours or GT4Py's (``gtscript.I``, recognised by type name and ``name``); an offset
is an integer the frontend knows at compile time (a literal, an external).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .computation_translate import ComputationTranslator


def axis_name(value: object) -> str | None:
    """"I", "J" or "K" when ``value`` is one of gtscript's axes (ours or GT4Py's)."""
    if type(value).__name__ == "Axis":
        name = getattr(value, "name", None)
        if name in ("I", "J", "K"):
            return name
    return None


def names_axis(tr: ComputationTranslator, node: ast.expr) -> str | None:
    """The axis a plain name (or attribute, ``gtscript.K``) denotes, if it denotes one."""
    if isinstance(node, ast.Name) and tr._is_runtime(node.id):
        return None
    if not isinstance(node, (ast.Name, ast.Attribute)):
        return None
    try:
        return axis_name(tr.resolve_global(node))
    except Exception:  # an attribute that does not resolve: not an axis
        return None


def axis_offsets(tr: ComputationTranslator, index: ast.expr) -> tuple[int, int, int] | None:
    """(di, dj, dk) of an index written with axes (``K + 1``, ``I - 1, J + 1``); None when
    the index is not written with axes (then it is read as plain offsets)."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    terms = [_term(tr, p) for p in parts]
    if not any(t is not None for t in terms):
        return None
    offsets: dict[str, int] = {}
    for part, term in zip(parts, terms):
        if term is None:
            raise tr.error(part, f"`{ast.unparse(part)}` mixes plain offsets with axis "
                                 "offsets", "write every index with its axis (a[I - 1, J + 1]) "
                                            "or none (a[-1, 1, 0])")
        axis, offset = term
        if axis in offsets:
            raise tr.error(part, f"axis {axis} is offset twice in one index")
        offsets[axis] = offset
    return offsets.get("I", 0), offsets.get("J", 0), offsets.get("K", 0)


def _term(tr: ComputationTranslator, node: ast.expr) -> tuple[str, int] | None:
    """(axis, offset) of ``K``, ``K + 1``, ``I - 1 + 2``, ``1 + J``; None otherwise."""
    axis = names_axis(tr, node)
    if axis is not None:
        return axis, 0
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left = _term(tr, node.left)
        if left is not None:
            return left[0], left[1] + _integer(tr, node.right) * (
                1 if isinstance(node.op, ast.Add) else -1)
        right = _term(tr, node.right)
        if right is not None and isinstance(node.op, ast.Add):
            return right[0], right[1] + _integer(tr, node.left)
    return None


def _integer(tr: ComputationTranslator, node: ast.expr) -> int:
    known, value = tr.static(node)
    if not known or not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise tr.error(node, f"an axis offset must be an integer known at compile time, got "
                             f"`{ast.unparse(node)}`", "write K + 1, I - 2 (or an external)")
    return int(value)
