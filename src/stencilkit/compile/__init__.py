"""The compile driver (``driver.py``), its requests, hooks and cache keys.

``run(request)`` builds a point kernel, computation or ParLoop on its backend through the
named stages of ``driver.PIPELINES``; ``render(request)`` stops after printing the source.
"""

from __future__ import annotations

from .driver import PIPELINES, Artifact, Stage, Work, render, run, stages
from .requests import ComputationRequest, Kind, ParLoopRequest, PointRequest

__all__ = ["PIPELINES", "Artifact", "ComputationRequest", "Kind", "ParLoopRequest",
           "PointRequest", "Stage", "Work", "render", "run", "stages"]
