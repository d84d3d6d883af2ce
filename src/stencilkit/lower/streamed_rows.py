"""Fit a point kernel's streamed rows to the machine and to the variant being built.

Requires: kernel IR from ``lower_point`` whose ``StreamedRow``s stream when ``work >= N``
(``N`` a constant: the output's elements at the streaming threshold). Ensures: each
``StreamedRow`` streams from ``min_bytes`` of output on (None: ``N`` kept), computes
``chunk`` elements per row chunk, or, with ``streaming`` False, is its plain loop; with
``streaming`` True it streams whatever the size (the variant measured for this size class).

Why a pass: the constants depend on the machine (``build.machine``: the last-level cache,
L1d) and on the tuner's choice (``build.tuning``), which the lowering, a pass, cannot ask;
the C backend's lowering stage applies this with what it knows. Bit-identical either way:
only the path of the stores changes.
"""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np

from ..ir import kernel as k
from ..ir.core import Node, map_children


def fit_streamed_rows(kf: k.KernelFunction, *, min_bytes: int | None, chunk: int,
                      streaming: bool | None) -> k.KernelFunction:
    """``kf`` with every streamed row fitted (module docstring)."""
    def visit(n: Node) -> Node:
        n = map_children(n, visit)
        if not isinstance(n, k.StreamedRow):
            return n
        if streaming is False:
            return n.loop
        when = n.when
        if streaming is True:
            when = _with_threshold(when, 0)
        elif min_bytes is not None:
            item = n.buffer.element_type.itemsize
            when = _with_threshold(when, -(-min_bytes // item))
        return dataclasses.replace(n, chunk=chunk, when=when)

    body = cast("tuple[k.Stmt, ...]", tuple(visit(s) for s in kf.body))
    return kf if body == kf.body else dataclasses.replace(kf, body=body)


def _with_threshold(when: k.Expr, elements: int) -> k.Expr:
    assert isinstance(when, k.Op) and when.op == ">=" and isinstance(when.args[1], k.Constant), \
        f"a streamed row's condition is not 'work >= N': {when}"
    return dataclasses.replace(when, args=(when.args[0], k.Constant(
        np.int64(elements), dtype=when.args[1].dtype)))
