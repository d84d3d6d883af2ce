"""``sk.set_num_threads`` / ``sk.get_num_threads`` (contract.md section 9): the count reaches the C
backend's parallel regions (also in modules built before it was set) and Numba's."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import stencilkit as sk

from .requires import needs_c

ROOT = Path(__file__).resolve().parents[1]

# A C ParLoop kernel that writes the size of the team running it: direct WRITE over a set
# far above the parallel threshold, so the loop runs as an OpenMP parallel region
TEAM_KERNEL = """
#ifdef _OPENMP
#include <omp.h>
#endif
void team(double *out) {
#ifdef _OPENMP
    out[0] = (double)omp_get_num_threads();
#else
    out[0] = 1.0;
#endif
}
"""


def _team_sizes(n: int = 1 << 18) -> set[int]:
    cells = sk.Set(n)
    out = sk.Dat(cells)
    sk.ParLoop(sk.Kernel(TEAM_KERNEL, "team"), cells, out(sk.WRITE), backend="c").compute()
    return set(out.data.astype(int).tolist())


@pytest.fixture
def restore_threads():
    from stencilkit.runtime import threads

    before = threads._team.value
    yield
    threads._team.value = before


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", None, True, 1 << 20])
def test_bad_counts_are_value_errors(bad, restore_threads):
    before = sk.get_num_threads()
    with pytest.raises(ValueError, match="set_num_threads"):
        sk.set_num_threads(bad)
    assert sk.get_num_threads() == before


def test_default_follows_omp_num_threads():
    code = "import stencilkit as sk; print(sk.get_num_threads())"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="3,2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "3", out.stderr


def test_c_parallel_regions_use_the_count(restore_threads):
    needs_c()
    sk.set_num_threads(3)  # more than this machine's cores: the count is what we asked for
    assert _team_sizes() == {3}
    sk.set_num_threads(1)
    assert _team_sizes() == {1}  # the same module, built before: the count is read per call
    sk.set_num_threads(2)
    assert sk.get_num_threads() == 2 and _team_sizes() == {2}


def test_results_do_not_depend_on_the_count(restore_threads):
    needs_c()
    @sk.stencil(backend="c")
    def lap(a):
        return a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1] - 4.0 * a[0, 0]

    a = np.random.default_rng(0).random((300, 400))
    results = []
    for n in (1, 2, 5):
        sk.set_num_threads(n)
        results.append(lap(a))
    assert all(np.array_equal(results[0], r) for r in results[1:])


def test_numba_gets_the_count(tmp_path):
    pytest.importorskip("numba")
    # its own process: Numba's thread pool and per-thread count are process state
    code = textwrap.dedent("""
        import numba, numpy as np, stencilkit as sk
        sk.set_num_threads(1)
        print(numba.get_num_threads())
        sk.set_num_threads(2)
        @sk.stencil(backend="numba")
        def f(a):
            return a[1] - a[-1]
        f(np.arange(10.0))
        print(numba.get_num_threads())
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), NUMBA_NUM_THREADS="2")
    script = tmp_path / "numba_threads.py"  # a file: kernels need their source
    script.write_text(code)
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.stdout.split() == ["1", "2"], out.stderr
