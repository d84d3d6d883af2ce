"""Names in kernels never collide with names of the generated code (issue 8).

Every identifier the user writes reaches generated code with a trailing ``_`` (``a`` ->
``a_``), and no internal name ends with ``_``; ``hostile_names.py`` checks it end to end
with about 500 names (C keywords, macros, library functions, Python.h names, NumPy and
Python names, and every identifier of the printers' own output), for every kind and every
backend.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.registry import REGISTRY, implemented

ROOT = Path(__file__).resolve().parent.parent
AVAILABLE = [b for b in implemented() if not REGISTRY[b].probe()]


# numba computations run on their own (the slowest backend and kind of the file)
_KNOWN = {("computation", "numba")}


# One backend per case. The fast test tier (tests/tiers.py) runs those on "numpy" and "c"
# but point kernels on "c" (87 s of CPU measured, the most of any case); CI runs all.
_SLOW = {("point", "c")}


@pytest.mark.parametrize("kind, backend", [
    pytest.param(k, b, id=f"{k}-{b}", marks=[pytest.mark.full] if b not in ("numpy", "c")
                 or (k, b) in _SLOW else [])
    for k in ("point", "computation", "parloop") for b in AVAILABLE])
def test_hostile_names_on_every_backend(kind, backend, tmp_path):
    if kind not in REGISTRY[backend].capabilities.kinds or (kind, backend) in _KNOWN:
        pytest.skip(f"{kind}s on {backend}: not built here, or in their own test")
    _hostile_names(kind, [backend], tmp_path)


def test_hostile_names_on_numba_computations(tmp_path):
    if "numba" not in AVAILABLE:
        pytest.skip("numba unavailable")
    _hostile_names("computation", ["numba"], tmp_path)


def _hostile_names(kind: str, builds: list[str], tmp_path) -> None:
    pytest.importorskip("numba")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT),
                                         env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-m", "tests.hostile_names", kind,
                           ",".join(builds), str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-20000:]
    assert proc.stdout.count(" 0 failures") == len(builds)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_no_library_name_is_in_the_user_namespace(tmp_path):
    """What the namespaces rely on: no macro or identifier of the headers the generated code
    includes ends with '_' unless it starts with '_'."""
    f = tmp_path / "h.c"
    f.write_text("#include <stdint.h>\n#include <stdbool.h>\n#include <math.h>\n"
                 "#include <complex.h>\n#include <omp.h>\n#include <Python.h>\n")
    inc = f"-I{sysconfig.get_paths()['include']}"
    macros = subprocess.run(["gcc", "-fopenmp", inc, "-E", "-dM", str(f)], capture_output=True,
                            text=True, check=True).stdout
    code = subprocess.run(["gcc", "-fopenmp", inc, "-E", str(f)], capture_output=True,
                          text=True, check=True).stdout
    defined = re.findall(r"^#define (\w+)", macros, re.MULTILINE)  # not their bodies
    names = set(defined) | set(re.findall(r"\b[A-Za-z_]\w*\b", code))
    assert len(names) > 1000
    assert sorted(n for n in names if n.endswith("_") and not n.startswith("_")) == []


def test_generated_names_stay_readable():
    @sk.stencil(backend="c", cval=2.0)
    def smooth(a, cval):
        total = a[-1] + a[1]
        return cval * total

    x = np.arange(6.0)
    np.testing.assert_array_equal(smooth(x, 0.5), [2.0, 1.0, 2.0, 3.0, 4.0, 2.0])
    code = smooth.generate()
    assert "total_ = a_[i0 - 1] + a_[i0 + 1];" in code
    assert "int sk_smooth_point(" in code and "double cval_" in code


def test_computation_called_with_a_field_named_self(backend):
    from stencilkit import PARALLEL, Field, computation, interval

    def copy(self: Field[float], out: Field[float], ni: float):
        with computation(PARALLEL), interval(...):
            out = self + ni  # noqa: F841

    a, b = np.ones((3, 3, 2)), np.zeros((3, 3, 2))
    sk.stencil(copy, backend=backend)(self=a, out=b, ni=4.0)
    np.testing.assert_array_equal(b, 5.0)


def test_numba_names_survive_numbas_renamings():
    """The names that failed inside Numba's parfor pass ("key already in dictionary:
    'x__'"): ``x_`` (user ``x``) legalizes to ``x__`` (user ``x_``); an internal ``t_1``
    is what ``t.1`` (Numba's SSA version of ``t``) legalizes to."""
    from stencilkit.codegen.numba_names import numba_names, safe

    def legalize(n: str) -> str:  # numba.core.ir_utils.legalize_names
        return n.replace("_", "__").replace("$", "_").replace(".", "_")

    names = {"x_", "x__", "a_shape_0", "a_shape_0_", "t", "t_1", "i0", "u_origin_I_",
             "_err_", "status", "range", "lambda_", "sk__sample_point_"}
    table = numba_names(names)
    out = set(table.values())
    assert len(out) == len(names) and all(safe(n) for n in out)
    assert table["x_"] == "x_" and table["t"] == "t" and table["i0"] == "i0"
    assert all(n.endswith("_") for old, n in table.items() if old.endswith("_"))
    assert {legalize(n) for n in out if legalize(n) != n}.isdisjoint(out)
    assert {legalize(f"{n}.1") for n in out}.isdisjoint(out)


@pytest.mark.skipif("numba" not in AVAILABLE, reason="numba unavailable")
def test_numba_computation_with_colliding_names():
    from stencilkit import PARALLEL, Field, computation, interval

    def src(x: Field[float], x_: Field[float], t: float):
        with computation(PARALLEL), interval(...):
            t_1 = x[1, 0, 0] + t
            x_ = t_1 + x[0, 0, 0]  # noqa: F841

    a, want = np.random.default_rng(0).random((2, 6, 5, 4))
    got = want.copy()
    sk.stencil(src, backend="numpy")(a, want, 0.5, origin=(0, 0, 0), domain=(5, 5, 4))
    sk.stencil(src, backend="numba")(a, got, 0.5, origin=(0, 0, 0), domain=(5, 5, 4))
    np.testing.assert_array_equal(got, want)
