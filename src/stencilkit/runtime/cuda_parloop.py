"""Running a CUDA ParLoop: blocks of one element (a thread each) when nothing shared is
written or the writes are atomic; coloured blocks of ``COLOUR_BLOCK`` elements otherwise
(a thread per block, the colours one launch after the other)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from .parloop_blocks import coloring, even_blocks, loop_arrays

if TYPE_CHECKING:
    from ..loop import ParLoop

COLOUR_BLOCK = 16  # elements per thread when colouring; small: threads are the parallelism


def run_blocks(loop: ParLoop, fn: Callable[..., int]) -> None:
    call = loop_arrays(loop)
    if loop.race_mode() != "color":
        loop.check_status(fn(even_blocks(loop.iterset.size, 1), *call))
        return
    for blocks in coloring(loop, COLOUR_BLOCK):
        loop.check_status(fn(np.ascontiguousarray(blocks), *call))
