"""The launch ABI (``ir/abi.py``): descriptions derived from the lowered kernels, argument
keys that never meet a user's name, and a runtime that sees no user object.

- a point kernel, a computation and a ParLoop (direct, indirect, INC by atomics and by
  colouring, a Mat) list their parameters with the right roles and access modes;
- no generated source of any backend spells a compiler-added argument with "@";
- no module under ``runtime/`` imports a user-facing module (imports inside functions
  count);
- user arguments named like the generated identifiers (``cval``, ``fill_border``, ``ni``,
  ``nblocks``, ``blocks``) still work.
"""

from __future__ import annotations

import ast
import dataclasses
import pathlib
import re

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.analysis.typing import ArgType
from stencilkit.codegen import c as cgen
from stencilkit.compile.point import analyse
from stencilkit.ir import abi
from stencilkit.ir import kernel as k
from stencilkit.ir.abi import Access, ArgKind, Kind, RaceMode, Role
from stencilkit.lower import parloop as lpl
from stencilkit.lower.computation import ComputationLowering
from stencilkit.lower.point import Layout
from stencilkit.registry.shared_stages import lower
from stencilkit.runtime.parloop_blocks import block_layout

F64 = np.dtype(np.float64)
SRC = pathlib.Path(sk.__file__).parent
C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*\Z")


def _roles(desc: abi.LaunchDescription) -> dict[str, Role]:
    return {p.name: p.role for p in desc.parameters}


# ---------------------------------------------------------------- descriptions


def weighted(a, b, c, w):
    return a[0, 1] + b[-1, 0] * c + w[1]


def test_point_kernel_description():
    st = sk.stencil(weighted, standard_indexing=("w",), backend="numpy")
    kernel, src = st._parse()
    types = (ArgType(F64, 2), ArgType(F64, 2), ArgType(F64, 0), ArgType(F64, 1))
    typed = analyse(kernel, types, None)
    kf = lower(typed, Layout((True, True, False, True), True), src.line_text, "t.py",
                        F64, "constant")
    desc = abi.describe(kf, Kind.POINT)
    pointers = {p.key: (p.role, p.access) for p in desc.parameters if p.pointer}
    assert pointers == {"a": (Role.PRIMARY_INPUT, Access.READ),
                        "b": (Role.RELATIVE_INPUT, Access.READ),
                        "w": (Role.STANDARD_INPUT, Access.READ),
                        "out": (Role.OUTPUT, Access.WRITE)}
    assert desc.parameter("c").role is Role.SCALAR
    assert [p.role for p in desc.parameters if not isinstance(p.key, str)] == [
        Role.BORDER_FILL, Role.CVAL]
    assert desc.parameter(k.FillValue()).dtype == F64
    assert desc.parameter("a").ndim == 2 and desc.parameter("a").unit_stride_axis == 1
    assert desc.parameter("w").ndim == 1
    shapes = [(p.key, p.dim) for p in desc.with_role(Role.SHAPE)]
    assert ("a", 0) in shapes and ("a", 1) in shapes
    assert all(C_IDENTIFIER.match(p.name) for p in desc.parameters)
    # w[1] is checked at run time (w's length is not known): its status is the only one
    assert [s.code for s in desc.statuses] == [k.STATUS_INDEX]
    assert abi.describe(kf) == desc  # the kind, from the parameters: no block list, no origin
    header = cgen.header_comment(kf)
    assert "  2: an absolute index was out of range" in header
    assert "cval: the value outside the array" in header and "@" not in header


def shifted(a, n):
    return a[0, n]


def test_a_run_time_offset_reports_its_status():
    st = sk.stencil(shifted, neighborhood=((0, 0), (-1, 1)), backend="numpy")
    kernel, src = st._parse()
    typed = analyse(kernel, (ArgType(F64, 2), ArgType(np.dtype(np.int64), 0)),
                             st.neighborhood)
    kf = lower(typed, Layout((True, False), True), src.line_text, "t.py", F64,
                        "constant")
    assert [s.code for s in abi.describe(kf).statuses] == [k.STATUS_OFFSET]


def diffuse(inp: sk.Field[float], out: sk.Field[float], alpha: float):
    with sk.computation(sk.FORWARD), sk.interval(...):
        tmp = inp[1, 0, 0] - inp[0, 0, 0]
        out = tmp[0, 0, 0] * alpha + tmp[-1, 0, 0]  # noqa: F841


def test_computation_description():
    st = sk.stencil(diffuse, backend="numpy")
    plan = st.plans[False]  # temporaries in memory
    layout = {f.name: len(f.axes) - 1 for f in plan.definition.fields}
    layout.update({t: 2 for t, _ in plan.definition.temporaries})
    lowering = ComputationLowering(plan.definition, plan.schedule, layout, st.source)
    desc = abi.describe(lowering.lower_all())
    assert desc.kind is Kind.COMPUTATION
    arrays = {p.key: p.role for p in desc.parameters if p.pointer}
    assert arrays["inp"] is Role.FIELD and arrays["out"] is Role.FIELD
    assert set(arrays.values()) <= {Role.FIELD, Role.TEMPORARY}
    if "tmp" in arrays:  # held in memory unless the lowering keeps it in registers
        assert arrays["tmp"] is Role.TEMPORARY
    origins = {(p.field, p.axis) for p in desc.with_role(Role.ORIGIN)}
    assert {("inp", a) for a in "IJK"} <= origins and {("out", a) for a in "IJK"} <= origins
    assert [p.axis for p in desc.with_role(Role.DOMAIN_EXTENT)] == ["I", "J", "K"]
    assert desc.parameter("alpha").role is Role.SCALAR
    # origins and extents come after the arrays, the user's scalars between them
    roles = [p.role for p in desc.parameters if p.role not in (Role.SHAPE, Role.STRIDE)]
    assert roles.index(Role.SCALAR) > max(i for i, r in enumerate(roles) if r is Role.ORIGIN)
    assert all(C_IDENTIFIER.match(p.name) for p in desc.parameters)


SPECS = (lpl.ArgSpec(ArgKind.DIRECT, Access.WRITE, F64, 1, (1,)),
         lpl.ArgSpec(ArgKind.INDIRECT, Access.READ, F64, 2, (3, 2), arity=3),
         lpl.ArgSpec(ArgKind.INDIRECT, Access.INC, F64, 1, (3, 1), arity=3),
         lpl.ArgSpec(ArgKind.ENTRY, Access.MAX, F64, 1, (1,), arity=3, entry=1),
         lpl.ArgSpec(ArgKind.GLOBAL, Access.INC, F64, 1, (1,)),
         lpl.ArgSpec(ArgKind.MAT, Access.INC, F64, 1, (3, 3), arity=9))


@pytest.mark.parametrize("atomic", [False, True])
def test_parloop_description(atomic):
    kf = lpl.LoopLowering("sk_parloop_t", "t", "sk_t_kernel", SPECS, atomic, True).lower()
    race = RaceMode.ATOMIC if atomic else RaceMode.COLOUR
    desc = abi.describe(kf, race=race, modes=[s.mode for s in SPECS])
    assert desc.race is race and desc.kind is Kind.PARLOOP
    assert [(p.name, p.role) for p in desc.parameters[:2]] == [
        ("nblocks", Role.BLOCK_COUNT), ("blocks", Role.BLOCK_LIST)]
    data = desc.with_role(Role.LOOP_DATA)
    assert [(p.loop_argument, p.access) for p in data] == [
        (i, s.mode) for i, s in enumerate(SPECS)]
    assert [p.loop_argument for p in desc.with_role(Role.MAP)] == [1, 2, 3, 5]
    assert all(p.access is Access.READ for p in desc.with_role(Role.MAP))
    assert [s.code for s in desc.statuses] == [k.STATUS_INDEX]
    # what the runtime needs to pick the scatter: atomics only when asked
    atomics = {n.buffer.name for s in kf.body for n in _walk(s) if isinstance(n, k.AtomicUpdate)}
    assert atomics == ({"a2", "a5"} if atomic else set())


def _walk(node):
    from stencilkit.ir.core import walk

    return walk(node)


def _mesh(n_cells=300, n_nodes=120, seed=0):
    rng = np.random.default_rng(seed)
    cells, nodes = sk.Set(n_cells), sk.Set(n_nodes)
    return cells, nodes, sk.Map(cells, nodes, 3, rng.integers(0, n_nodes, (n_cells, 3)))


@sk.kernel
def spread(v, acc):
    for i in range(3):
        acc[i, 0] += v[0]


@pytest.mark.parametrize("race", ["color", "atomic"])
def test_a_bound_parloop_hands_over_arrays_maps_and_its_race_mode(race):
    cells, nodes, m = _mesh()
    v, acc = sk.Dat(cells, data=np.arange(300.0)), sk.Dat(nodes)
    loop = sk.ParLoop(spread, cells, v(sk.READ), acc(sk.INC, m), backend="c", race=race)
    call = loop.bind()
    assert call.race is RaceMode(race) and call.set_size == 300 and call.name == "spread"
    direct, inc = call.arguments
    assert (direct.kind, direct.access, direct.map_values) == (ArgKind.DIRECT, Access.READ, None)
    assert (inc.kind, inc.access, inc.target_size) == (ArgKind.INDIRECT, Access.INC, 120)
    assert inc.map_values is m.values and inc.data is acc._data
    layout = block_layout(call, block=16)
    assert layout.set_size == 300 and layout.block == 16
    if race == "atomic":
        (everything,) = layout.colours
        assert everything.tolist() == [[s, min(s + 16, 300)] for s in range(0, 300, 16)]
    else:
        assert len(layout.colours) > 1
        for blocks in layout.colours:  # no two blocks of one colour share a node
            seen: set[int] = set()
            for s, t in blocks:
                here = set(m.values[s:t].ravel().tolist())
                assert not here & seen
                seen |= here
    loop.compute()
    expect = np.zeros(120)
    np.add.at(expect, m.values.ravel(), np.repeat(np.arange(300.0), 3))
    np.testing.assert_allclose(acc.data, expect)


def test_race_modes_and_devices_are_enums():
    cells, nodes, m = _mesh()
    v, acc = sk.Dat(cells), sk.Dat(nodes)
    assert sk.ParLoop(spread, cells, v(sk.READ), acc(sk.INC, m), race="atomic").race_mode() \
        is RaceMode.ATOMIC
    assert sk.ParLoop(spread, cells, v(sk.READ), acc(sk.INC, m), race="color").race_mode() \
        is RaceMode.COLOUR

    @sk.kernel
    def copy(v, w):
        w[0] = v[0]

    assert sk.ParLoop(copy, cells, v(sk.READ), sk.Dat(cells)(sk.WRITE)).race_mode() \
        is RaceMode.NONE
    assert sk.READ is Access.READ and repr(sk.INC) == "sk.INC"
    from stencilkit import registry

    assert registry.resolve("c").capabilities.device is abi.Device.CPU


# ---------------------------------------------------------------- generated sources


def _corpus(backend: str) -> list[str]:
    """The generated sources of a point kernel (constant and remapping borders), a
    computation and ParLoops (direct, indirect, INC, entry, Global, Mat) on ``backend``."""
    x = np.ones((12, 12))
    out = [sk.stencil(weighted, standard_indexing=("w",), cval=0.0, backend=backend)
           .generate(x, x, 2.0, np.ones(4)),
           sk.stencil("reflect", backend=backend)(lambda a: a[0, 1] - a[-1, 0]).generate(x),
           sk.stencil(diffuse, backend=backend).generate()]
    cells, nodes, m = _mesh(30, 12)
    v, acc, g = sk.Dat(cells), sk.Dat(nodes), sk.Global(1, 0.0)
    peak = sk.Dat(nodes)

    @sk.kernel
    def gather(v, acc, first, total):
        for i in range(3):
            acc[i, 0] += v[0]
        total[0] += first[0]

    out.append(sk.ParLoop(gather, cells, v(sk.WRITE), acc(sk.INC, m), peak(sk.READ, m[0]),
                          g(sk.INC), backend=backend).generate())
    if backend in ("c", "numpy", "numba"):
        mat = sk.Mat(sk.Sparsity(m, m))

        @sk.kernel
        def assemble(a):
            for i in range(3):
                for j in range(3):
                    a[i, j] += 1.0

        out.append(sk.ParLoop(assemble, cells, mat(sk.INC, (m, m)), backend=backend).generate())
    return out


def test_no_generated_source_spells_an_argument_with_an_at(backend):
    for source in _corpus(backend):
        # Python decorators (the "numba" backend's @_kernel, @_helper) are the only "@"
        lines = [line for line in source.splitlines()
                 if "@" in line and not re.match(r"\s*@\w+(\(.*\))?\s*$", line)]
        assert not lines, lines[:5]


# ---------------------------------------------------------------- the runtime's imports

USER_MODULES = ("stencilkit.api.parloop", "stencilkit.api.stencil", "stencilkit.api.multistage",
                "stencilkit.api.loop", "stencilkit.gtscript")


def _imports(path: pathlib.Path, root: pathlib.Path = SRC) -> set[str]:
    """Every module ``path`` (under the package directory ``root``) imports, at the top or
    inside a function, absolute."""
    package = "stencilkit." + ".".join(path.relative_to(root).parent.parts)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rstrip(".").split(".")
            if node.level:
                base = base[:len(base) - node.level + 1]
            else:
                base = []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)  # from . import loop
    return found


def test_the_runtime_imports_no_user_facing_module():
    files = sorted((SRC / "runtime").glob("*.py"))
    assert len(files) > 10
    offenders = {f.name: _user_imports(f) for f in files}
    assert {f: m for f, m in offenders.items() if m} == {}


def _user_imports(path: pathlib.Path) -> list[str]:
    return sorted(m for m in _imports(path)
                  if any(m == u or m.startswith(u + ".") for u in USER_MODULES))


def test_the_point_and_computation_launchers_see_no_user_facing_module():
    """Every backend's point and computation launchers (and the Numba module loader they
    call) live where the scan above looks, and import no user-facing module: they bind by
    the launch description."""
    from stencilkit import registry

    modules = {"stencilkit.build.numba_module"}
    for b in registry.REGISTRY.values():
        for kind in ("point", "computation"):
            ref = getattr(b.pieces.launcher, kind)
            module = ref.partition(":")[0]
            assert module.startswith("stencilkit.runtime."), (b.name, kind, ref)
            modules.add(module)
    assert len(modules) >= 5
    for module in sorted(modules):
        path = SRC / (module.removeprefix("stencilkit.").replace(".", "/") + ".py")
        assert _user_imports(path) == [], module


def test_the_import_scan_sees_imports_inside_functions(tmp_path):
    runtime = tmp_path / "stencilkit" / "runtime"
    runtime.mkdir(parents=True)
    probe = runtime / "probe.py"
    probe.write_text("def f():\n    from ..api.parloop import READ\n    from ..api import loop\n")
    assert {"stencilkit.api.parloop", "stencilkit.api.loop"} <= _imports(
        probe, tmp_path / "stencilkit")


# ---------------------------------------------------------------- user names


def named_like_generated(cval, fill_border, out_stride_0, nblocks):
    return cval[0, 1] + fill_border[0, 0] * nblocks - out_stride_0[-1, 0]


@pytest.mark.parametrize("mode", ["constant", "nearest"])
def test_point_arguments_named_like_generated_identifiers(backend, mode):
    rng = np.random.default_rng(1)
    a, b, c = (rng.random((9, 7)) for _ in range(3))
    st = sk.stencil(mode, cval=-1.0, backend=backend)(named_like_generated)
    got = np.asarray(st(a, b, c, 3.0))
    ref = sk.stencil(mode, cval=-1.0, backend="numpy")(named_like_generated)(a, b, c, 3.0)
    np.testing.assert_allclose(got, np.asarray(ref))
    np.testing.assert_allclose(np.asarray(ref)[1:, :-1],
                               a[1:, 1:] + b[1:, :-1] * 3.0 - c[:-1, :-1])


def shadowing(ni: sk.Field[float], blocks: sk.Field[float], cval: float):
    with sk.computation(sk.PARALLEL), sk.interval(...):
        blocks = ni[1, 0, 0] * cval  # noqa: F841


def test_computation_arguments_named_like_generated_identifiers(backend):
    rng = np.random.default_rng(2)
    ni = rng.random((6, 5, 4))
    blocks = np.zeros_like(ni)
    sk.stencil(shadowing, backend=backend)(ni, blocks, 2.0, origin=(0, 0, 0),
                                           domain=(5, 5, 4))
    np.testing.assert_allclose(np.asarray(blocks)[:5], 2.0 * ni[1:])


def test_parloop_arguments_named_like_generated_identifiers(backend):
    cells, nodes, m = _mesh(40, 15)

    @sk.kernel
    def loop_names(nblocks, blocks, a0, m0):
        for i in range(3):
            blocks[i, 0] += nblocks[0] + a0[0] * m0[0]

    rng = np.random.default_rng(3)
    nb, a0, m0 = (sk.Dat(cells, data=rng.random(40)) for _ in range(3))
    acc = sk.Dat(nodes)
    sk.par_loop(loop_names, cells, nb(sk.READ), acc(sk.INC, m), a0(sk.READ), m0(sk.READ),
                backend=backend)
    expect = np.zeros(15)
    np.add.at(expect, m.values.ravel(), np.repeat(nb.data + a0.data * m0.data, 3))
    np.testing.assert_allclose(acc.data, expect)


def test_generated_argument_keys_are_never_names():
    """The guarantee behind the last three tests: a compiler-added argument's key is a
    value of its own type, so no user argument (keyed by its name) can be taken for it."""
    kf = lpl.LoopLowering("sk_parloop_t", "t", "sk_t_kernel", SPECS, False, True).lower()
    desc = abi.describe(kf, Kind.PARLOOP)
    generated = [p for p in desc.parameters if p.role in (
        Role.BLOCK_COUNT, Role.ORIGIN, Role.DOMAIN_EXTENT, Role.BORDER_FILL, Role.CVAL)]
    assert generated and all(not isinstance(p.key, str) for p in generated)
    assert dataclasses.is_dataclass(generated[0].key)


def test_a_loop_binds_new_map_values_and_race_modes(backend):
    """A ParLoop keeps its bound call between runs: new values of a map, or another race
    mode, give a new one (the old one would scatter through the old targets)."""
    cells, nodes, m = _mesh(50, 20)
    v, acc = sk.Dat(cells, data=np.arange(50.0)), sk.Dat(nodes)
    loop = sk.ParLoop(spread, cells, v(sk.READ), acc(sk.INC, m), backend=backend)
    loop.compute()
    first = loop.bind()
    assert loop.bind() is first
    targets = (m.values + 1) % 20
    m.values = targets
    acc.data = np.zeros(20)
    loop.compute()
    assert loop.bind() is not first and loop.bind().arguments[1].map_values is m.values
    expect = np.zeros(20)
    np.add.at(expect, targets.ravel(), np.repeat(np.arange(50.0), 3))
    np.testing.assert_allclose(acc.data, expect)
    with sk.configure(race="atomic"):
        assert loop.bind().race is RaceMode.ATOMIC
    assert loop.bind().race is RaceMode.COLOUR


def test_a_description_names_a_missing_argument():
    kf = lpl.LoopLowering("sk_parloop_t", "t", "sk_t_kernel", SPECS, False, True).lower()
    with pytest.raises(KeyError, match="sk_parloop_t has no argument 'cval'"):
        abi.describe(kf).parameter("cval")
