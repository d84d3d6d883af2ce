"""The only stencilkit internals the applications use, each where the public API has no way.

Everything else in ``stencilkit_apps`` goes through ``import stencilkit as sk``. Keeping
these few in one module makes the seam visible: when the compiler's layout changes, this is
the file to follow it.
"""

from __future__ import annotations

from typing import Any


def c_compiler() -> tuple[str, tuple[str, ...]]:
    """The C compiler and flags of the "c" backend: the hand-written C and STREAM peers are
    built with exactly these, so the comparison is of code, not of compiler options (the
    contract exposes no toolchain)."""
    from stencilkit.build.toolchain import toolchain

    tc = toolchain()
    return tc.cc, tuple(tc.flags)


def default_backend() -> str:
    """The backend a stencil without ``backend=`` runs on (configured, else the preferred
    available one): the demo reports it."""
    import stencilkit as sk

    return sk.registry.resolve(None).name


def opencl_queue() -> Any:
    """The pyopencl queue the "opencl" backend launches on: arrays made on it are used in
    place (the contract accepts device arrays "where the device matches" but names no
    queue)."""
    from stencilkit.runtime.opencl import device

    return device().queue


def block_coloring(n_cells: int, maps: list[Any], targets: list[int]) -> object:
    """The block colouring a colour-ordered ParLoop computes once: the bench reports its
    one-time cost next to the loop's time."""
    from stencilkit.runtime.parloop_blocks import block_coloring as colour

    return colour(n_cells, maps, targets)


def halo_exchange_seconds(dec: Any, reset: bool = False) -> float:
    """Seconds this rank's halo exchanges took since the last reset: the MPI demo reports
    the exchange's share of a step."""
    exchanger = dec.exchanger
    if reset:
        exchanger.seconds = 0.0
    return float(exchanger.seconds)
