"""The adapter protocol (``stencilkit.adapters``) and the one geometry analysis
(``stencilkit.analysis.geometry``).

Adapters: a toy adapter for an array type of this file, registered here, runs point-kernel
and computation calls and pickles stencils; NumPy calls never look an adapter up; the
built-in adapters register lazily, so ``import stencilkit`` imports no optional library.
Geometry: one function for the Python call, the table form jitted code runs, and the MPI
split, which give the same error text for the same bad input.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import adapters
from stencilkit.analysis import geometry

from . import computations as C


class Boxed:
    """An array type stencilkit knows nothing of (no ``__array__``): only an adapter runs it."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data


class BoxedAdapter(adapters.Adapter):
    name = "boxed"
    priority = 50

    def __init__(self) -> None:
        self.calls: list[str] = []

    def claims_type(self, cls: type) -> bool:
        return cls is Boxed

    def point_call(self, st, args, out):
        self.calls.append("point")
        plain = tuple(a.data if type(a) is Boxed else a for a in args)
        if out is None:
            return Boxed(st(*plain))
        st(*plain, out=out.data)
        return out

    def computation_call(self, st, args, kwargs, origin, domain, validate_args, exec_info):
        self.calls.append("computation")
        st(*(a.data if type(a) is Boxed else a for a in args),
           **{k: v.data if type(v) is Boxed else v for k, v in kwargs.items()},
           origin=origin, domain=domain, validate_args=validate_args, exec_info=exec_info)

    def reduce(self, obj):
        if getattr(obj, "__name__", "") == "boxed_only":
            self.calls.append("reduce")
            return (_rebuilt_marker, (obj.__name__,))
        return None


def _rebuilt_marker(name: str) -> str:
    return f"rebuilt {name}"


@pytest.fixture
def boxed():
    adapter = adapters.register(BoxedAdapter())
    try:
        yield adapter
    finally:
        adapters.unregister(adapter)


@sk.stencil(backend="numpy")
def avg(a):
    return 0.5 * (a[-1, 0] + a[1, 0])


@sk.stencil(backend="numpy")
def boxed_only(a):
    return a[0, 0]


@sk.stencil(backend="numpy")
def copy(a: sk.Field[float], b: sk.Field[float]):
    with sk.computation(sk.PARALLEL), sk.interval(...):
        b = a[1, 0, 0]  # noqa: F841 (a field written)


def test_an_unclaimed_type_is_refused():
    with pytest.raises(sk.ArgumentError, match="is a Boxed, not an array"):
        avg(Boxed(np.zeros((4, 4))))


def test_a_registered_adapter_runs_point_calls(boxed):
    a = np.arange(20.0).reshape(5, 4)
    got = avg(Boxed(a))
    assert type(got) is Boxed
    np.testing.assert_array_equal(got.data, avg(a))
    out = Boxed(np.full_like(a, -1.0))
    assert avg(Boxed(a), out=out) is out
    np.testing.assert_array_equal(out.data, avg(a, out=np.full_like(a, -1.0)))
    assert boxed.calls == ["point", "point"]
    avg(a)  # NumPy arrays: never the adapter's
    assert boxed.calls == ["point", "point"]


def test_a_registered_adapter_runs_computation_calls(boxed):
    a = np.random.default_rng(0).random((6, 5, 3))
    b, expected = np.zeros_like(a), np.zeros_like(a)
    copy(Boxed(a), b=Boxed(b))
    copy(a, expected)
    np.testing.assert_array_equal(b, expected)
    assert boxed.calls == ["computation"]


def test_a_registered_adapter_pickles(boxed):
    assert pickle.loads(pickle.dumps(boxed_only)) == "rebuilt boxed_only"
    assert boxed.calls == ["reduce"]
    # stencils it does not take pickle as before, by definition
    again = pickle.loads(pickle.dumps(avg))
    a = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(again(a), avg(a))


def test_the_lowest_priority_claiming_adapter_runs_the_call(boxed):
    class Other:
        pass

    class OtherAdapter(adapters.Adapter):
        name, priority = "other", 5

        def claims_type(self, cls):
            return cls is Other

    other = adapters.register(OtherAdapter())
    try:
        assert adapters.for_call((Boxed(None),), (Other(),)) is other
        assert adapters.for_call((Boxed(None), 1.0)) is boxed
        assert adapters.for_call((np.zeros(2), 1, None)) is None
    finally:
        adapters.unregister(other)
    assert adapters.for_call((Other(),)) is None


def test_numpy_arguments_are_never_looked_up(boxed):
    adapters._by_type.clear()
    adapters.for_call((np.zeros(3), 1, 2.0, True, 1j, None))
    assert adapters._by_type == {}


def test_register_lazy_imports_the_adapter_module_on_first_use(tmp_path, monkeypatch):
    (tmp_path / "lazyarrays.py").write_text("class Arr:\n    pass\n")
    (tmp_path / "lazyadapter.py").write_text(
        "from stencilkit import adapters\n"
        "class A(adapters.Adapter):\n"
        "    name = 'lazy'\n"
        "    def claims_type(self, cls):\n"
        "        return cls.__module__ == 'lazyarrays'\n"
        "ADAPTER = adapters.register(A())\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import lazyarrays

    adapters.register_lazy("lazyarrays", "lazyadapter")
    try:
        assert "lazyadapter" not in sys.modules
        found = adapters.for_value(lazyarrays.Arr())
        assert found is sys.modules["lazyadapter"].ADAPTER
    finally:
        adapters._LAZY.pop("lazyarrays")
        adapters.unregister(sys.modules["lazyadapter"].ADAPTER)
        sys.modules.pop("lazyadapter")


def test_import_stencilkit_imports_no_optional_library():
    optional = ["dask", "xarray", "mpi4py", "cupy", "pyopencl", "numba", "distributed",
                "torch", "jax", "matplotlib", "tqdm"]
    code = ("import sys, stencilkit\n"
            f"print(sorted(m for m in {optional!r} if m in sys.modules))\n"
            "print(sorted(m for m in sys.modules if m.startswith('stencilkit.adapters.')\n"
            "             and m != 'stencilkit.adapters.numba_hook'))")
    # (numba_hook is armed at import: a meta-path hook that waits for numba to be imported
    # and imports nothing itself, checked by the first line)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert res.stdout.split("\n")[:2] == ["[]", "[]"], res.stdout


def test_the_core_imports_no_adapter():
    """The user objects reach adapters through the protocol module only."""
    import ast
    from pathlib import Path

    root = Path(sk.__file__).parent
    for name in ("api/stencil.py", "api/multistage.py", "api/parloop.py"):
        tree = ast.parse((root / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 2:
                module = node.module or ""
                assert module.partition(".")[0] not in ("integrations", "distributed"), \
                    (name, module)
                assert module in ("", "adapters") or not module.startswith("adapters"), \
                    (name, module)
                # device arrays of every kind (CuPy, pyopencl) are adapters' too
                assert module != "runtime.opencl", (name, module)


# ---------------------------------------------------------------- geometry

HDIFF = sk.stencil(C.hdiff, backend="numpy")
REGIONS = sk.stencil(C.regions, backend="numpy")
LAP3D = sk.stencil(C.lap3d, backend="numpy")

BAD = [  # (stencil, shapes by field) that the default origin and domain refuse
    (HDIFF, {"in_field": (3, 3, 5), "out_field": (3, 3, 5), "coeff": (3, 3, 5)}),  # I halo
    (REGIONS, {"a": (3, 8, 2), "b": (3, 8, 2)}),  # below the regions' minimum domain
    (LAP3D, {"u": (6, 6, 6), "out": (6, 6, 6)}),  # K halo
]


def _python_error(st, shapes) -> sk.ArgumentError:
    with pytest.raises(sk.ArgumentError) as info:
        st(**{n: np.zeros(s) for n, s in shapes.items()})
    return info.value


@pytest.mark.parametrize("case", range(len(BAD)))
def test_the_table_form_raises_what_resolve_raises(case):
    st, shapes = BAD[case]
    plan = st._plan(sk.registry.REGISTRY["numpy"])
    rules = st.geometry_rules(plan)
    with pytest.raises(sk.ArgumentError) as info:
        geometry.resolve(rules, shapes, None, None)
    t = geometry.tables(rules)
    table = np.array([[s[f.axes.index(a)] if a in f.axes else 0 for a in "IJK"]
                      for f, s in zip(rules.params, shapes.values())], np.int64)
    status, values, *_ = geometry.default_geometry(
        table, t["HAS"], t["OWN"], t["HI"], t["IJK"], t["ORDER"], t["KF"], t["MIN"], t["KT"],
        t["TEXT"])
    assert status != geometry.TableStatus.OK
    err = geometry.table_error(rules, status, [int(v) for v in values])
    assert (err.bare_message, err.hint) == (info.value.bare_message, info.value.hint)
    py = _python_error(st, shapes)
    assert (py.bare_message, py.hint) == (err.bare_message, err.hint)


def test_resolve_defaults_and_given_origin():
    st = HDIFF
    rules = st.geometry_rules(st._plan(sk.registry.REGISTRY["numpy"]))
    shapes = {"in_field": (9, 10, 4), "out_field": (9, 10, 4), "coeff": (9, 10, 4)}
    geo = geometry.resolve(rules, shapes, None, None)
    assert geo.origins["in_field"] == (2, 2, 0) and geo.domain == (5, 6, 4)
    geo = geometry.resolve(rules, shapes, {"_all_": (3, 3, 0)}, (2, 2, 4))
    assert geo.origins["out_field"] == (3, 3, 0) and geo.domain == (2, 2, 4)
    with pytest.raises(sk.ArgumentError, match="origin names 'in_feld', which is not a "
                                               "field; did you mean 'in_field'"):
        geometry.resolve(rules, shapes, {"in_feld": (0, 0, 0)}, None)
    with pytest.raises(sk.ArgumentError, match="domain .* has a negative size"):
        geometry.resolve(rules, shapes, None, (1, -1, 1))


def test_python_numba_and_mpi_calls_give_the_same_error():
    numba = pytest.importorskip("numba")
    mpi4py = pytest.importorskip("mpi4py")
    from mpi4py import MPI

    st, shapes = BAD[0]
    py = _python_error(st, shapes)
    assert "lacks the halo" in py.bare_message

    @numba.njit
    def jitted(a, b, c):
        HDIFF(a, b, c)

    with pytest.raises(sk.ArgumentError) as jit:
        jitted(*(np.zeros(s) for s in shapes.values()))
    assert (jit.value.bare_message, jit.value.hint) == (py.bare_message, py.hint)

    comm = MPI.COMM_WORLD
    dec = sk.Decomposition(comm, (3, 3, 5), halo=2, dims=(comm.size, 1, 1))
    with pytest.raises(sk.ArgumentError) as mpi:
        st(dec.zeros(), dec.zeros(), dec.zeros())
    assert (mpi.value.bare_message, mpi.value.hint) == (py.bare_message, py.hint)
    assert mpi4py  # imported for MPI
