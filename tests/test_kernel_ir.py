"""The kernel IR under all three kinds, the platform interface and the printer.

- the ParLoop's loop over the set is kernel IR: its gathers and scatters through maps,
  atomics, reductions, the kernel call and the error status are nodes, not C text;
- the C platform leaves no abstract node, and the printer refuses abstract IR;
- a small platform written against the base class alone (serial C: no OpenMP at all) is
  enough to run every kind, with the results of NumPy references.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import stencilkit as sk
from stencilkit import registry
from stencilkit.codegen import c as cgen
from stencilkit.codegen.cfamily import CFamilyPrinter
from stencilkit.codegen.kernel_text import kernel_ir_text
from stencilkit.ir import kernel as k
from stencilkit.ir.core import walk
from stencilkit.lower import parloop as lpl
from stencilkit.targets.base import Platform, status_constant
from stencilkit.targets.c import C_PLATFORM, libm

from .computations import planes, ref_planes

F64 = np.dtype(np.float64)


def _specs() -> tuple[lpl.ArgSpec, ...]:
    """A WRITE Dat, an indirectly READ (3, 2) block, an INC Global, a MAX Global, an INC
    through a map, a whole-matrix INC."""
    return (lpl.ArgSpec("direct", "WRITE", F64, 1, (1,)),
            lpl.ArgSpec("indirect", "READ", F64, 2, (3, 2), arity=3),
            lpl.ArgSpec("global", "INC", F64, 1, (1,)),
            lpl.ArgSpec("global", "MAX", F64, 2, (2,)),
            lpl.ArgSpec("indirect", "INC", F64, 1, (3, 1), arity=3),
            lpl.ArgSpec("mat", "INC", F64, 1, (3, 3), arity=9))


def _loop(atomic: bool, status: bool = True) -> k.KernelFunction:
    return lpl.LoopLowering("sk_parloop_t", "t", "sk_t_kernel", _specs(), atomic,
                            status).lower()


def _nodes(kf: k.KernelFunction, kind: type) -> list:
    return [n for s in kf.body for n in walk(s) if isinstance(n, kind)]


def test_parloop_loop_is_kernel_ir():
    kf = _loop(atomic=True)
    parallel = [n for n in _nodes(kf, k.Loop) if n.parallel is not None]
    assert len(parallel) == 1, "one parallel loop: over the blocks"
    par = parallel[0].parallel
    assert [(r.op, r.buffer.name, r.size) for r in par.reductions] == [("+", "r2", 1),
                                                                       ("max", "r3", 2)]
    assert par.only_if is not None  # a single block runs without starting threads
    # scatters of the INC through a map and of the matrix block are atomic updates
    atomics = _nodes(kf, k.AtomicUpdate)
    assert sorted(a.buffer.name for a in atomics) == ["a4", "a5"]
    assert all(a.op == "+" for a in atomics)
    # gathers read the data at the element's map entries: a Load whose index loads the map
    gathers = [n for n in _nodes(kf, k.Load) if n.buffer.name == "a1"
               and any(isinstance(x, k.Load) and x.buffer.name == "m1"
                       for i in n.indices for x in walk(i))]
    assert gathers
    (call,) = _nodes(kf, k.Call)
    assert call.function == "sk_t_kernel" and len(call.args) == 6
    assert [s.code for s in _nodes(kf, k.SetError)] == [k.STATUS_INDEX]
    assert kf.uses_error_flag and kf.status is not None
    # parameters: the blocks, then per argument its data and map, by argument order
    assert [p.name for p in kf.params] == ["nblocks", "blocks", "a0", "a1", "m1", "a2", "a3",
                                           "a4", "m4", "a5", "m5"]
    assert [p.name for p in kf.params if p.has(k.ReadOnly)] == ["blocks", "a1", "m1", "m4",
                                                                "m5"]


def test_colouring_needs_no_atomics_and_no_status_without_index_checks():
    kf = _loop(atomic=False, status=False)
    assert not _nodes(kf, k.AtomicUpdate) and not _nodes(kf, k.SetError)
    assert len(_nodes(kf, k.Evaluate)) == 1  # the kernel is called for its effect


def test_text_form_spells_out_abstract_nodes():
    text = kernel_ir_text(_loop(atomic=True))
    assert "parallel schedule(static) reduction(+: r2[:1]) reduction(max: r3[:2]) if(" in text
    assert "atomic a4[" in text and "set_error 2;" in text


def test_c_platform_leaves_no_abstract_node():
    lowered = C_PLATFORM.lower(_loop(atomic=True))
    for s in lowered.body:
        for n in walk(s):
            assert not isinstance(n, k.ABSTRACT), n
            assert not (isinstance(n, k.Loop) and (n.parallel or n.vectorize)), n
    pragmas = ["".join(p if isinstance(p, str) else "<e>" for p in n.parts)
               for n in _nodes(lowered, k.Pragma)]
    assert "omp parallel for schedule(static) reduction(+: <e>[:1]) reduction(max: <e>[:2]) " \
           "num_threads(sk_team_size())" in pragmas
    # the only_if condition is a branch around the pragma'd loop and a serial copy of it,
    # not OpenMP's if clause (which still pays for a team of one)
    branch = _nodes(lowered, k.Branch)[0]
    assert isinstance(branch.then[0], k.Pragma) and isinstance(branch.then[1], k.Loop)
    assert branch.orelse == (branch.then[1],)
    assert not any("if(" in p for p in pragmas)
    # (in each copy: the serial one keeps its atomics, harmless outside a parallel region)
    assert pragmas.count("omp atomic") == 4 and pragmas.count("omp atomic write") == 2
    assert isinstance(lowered.body[0], k.Declare) and isinstance(lowered.body[-1], k.Return)
    assert lowered.params == _loop(atomic=True).params


def test_printer_refuses_abstract_ir():
    with pytest.raises(TypeError, match="platform"):
        cgen.kernel_source(_loop(atomic=True))


@pytest.mark.parametrize("func, dtype, name", [
    ("sqrt", np.float64, "sqrt"), ("sqrt", np.float32, "sqrtf"),
    ("sqrt", np.complex128, "csqrt"), ("exp", np.complex64, "cexpf"),
    ("gamma", np.float64, "tgamma")])
def test_math_function_per_dtype_is_the_platforms(func, dtype, name):
    t = np.dtype(dtype)
    x = k.Sym(k.KernelContext().symbol("x", t), dtype=t)
    call = C_PLATFORM.math_call(k.MathCall(func, (x,), dtype=t))
    assert isinstance(call, k.CCall) and call.name == name == libm(func, t)


def test_math_helpers_and_tests():
    ctx = k.KernelContext()
    i = k.Sym(ctx.symbol("i", np.int64), dtype=np.dtype(np.int64))
    f = k.Sym(ctx.symbol("f", F64), dtype=F64)
    assert C_PLATFORM.math_call(k.MathCall("max", (i, i), dtype=i.dtype)) == \
        k.Op("max", (i, i), dtype=i.dtype)
    assert C_PLATFORM.math_call(k.MathCall("abs", (f,), dtype=F64)).name == "fabs"
    isnan_int = C_PLATFORM.math_call(k.MathCall("isnan", (i,), dtype=np.dtype(bool)))
    assert isinstance(isnan_int, k.Constant) and not isnan_int.value


# ---------------------------------------------------------------- a platform of its own


class SerialC(Platform):
    """C without OpenMP, written against the hooks alone: loops run serially (so a
    reduction accumulates in place, and an atomic update is a plain one)."""

    name = "serial-c"
    used: set[str] = set()  # the hooks called, over every instance (the test's record)

    def parallel_loop(self, loop, kf):
        self.used.add("parallel_loop")
        return (dataclasses.replace(loop, parallel=None, vectorize=False),)

    def parallel_region(self, region):
        self.used.add("parallel_region")
        return (k.Block(region.body),)

    def atomic_update(self, s):
        self.used.add("atomic_update")
        t = s.buffer.element_type
        value = s.value if s.op is None else k.Op(
            s.op, (k.Load(s.buffer, s.indices, dtype=t), s.value), dtype=t)
        return (k.Store(s.buffer, s.indices, value),)

    def set_error(self, code, kf, s):
        self.used.add("set_error")
        return (k.SetSym(kf.status, status_constant(code)),)

    def error_prologue(self, kf):
        return (k.Declare(kf.status, status_constant(0)),)

    def error_epilogue(self, kf):
        return (k.Return(k.Sym(kf.status, dtype=kf.status.dtype)),)

    def math_call(self, call):
        self.used.add("math_call")
        return C_PLATFORM.math_call(call)  # the same language: the same libm


@pytest.fixture
def serial(monkeypatch) -> str:
    """A backend "serial_c": the C backend with ``SerialC`` as its platform."""
    c = registry.REGISTRY["c"]
    if not c.available:
        pytest.skip(f"backend c: {c.probe()}")
    pieces = dataclasses.replace(c.pieces, platform=f"{__name__}:SerialC")
    twin = dataclasses.replace(c, name="serial_c", gt4py_names=(), pieces=pieces)
    monkeypatch.setitem(registry.REGISTRY, twin.name, twin)
    SerialC.used.clear()
    return twin.name


def _no_openmp(code: str) -> None:
    """No pragma in the generated functions (the prelude's index helpers keep theirs)."""
    first = re.search(r"^(static inline )?int sk_", code, re.MULTILINE)
    assert first is not None and "#pragma" not in code[first.start():]


def test_own_platform_runs_a_point_kernel(serial):
    @sk.stencil(backend=serial, neighborhood=((-1, 1), (-1, 1)))
    def smooth(a, n):
        s = 0.0
        for i in range(-1, 2, n):
            s += np.sqrt(a[i, 0]) + abs(a[0, i])
        return s

    a = np.random.default_rng(1).random((300, 200))  # past the parallel work threshold
    got = smooth(a, 1)
    expect = np.zeros_like(a)
    inner = sum(np.sqrt(a[1 + i:299 + i, 1:-1]) + np.abs(a[1:-1, 1 + i:199 + i])
                for i in (-1, 0, 1))
    expect[1:-1, 1:-1] = inner
    np.testing.assert_allclose(got, expect, rtol=1e-14)
    with pytest.raises(sk.StencilError):  # range() step 0: the error channel, serially
        smooth(a, 0)
    _no_openmp(smooth.generate(a, 1))
    assert {"parallel_loop", "set_error", "math_call"} <= SerialC.used


def test_own_platform_runs_a_plane_by_plane_computation(serial):
    st = sk.stencil(planes, backend=serial)
    assert "executed by planes" in st.ir
    rng = np.random.default_rng(2)
    a, q = rng.random((5, 4, 6)), np.zeros((5, 4, 6))
    expect = ref_planes(a, q)
    st(a, q, origin=(1, 0, 0), domain=(3, 4, 6))
    np.testing.assert_allclose(q, expect, rtol=1e-12)
    _no_openmp(st.generate(backend=serial))
    assert {"parallel_loop", "parallel_region"} <= SerialC.used


@pytest.mark.parametrize("race", ["atomic", "color"])
def test_own_platform_runs_a_parloop(serial, race):
    rng = np.random.default_rng(3)
    n_nodes, tri = 30, rng.integers(0, 30, size=(80, 3))
    cells, nodes = sk.Set(len(tri)), sk.Set(n_nodes)
    c2n = sk.Map(cells, nodes, 3, tri)
    x = sk.Dat(nodes, data=rng.random(n_nodes))
    acc, total, top = sk.Dat(nodes), sk.Global(1, 0.0), sk.Global(1, -1.0)

    @sk.kernel
    def spread(acc, x, total, top):
        s = x[0, 0] + x[1, 0] + x[2, 0]
        for j in range(3):
            acc[j, 0] += s
        total[0] += s
        top[0] = max(top[0], s)

    sk.par_loop(spread, cells, acc(sk.INC, c2n), x(sk.READ, c2n), total(sk.INC),
                top(sk.MAX), backend=serial, race=race)
    s = x.data[tri].sum(axis=1)
    expect = np.zeros(n_nodes)
    np.add.at(expect, tri, s[:, None].repeat(3, axis=1))
    np.testing.assert_allclose(acc.data, expect, rtol=1e-12)
    np.testing.assert_allclose(total.data, [s.sum()], rtol=1e-12)
    np.testing.assert_allclose(top.data, [s.max()])
    loop = sk.ParLoop(spread, cells, acc(sk.INC, c2n), x(sk.READ, c2n), total(sk.INC),
                      top(sk.MAX), backend=serial, race=race)
    _no_openmp(loop.generate())
    if race == "atomic":
        assert "atomic_update" in SerialC.used


def test_base_platform_names_what_is_missing():
    with pytest.raises(NotImplementedError):
        Platform().lower(_loop(atomic=True))


# ---------------------------------------------------------------- random argument structures

_MODES = {"direct": ("READ", "WRITE", "RW", "INC", "MIN", "MAX"),
          "indirect": ("READ", "WRITE", "RW", "INC", "MIN", "MAX"),
          "entry": ("READ", "WRITE", "RW", "INC", "MIN", "MAX"),
          "global": ("READ", "INC", "MIN", "MAX"), "mat": ("INC", "WRITE")}


@st.composite
def _arg_specs(draw) -> tuple[lpl.ArgSpec, ...]:
    out = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(sorted(_MODES)))
        mode = draw(st.sampled_from(_MODES[kind]))
        dtype = np.dtype(draw(st.sampled_from([np.float64, np.float32, np.int32])))
        dim, arity = draw(st.integers(1, 3)), draw(st.integers(1, 4))
        index = np.dtype(draw(st.sampled_from([np.int32, np.int64])))
        if kind == "mat":
            cols = draw(st.integers(1, 3))
            out.append(lpl.ArgSpec(kind, mode, dtype, 1, (arity, cols), arity * cols))
        elif kind == "indirect":
            out.append(lpl.ArgSpec(kind, mode, dtype, dim, (arity, dim), arity, 0, index))
        elif kind == "entry":
            entry = draw(st.integers(0, arity - 1))
            out.append(lpl.ArgSpec(kind, mode, dtype, dim, (dim,), arity, entry, index))
        else:
            out.append(lpl.ArgSpec(kind, mode, dtype, dim, (dim,)))
    return tuple(out)


@settings(max_examples=40, deadline=None)
@given(specs=_arg_specs(), atomic=st.booleans(), status=st.booleans())
def test_loop_lowering_follows_the_arguments(specs, atomic, status):
    kf = lpl.LoopLowering("sk_parloop_r", "r", "sk_r_kernel", specs, atomic, status).lower()
    scattered = [i for i, s in enumerate(specs) if s.writes_shared
                 and s.mode.value in ("INC", "WRITE", "RW")]
    expect = sorted(f"a{i}" for i in scattered) if atomic else []
    assert sorted(a.buffer.name for a in _nodes(kf, k.AtomicUpdate)) == expect
    (loop,) = [n for n in _nodes(kf, k.Loop) if n.parallel is not None]
    assert [r.buffer.name for r in loop.parallel.reductions] == [
        f"r{i}" for i, s in enumerate(specs) if s.kind == "global" and s.mode.value != "READ"]
    (call,) = _nodes(kf, k.Call)
    assert len(call.args) == len(specs)
    names = ["nblocks", "blocks"]
    for i, s in enumerate(specs):
        names += [f"a{i}"] + ([f"m{i}"] if s.kind in ("indirect", "entry", "mat") else [])
    assert [p.name for p in kf.params] == names
    assert len(_nodes(kf, k.SetError)) == int(status)
    lowered = C_PLATFORM.lower(kf)
    assert not [n for s in lowered.body for n in walk(s) if isinstance(n, k.ABSTRACT)]
    cgen.kernel_source(lowered)  # prints: every node is concrete


@pytest.mark.parametrize("atomic", [True, False])
def test_printed_loop_compiles(tmp_path, atomic):
    cc = shutil.which(os.environ.get("CC", "gcc")) or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    source, _ = cgen.kernel_source(C_PLATFORM.lower(_loop(atomic=atomic)))
    stub = "int sk_t_kernel(double *, const double *, double *, double *, double *, double *);\n"
    path = tmp_path / "loop.c"
    path.write_text(stub + source)
    # the prelude's helpers are static inline, unused in this loop: clang's -Wall says so
    done = subprocess.run([cc, "-std=gnu11", "-fopenmp", "-fsyntax-only", "-Wall", "-Werror",
                           "-Wno-unused-function", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_c_platform_keeps_the_if_clause_for_large_bodies(monkeypatch):
    """A body above SERIAL_COPY_NODES is compiled once, under OpenMP's if clause."""
    from stencilkit.targets import c as c_platform

    monkeypatch.setattr(c_platform, "SERIAL_COPY_NODES", 1)
    lowered = C_PLATFORM.lower(_loop(atomic=True))
    pragmas = ["".join(p if isinstance(p, str) else "<e>" for p in n.parts)
               for n in _nodes(lowered, k.Pragma)]
    assert "omp parallel for schedule(static) reduction(+: <e>[:1]) reduction(max: <e>[:2]) " \
           "if(<e>) num_threads(sk_team_size())" in pragmas
    assert not any(b.orelse and isinstance(b.orelse[0], k.Loop)  # no serial copy
                   for b in _nodes(lowered, k.Branch))


def test_a_declaration_ends_with_its_block():
    """A counter declared inside one branch is out of scope in the other: a loop there over
    the same counter declares its own (C would refuse ``for (i = ...)`` with no ``i`` in
    scope), while a counter declared in the enclosing block is reused."""
    ctx = k.KernelContext()
    buf = ctx.buffer("out", F64, 1, unit_stride_last=True, restrict=True, read_only=False,
                     user=False)
    i, n = ctx.symbol("i", k.INDEX), ctx.symbol("n", k.INDEX)

    def index(v: int) -> k.Constant:
        return k.Constant(np.int64(v), dtype=k.INDEX)

    store = k.Store(buf, (k.Sym(i, dtype=k.INDEX),), k.Constant(np.float64(1), dtype=F64))
    loop = k.Loop(i, index(0), k.Sym(n, dtype=k.INDEX), index(1), (store,))
    branch = k.Branch(k.Op(">", (k.Sym(n, dtype=k.INDEX), index(3)), dtype=np.dtype(bool)),
                      (k.Declare(i, index(2)), store), (loop,))
    text = "\n".join(CFamilyPrinter("sk_error").stmts((branch, loop), ""))
    assert text.count("for (int64_t i = 0;") == 2, text
    text = "\n".join(CFamilyPrinter("sk_error").stmts((k.Declare(i, index(0)), branch, loop),
                                                       ""))
    assert "for (i = 0;" in text and "int64_t i = 0;" in text, text
