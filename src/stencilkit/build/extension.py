"""Build a generated CPython extension (once per cache key) and return its entry point."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..config import current, fast_math
from ..errors import BackendError
from . import cache
from .toolchain import Toolchain, missing_function_error, toolchain
from .tuning import current_variant

#: What ``fast_math=True`` adds to the C flags (after -ffp-contract=off, so these win):
#: contraction into FMA and reassociation (reductions vectorize). Not -ffast-math, whose
#: -ffinite-math-only lets GCC fold isnan() and NaN comparisons away.
FAST_MATH_FLAGS = ("-ffp-contract=fast", "-fassociative-math", "-fno-signed-zeros")


def current_toolchain() -> Toolchain:
    """The configured toolchain, with ``FAST_MATH_FLAGS`` where the stencil being built
    asked for them (the flags are part of its identity, hence of every cache key)."""
    cfg = current()
    fast = FAST_MATH_FLAGS if fast_math() else ()
    return toolchain(cfg.cc, cfg.cflags + fast + current_variant().flags, cfg.openmp)


def module_name(key: str) -> str:
    return f"sk_{key[:24]}"


def build_extension(key: str, source: str, stencil: str) -> Callable[..., int]:
    """The ``call`` function of the module ``module_name(key)`` compiled from ``source``:
    from memory, else from the disk cache, else compiled now (under the cache's lock)."""
    fn = cache.memory_get(key)
    if fn is None:
        module = module_name(key)
        filename = cache.extension_filename(module)
        tc = current_toolchain()

        def build(tmp):
            c_file = tmp / f"{module}.c"
            c_file.write_text(source)
            tc.compile(c_file, tmp / filename, python=True, stencil=stencil)

        try:
            mod = cache.get_or_build(key, filename, build,
                                     lambda path: cache.load_extension(path, module))
        except ImportError as exc:  # what was just built does not load: nothing was stored
            raise _load_error(exc, stencil) from None
        fn = mod.call
        cache.memory_put(key, fn)
    return fn  # type: ignore[return-value]


def _load_error(exc: ImportError, stencil: str) -> BackendError:
    missing = re.search(r"undefined symbol: (\w+)", str(exc))
    if missing:
        return missing_function_error(missing.group(1), "nothing defines", stencil)
    return BackendError(f"the compiled library does not load: {exc}", stencil=stencil,
                        hint="report this with the generated source; meanwhile use "
                             "backend='numpy'")


def exec_generated(key: str, source: str, function: str, label: str) -> Callable[..., object]:
    """The function ``function`` defined by generated Python ``source`` (memory-cached under
    its back key ``key``)."""
    fn = cache.memory_get(key)
    if fn is None:
        namespace: dict[str, object] = {}
        exec(compile(source, f"<stencilkit {label}>", "exec"), namespace)
        fn = namespace[function]
        cache.memory_put(key, fn)
    return fn  # type: ignore[return-value]
