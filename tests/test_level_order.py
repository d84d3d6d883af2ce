"""The order of a PARALLEL stage's loops on the C backend: K levels outermost where the
fields keep K outermost in memory (storages, Fortran order), shared out with the next loop
by ``collapse(2)``; I outermost where K is contiguous (C order). The results are the same
bit for bit whatever the order."""

from __future__ import annotations

import re

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import registry
from stencilkit.compile import driver
from stencilkit.gtscript import PARALLEL, Field, computation, interval
from stencilkit_apps import definitions

pytestmark = pytest.mark.skipif(sk.registry.REGISTRY["c"].probe() is not None,
                                reason="no C compiler")


def _source(definition, fields: dict[str, np.ndarray]) -> str:
    st = sk.stencil(definition, backend="c")
    return driver.render(st._request(registry.resolve("c"), fields)).source


def _first_parallel_nest(source: str) -> tuple[str, list[str]]:
    """The first ``omp parallel for`` pragma and the counters of the two loops after it."""
    pragma = re.search(r"#pragma omp parallel for[^\n]*", source)
    assert pragma is not None
    loops = re.findall(r"for \(int64_t (\w+) = ", source[pragma.end():])[:2]
    return pragma.group(0), loops


def _hdiff_fields(make) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {n: make(rng.random((20, 18, 12))) for n in ("in_field", "out_field", "coeff")}


@pytest.mark.parametrize("make, second", [
    (lambda x: sk.as_storage(x, backend="c"), "i"),  # J contiguous
    (np.asfortranarray, "j"),  # I contiguous
])
def test_levels_go_outermost_on_storages_and_fortran_order(make, second):
    pragma, loops = _first_parallel_nest(_source(definitions.hdiff, _hdiff_fields(make)))
    assert " collapse(2)" in pragma
    assert loops == ["k", second]


def test_c_order_keeps_i_outermost_without_collapse():
    pragma, loops = _first_parallel_nest(
        _source(definitions.hdiff, _hdiff_fields(np.ascontiguousarray)))
    assert "collapse" not in pragma
    assert loops[0] == "i"


def levels(inp: Field[float], out: Field[float]):
    # one level alone, then the rest: a collapsed (K, I) space still gives every thread rows
    with computation(PARALLEL), interval(0, 1):
        out = 2.0 * inp + inp[1, 0, 0] - inp[0, -1, 0]
    with computation(PARALLEL), interval(1, None):
        out = inp[-1, 0, 0] * 0.5 - inp[0, 1, 0] + inp[0, 0, -1]  # noqa: F841


# big enough for a team of threads (at least 2^14 points)
@pytest.mark.parametrize("definition, nfields, origin, shape", [
    (definitions.hdiff, 3, (2, 2, 0), (44, 41, 13)),
    (levels, 2, (1, 1, 1), (38, 35, 17)),
])
def test_every_layout_gives_the_same_bits(definition, nfields, origin, shape):
    rng = np.random.default_rng(4)
    base = [rng.random(shape) for _ in range(nfields)]
    domain = tuple(n - 2 * o for n, o in zip(shape, origin))
    domain = domain[:2] + (shape[2] - origin[2],)
    results = []
    for make in (np.ascontiguousarray, np.asfortranarray,
                 lambda x: sk.as_storage(x, backend="c")):
        fields = [make(x.copy()) for x in base]
        sk.stencil(definition, backend="c")(*fields, origin=origin, domain=domain)
        results.append([np.asarray(f) for f in fields])
    want = [x.copy() for x in base]
    sk.stencil(definition, backend="numpy")(*want, origin=origin, domain=domain)
    for got in results:
        for g, r in zip(got, results[0]):
            assert np.array_equal(g, r)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-13)
