"""The launch description as the one contract between the compile driver and the launchers.

- the driver attaches a description to every artifact built from kernel IR (point kernels on
  "numpy" too), with the kind's race mode and a point kernel's call order;
- the description of lap3d (point), hdiff (computation) and an INC ParLoop lists the
  parameters, roles and access modes that their launchers (and the C entry's arguments)
  then use;
- launchers bind by the description: given one in another order they bind by its keys and
  order, or refuse one they cannot honour; a stage that changes the described parameters
  is refused by the driver.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import registry
from stencilkit.compile import driver
from stencilkit.compile.requests import PointRequest
from stencilkit.ir import abi
from stencilkit.ir import kernel as k
from stencilkit.ir.abi import Access, Kind, RaceMode, Role
from stencilkit.lower.point import CVAL, FILL_BORDER, OUT
from stencilkit.runtime.computation import CompiledComputationCall, ComputationBinding
from stencilkit.runtime.launch import PointCall, point_positions
from stencilkit_apps.definitions import hdiff

from .kernels import lap3d

F64 = np.dtype(np.float64)


def _point_artifact(func, args, backend="c", **options):
    st = sk.stencil(func, backend=backend, **options)
    st.generate(*args, backend=backend)
    typed, layout, out_dtype, types = st._last_build
    request = PointRequest(registry.REGISTRY[backend], typed, layout, st._parse()[1],
                                  out_dtype, types, st.mode)
    return st, driver.run(request)


def _built_call(st):
    (call,) = st._specs.values()
    return call


# ---------------------------------------------------------------- one description per kind


@pytest.mark.parametrize("backend", ["c", "numpy"])
def test_lap3d_description_is_what_its_launcher_binds(backend):
    a = np.random.default_rng(0).random((6, 7, 8))
    st, built = _point_artifact(lap3d, (a,), backend)
    launch = built.launch
    assert launch.kind is Kind.POINT and launch.call_order == ("a",)
    assert launch.device is abi.Device.CPU and launch.race is RaceMode.NONE
    roles = [(p.key, p.role, p.access) for p in launch.arguments]
    assert roles == [("a", Role.PRIMARY_INPUT, Access.READ), ("out", Role.OUTPUT, Access.WRITE),
                     (k.BorderFill(), Role.BORDER_FILL, None), (k.FillValue(), Role.CVAL, None)]
    assert launch.entry_keys == ("a", "out", k.BorderFill(), k.FillValue())
    assert abi.POINT_TAIL_KEYS == (OUT, FILL_BORDER, CVAL)  # the lowering's keys
    assert launch.written == frozenset({"out"})
    st(a)
    call = _built_call(st)
    assert call.launch == launch  # the driver's, as built for the call
    assert (call.array_positions, call.relative_positions) == ((0,), (0,))


def weighted(a, b, c, w, unused):
    return a[0, 1] + b[-1, 0] * c + w[1]


def test_the_positions_a_point_launcher_uses_come_from_the_description():
    a, b, w = np.ones((5, 6)), np.ones((5, 6)), np.arange(3.0)
    st, built = _point_artifact(weighted, (a, b, 2.0, w, np.ones(2)),
                                standard_indexing=("w",))
    launch = built.launch
    # every argument of the call, used or not, is in its call order; the kernel's
    # parameters (and so the description's) are those it reads
    assert launch.call_order == ("a", "b", "c", "w", "unused")
    assert {p.key: p.role for p in launch.arguments if isinstance(p.key, str)} == {
        "a": Role.PRIMARY_INPUT, "b": Role.RELATIVE_INPUT, "c": Role.SCALAR,
        "w": Role.STANDARD_INPUT, "out": Role.OUTPUT}
    assert point_positions(launch) == ((0, 1, 3), (0, 1))
    # a secondary array smaller than the first: named by its position in the call
    with pytest.raises(sk.ArgumentError, match="argument 2"):
        st(a, np.ones((4, 6)), 2.0, w, np.ones(2))


def test_hdiff_description_is_what_its_launcher_and_entry_take():
    comp = sk.stencil(hdiff, backend="c")
    built = driver.run(comp._request(registry.REGISTRY["c"], None))
    launch = built.launch
    assert launch.kind is Kind.COMPUTATION
    arrays = {p.key: (p.role, p.access) for p in launch.arguments if p.pointer}
    assert arrays["in_field"] == (Role.FIELD, Access.READ)
    assert arrays["coeff"] == (Role.FIELD, Access.READ)
    assert arrays["out_field"] == (Role.FIELD, Access.RW)
    assert launch.written == {n for n, (role, _) in arrays.items() if role is Role.TEMPORARY} | {
        "out_field"}
    assert [p.axis for p in launch.with_role(Role.DOMAIN_EXTENT)] == ["I", "J", "K"]
    # the C entry takes exactly the described arguments, the written ones writable
    wrapper, _, _ = built.work.facts["entry"]
    assert tuple(a.name for a in wrapper) == launch.entry_keys
    assert {a.name for a in wrapper if a.writable} == launch.written
    # the launcher binds the same arguments, in that order
    call = built.entry
    assert isinstance(call, CompiledComputationCall) and call.launch is launch
    binding = call.binding
    assert binding.order is None  # the lowering's order is the grouped one
    assert binding.arrays == tuple(p.key for p in launch.arguments if p.pointer)
    assert [(f, "IJK"[a]) for f, a in binding.origins] == [
        (p.field, p.axis) for p in launch.with_role(Role.ORIGIN)]
    # and it computes hdiff
    rng = np.random.default_rng(1)
    inp, coeff = rng.random((12, 12, 4)), rng.random((12, 12, 4))
    out, ref = np.zeros_like(inp), np.zeros_like(inp)
    comp(inp, out, coeff, origin=(2, 2, 0), domain=(8, 8, 4))
    sk.stencil(hdiff, backend="numpy")(inp, ref, coeff, origin=(2, 2, 0), domain=(8, 8, 4))
    np.testing.assert_allclose(out, ref)


def scaled(u: sk.Field[float], out: sk.Field[float], a: float, unused: float):
    with sk.computation(sk.PARALLEL), sk.interval(...):
        out = u * a  # noqa: F841


@pytest.mark.parametrize("backend", ["c", "numba"])
def test_a_scalar_the_computation_never_reads_is_neither_described_nor_passed(backend):
    if backend == "numba":
        pytest.importorskip("numba")
    comp = sk.stencil(scaled, backend=backend)
    launch = driver.run(comp._request(registry.REGISTRY[backend], None)).launch
    assert [p.key for p in launch.with_role(Role.SCALAR)] == ["a"]
    u, out = np.random.default_rng(3).random((4, 5, 3)), np.zeros((4, 5, 3))
    comp(u, out, 2.5, 7.0)
    np.testing.assert_allclose(out, 2.5 * u)


@sk.kernel
def spread(v, acc):
    for i in range(3):
        acc[i, 0] += v[0]


@pytest.mark.parametrize("race", ["color", "atomic"])
def test_parloop_inc_description_lists_what_its_launcher_uses(race):
    cells, nodes = sk.Set(40), sk.Set(15)
    m = sk.Map(cells, nodes, 3, np.random.default_rng(2).integers(0, 15, (40, 3)))
    v, acc = sk.Dat(cells, data=np.arange(40.0)), sk.Dat(nodes)
    loop = sk.ParLoop(spread, cells, v(sk.READ), acc(sk.INC, m), backend="c", race=race)
    launch = driver.run(loop._request(registry.REGISTRY["c"])).launch
    assert launch.kind is Kind.PARLOOP and launch.race is RaceMode(race)
    data = {p.loop_argument: p.access for p in launch.with_role(Role.LOOP_DATA)}
    assert data == {0: Access.READ, 1: Access.INC}
    assert [p.loop_argument for p in launch.with_role(Role.MAP)] == [1]
    assert launch.with_role(Role.BLOCK_LIST) and launch.with_role(Role.BLOCK_COUNT)
    call = loop.bind()  # what the launcher runs with: the same modes, the same race
    assert tuple(a.access for a in call.arguments) == (data[0], data[1])
    assert call.race is launch.race


def test_a_point_kernel_on_numpy_has_a_description_and_a_numpy_computation_none():
    _, built = _point_artifact(lap3d, (np.ones((4, 4, 4)),), "numpy")
    assert built.launch is not None and built.launch.kind is Kind.POINT
    comp = sk.stencil(hdiff, backend="numpy")
    assert driver.render(comp._request(registry.REGISTRY["numpy"], None)).launch is None


def test_the_abi_dump_prints_the_description():
    captured = io.StringIO()
    with sk.configure(dump="abi"), contextlib.redirect_stderr(captured):
        _point_artifact(lap3d, (np.ones((4, 4, 4)),), "c")
    text = captured.getvalue()
    assert "abi: lap3d" in text and "point sk_lap3d_point [cpu, race none]" in text
    assert "a_: primary input, READ" in text and "out: output, WRITE" in text


# ---------------------------------------------------------------- the launchers read it


class _Recorder:
    def __init__(self) -> None:
        self.args: tuple = ()

    def __call__(self, *args: object) -> int:
        self.args = args
        return 0


@dataclasses.dataclass
class _Geometry:
    origins: dict
    domain: tuple


def _hdiff_launch() -> tuple[abi.LaunchDescription, object]:
    comp = sk.stencil(hdiff, backend="c")
    request = comp._request(registry.REGISTRY["c"], None)
    return driver.run(request).launch, request.defn


def test_a_computation_launcher_binds_in_the_descriptions_order():
    launch, defn = _hdiff_launch()
    reordered = dataclasses.replace(launch, parameters=tuple(reversed(launch.parameters)))
    entry = _Recorder()
    call = CompiledComputationCall(entry, defn, reordered)
    assert call.binding.order is not None
    fields = {n: np.full((6, 6, 3), i, float) for i, n in enumerate(("in_field", "out_field",
                                                                     "coeff"))}
    origins = {"in_field": (1, 2, 0), "out_field": (3, 4, 0), "coeff": (5, 6, 0)}
    call(fields, {}, _Geometry(origins, (7, 8, 9)))
    expected = []
    for p in reordered.arguments:
        if p.pointer:
            expected.append(fields[p.key])
        elif p.role is Role.ORIGIN:
            expected.append(origins[p.field]["IJK".index(p.axis)])
        elif p.role is Role.DOMAIN_EXTENT:
            expected.append((7, 8, 9)["IJK".index(p.axis)])
    assert len(entry.args) == len(expected) == len(reordered.arguments)
    for got, want in zip(entry.args, expected):
        assert got is want if isinstance(want, np.ndarray) else got == want


def test_a_computation_launcher_refuses_an_argument_it_cannot_bind():
    launch, defn = _hdiff_launch()
    odd = abi.Parameter("blocks", Role.BLOCK_LIST, np.dtype(np.int64), "blocks", True,
                        Access.READ, 2)
    with pytest.raises(ValueError, match="lists a block list argument"):
        ComputationBinding.of(dataclasses.replace(
            launch, parameters=(*launch.parameters, odd)))


def test_a_point_launcher_reads_its_positions_from_the_call_order():
    a = np.ones((5, 6))
    _, built = _point_artifact(weighted, (a, a, 2.0, np.arange(3.0), a),
                               standard_indexing=("w",))
    launch = built.launch
    swapped = dataclasses.replace(launch, call_order=("unused", "w", "c", "b", "a"))
    assert point_positions(swapped) == ((1, 3, 4), (3, 4))
    call = PointCall(_Recorder(), F64, 0.0, False, "weighted", None, launch=swapped, source="")
    assert call.relative_positions == (3, 4)


def test_a_point_launcher_refuses_a_description_with_the_output_first():
    _, built = _point_artifact(lap3d, (np.ones((4, 4, 4)),), "c")
    launch = built.launch
    out_first = dataclasses.replace(launch, parameters=tuple(
        sorted(launch.parameters, key=lambda p: p.role is not Role.OUTPUT)))
    with pytest.raises(ValueError, match="is not a point kernel's entry point"):
        PointCall(_Recorder(), F64, 0.0, False, "lap3d", None, launch=out_first, source="")
    with pytest.raises(ValueError, match="is not a point kernel's entry point"):
        point_positions(dataclasses.replace(launch, kind=Kind.COMPUTATION))


def test_the_driver_refuses_a_stage_that_changes_the_described_parameters(monkeypatch):
    from stencilkit.lower import simplify as simplify_module

    real = simplify_module.simplify

    def reversing(kf):
        kf = real(kf)
        return dataclasses.replace(kf, params=tuple(reversed(kf.params)))

    monkeypatch.setattr(simplify_module, "simplify", reversing)
    driver.forget_rendered()
    st = sk.stencil(lap3d, backend="c")
    with pytest.raises(RuntimeError, match="stage 'simplify' .* changed the entry point's "
                                           "parameters"):
        st.generate(np.ones((4, 4, 4)), backend="c")
    driver.forget_rendered()
