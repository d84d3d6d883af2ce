"""The corpus registry: one ``Case`` per definition, and the random inputs it runs on.

Each corpus module is plain gtscript code written for GT4Py; it lists its cases in a
module-level ``CASES``. The harness loads every module twice (as written, and with
``gt4py.cartesian`` replaced by ``stencilkit``), so a case's externals are built by the
module itself, from whichever ``gtscript`` it imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

Args = dict[str, object]


@dataclass(frozen=True)
class Case:
    """How to run one definition: its inputs, where, and with which externals."""

    name: str                                   # the definition's name in its module
    make_args: Callable[[np.random.Generator], Args]  # keyword arguments, fields and scalars
    origin: tuple[int, int, int]
    domain: tuple[int, int, int]
    externals: dict[str, object] = field(default_factory=dict)


def uniform(r: np.random.Generator, shape: tuple[int, ...], lo: float = 0.0,
            hi: float = 1.0) -> np.ndarray:
    """Random float64 values in [lo, hi), C-ordered."""
    return lo + (hi - lo) * r.random(shape)


def zeros(shape: tuple[int, ...]) -> np.ndarray:
    return np.zeros(shape)


def profile(r: np.random.Generator, shape: tuple[int, int, int], top: float,
            bottom: float, noise: float = 0.01) -> np.ndarray:
    """A vertical profile from ``top`` (k = 0) to ``bottom`` (k = nz - 1), perturbed."""
    nz = shape[2]
    base = np.linspace(top, bottom, nz)[None, None, :]
    return base * (1.0 + noise * (r.random(shape) - 0.5))
