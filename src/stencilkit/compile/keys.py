"""The two cache keys of a build.

- The **front key** names the generated source: the definition (its IR, with the constants
  it captured, and the text it was parsed from), the options that change the code (layout,
  dtypes, border mode, fast_math) and the target (the backend and its stage declaration,
  the environment variables the stages read).
  The driver keeps rendered sources under it, so that rendering or building the same
  request again skips analysis, lowering and printing.
- The **back key** names the binary: the source, the identity of the toolchain that builds
  it (compiler, flags, versions) and whatever else is compiled into the binary (the entry
  wrapper's arguments). Every disk-cache entry of generated code is stored under one.

Both are digests of ``build/cache.py``'s ``key`` (which adds the stencilkit version, the
cache format and the Python ABI), so an entry of an older version simply misses.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..build import cache, machine, tuning
from ..build.cache import back_key  # noqa: F401 (the driver's back key; build/ keys with it too)

if TYPE_CHECKING:
    from .requests import Request


def front_key(request: Request) -> str:
    """What decides the generated source of ``request``: definition, options, target."""
    return cache.key("front", request.kind.value, target(request.backend),
                     request.definition(), repr(request.options()))


#: The environment variables lowerings and printers read (the rest of the configuration
#: that changes code is in the request: fast_math, race). tests/test_driver.py checks that
#: no other STENCILKIT_ variable is read where code is generated.
GENERATION_ENVIRONMENT = ("STENCILKIT_STREAM_MIN_BYTES",)


def target(backend: object) -> str:
    """The backend and its stage declaration, the environment the stages read, and for the
    C backend the machine its constants are derived from and the knobs of the variant being
    built that change its source (``build.machine``, ``build.tuning``)."""
    env = tuple(os.environ.get(name) for name in GENERATION_ENVIRONMENT)
    name = getattr(backend, "name", backend)
    tuned = (machine.current().key, tuning.current_variant().source_key) if name == "c" else ()
    return repr((name, getattr(backend, "pieces", None), env, *tuned))


