"""OpenMP teams of the "c" backend next to Numba's OpenMP threading layer.

Numba's layer calls omp_set_num_threads(NUMBA_NUM_THREADS) in the libgomp it shares with our
extensions, so after a Numba parallel call a region sized by omp_get_max_threads() ignores
OMP_NUM_THREADS. What a region used is read from the threads' CPU time (Linux schedstat),
not from a timing: with OMP_NUM_THREADS=1 no thread but the caller may run our kernel.
Each case runs in a fresh process (the team size and libgomp's settings are per process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stencilkit.build.extension import current_toolchain

_SCRIPT = textwrap.dedent("""
    import json, os
    import numpy as np
    import numba as nb
    import stencilkit as sk

    def runtime_ns():
        out = {}
        for t in os.listdir("/proc/self/task"):
            try:
                out[int(t)] = int(open(f"/proc/self/task/{t}/schedstat").read().split()[0])
            except OSError:
                pass
        return out

    @nb.njit(parallel=True)
    def peer(x):
        s = 0.0
        for i in nb.prange(x.shape[0]):
            s += x[i, 0]
        return s

    def lap(a):
        return a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1] - 4.0 * a[0, 0]

    a = np.random.default_rng(0).random((1024, 1024))
    out = np.zeros_like(a)
    c = sk.stencil(lap, backend="c")
    c(a, out=out)
    peer(a)
    before = runtime_ns()
    for _ in range(20):
        c(a, out=out)
    after = runtime_ns()
    helpers = [(after[t] - before.get(t, 0)) / 1e6 for t in after if t != os.getpid()]
    print(json.dumps({"layer": nb.threading_layer(), "helpers_ms": helpers}))
""")


def _helpers_that_ran(tmp_path: Path, threads: int) -> list[float]:
    script = tmp_path / "mix.py"
    script.write_text(_SCRIPT)
    # GOMP_SPINCOUNT=0: an idle libgomp thread sleeps at once, so it accrues no CPU time
    # unless it runs part of a region
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), GOMP_SPINCOUNT="0",
               OPENBLAS_NUM_THREADS="1", STENCILKIT_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    # each helper's share of 20 calls on 1024^2 is several ms of CPU time
    return [ms for ms in res["helpers_ms"] if ms > 1.0]


@pytest.fixture
def mixed_process():
    pytest.importorskip("numba", reason="numba is not installed (pip install .[test])")
    if not current_toolchain().openmp:
        pytest.skip("the C toolchain has no OpenMP")
    if not Path(f"/proc/self/task/{os.getpid()}/schedstat").exists():
        pytest.skip("no /proc/<pid>/task/<tid>/schedstat to read threads' CPU time")
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: Numba and OpenMP would both use one thread")


def test_omp_num_threads_holds_after_a_numba_parallel_call(tmp_path, mixed_process):
    assert _helpers_that_ran(tmp_path, 1) == []


def test_two_threads_share_the_work_after_a_numba_parallel_call(tmp_path, mixed_process):
    # the measurement sees a helper when there is one (the test above can fail)
    assert len(_helpers_that_ran(tmp_path, 2)) == 1
