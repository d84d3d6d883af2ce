"""Run ONE gtscript source text on GT4Py's "numpy" backend and on ours.

A definition is written as module source whose imports say ``__GT__`` where the package
goes (``from __GT__ import gtscript``); the text is executed once with ``stencilkit`` and once
with ``gt4py.cartesian`` in its place, from a file registered in ``linecache`` so that both
frontends can read the source back.
"""

from __future__ import annotations

import itertools
import linecache
import textwrap

import numpy as np

_counter = itertools.count()


def load(source: str, package: str) -> dict[str, object]:
    """Execute ``source`` with ``__GT__`` replaced by ``package``; the module's namespace.
    The source's own ``from __future__`` imports decide how its annotations are evaluated
    (not this module's)."""
    text = textwrap.dedent(source).replace("__GT__", package)
    filename = f"<gtscript-case-{package.split('.')[0]}-{next(_counter)}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    ns: dict[str, object] = {"__name__": filename}
    exec(compile(text, filename, "exec", dont_inherit=True), ns)
    return ns


def stencils(source: str, backend: str, name: str = "definition", **options):
    """(GT4Py's stencil, ours) for the definition ``name`` in ``source``."""
    from gt4py.cartesian import gtscript as gt

    from stencilkit import gtscript

    ref = gt.stencil(backend="numpy", definition=load(source, "gt4py.cartesian")[name],
                     **options)
    ours = gtscript.stencil(backend=backend, definition=load(source, "stencilkit")[name],
                            **options)
    return ref, ours


def compare(source: str, backend: str, args: dict[str, object], *, origin, domain,
            name: str = "definition", rtol: float = 1e-12, atol: float = 1e-14,
            **options) -> dict[str, np.ndarray]:
    """Run both on copies of ``args`` and compare every array; returns our results."""
    ref, ours = stencils(source, backend, name, **options)
    ref_args = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    our_args = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    ref(**ref_args, origin=origin, domain=domain)
    ours(**our_args, origin=origin, domain=domain)
    for k, v in ref_args.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_allclose(our_args[k], v, rtol=rtol, atol=atol,
                                       err_msg=f"field '{k}' differs from GT4Py's")
    return our_args  # type: ignore[return-value]
