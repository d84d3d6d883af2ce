"""Running a CUDA ParLoop: blocks of one element (a thread each) when nothing shared is
written or the writes are atomic; coloured blocks of ``COLOUR_BLOCK`` elements otherwise
(a thread per block, the colours one launch after the other)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .parloop_blocks import block_coloring, even_blocks

if TYPE_CHECKING:
    from ..loop import ParLoop

COLOUR_BLOCK = 16  # elements per thread when colouring; small: threads are the parallelism


def run_blocks(loop: ParLoop, fn: Callable[..., int]) -> None:
    from .parloop_blocks import READ

    call: list[object] = []
    for a in loop.args:
        call.append(a.obj._data)
        if a.kind in ("indirect", "entry"):
            call.append(a.map.values)  # type: ignore[union-attr]
        elif a.kind == "mat":
            call.append(a.obj.sparsity.lmap)  # type: ignore[union-attr]
    if loop.race_mode() != "color":
        loop.check_status(fn(even_blocks(loop.iterset.size, 1), *call))
        return
    written = []
    for a in loop.args:
        if a.kind in ("indirect", "entry") and a.mode is not READ:
            written.append((a.map, a.path.index if a.kind == "entry" else None))  # type: ignore
        elif a.kind == "mat":
            written.append((a.path[0], None))  # type: ignore[index]
    holder = written[0][0]._colorings  # type: ignore[union-attr]
    key = ("cuda", COLOUR_BLOCK,
           *((m.version, entry) for m, entry in written))  # type: ignore[union-attr]
    if key not in holder:
        cols = [m.values if e is None else m.values[:, [e]]  # type: ignore[union-attr]
                for m, e in written]
        holder[key] = block_coloring(loop.iterset.size, cols,
                                     [m.to_set.size for m, _ in written],  # type: ignore
                                     block=COLOUR_BLOCK)
    for blocks in holder[key]:
        loop.check_status(fn(np.ascontiguousarray(blocks), *call))
