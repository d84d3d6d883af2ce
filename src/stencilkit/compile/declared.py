"""Reading a backend's declaration: its stages per kind, the functions they name."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..ir.computation import ComputationDef
    from ..registry.base import KindStages


def kind_stages(backend: Any, kind: str) -> KindStages:
    """What ``backend`` declares for ``kind`` (a ``Kind``, or its value); a BackendError where
    it builds no such kind."""
    name = getattr(kind, "value", kind)
    declared = None if backend.pieces is None else getattr(backend.pieces.stages, name)
    if declared is None:
        raise backend._not_built(name)
    return declared


@functools.cache
def load(ref: str) -> Callable[..., Any]:
    """The function a ``"module:attribute"`` reference names (the backends' declarations
    name their stage functions so, so that declaring one imports none of its dependencies)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def layout_key(backend: Any, fields: Mapping[str, Any] | None, defn: ComputationDef) -> tuple:
    """What, beyond the definition, a computation's code depends on (e.g. which axis of each
    field has unit stride); one build per distinct key. () where the backend says nothing."""
    ref = kind_stages(backend, "computation").layout_key
    if ref is None:
        return ()
    return load(ref)(fields, defn)
