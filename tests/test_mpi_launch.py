"""The MPI runs that need several processes, launched from the ordinary test suite:
errors decided on every rank (a failure must end, not hang: each run has a timeout), and
``stencilkit demo --mpi`` equal to the one-process demo. The CI runs all of
tests/test_mpi.py under mpiexec -n 1/2/4 besides."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install '.[mpi]')")
MPIEXEC = shutil.which("mpiexec")
pytestmark = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (pip install mpich)")
ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    return env


def test_refusals_on_two_ranks_end():
    """Errors (halo too small, mixed decompositions, plain arrays, one rank's own error, K
    split, regions) raise on both ranks; no rank is left waiting."""
    proc = subprocess.run(
        [MPIEXEC, "-n", "2", sys.executable, "-m", "mpi4py", "-m", "pytest", "-q",
         "-p", "no:xdist", "-p", "no:cacheprovider", "tests/test_mpi.py",
         "-k", "refus or error or halo_too_small or thinner or mixed"],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count(" passed") == 2  # one summary per rank


def test_demo_mpi_equals_one_process(tmp_path):
    common = ["-m", "stencilkit.cli", "demo", "--size", "64", "--steps", "30", "--quiet"]
    one = subprocess.run([sys.executable, *common, "--output", str(tmp_path / "one.png")],
                         env=_env(), capture_output=True, text=True, timeout=300)
    many = subprocess.run([MPIEXEC, "-n", "2", sys.executable, *common, "--mpi", "--output",
                           str(tmp_path / "two.png")], env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert one.returncode == 0 and many.returncode == 0, one.stderr + many.stderr
    assert "2 MPI rank(s)" in many.stdout and many.stdout.count("wrote") == 1
    peak = [line for line in one.stdout.splitlines() if line.startswith("peak")]
    assert peak and peak[0] in many.stdout.splitlines()
    import matplotlib.image

    a = matplotlib.image.imread(tmp_path / "one.png")
    b = matplotlib.image.imread(tmp_path / "two.png")
    assert a.shape == b.shape and np.mean(a != b) < 0.05  # the titles differ


def test_demo_mpi_bad_output_is_one_line():
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, "-m", "stencilkit.cli", "demo",
                           "--mpi", "--output", "/nonexistent/dir/x.png"], env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr
