"""GPU calls without a wait (contract.md section 9), on the CUDA emulator: a call whose arrays all
live on the device returns before anyone reads its status word; its run-time error is raised
by ``sk.synchronize()`` or by the next call of the same stencil, naming the stencil's line,
and a call with NumPy arrays (which waits for its copies back anyway) raises at once."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import FORWARD, Field, computation, interval

pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                reason="the CUDA emulator needs a C++ compiler")


@pytest.fixture
def device(monkeypatch):
    """The emulator's CuPy (device arrays that are host memory behind a guard page)."""
    from stencilkit.runtime import cuda as runtime

    from .cuda_emulator import install

    install(monkeypatch)
    yield runtime._cupy()
    runtime._PENDING.clear()  # nothing of this test's leaks into the next


def reach(a, i):
    return a[i]  # a run-time offset: checked against the declared neighbourhood


def column(f: Field[float], lev: int):
    with computation(FORWARD), interval(...):
        f = f[0, 0, lev] + 1.0


def test_device_call_reports_at_synchronize(device):
    st = sk.stencil(reach, neighborhood=((-1, 1),), backend="cuda")
    a = device.asarray(np.arange(8.0))
    out = device.zeros(8)
    assert st(a, 5, out=out) is out  # no wait, no error yet: the status word is pending
    with pytest.raises(sk.ArgumentError, match="left the declared neighborhood") as err:
        sk.synchronize()
    assert "reach" in str(err.value) and "test_cuda_async.py" in str(err.value)
    sk.synchronize()  # reported once
    assert np.array_equal(np.asarray(st(a, 1, out=out)), [0, 2, 3, 4, 5, 6, 7, 0])
    sk.synchronize()


def test_next_call_reports_the_earlier_error(device):
    st = sk.stencil(reach, neighborhood=((-1, 1),), backend="cuda")
    a = device.asarray(np.arange(8.0))
    st(a, -4, out=device.zeros(8))
    with pytest.raises(sk.ArgumentError, match="left the declared neighborhood"):
        st(a, 0, out=device.zeros(8))
    good = device.zeros(8)
    st(a, 0, out=good)  # the error was raised once; this call runs
    sk.synchronize()
    assert np.array_equal(np.asarray(good), [0, 1, 2, 3, 4, 5, 6, 0])  # border untouched


def test_host_arrays_report_at_the_call(device):
    st = sk.stencil(reach, neighborhood=((-1, 1),), backend="cuda")
    with pytest.raises(sk.ArgumentError, match="left the declared neighborhood"):
        st(np.arange(8.0), 3)
    sk.synchronize()  # nothing pending


def test_computation_on_device_reports_at_synchronize(device):
    st = sk.stencil(backend="cuda")(column)
    f = device.asarray(np.zeros((2, 3, 4)))
    st(f, lev=7)  # reads 7 levels up: outside the field
    with pytest.raises(sk.ArgumentError, match="column"):
        sk.synchronize()


def test_synchronize_without_gpu_calls_is_a_no_op():
    sk.synchronize()
