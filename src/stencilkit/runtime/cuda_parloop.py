"""Running a CUDA ParLoop: blocks of one element (a thread each) when nothing shared is
written or the writes are atomic; coloured blocks of ``COLOUR_BLOCK`` elements otherwise
(a thread per block, the colours one launch after the other).

Maps and block lists stay on the device: a read-only host array that the loop only reads
(a ``Map``'s values are a private read-only copy, replaced, never changed, when the user
assigns new ones; the block lists are built once per set size or colouring and frozen
here) is copied to the device on its first use and kept there as long as the host array
lives (``resident``), for every loop that uses it. Host Dats and Globals are copied per
call, as before.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence

import numpy as np

from ..ir import kernel as k
from ..ir.abi import ParLoopCall, RaceMode
from . import cuda
from .cuda import _PENDING, CudaEntry, on_device, to_device
from .cuda_bound import BoundPlan
from .cuda_status import replay
from .parloop_blocks import block_layout, check_status, even_blocks, loop_arrays

COLOUR_BLOCK = 16  # elements per thread when colouring; small: threads are the parallelism

#: device copies of read-only host arrays, by the host array's id; the weak reference both
#: proves the id still names that array and drops the copy when the array dies
_RESIDENT: dict[int, tuple[weakref.ref, object]] = {}


def resident(cp, host: np.ndarray) -> object:
    """The device copy of the read-only host array ``host``, made on first use."""
    kept = _RESIDENT.get(id(host))
    if kept is not None and kept[0]() is host:
        return kept[1]
    key = id(host)

    def forget(_: object) -> None:
        _RESIDENT.pop(key, None)

    _RESIDENT[key] = (weakref.ref(host, forget), to_device(cp, host))
    return _RESIDENT[key][1]


@functools.lru_cache(maxsize=64)
def _one_per_block(n: int) -> np.ndarray:
    """The blocks of a loop run without colouring (one element each), frozen: the same
    array, on the device once, for every call over a set of ``n`` elements."""
    blocks = even_blocks(n, 1)
    blocks.flags.writeable = False
    return blocks


def run_blocks(call: ParLoopCall, fn: Callable[..., int]) -> None:
    arrays = loop_arrays(call)
    if call.race is not RaceMode.COLOUR:
        check_status(call, fn(_one_per_block(call.set_size), *arrays))
        return
    # the colouring is kept with the maps (parloop_blocks.coloring): its block lists are
    # the same arrays on every call, frozen so that their device copies stay
    for colour, blocks in enumerate(colour_blocks(call)):
        if colour and isinstance(fn, CudaParLoopEntry):
            # the colours of one run follow each other on the stream: only the first
            # waits for the loop's earlier runs (to raise their errors)
            check_status(call, fn.launch(blocks, *arrays))
        else:
            check_status(call, fn(blocks, *arrays))


class CudaParLoopEntry(CudaEntry):
    """A ParLoop's loop: called as ``entry(blocks, array, ...)`` (the block runner's
    convention); the arrays bind to the pointer parameters in order, ``nblocks`` is the
    number of rows of ``blocks``."""

    def __call__(self, *args: object) -> int:
        if self in _PENDING:
            self.raise_pending()
        return self.launch(*args)

    def launch(self, *args: object) -> int:
        """The call without reading the earlier calls' status word first."""
        cp = cuda._cupy()  # looked up per call: the tests' emulator replaces it
        values, back, _ = self.device_values(cp, args)
        self.bound_for_blocks(cp, values, len(args[0])).run(values)  # type: ignore[arg-type]
        return self.finish(cp, back)

    def device_values(self, cp, args: Sequence[object]
                      ) -> tuple[list[object], list[tuple], bool]:
        """The arguments on the device (blocks, maps and read-only host arrays resident,
        device Dats in place, other host arrays copied), the (host, device) pairs to copy
        back, and whether anything was copied to the device for this call only."""
        pointers = [p for p in self.plan.kernel.params if p.pointer]
        values: list[object] = []
        back = []
        copied = False
        for i, (p, a) in enumerate(zip(pointers, args)):
            if i == 0 and isinstance(a, np.ndarray) and not a.flags.writeable:
                values.append(resident(cp, a))  # the block list (run_blocks freezes it)
            elif isinstance(a, cp.ndarray):  # a Dat on the GPU: in place
                values.append(a)
            elif on_device(a):
                values.append(cp.asarray(a))
            elif isinstance(a, np.ndarray) and p.has(k.ReadOnly) and not a.flags.writeable:
                values.append(resident(cp, a))  # maps, block lists: on the device once
            elif isinstance(a, np.ndarray):  # host Dats and Globals: copied (documented)
                d = to_device(cp, a)
                copied = True
                if not p.has(k.ReadOnly):
                    back.append((a, d))
                values.append(d)
            else:
                values.append(a)
        return values, back, copied

    def bound_for_blocks(self, cp, values: Sequence[object], nblocks: int) -> BoundPlan:
        """The plan bound for ``nblocks`` blocks (all a ParLoop's launches depend on)."""
        bound = self._bound.get((nblocks,))
        if bound is None:
            pointers = [p for p in self.plan.kernel.params if p.pointer]
            env: dict[str, object] = {p.name: v for p, v in zip(pointers, values)}
            for p in self.plan.kernel.params:
                if not p.pointer:
                    env[p.name] = nblocks
            bound = BoundPlan.build(self.plan, self.functions(), env,
                                    {p.name: i for i, p in enumerate(pointers)}, frozenset(),
                                    self.status_word(cp).argument,
                                    lambda n, dtype: cp.zeros(n, dtype=dtype),
                                    cuda.launch_config)
            self._bound[(nblocks,)] = bound
        return bound


def colour_blocks(call: ParLoopCall) -> list[np.ndarray]:
    """The block lists of ``call``'s launches, one per colour (one list of one element
    per block where nothing is coloured), frozen (their device copies stay)."""
    if call.race is not RaceMode.COLOUR:
        return [_one_per_block(call.set_size)]
    lists = []
    for blocks in block_layout(call, COLOUR_BLOCK).colours:
        blocks = np.ascontiguousarray(blocks)
        blocks.flags.writeable = False
        lists.append(blocks)
    return lists


class BoundRun:
    """The launches of one ParLoop run whose arguments all stay on the device, bound: each
    colour's plan with its argument list (resident maps and blocks, the Dats' device
    arrays). ``run`` takes the earlier runs' status word (``runtime.cuda_calls``'s rule),
    launches them in order on the current stream, and records the entry's event."""

    __slots__ = ("entry", "word", "cp", "runs")

    def __init__(self, entry: CudaParLoopEntry, cp, runs: tuple) -> None:
        self.entry, self.word, self.cp, self.runs = entry, entry.status_word(cp), cp, runs

    @staticmethod
    def of(call: ParLoopCall, fn: object) -> BoundRun | None:
        """``run_blocks(call, fn)`` bound, or None where a run copies host arrays (they are
        copied per call) or ``fn`` is no CUDA entry."""
        if not isinstance(fn, CudaParLoopEntry):
            return None
        cp = cuda._cupy()
        arrays = loop_arrays(call)
        runs = []
        for blocks in colour_blocks(call):
            values, _, copied = fn.device_values(cp, (blocks, *arrays))
            if copied:
                return None
            runs.append((fn.bound_for_blocks(cp, values, len(blocks)), values))
        return BoundRun(fn, cp, tuple(runs))

    def run(self) -> None:
        replay(self.entry, self.word, self.cp.cuda.get_current_stream(), self.runs)
