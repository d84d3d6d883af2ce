"""Errors point at the user's line (issue 29): stencilkit's own frames are cut from the
traceback of a StencilError (as Numba cuts its own), and a call-time error names the call's
file and line besides the definition's."""

from __future__ import annotations

import sys
import traceback

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval

PACKAGE = sk.__file__.rsplit("/", 1)[0]


def reach(a, i):
    return a[i]


def shifted(a: Field[float], b: Field[float]):
    with computation(PARALLEL), interval(...):
        b = a[1, 0, 0]  # noqa: F841


def misspelt(a):
    return a[0] + undefined_name  # noqa: F821


def _library_frames(exc: BaseException) -> list[str]:
    return [f"{f.filename}:{f.lineno}" for f in traceback.extract_tb(exc.__traceback__)
            if f.filename.startswith(PACKAGE)]


def _line_of(marker: str) -> int:
    src = open(__file__).read().splitlines()
    return next(i + 1 for i, line in enumerate(src) if marker in line and "_line_of" not in line)


def test_call_time_error_names_the_call_and_keeps_one_library_frame():
    st = sk.stencil(reach, neighborhood=((-1, 1),), backend="numpy")
    with pytest.raises(sk.ArgumentError) as info:
        st(np.arange(6.0), 4)  # CALL-SITE-1
    assert len(_library_frames(info.value)) == 1
    assert f"called at {__file__}:{_line_of('CALL-SITE-1')}" in str(info.value)
    assert "test_tracebacks.py:19" in str(info.value) or "reach" in str(info.value)


def test_computation_call_error_is_trimmed():
    st = sk.stencil(backend="numpy")(shifted)
    with pytest.raises(sk.ArgumentError) as info:
        st(np.zeros((4, 3, 2)), np.zeros((4, 3, 2)), origin=(0, 0, 0), domain=(4, 3, 2))  # CALL-SITE-2
    assert len(_library_frames(info.value)) == 1
    assert f":{_line_of('CALL-SITE-2')}" in str(info.value)


def test_misspelt_name_is_a_short_traceback():
    st = sk.stencil(misspelt, backend="numpy")
    with pytest.raises(sk.StencilError) as info:
        st(np.arange(4.0))
    assert "undefined_name" in str(info.value)
    assert len(traceback.extract_tb(info.value.__traceback__)) <= 2


def test_parloop_errors_name_the_users_line():
    cells = sk.Set(3)
    d = sk.Dat(cells)
    with pytest.raises(sk.StencilError) as info:
        sk.par_loop(sk.Kernel("void k(double *x) { x[0] = 1; }", "k"), cells,
                    d(sk.WRITE), backend="no-such-backend")  # CALL-SITE-3
    assert f"called at {__file__}:" in str(info.value)
    assert PACKAGE not in str(info.value).split("called at")[-1]


def test_full_tracebacks_on_request():
    st = sk.stencil(reach, neighborhood=((-1, 1),), backend="numpy")
    before = sk.config.current()
    try:
        sk.configure(full_tracebacks=True)
        with pytest.raises(sk.ArgumentError) as info:
            st(np.arange(6.0), 4)
    finally:
        sk.config._current = before
    assert len(_library_frames(info.value)) > 1


def test_uncaught_in_a_script(tmp_path):
    import subprocess

    script = tmp_path / "user_script.py"
    script.write_text("import numpy as np, stencilkit as sk\n"
                      "@sk.stencil(neighborhood=((-1, 1),))\n"
                      "def reach(a, i):\n"
                      "    return a[i]\n"
                      "reach(np.arange(5.0), 3)\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": PACKAGE.rsplit("/", 1)[0],
                                            "PATH": "/usr/bin:/bin",
                                            "HOME": str(tmp_path)})
    tb = proc.stderr
    assert proc.returncode == 1
    assert tb.count('  File "') == 2, tb  # the user's line, and the raise in __call__
    assert f"{script}:5" in tb
