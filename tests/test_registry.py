"""The backend registry: declarations, capabilities instead of names, the test fixture.

The strongest check that nothing outside the registry compares backend names: a built
backend registered again under a new name runs every kind, with the same results as NumPy
slicing, ``np.add.at`` and ``np.cumsum``, and with its own capabilities' behaviour.
"""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import FORWARD, PARALLEL, Field, computation, interval, registry
from stencilkit.registry import base

from .conftest import _backend_params


def _built():
    return [b for b in registry.REGISTRY.values() if b.built]


@pytest.mark.parametrize("name", list(registry.REGISTRY))
def test_declaration_is_complete(name):
    b = registry.REGISTRY[name]
    assert b.name == name and b.description and b.needs
    reason = b.probe()
    assert reason is None or (isinstance(reason, str) and reason)
    assert b.built == (b.pieces is not None), "capabilities and pieces come together"
    if not b.built:
        assert "not built yet" in reason
        with pytest.raises(sk.BackendError, match="not available"):
            registry.resolve(name)
        return
    caps = b.capabilities
    assert caps.kinds and caps.kinds <= set(base.KINDS)
    assert caps.device in ("cpu", "gpu")
    assert caps.dtypes and caps.dtypes <= sk.dtypes.SUPPORTED
    for kind in base.KINDS:  # a declared kind has its stages and its launcher
        declared = kind in caps.kinds
        assert (getattr(b.pieces.launcher, kind) is not None) == declared
        assert (getattr(b.pieces.stages, kind) is not None) == declared
    assert not any(hasattr(b, step) for step in ("build_point", "build_computation",
                                                 "build_parloop")), "the driver builds"


@pytest.mark.parametrize("name", [b.name for b in _built()])
def test_every_declared_piece_imports(name):
    pieces = registry.REGISTRY[name].pieces
    for ref in pieces.refs():
        assert callable(base.load(ref)), ref
    # the backend's own probe (tests/cuda_emulator.py replaces the registry's "cuda" entry
    # with one whose probe lets the emulator run without CuPy)
    reason = importlib.import_module(f"stencilkit.registry.{name}").BACKEND.probe()
    try:
        __import__(pieces.array_module)
    except ImportError:
        # a built backend whose array module is not installed (cuda without CuPy, as in
        # CI) must say so in its probe, with the install hint
        assert reason is not None and pieces.array_module in reason, reason
        assert "pip install" in reason, reason
    else:
        assert reason is None or pieces.array_module not in reason, reason


def test_gt4py_names_are_unambiguous():
    seen: dict[str, str] = {}
    for b in registry.REGISTRY.values():
        for alias in b.gt4py_names:
            assert seen.setdefault(alias, b.name) == b.name, alias
    assert registry.gt4py_names() == sk.gtscript.BACKEND_NAMES
    assert set(registry.gt4py_names().values()) == set(registry.REGISTRY)


def test_the_fixture_is_every_built_backend(monkeypatch):
    monkeypatch.delenv("STENCILKIT_TEST_BACKENDS", raising=False)  # (a narrowed run's filter)
    ids = [p.id for p in _backend_params()]
    assert set(ids) <= set(registry.implemented())
    assert set(registry.implemented()) == {b.name for b in _built()}
    assert "numpy" in ids


# ----------------------------------------------------------------- a backend by another name

def blur(a):
    return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])


def lap_and_sum(a: Field[float], lap: Field[float], acc: Field[float]):
    with computation(PARALLEL), interval(...):
        t = a[1, 0, 0] + a[-1, 0, 0] - 2.0 * a
        lap = t  # noqa: F841 (a gtscript field write)
    with computation(FORWARD):
        with interval(0, 1):
            acc = a
        with interval(1, None):
            acc = acc[0, 0, -1] + a


@sk.kernel
def spread(v, acc):
    for i in range(3):
        acc[i, 0] += v[0]


def _same_source(name: str, twin: str) -> None:
    """The twin generates what the original does (not what another backend would)."""
    img = np.ones((5, 5))
    assert sk.stencil(blur, backend=twin).generate(img) == \
        sk.stencil(blur, backend=name).generate(img)
    kinds = registry.REGISTRY[name].capabilities.kinds
    if "computation" in kinds:
        comp = sk.stencil(lap_and_sum)
        assert comp.generate(backend=twin) == comp.generate(backend=name)
    if "parloop" not in kinds:
        return
    cells, nodes = sk.Set(2), sk.Set(3)
    loop = sk.ParLoop(spread, cells, sk.Dat(cells)(sk.READ),
                      sk.Dat(nodes)(sk.INC, sk.Map(cells, nodes, 3, [[0, 1, 2], [2, 1, 0]])))
    assert loop.generate(backend=twin) == loop.generate(backend=name)


def _run_every_kind(name: str) -> None:
    rng = np.random.default_rng(3)
    img = rng.random((9, 11))
    out = sk.stencil(blur, backend=name)(img)
    ref = np.zeros_like(img)
    ref[1:-1, 1:-1] = 0.25 * (img[:-2, 1:-1] + img[2:, 1:-1] + img[1:-1, :-2] + img[1:-1, 2:])
    np.testing.assert_allclose(out, ref, rtol=1e-15)
    kinds = registry.REGISTRY[name].capabilities.kinds
    if "computation" not in kinds:  # a backend building point kernels only
        return

    a = rng.random((8, 5, 6))
    lap, acc = np.zeros_like(a), np.zeros_like(a)
    info: dict = {}
    sk.stencil(lap_and_sum, backend=name)(a, lap, acc, exec_info=info)
    assert info["backend"] == name
    np.testing.assert_allclose(lap[1:-1], a[2:] + a[:-2] - 2.0 * a[1:-1], rtol=1e-14)
    np.testing.assert_allclose(acc[1:-1], np.cumsum(a[1:-1], axis=2), rtol=1e-14)

    tri = rng.integers(0, 7, (40, 3))
    cells, nodes = sk.Set(40), sk.Set(7)
    v = sk.Dat(cells, data=rng.random(40))
    total = sk.Dat(nodes)
    sk.par_loop(spread, cells, v(sk.READ), total(sk.INC, sk.Map(cells, nodes, 3, tri)),
                backend=name)
    expect = np.zeros(7)
    np.add.at(expect, tri.reshape(-1), np.repeat(v.data, 3))
    np.testing.assert_allclose(total.data, expect, rtol=1e-13)


@pytest.mark.parametrize("name", [b.name for b in _built()])
def test_a_backend_registered_under_a_new_name_runs_every_kind(name, monkeypatch):
    original = registry.REGISTRY[name]
    if not original.available:
        pytest.skip(f"backend {name}: {original.probe()}")
    twin = dataclasses.replace(original, name=f"{name}_twin", gt4py_names=())
    monkeypatch.setitem(registry.REGISTRY, twin.name, twin)
    assert twin.name in registry.implemented()
    monkeypatch.delenv("STENCILKIT_TEST_BACKENDS", raising=False)  # (a narrowed run's filter)
    assert twin.name in [p.id for p in _backend_params()]
    _same_source(name, twin.name)
    _run_every_kind(twin.name)
    # its capabilities, not its name, pick the storage layout
    s = sk.empty((4, 5, 6), backend=twin.name)
    assert (s.strides[1] == 8 and s.strides[2] == 4 * 5 * 8) == \
        twin.capabilities.k_planes_storage


def _restricted(monkeypatch, **changes) -> str:
    numpy = registry.REGISTRY["numpy"]
    caps = dataclasses.replace(numpy.capabilities, **changes)
    twin = dataclasses.replace(numpy, name="restricted", capabilities=caps, gt4py_names=())
    monkeypatch.setitem(registry.REGISTRY, twin.name, twin)
    return twin.name


def test_a_kind_the_backend_does_not_build_is_refused(monkeypatch):
    name = _restricted(monkeypatch, kinds=frozenset({"point"}))
    cells, nodes = sk.Set(3), sk.Set(2)
    c2n = sk.Map(cells, nodes, 3, np.zeros((3, 3), int))
    with pytest.raises(sk.BackendError, match="does not build ParLoops"):
        sk.par_loop(spread, cells, sk.Dat(cells)(sk.READ), sk.Dat(nodes)(sk.INC, c2n),
                    backend=name)
    with pytest.raises(sk.BackendError, match="does not build computations"):
        sk.stencil(lap_and_sum, backend=name).generate()
    sk.stencil(blur, backend=name)(np.ones((4, 4)))  # what it builds still runs


def test_a_dtype_the_backend_does_not_compute_on_is_refused(monkeypatch):
    name = _restricted(monkeypatch, dtypes=frozenset({np.dtype(np.float64)}))
    with pytest.raises(sk.BackendError, match="does not compute on complex128"):
        sk.stencil(blur, backend=name)(np.ones((4, 4), complex))
    sk.stencil(blur, backend=name)(np.ones((4, 4)))


def test_c_string_kernels_need_the_capability():
    cells = sk.Set(4)
    k = sk.Kernel("void add_one(double *x) { x[0] += 1.0; }", "add_one")
    with pytest.raises(sk.StencilError, match="C-string kernels need a backend that compiles C"):
        sk.par_loop(k, cells, sk.Dat(cells)(sk.RW), backend="numpy")
