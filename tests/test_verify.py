"""The kernel-IR verifier (ir/verify.py): one hand-built malformed kernel per rule is
rejected with that rule, and every kernel the golden corpus lowers to is accepted after
each stage on every backend with kernel IR (the suite also verifies every kernel it
builds: conftest.py sets STENCILKIT_VERIFY=1)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from stencilkit.compile import driver
from stencilkit.ir import kernel as k
from stencilkit.ir import verify
from stencilkit.ir.verify import KernelIRError, Rule, checked, verify_kernel
from stencilkit.targets.c import C_PLATFORM

F64 = np.dtype(np.float64)
BOOL = np.dtype(np.bool_)
I64 = k.INDEX


def c64(v: int) -> k.Constant:
    return k.Constant(np.int64(v), dtype=I64)


def f64(v: float) -> k.Constant:
    return k.Constant(np.float64(v), dtype=F64)


def sym(s: k.Symbol) -> k.Sym:
    return k.Sym(s, dtype=s.dtype)


class Kit:
    """A small well-formed kernel: ``out[i] = inp[i] * 2.0`` for i < n, and its parts."""

    def __init__(self) -> None:
        ctx = k.KernelContext()
        self.ctx = ctx
        self.inp = ctx.buffer("inp", F64, 1, unit_stride_last=True, restrict=True,
                              read_only=True)
        self.out = ctx.buffer("out", F64, 1, unit_stride_last=True, restrict=True,
                              read_only=False)
        self.n = self.inp.shape[0].symbol
        self.i = ctx.symbol("i", I64)
        self.t = ctx.symbol("t", F64)

    def load(self, idx: k.Expr | None = None) -> k.Load:
        return k.Load(self.inp, (sym(self.i) if idx is None else idx,), dtype=F64)

    def store(self, value: k.Expr, buffer: k.Buffer | None = None) -> k.Store:
        return k.Store(buffer or self.out, (sym(self.i),), value)

    def loop(self, *body: k.Stmt, parallel: k.Parallel | None = None,
             start: k.Expr | None = None) -> k.Loop:
        return k.Loop(self.i, c64(0) if start is None else start, sym(self.n), c64(1),
                      tuple(body), parallel=parallel)

    def kernel(self, *body: k.Stmt, uses_error_flag: bool = False) -> k.KernelFunction:
        params = (self.inp.base, self.n, self.out.base)
        return k.KernelFunction("sk_test", params, tuple(body), (self.inp, self.out),
                                uses_error_flag=uses_error_flag,
                                status=self.ctx.symbol("sk_error", k.STATUS))

    def good(self) -> k.KernelFunction:
        return self.kernel(self.loop(
            k.Declare(self.t, k.Op("*", (self.load(), f64(2.0)), dtype=F64)),
            self.store(sym(self.t))))


def test_a_well_formed_kernel_passes_before_and_after_the_platform():
    kit = Kit()
    verify_kernel(kit.good())
    par = kit.kernel(kit.loop(k.Declare(kit.t, kit.load()), kit.store(sym(kit.t)),
                              parallel=k.Parallel()))
    verify_kernel(par)
    verify_kernel(C_PLATFORM.lower(par), platform_lowered=True)


def _bad_kernels() -> dict[Rule, k.KernelFunction]:
    kit = Kit()
    ctx = kit.ctx
    ghost = ctx.symbol("ghost", I64)
    flag = ctx.symbol("flag", I64)
    local = ctx.buffer("scratch", F64, 1, unit_stride_last=True, restrict=False,
                       read_only=False, user=False)
    bad_name = dataclasses.replace(kit.t, name="x@y")
    acc = ctx.symbol("acc", F64)
    inner = ctx.symbol("q", I64)
    return {
        # a symbol used outside its scope: t is declared in the loop, read after it
        Rule.UNDEFINED: kit.kernel(kit.loop(k.Declare(kit.t, kit.load())),
                                   k.Store(kit.out, (c64(0),), sym(kit.t))),
        Rule.REDECLARED: kit.kernel(k.Declare(kit.t, f64(0.0)), k.Declare(kit.t, f64(1.0))),
        Rule.IDENTIFIER: kit.kernel(k.Declare(bad_name, f64(0.0))),
        Rule.OPERAND_TYPES: kit.kernel(kit.loop(kit.store(
            k.Op("+", (kit.load(), sym(kit.i)), dtype=F64)))),
        Rule.RESULT_TYPE: kit.kernel(kit.loop(kit.store(
            k.Op("<", (kit.load(), f64(0.0)), dtype=F64)))),
        Rule.ASSIGN_TYPE: kit.kernel(kit.loop(kit.store(sym(kit.i)))),
        Rule.CONDITION: kit.kernel(kit.loop(k.Branch(kit.load(), (kit.store(f64(1.0)),)))),
        Rule.INDEX_TYPE: kit.kernel(kit.loop(kit.store(kit.load(f64(1.0))))),
        Rule.READ_ONLY: kit.kernel(kit.loop(kit.store(f64(1.0), kit.inp))),
        Rule.COUNTER_ASSIGNED: kit.kernel(kit.loop(
            k.SetSym(kit.i, k.Op("+", (sym(kit.i), c64(1)), dtype=I64)))),
        Rule.RACE: kit.kernel(k.Declare(acc, f64(0.0)), kit.loop(
            k.SetSym(acc, k.Op("+", (sym(acc), kit.load()), dtype=F64)),
            parallel=k.Parallel())),
        Rule.ERROR_CHANNEL: kit.kernel(kit.loop(k.SetError(k.STATUS_INDEX))),
        Rule.BUFFER_RANK: kit.kernel(kit.loop(kit.store(
            k.Load(kit.inp, (sym(kit.i), sym(kit.i)), dtype=F64)))),
        # collapse(2) over a loop whose body is not one loop
        Rule.COLLAPSE: kit.kernel(kit.loop(kit.store(kit.load()),
                                           parallel=k.Parallel(collapse=2))),
        # collapse(2) over a triangular nest: the inner bound is the outer counter
        "triangular collapse": kit.kernel(kit.loop(
            k.Loop(inner, c64(0), sym(kit.i), c64(1), (kit.store(kit.load()),)),
            parallel=k.Parallel(collapse=2))),
        # (ABSTRACT_LEFT below: it needs platform_lowered=True)
        "race on a local array": kit.kernel(
            k.DeclareArray(local, c64(4)),
            kit.loop(k.Store(local, (c64(0),), kit.load()), parallel=k.Parallel()),
            kit.store(k.Load(local, (c64(0),), dtype=F64))),
        "loop bound": kit.kernel(k.Loop(kit.i, c64(0), f64(4.0), c64(1), ())),
        "undefined loop bound": kit.kernel(k.Loop(kit.i, c64(0), sym(ghost), c64(1), ())),
        "bad status code": kit.kernel(kit.loop(k.SetError(3)), uses_error_flag=True),
        "select condition": kit.kernel(k.Declare(flag, c64(1)), kit.loop(kit.store(
            k.Select(sym(flag), f64(1.0), f64(2.0), dtype=F64)))),
        "select of undeclared": kit.kernel(kit.loop(kit.store(
            k.Select(k.Op("<", (sym(flag), c64(0)), dtype=BOOL), f64(1.0), f64(2.0),
                     dtype=F64)))),
    }


RULE_OF = {"race on a local array": Rule.RACE, "loop bound": Rule.INDEX_TYPE,
           "undefined loop bound": Rule.UNDEFINED, "bad status code": Rule.ERROR_CHANNEL,
           "select condition": Rule.CONDITION, "select of undeclared": Rule.UNDEFINED,
           "triangular collapse": Rule.COLLAPSE}


def test_each_rule_rejects_its_malformed_kernel():
    # one test, not one per case: the fast tier caps a function's cases (tests/tiers.py)
    for case, kf in _bad_kernels().items():
        rule = RULE_OF.get(case, case)
        with pytest.raises(KernelIRError) as info:
            verify_kernel(kf)
        assert info.value.rule is rule, f"{case}: {info.value}"
        message = str(info.value)
        assert "'sk_test'" in message and rule.name in message and "in: " in message


def test_every_rule_has_a_case():
    rules = {RULE_OF.get(c, c) for c in _bad_kernels()} | {Rule.ABSTRACT_LEFT}
    assert rules == set(Rule)


def test_abstract_nodes_are_refused_after_the_platform_only():
    kit = Kit()
    kf = kit.kernel(kit.loop(kit.store(k.MathCall("sqrt", (kit.load(),), dtype=F64)),
                             parallel=k.Parallel()))
    verify_kernel(kf)
    with pytest.raises(KernelIRError) as info:
        verify_kernel(kf, platform_lowered=True)
    assert info.value.rule is Rule.ABSTRACT_LEFT
    verify_kernel(C_PLATFORM.lower(kf), platform_lowered=True)


def test_a_platform_may_keep_what_its_printer_prints():
    kit = Kit()
    kf = kit.kernel(kit.loop(kit.store(k.MathCall("sqrt", (kit.load(),), dtype=F64))))
    verify_kernel(kf, platform_lowered=True, keeps=(k.MathCall,))


def test_the_message_names_the_statement_and_its_source_line():
    kit = Kit()
    where = k.Store(kit.inp, (c64(0),), f64(1.0), loc=None, source="demo.py:3  a[0] = 1.0")
    with pytest.raises(KernelIRError, match=r"READ_ONLY.*\n  in: Store inp_\[\.\.\.\]: "
                                            r"demo.py:3  a\[0\] = 1.0"):
        verify_kernel(kit.kernel(where))


def test_the_hook_verifies_only_under_the_flag(monkeypatch):
    bad = _bad_kernels()[Rule.REDECLARED]
    monkeypatch.setenv("STENCILKIT_VERIFY", "0")
    assert checked(bad) is bad
    monkeypatch.setenv("STENCILKIT_VERIFY", "1")
    with pytest.raises(KernelIRError):
        checked(bad)


def test_a_counter_declared_before_its_loop_is_that_symbol():
    kit = Kit()
    # the printers assign a declared counter instead of declaring it again
    verify_kernel(kit.kernel(k.Declare(kit.i, c64(0)), kit.loop(kit.store(kit.load())),
                             kit.store(kit.load())))


def test_shared_loops_may_assign_what_their_region_declares():
    kit = Kit()
    acc = kit.ctx.symbol("acc", F64)
    region = k.ParallelRegion((k.Declare(acc, f64(0.0)), kit.loop(
        k.SetSym(acc, kit.load()), kit.store(sym(acc)), parallel=k.Parallel(shared=True))))
    verify_kernel(kit.kernel(region))
    # but not what is declared outside the region
    outside = k.ParallelRegion((kit.loop(k.SetSym(acc, kit.load()),
                                         parallel=k.Parallel(shared=True)),))
    with pytest.raises(KernelIRError) as info:
        verify_kernel(kit.kernel(k.Declare(acc, f64(0.0)), outside))
    assert info.value.rule is Rule.RACE


def test_reductions_may_be_written_by_their_parallel_loop():
    kit = Kit()
    acc = kit.ctx.buffer("acc", F64, 1, unit_stride_last=True, restrict=False,
                         read_only=False, user=False)
    par = k.Parallel(reductions=(k.Reduction("+", acc, 1),))
    verify_kernel(kit.kernel(k.DeclareArray(acc, c64(1)), kit.loop(
        k.Store(acc, (c64(0),), k.Op("+", (k.Load(acc, (c64(0),), dtype=F64), kit.load()),
                                     dtype=F64)), parallel=par)))


@pytest.mark.parametrize("target", ["c", "cuda", "opencl", "numba"])
def test_the_corpus_is_verified_after_every_stage(target, monkeypatch):
    """Every kind of the golden corpus, rendered with the flag set: the hooks run (after
    lowering, simplification and the platform, and on each launch of a GPU plan) and
    accept what they see."""
    import importlib.util

    from .golden.corpus import CORPUS

    needs = {"opencl": "pyopencl", "numba": "numba"}.get(target)
    if needs and importlib.util.find_spec(needs) is None:
        pytest.skip(f"generate(backend={target!r}) needs {needs}")
    seen: list[tuple[str, bool]] = []
    real = verify.verify_kernel

    def counting(kf, *, platform_lowered=False, keeps=()):
        seen.append((kf.name, platform_lowered))
        real(kf, platform_lowered=platform_lowered, keeps=keeps)

    monkeypatch.setenv("STENCILKIT_VERIFY", "1")
    monkeypatch.setattr(verify, "verify_kernel", counting)
    driver.forget_rendered()  # rendered work is kept: an earlier test may have rendered it
    for name, render in CORPUS.items():
        before = len(seen)
        render(target)  # lowering runs before the cache's lookup (its key is the source)
        stages = seen[before:]
        assert any(not lowered for _, lowered in stages), (name, stages)
        # Numba prints point kernels from the lowered IR: no platform stage
        if not (target == "numba" and name in ("lap3d", "jacobi2d", "blur_wrap")):
            assert any(lowered for _, lowered in stages), (name, stages)
