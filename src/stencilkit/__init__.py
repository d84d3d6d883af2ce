"""stencilkit: write stencil and mesh kernels once in Python, run them near the hardware's limit.

The names of the public contract (API.md), re-exported; no logic lives here.
"""

__version__ = "0.1.0"

from . import backends  # noqa: E402
from .build import cache  # noqa: E402
from .config import configure  # noqa: E402
from .errors import (  # noqa: E402
    AccessRuleError,
    ArgumentError,
    BackendError,
    StencilError,
    StencilSyntaxError,
    StencilTypeError,
)
from .stencil import PointStencil, stencil  # noqa: E402

__all__ = [
    "AccessRuleError", "ArgumentError", "BackendError", "PointStencil", "StencilError",
    "StencilSyntaxError", "StencilTypeError", "backends", "cache", "configure", "stencil",
]
