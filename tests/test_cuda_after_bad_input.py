"""Issue 24, item 2: no bad input makes a later "cuda" call fail in the same process.

On a GPU, a kernel that reads outside an allocation kills the process's CUDA context: the
bad call's own test may pass, and every later call fails. Each bad-input file runs here in
one child process on "cuda" with ``tests/cuda_aftercare.py``: after every test of it (and,
in the fuzz file, after every case, in ``tests/fuzz_child.py``) a good call must still give
the right answer. On a GPU the child runs on it; elsewhere on the emulator, whose device
arrays end at guard pages, so that an out-of-bounds access kills the child as loudly as it
kills the context on a GPU (tests/cuda_emulator.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from stencilkit.registry import cuda as cuda_registry

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FILES = ["test_hostile_input.py", "test_bad_input.py", "test_fuzz_bad_input.py"]


def _child_env(log: str) -> dict[str, str]:
    env = dict(os.environ, STENCILKIT_TEST_BACKENDS="cuda", STENCILKIT_AFTERCARE_LOG=log)
    env["PYTHONPATH"] = os.path.join(ROOT, "src") + os.pathsep + env.get("PYTHONPATH", "")
    if cuda_registry.probe() is not None:  # no GPU here: the emulator
        if shutil.which("g++") is None:
            pytest.skip(f"no CUDA device ({cuda_registry.probe()}) and no g++ for the emulator")
        env["STENCILKIT_CUDA_EMULATOR"] = "1"
    return env


@pytest.mark.parametrize("name", FILES)
def test_a_good_call_after_every_bad_one(name, tmp_path):
    log = str(tmp_path / "checked.txt")
    env = _child_env(log)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
             "-p", "tests.cuda_aftercare", "-k", "cuda", "-rfE", os.path.join(HERE, name)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{name} on 'cuda' did not finish: {str(exc.stdout)[-2000:]}")
    checked = open(log).read().splitlines() if os.path.exists(log) else []
    last = checked[-1] if checked else "(none)"
    assert proc.returncode == 0, (
        f"{name} on 'cuda' in one process: exit {proc.returncode} (a negative one is a "
        f"signal: an out-of-bounds access); last test followed by a good call: {last}\n"
        f"{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}")
    if name != "test_fuzz_bad_input.py":  # its good calls run per case, in its children
        assert checked, proc.stdout[-2000:]
    assert " passed" in proc.stdout, proc.stdout[-2000:]
