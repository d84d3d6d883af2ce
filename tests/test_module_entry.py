"""``python -m stencilkit`` and the PEP 561 marker (contract.md section 9; issue 29)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import stencilkit as sk

ROOT = Path(__file__).resolve().parents[1]


def _module(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "stencilkit", *argv], capture_output=True,
                          text=True, env=env, timeout=120)


def test_python_dash_m_is_the_command():
    proc = _module("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"stencilkit {sk.__version__}"


def test_python_dash_m_reports_bad_usage_like_the_command():
    proc = _module("no-such-command")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.skipif(not (ROOT / "pyproject.toml").exists(), reason="needs the source tree")
def test_wheel_carries_py_typed(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "-q", "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {proc.stderr.strip()[-200:]}")
    (wheel,) = tmp_path.glob("stencilkit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "stencilkit/py.typed" in names
    # the applications (stencilkit demo, bench) ship in the same wheel, beside the compiler
    assert {"stencilkit_apps/demo.py", "stencilkit_apps/bench.py"} <= set(names)
