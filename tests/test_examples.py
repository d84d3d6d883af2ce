"""Every script of examples/ runs, at a small size, and checks what it prints.

Each script asserts its own result against a reference (NumPy slicing, np.linalg.solve, the
exact solution, scipy.ndimage, one process); here it runs in a fresh interpreter in a
temporary directory, and must exit 0, print its result and write its picture. A new script
without an entry below fails test_every_example_is_run.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

# script: (small-size arguments, modules it needs, a line fragment its output must hold)
CASES = {
    "heat_equation.py": (["--size", "48", "--steps", "20"], [],
                         "max difference from NumPy slicing: 0.0e+00"),
    "column_physics.py": (["--size", "6", "--levels", "16", "--steps", "3"], [],
                          "against np.linalg.solve"),
    "fem_poisson.py": (["--size", "8"], ["scipy"], "observed order of convergence"),
    "xarray_smoothing.py": (["--times", "2", "--resolution", "10"], ["dask", "xarray", "scipy"],
                            "max difference from scipy.ndimage.uniform_filter"),
    "heat_mpi.py": (["--size", "48", "--steps", "10"], ["mpi4py"],
                    "equal to one process bit for bit: True"),
}


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return env


def test_every_example_is_run() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(CASES)


@pytest.mark.parametrize("script", sorted(CASES))
def test_example(script: str, tmp_path: Path) -> None:
    args, needs, expected = CASES[script]
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{script} needs {', '.join(missing)}")
    command = [sys.executable, str(EXAMPLES / script), *args, "--output", "out.png"]
    if script == "heat_mpi.py":
        mpiexec = shutil.which("mpiexec")
        if mpiexec is None:
            pytest.skip("no mpiexec (pip install mpich)")
        command = [mpiexec, "-n", "2", *command]
    proc = subprocess.run(command, cwd=tmp_path, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert expected in proc.stdout, proc.stdout
    assert (tmp_path / "out.png").stat().st_size > 1000       # a picture, not an empty file
