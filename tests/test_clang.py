"""The C backend built with clang instead of GCC (``CC=clang``, issue 30: "compare with clang
if installed").

clang ignores ``#pragma GCC ivdep``, and inside an OpenMP region it no longer knows that the
restrict-qualified arrays the region captured do not alias: it vectorized no row loop of a
computation (hdiff 256x256x80: 14.4 ms against GCC's 6.2). The C platform asserts the same
independence in clang's words (``targets.c.CPlatform.vector_loop``). These tests compile
generated sources with clang's vectorizer remarks, and compare clang's builds with the
numpy backend bit for bit. They skip where clang (with OpenMP) is not installed; CI installs
it (``.ci/run``, the clang step).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval
from stencilkit.build import toolchain
from stencilkit_apps.definitions import hdiff

from .requires import needs_c

pytestmark = pytest.mark.skipif(shutil.which("clang") is None, reason="clang is not installed")


def smooth(a: Field[np.float64], b: Field[np.float64]):
    with computation(PARALLEL), interval(1, -1):
        b = 0.25 * (a[0, 0, -1] + 2.0 * a + a[0, 0, 1])  # noqa: F841


def lap3d(a):
    return a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1] \
        - 6.0 * a[0, 0, 0]


def _clang_with_openmp() -> None:
    if not toolchain.toolchain("clang").openmp:
        pytest.skip("clang here builds no OpenMP (libomp's headers are not installed)")


def _vectorizer_remarks(source: str, tmp_path: Path) -> dict[int, str]:
    """clang's loop-vectorizer remark per source line: "vectorized" or "missed"."""
    c_file = tmp_path / "kernel.c"
    c_file.write_text(source)
    flags = [f for f in toolchain.toolchain("clang").flags if f != "-shared"]
    proc = subprocess.run(
        ["clang", *flags, "-c", "-Rpass=loop-vectorize", "-Rpass-missed=loop-vectorize",
         f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}",
         str(c_file), "-o", str(tmp_path / "kernel.o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    remarks: dict[int, str] = {}
    for line, kind in re.findall(r"kernel\.c:(\d+):\d+: remark: (vectorized loop|loop not "
                                 r"vectorized)", proc.stderr):
        # a loop is versioned into several copies: one vectorized copy is enough
        if remarks.get(int(line)) != "vectorized":
            remarks[int(line)] = "vectorized" if kind == "vectorized loop" else "missed"
    return remarks


def _asserted_loops(source: str) -> list[int]:
    """The lines of the loops the platform asserted independent: the ``for`` after
    ``#pragma GCC ivdep`` (and whatever pragmas follow it)."""
    lines = source.splitlines()
    loops = []
    for n, text in enumerate(lines):
        if text.strip() == "#pragma GCC ivdep":
            after = n + 1
            while lines[after].strip().startswith("#pragma"):
                after += 1
            loops.append(after + 1)
    return loops


@pytest.mark.parametrize("name", ["hdiff", "smooth"])
def test_clang_vectorizes_every_row_loop_of_a_computation(name, tmp_path):
    needs_c()
    _clang_with_openmp()
    definition = {"hdiff": hdiff, "smooth": smooth}[name]
    source = sk.stencil(definition, backend="c").generate()
    loops = _asserted_loops(source)
    assert loops, source
    remarks = _vectorizer_remarks(source, tmp_path)
    missed = [n for n in loops if remarks.get(n) != "vectorized"]
    assert not missed, (f"clang did not vectorize the loops at lines {missed}:\n"
                        + "\n".join(source.splitlines()[n - 1] for n in missed))


def test_clang_vectorizes_the_row_loops_of_a_parallel_point_kernel(tmp_path):
    needs_c()
    _clang_with_openmp()
    a = np.zeros((64, 64, 64))
    source = sk.stencil(lap3d, backend="c").generate(a)
    remarks = _vectorizer_remarks(source, tmp_path)
    lines = source.splitlines()
    # the interior's rows (the border's loops of at most one element are not worth it)
    rows = [n for n in _asserted_loops(source) if "sk_result" in "".join(lines[n:n + 2])]
    assert len(rows) >= 3, source
    assert all(remarks.get(n) == "vectorized" for n in rows), (rows, remarks)


@pytest.mark.parametrize("layout", ["C", "F", "storage"])
def test_clang_builds_compute_what_numpy_does(layout, tmp_path, monkeypatch):
    """hdiff and a vertical smoother built by clang, on a domain large enough for a team,
    against the numpy backend: the same bits (no contraction into FMA, no reassociation)."""
    needs_c()
    _clang_with_openmp()
    compilers = []
    compile_ = toolchain.Toolchain.compile

    def recorded(self, *args, **kwargs):
        compilers.append(self.cc)
        return compile_(self, *args, **kwargs)

    monkeypatch.setattr(toolchain.Toolchain, "compile", recorded)
    rng = np.random.default_rng(7)
    shape = (40, 36, 24)

    def field() -> np.ndarray:
        values = rng.standard_normal(shape)
        if layout == "storage":
            return sk.as_storage(values, backend="c")
        return np.asarray(values, order=layout)

    inp, coeff, out0, smoothed0 = field(), field(), field(), field()
    results = {}
    with sk.configure(cc="clang", cache_dir=str(tmp_path / "cache"), autotune="off"):
        for backend in ("c", "numpy"):
            out, smoothed = out0.copy(), smoothed0.copy()
            sk.stencil(hdiff, backend=backend)(inp, out, coeff, origin=(2, 2, 0),
                                               domain=(shape[0] - 4, shape[1] - 4, shape[2]))
            sk.stencil(smooth, backend=backend)(inp, smoothed)
            results[backend] = (np.asarray(out).copy(), np.asarray(smoothed).copy())
    assert compilers and set(compilers) == {"clang"}, compilers
    for got, want in zip(results["c"], results["numpy"]):
        np.testing.assert_array_equal(got, want)
