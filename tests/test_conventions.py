"""Everyday conventions (issue 29): objects that say what they are, a ``stencilkit`` logger
with build and cache events, GT4Py's ``verbose=True`` honoured."""

from __future__ import annotations

import logging

import numpy as np

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, gtscript, interval


def smooth(a):
    return 0.5 * (a[-1] + a[1])


def shift(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = a[1, 0, 0]  # noqa: F841


def test_point_stencil_repr():
    st = sk.stencil("wrap", backend="numpy")(smooth)
    assert repr(st) == f'<PointStencil: {__name__}.smooth> [backend="numpy", mode=\'wrap\']'
    st(np.arange(6.0))
    text = repr(st)
    assert "neighborhood=((-1, 1),)" in text and "specializations=1" in text
    page = st._repr_html_()
    assert "<table>" in page and "wrap" in page and "numpy" in page


def test_computation_and_parloop_repr():
    comp = gtscript.stencil(backend="numpy", definition=shift)
    assert repr(comp).startswith(f'<ComputationStencil: {__name__}.shift> [backend="numpy"')
    assert "fields='a, b'" in repr(comp) and "extents" in comp._repr_html_()
    cells = sk.Set(4, name="cells")
    d = sk.Dat(cells)
    loop = sk.ParLoop(sk.Kernel("void one(double *x) { x[0] = 1.0; }", "one"), cells,
                      d(sk.WRITE), backend="numpy" if sk.backends()["c"].reason else "c")
    assert repr(loop).startswith("<ParLoop: one> [backend=") and "Set(4)" in repr(loop)


def test_build_events_are_logged(caplog):
    backend = "numpy" if sk.backends()["c"].reason else "c"  # "c": compiled, through the cache
    st = sk.stencil(backend=backend)(smooth)
    with caplog.at_level(logging.DEBUG, logger="stencilkit"):
        st(np.arange(5, dtype=np.int16))  # a signature no other test builds: a cache look-up
    messages = [r.getMessage() for r in caplog.records if r.name == "stencilkit"]
    assert any(f"point kernel 'smooth': built for backend '{backend}'" in m for m in messages)
    assert backend == "numpy" or any(m.startswith("cache ") for m in messages)


def test_verbose_prints_build_events(capsys):
    comp = gtscript.stencil(backend="numpy", definition=shift, verbose=True)
    comp(np.ones((4, 3, 2)), np.zeros((4, 3, 2)))
    assert "stencilkit: computation 'shift': built for backend 'numpy'" in capsys.readouterr().err
    quiet = gtscript.stencil(backend="numpy", definition=shift)
    quiet(np.ones((4, 3, 2)), np.zeros((4, 3, 2)))
    assert "stencilkit:" not in capsys.readouterr().err


def test_close_matches_for_options_and_backends():
    import pytest

    with pytest.raises(sk.StencilError, match="did you mean 'neighborhood'"):
        sk.stencil(smooth, neighbourhood=((-1, 1),))
    with pytest.raises(sk.StencilError, match="did you mean 'externals'"):
        gtscript.stencil(backend="numpy", definition=shift, external={})
    with pytest.raises(sk.BackendError, match="did you mean 'numpy'"):
        gtscript.stencil(backend="numpi", definition=shift)
    with pytest.raises(sk.BackendError, match="did you mean 'numpy'"):
        sk.stencil(smooth, backend="NumPy")(np.arange(4.0))


def _gtscript_without_computation(a: Field[float], b: Field[float]):
    b = a[1, 0, 0]  # noqa: F841  (the statements are not in a computation block)


def _comprehension(a):
    return sum([a[i] for i in range(2)])


def _misspelt_local(a):
    weight = 0.5  # noqa: F841
    return wieght * a[0]  # noqa: F821


def _misspelt_field(inp: Field[float], out: Field[float]):
    with computation(PARALLEL), interval(...):
        out = inpt[1, 0, 0]  # noqa: F821, F841


def test_messages_use_plain_words():
    import pytest

    with pytest.raises(sk.StencilError, match="no `return` and no `with computation"):
        sk.stencil(_gtscript_without_computation, backend="numpy")(np.zeros((3, 3, 3)),
                                                                   np.zeros((3, 3, 3)))
    with pytest.raises(sk.StencilSyntaxError) as info:
        sk.stencil(_comprehension, backend="numpy")(np.arange(5.0))
    assert "list comprehensions are not supported" in str(info.value)
    assert "ListComp" not in str(info.value)
    with pytest.raises(sk.StencilError, match="did you mean 'weight'"):
        sk.stencil(_misspelt_local, backend="numpy")(np.arange(5.0))
    with pytest.raises(sk.StencilError, match="did you mean 'inp'"):
        sk.stencil(backend="numpy")(_misspelt_field)


def test_close_matches_for_fields():
    import pytest

    comp = gtscript.stencil(backend="numpy", definition=shift)
    a, b = np.ones((4, 3, 2)), np.zeros((4, 3, 2))
    with pytest.raises(sk.ArgumentError, match="did you mean 'b'"):
        comp(a=a, bb=b)
    with pytest.raises(sk.ArgumentError, match="did you mean 'a'"):
        comp(a, b, origin={"aa": (1, 0, 0)})
