"""Running a compiled ParLoop: blocks of elements, coloured so that blocks of one colour
share no target entry (PyOP2's block colouring), or all blocks at once with atomics.

Colouring keeps each block's elements in order and runs a colour's blocks in parallel
without atomics; the compiled entry point takes the blocks of one colour as an int64
(count, 2) array of [start, end) pairs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import ArgumentError
from ..ir.abi import BlockLayout, ParLoopCall, RaceMode


def run_blocks(call: ParLoopCall, fn: Callable[..., int]) -> None:
    """Run a compiled ParLoop entry point over blocks of elements: all at once (no shared
    target, or atomics), or colour by colour (blocks of one colour share no target entry)."""
    arrays = loop_arrays(call)
    for blocks in block_layout(call).colours:
        check_status(call, fn(blocks, *arrays))


def run_coloured(call: ParLoopCall, module) -> None:
    """Run a ParLoop module of the "numba" backend (no atomics): colour by colour whenever
    the loop writes shared entries, whatever its race mode, else all blocks at once. The
    entry point takes every array flat (as the C one takes pointers)."""
    arrays = [_flat(a) for a in loop_arrays(call)]
    colour = RaceMode.NONE if call.race is RaceMode.NONE else RaceMode.COLOUR
    for blocks in block_layout(call, race=colour).colours:
        # the loop's run-in-parallel condition (lower_parloop: more than one block), which a
        # prange cannot test: a parallel region for one block only costs the threads' wake-up
        fn = module.parallel if len(blocks) > 1 else module.serial
        check_status(call, fn(len(blocks), blocks.reshape(-1), *arrays))


def block_layout(call: ParLoopCall, block: int | None = None,
                 race: RaceMode | None = None) -> BlockLayout:
    """The blocks of ``block`` elements (default ``BLOCK``) a run takes: one group of every
    block, or (``race``, default the call's, is COLOUR) one group per colour."""
    block = BLOCK if block is None else block
    race = call.race if race is None else race
    if race is RaceMode.COLOUR:
        return BlockLayout(call.set_size, block, tuple(coloring(call, block)))
    return BlockLayout(call.set_size, block, (even_blocks(call.set_size, block),))


def check_status(call: ParLoopCall, status: int) -> None:
    """The error for a non-zero status of the generated loop."""
    if status:
        raise ArgumentError("the kernel indexed a local array out of range at run time "
                            "(nothing outside the data was touched)",
                            stencil=call.name, loc=call.loc,
                            hint="check the indices against the map arity and dim")


def loop_arrays(call: ParLoopCall) -> list[np.ndarray]:
    """The arrays a compiled ParLoop entry point takes after the blocks, in order: each
    argument's data, then its map's values (indirect) or its local map (a Mat)."""
    arrays: list[np.ndarray] = []
    for a in call.arguments:
        arrays.append(a.data)
        if a.map_values is not None:
            arrays.append(a.map_values)
    return arrays


def _flat(a: np.ndarray) -> np.ndarray:
    flat = a.reshape(-1)  # a view of the contiguous arrays Dats, Maps and Mats hold
    assert a.size == 0 or np.shares_memory(flat, a), "ParLoop data must be contiguous"
    return flat


def coloring(call: ParLoopCall, block: int | None = None) -> list[np.ndarray]:
    """Blocks of ``block`` elements (default ``BLOCK``) grouped by colour; cached on the
    first written map, keyed by the block size and the maps' versions (never reused, unlike
    id(): a new map cannot inherit a stale colouring)."""
    block = BLOCK if block is None else block
    written = [a for a in call.arguments
               if a.kind.shares_targets and a.access.writes and a.targets is not None]
    holder = written[0].colourings
    assert holder is not None
    key = (block, *((a.map_version, a.entry) for a in written))
    if key not in holder:
        holder[key] = block_coloring(call.set_size, [a.targets for a in written],  # type: ignore
                                     [a.target_size for a in written], block=block)
    return holder[key]


BLOCK = 2048


def even_blocks(n: int, block: int = BLOCK) -> np.ndarray:
    starts = np.arange(0, n, block, dtype=np.int64)
    return np.ascontiguousarray(np.stack([starts, np.minimum(starts + block, n)], axis=1))


def block_coloring(n: int, maps: list[np.ndarray], sizes: list[int],
                   block: int = BLOCK) -> list[np.ndarray]:
    """Greedy colouring of contiguous blocks of elements: two blocks of one colour share no
    target entry, so a colour's blocks run in parallel without atomics while each block
    keeps the elements' order (and their locality). Returns, per colour, its blocks as an
    int64 (count, 2) array of [start, end) pairs. Colours come in palettes of 64 (one bit
    each per target entry); a block that finds a palette full tries the next, so any
    number of colours is possible (a target shared by every element gives one per block)."""
    blocks = even_blocks(n, block)
    targets = []
    for m, size in zip(maps, sizes):
        m = np.asarray(m)
        if size > 8 * m.size + 4096:
            # a few entries of a huge target set: colour their distinct values only
            uniq, inverse = np.unique(m, return_inverse=True)
            m, size = inverse.reshape(m.shape), len(uniq)
        targets.append((m, size))
    palettes: list[list[np.ndarray]] = []
    colour_of = np.empty(len(blocks), np.int64)
    for b, (start, end) in enumerate(blocks):
        rows = [m[start:end].reshape(-1) for m, _ in targets]
        p = 0
        while True:
            if p == len(palettes):
                palettes.append([np.zeros(size, np.uint64) for _, size in targets])
            used = palettes[p]
            taken = 0
            for u, r in zip(used, rows):
                if r.size:
                    taken |= int(np.bitwise_or.reduce(u[r]))
            free = ~taken & ((1 << 64) - 1)
            if free:
                break
            p += 1
        c = (free & -free).bit_length() - 1
        for u, r in zip(used, rows):
            u[r] |= np.uint64(1 << c)
        colour_of[b] = 64 * p + c
    return [np.ascontiguousarray(blocks[colour_of == c]) for c in np.unique(colour_of)]
