"""Running a CUDA ParLoop: blocks of one element (a thread each) when nothing shared is
written or the writes are atomic; coloured blocks of ``COLOUR_BLOCK`` elements otherwise
(a thread per block, the colours one launch after the other)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.abi import ParLoopCall, RaceMode
from .parloop_blocks import block_layout, check_status, loop_arrays

COLOUR_BLOCK = 16  # elements per thread when colouring; small: threads are the parallelism


def run_blocks(call: ParLoopCall, fn: Callable[..., int]) -> None:
    arrays = loop_arrays(call)
    block = COLOUR_BLOCK if call.race is RaceMode.COLOUR else 1
    for blocks in block_layout(call, block).colours:
        check_status(call, fn(np.ascontiguousarray(blocks), *arrays))
