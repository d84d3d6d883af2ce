"""The documented bound of transcendental functions on "cuda" (docs/numerics.md): each is
within ``ulps.gpu_bound`` of NumPy's result; arithmetic and correctly rounded operations are
exact. On a GPU this checks libdevice; on the emulator the host's libm computes the
functions, so it checks the mechanism (and NumPy's own SIMD loops against glibc's)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import registry

from .ulps import CUDA_MAX_ULPS, gpu_bound, ulp_distance

# the function, the kernel's call, and a range of arguments where it is defined
_UNARY = {
    "sqrt": (0, 1e3), "cbrt": (-1e3, 1e3), "exp": (-30, 30), "exp2": (-30, 30),
    "expm1": (-5, 5), "log": (1e-3, 1e3), "log2": (1e-3, 1e3), "log10": (1e-3, 1e3),
    "log1p": (-0.9, 1e3), "sin": (-50, 50), "cos": (-50, 50), "tan": (-1.5, 1.5),
    "arcsin": (-1, 1), "arccos": (-1, 1), "arctan": (-50, 50), "sinh": (-20, 20),
    "cosh": (-20, 20), "tanh": (-5, 5), "arcsinh": (-50, 50), "arccosh": (1, 50),
    "arctanh": (-0.99, 0.99),
}
_BINARY = {"arctan2": ((-5, 5), (-5, 5)), "hypot": ((-1e3, 1e3), (-1e3, 1e3)),
           "power": ((1e-2, 10), (-8, 8))}


def _unary_kernel(f):
    def k(a):
        return f(a[0, 0])
    return k


def _binary_kernel(f):
    def k(a, b):
        return f(a[0, 0], b[0, 0])
    return k


@pytest.fixture(autouse=True)
def _cuda(monkeypatch):
    """"cuda" on the device where there is one, else on the emulator (tests/cuda_emulator.py),
    so that the CPU-only CI runs these too."""
    if registry.REGISTRY["cuda"].probe() is not None:
        if shutil.which("g++") is None:
            pytest.skip("no CUDA device and no g++ for the emulator")
        from .cuda_emulator import install

        install(monkeypatch)


def _needs_cuda() -> None:
    reason = registry.REGISTRY["cuda"].probe()
    if reason is not None:
        pytest.skip(f"backend cuda: {reason}")


def test_ulp_distance():
    one = np.float64(1.0)
    assert ulp_distance(np.array([one]), np.array([np.nextafter(one, 2)]))[0] == 1
    assert ulp_distance(np.array([0.0]), np.array([-0.0]))[0] == 0
    tiny = np.array([np.float32(1e-45)])
    assert ulp_distance(tiny, -tiny)[0] == 2  # across zero
    assert ulp_distance(np.array([np.nan]), np.array([np.nan]))[0] == 0
    assert ulp_distance(np.array([np.nan]), np.array([1.0]))[0] >= 2**62
    x = np.float32(3.0)
    assert ulp_distance(np.array([x]), np.array([x + 3 * np.spacing(x)]))[0] == 3


def test_every_tested_function_has_a_bound():
    assert set(_UNARY) | set(_BINARY) <= set(CUDA_MAX_ULPS)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("func", sorted(_UNARY))
def test_unary_within_bound(func, dtype):
    _needs_cuda()
    lo, hi = _UNARY[func]
    a = np.random.default_rng(7).uniform(lo, hi, (64, 64)).astype(dtype)
    f = getattr(np, func)
    st = sk.stencil(_unary_kernel(f), backend="cuda")
    got = np.asarray(st(a))
    dist = ulp_distance(got, f(a))
    assert dist.max() <= gpu_bound(func, dtype), (func, dtype, int(dist.max()))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("func", sorted(_BINARY))
def test_binary_within_bound(func, dtype):
    _needs_cuda()
    (alo, ahi), (blo, bhi) = _BINARY[func]
    rng = np.random.default_rng(8)
    a = rng.uniform(alo, ahi, (64, 64)).astype(dtype)
    b = rng.uniform(blo, bhi, (64, 64)).astype(dtype)
    f = getattr(np, func)
    st = sk.stencil(_binary_kernel(f), backend="cuda")
    dist = ulp_distance(np.asarray(st(a, b)), f(a, b))
    assert dist.max() <= gpu_bound(func, dtype), (func, dtype, int(dist.max()))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_correctly_rounded_operations_are_exact(dtype):
    """sqrt, division, fabs, floor, ceil, trunc, fmin/fmax, fmod: 0 ulps, also on the GPU
    (IEEE division and square root are NVRTC's defaults, stated in its options)."""
    _needs_cuda()
    rng = np.random.default_rng(9)
    a = rng.uniform(-1e3, 1e3, (64, 64)).astype(dtype)
    b = rng.uniform(0.5, 1e3, (64, 64)).astype(dtype)

    def k(a, b):
        return (np.sqrt(np.fabs(a[0, 0])) + a[0, 0] / b[0, 0] - np.floor(a[0, 0])
                + np.ceil(b[0, 0]) * np.trunc(a[0, 0]) + np.fmin(a[0, 0], b[0, 0])
                - np.fmax(a[0, 0], b[0, 0]) + np.fmod(a[0, 0], b[0, 0]))

    np.testing.assert_array_equal(np.asarray(sk.stencil(k, backend="cuda")(a, b)),
                                  sk.stencil(k, backend="numpy")(a, b))
