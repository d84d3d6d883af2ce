"""Fuzzing ParLoops: random sets, maps, arities, dims, dtypes and access modes, some invalid
on purpose, on each backend. Every case ends in one of two ways: a ``StencilError`` (whose
message names the kernel when the loop raised it), or results equal to a plain Python loop
(INC and reductions up to reassociation). Anything else fails: a raw exception, a wrong
value, or a crash.

The cases run in a subprocess per backend (this file is also the script), many per
process, so a crash or a hang fails one test instead of killing the run; the subprocess
prints its tally of areas and outcomes as JSON, and the last case it started on stderr.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

import stencilkit as sk

# Per backend; other backends that build ParLoops get the default (a device backend compiles
# a program per case, so fewer cases).
EXAMPLES = {"c": 150, "numpy": 120}
DEFAULT_EXAMPLES = 60


def _backends() -> list[str]:
    from stencilkit.registry import REGISTRY, implemented

    only = [b for b in os.environ.get("STENCILKIT_TEST_BACKENDS", "").split(",") if b]
    return [b for b in implemented() if "parloop" in REGISTRY[b].capabilities.kinds
            and (not only or b in only)]

# ------------------------------------------------------------------ kernel families
# A family's source is fixed; A (arity) and D (dim) are closure constants, so each
# (family, A, D, dtype) is one generated loop: the number of builds stays small.


@functools.cache
def inc_kernel(A: int, D: int) -> sk.Kernel:
    @sk.kernel
    def fz_inc(x, y):
        for i in range(A):
            for j in range(D):
                y[i, j] += x[j] * (i + 1)
    return fz_inc


@functools.cache
def half_kernel(A: int, D: int) -> sk.Kernel:
    @sk.kernel
    def fz_half(x, y):
        for i in range(A):
            for j in range(D):
                y[i, j] += x[j] * 0.5        # a float into an int Dat: refused
    return fz_half


@functools.cache
def overrun_kernel(A: int, D: int) -> sk.Kernel:
    @sk.kernel
    def fz_overrun(x, y):
        for i in range(A + 1):               # one map entry too many, at run time
            for j in range(D):
                y[i, j] += x[j]
    return fz_overrun


@functools.cache
def rw_kernel(A: int, D: int) -> sk.Kernel:
    @sk.kernel
    def fz_rw(x, y, z):
        for i in range(A):
            for j in range(D):
                y[i, j] = y[i, j] + x[j]
        for j in range(D):
            z[j] += x[j]
    return fz_rw


@functools.cache
def minmax_kernel(A: int, D: int) -> sk.Kernel:
    @sk.kernel
    def fz_minmax(x, lo, hi):
        for i in range(A):
            for j in range(D):
                lo[i, j] = min(lo[i, j], x[j])
                hi[i, j] = max(hi[i, j], x[j] * (i + 1))
    return fz_minmax


@functools.cache
def reduce_kernel(A: int, D: int) -> sk.Kernel:
    @sk.kernel
    def fz_reduce(x, y, out, g, gm):
        for j in range(D):
            out[j] = y[0, j] + y[A - 1, j] * x[j]
            g[j] += x[j]
            gm[j] = max(gm[j], y[A - 1, j])
    return fz_reduce


FAMILIES = ("inc", "rw", "minmax", "reduce")
INVALID = ("bad_map_value", "values_later_negative", "wrong_set", "dim_mismatch", "conflict",
           "read_only", "set_size", "dim_changed", "float_into_int", "overrun",
           "global_too_small", "not_a_map")


class Constructor(Exception):
    """A StencilError raised while building objects, before any loop (no kernel to name)."""


# ------------------------------------------------------------------ one case


def build_and_run(case: dict, backend: str) -> dict[str, np.ndarray]:
    """Build the case's objects and run its loop; return the results by name."""
    rng = np.random.default_rng(case["seed"])
    fam, A, D, n, t = case["family"], case["arity"], case["dim"], case["n"], case["targets"]
    dtype, bad = np.dtype(case["dtype"]), case["invalid"]
    try:
        cells, nodes = sk.Set(n), sk.Set(t)
        values = rng.integers(0, t, (n, A))
        if bad == "bad_map_value" and n:
            values[rng.integers(n), rng.integers(A)] = t if case["seed"] % 2 else -1
        m = sk.Map(cells, nodes, A, values)
        xs = rng.integers(-4, 5, (n, D)).astype(dtype)
        x = sk.Dat(cells, data=xs, dim=D, dtype=dtype)
        start = rng.integers(-4, 5, (t, D)).astype(dtype)
        y = sk.Dat(nodes if bad != "wrong_set" else sk.Set(t), data=start, dim=D,
                   dtype=dtype)
        if bad == "dim_mismatch" and D > 1:     # the kernel reads y[i, D - 1]
            y = sk.Dat(nodes, dim=D - 1, dtype=dtype)
    except sk.StencilError as exc:
        raise Constructor(str(exc)) from exc
    ypath = m if bad != "not_a_map" else None
    if fam == "inc":
        kern = inc_kernel(A, D)
        if bad == "float_into_int" and dtype.kind == "i":
            kern = half_kernel(A, D)
        elif bad == "overrun":
            kern = overrun_kernel(A, D)
        args = [x(sk.READ), y(sk.INC, ypath)]
        if bad == "conflict":
            args = [y(sk.READ, m), y(sk.INC, m)]
        outputs = {"y": y}
    elif fam == "rw":
        z = sk.Dat(nodes, dim=D, dtype=dtype)
        kern = rw_kernel(A, D)
        args = [x(sk.READ), y(sk.RW, ypath), z(sk.INC, m[A - 1])]
        if bad == "conflict":
            args[2] = y(sk.INC, m[A - 1])
        outputs = {"y": y, "z": z}
    elif fam == "minmax":
        hi = sk.Dat(nodes, data=np.zeros((t, D)), dim=D, dtype=dtype)
        kern = minmax_kernel(A, D)
        args = [x(sk.READ), y(sk.MIN, ypath), hi(sk.MAX, m)]
        if bad == "conflict":
            args[2] = y(sk.MAX, m)
        outputs = {"lo": y, "hi": hi}
    else:
        out = sk.Dat(cells, dim=D, dtype=dtype)
        g = sk.Global(D if bad != "global_too_small" or D == 1 else D - 1,
                      data=np.ones(D if bad != "global_too_small" or D == 1 else D - 1),
                      dtype=dtype)
        gm = sk.Global(D, data=np.full(D, -3), dtype=dtype)
        kern = reduce_kernel(A, D)
        args = [x(sk.READ), y(sk.READ, ypath), out(sk.WRITE), g(sk.INC), gm(sk.MAX)]
        if bad == "conflict":
            args[2] = x(sk.WRITE)
        outputs = {"out": out, "g": g, "gm": gm}
    loop = sk.ParLoop(kern, cells, *args, backend=backend, race=case["race"])
    if bad == "values_later_negative" and n:
        broken = values.copy()
        broken[0, 0] = -1
        try:
            m.values = broken
        except sk.ArgumentError as exc:
            raise Constructor(str(exc)) from exc
    if bad == "set_size":
        try:
            cells.size = n + 5
        except sk.ArgumentError:
            pass                       # refused; the loop below must still be right
        else:
            raise AssertionError("Set.size changed")
    if bad == "read_only":
        y.data.flags.writeable = False
    if bad == "dim_changed":
        y.dim = D + 1
    loop.compute()
    return {k: v.data.copy() for k, v in outputs.items()}


def reference(case: dict) -> dict[str, np.ndarray]:
    """The same case as plain Python loops, element by element, in float64/int64."""
    rng = np.random.default_rng(case["seed"])
    fam, A, D, n, t = case["family"], case["arity"], case["dim"], case["n"], case["targets"]
    dtype = np.dtype(case["dtype"])
    values = rng.integers(0, t, (n, A))
    xs = rng.integers(-4, 5, (n, D)).astype(dtype)
    y = rng.integers(-4, 5, (t, D)).astype(dtype).astype(np.float64)
    xs = xs.astype(np.float64)
    res: dict[str, np.ndarray] = {}
    if fam == "inc":
        for e in range(n):
            for i in range(A):
                y[values[e, i]] += xs[e] * (i + 1)
        res["y"] = y
    elif fam == "rw":
        z = np.zeros((t, D))
        for e in range(n):
            local = y[values[e]].copy()
            local += xs[e]
            y[values[e]] = local            # gather, update, scatter
            z[values[e, A - 1]] += xs[e]
        res["y"], res["z"] = y, z
    elif fam == "minmax":
        hi = np.zeros((t, D))
        for e in range(n):
            for i in range(A):
                y[values[e, i]] = np.minimum(y[values[e, i]], xs[e])
                hi[values[e, i]] = np.maximum(hi[values[e, i]], xs[e] * (i + 1))
        res["lo"], res["hi"] = y, hi
    else:
        out, g, gm = np.zeros((n, D)), np.ones(D), np.full(D, -3.0)
        for e in range(n):
            out[e] = y[values[e, 0]] + y[values[e, A - 1]] * xs[e]
            g += xs[e]
            gm = np.maximum(gm, y[values[e, A - 1]])
        res["out"], res["g"], res["gm"] = out, g, gm
    return res


def expect_error(case: dict) -> bool:
    bad, fam = case["invalid"], case["family"]
    if bad in ("set_size", None):
        return False
    if bad in ("bad_map_value", "values_later_negative", "overrun"):
        return case["n"] > 0
    if bad == "float_into_int":
        return np.dtype(case["dtype"]).kind == "i"
    if bad == "global_too_small":
        return fam == "reduce" and case["dim"] > 1
    if bad == "dim_mismatch":
        return case["dim"] > 1
    if bad == "read_only":
        return fam != "reduce"                # there y is only read
    return True


def check_case(case: dict, backend: str) -> str:
    """Run one case; return its outcome ("ok", "error", "constructor error") or raise."""
    try:
        got = build_and_run(case, backend)
    except Constructor:
        assert expect_error(case), f"valid case refused: {case}"
        return "constructor error"
    except sk.StencilError as exc:
        assert expect_error(case), f"valid case refused: {exc}"
        assert "'fz_" in str(exc), f"the message does not name the kernel: {exc}"
        return "error"
    assert not expect_error(case), f"invalid case ran: {case}"
    want = reference(case)
    tol = 1e-5 if case["dtype"] == "float32" else 1e-12
    for name, value in want.items():
        np.testing.assert_allclose(got[name].reshape(value.shape), value, rtol=tol, atol=tol,
                                   err_msg=f"{name} of {case}")
    return "ok"


# ------------------------------------------------------------------ the driver


def fuzz(backend: str, examples: int) -> Counter:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    dtypes_by_family = {"inc": ["float64", "int32", "float32"], "rw": ["float64", "int32"],
                        "minmax": ["float64", "int32"], "reduce": ["float64", "int32"]}
    tally: Counter = Counter()

    @st.composite
    def cases(draw):
        family = draw(st.sampled_from(FAMILIES))
        invalid = draw(st.one_of(st.none(), st.none(), st.sampled_from(INVALID)))
        if invalid in ("float_into_int", "overrun"):
            family = "inc"
        n = draw(st.sampled_from([0, 1, 7, 300, 2100, 5000]))
        if invalid == "global_too_small":
            family = "reduce"
        if invalid in ("global_too_small", "dim_mismatch"):
            n = max(n, 1)                     # found at run time, when elements run
        return {"family": family, "invalid": invalid,
                "arity": draw(st.sampled_from([1, 3])), "dim": draw(st.sampled_from([1, 2])),
                "dtype": draw(st.sampled_from(dtypes_by_family[family])),
                "n": n,
                "targets": draw(st.sampled_from([1, 4, 60, 2000])),
                "race": draw(st.sampled_from(["color", "atomic"])),
                "seed": draw(st.integers(0, 2**16))}

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(cases())
    def run(case):
        print(json.dumps(case), file=sys.stderr, flush=True)   # the last one, after a crash
        outcome = check_case(case, backend)
        area = case["family"] + ("" if case["invalid"] is None else f"/{case['invalid']}")
        tally[f"{area}: {outcome}"] += 1

    run()
    return tally


@pytest.mark.parametrize("backend", _backends())
def test_fuzz_parloop(backend):
    from stencilkit.registry import REGISTRY

    reason = REGISTRY[backend].probe()
    if reason:
        pytest.skip(f"backend {backend}: {reason}")
    env = dict(os.environ, OMP_NUM_THREADS="2")
    examples = int(os.environ.get("STENCILKIT_FUZZ_PARLOOP_EXAMPLES", "0")) or \
        EXAMPLES.get(backend, DEFAULT_EXAMPLES)  # the fast tier's count (tests/tiers.py)
    proc = subprocess.run([sys.executable, __file__, backend, str(examples)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, (f"exit status {proc.returncode}\n{proc.stdout[-4000:]}\n"
                                  f"{proc.stderr[-4000:]}")
    tally = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sum(tally.values()) >= examples // 2
    assert any(k.endswith(": ok") for k in tally) and any("error" in k for k in tally)


if __name__ == "__main__":
    if sys.argv[1] == "cuda" and os.environ.get("STENCILKIT_CUDA_EMULATOR") == "1":
        from cuda_emulator import install  # "cuda" on the CPU, as in the parent (conftest.py)

        install()
    counts = fuzz(sys.argv[1], int(sys.argv[2]))
    print(json.dumps(dict(sorted(counts.items()))))
