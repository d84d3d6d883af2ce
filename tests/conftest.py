"""Shared fixtures: a private cache directory, and the backend parametrization."""

from __future__ import annotations

import os
import tempfile

import pytest

_cache = tempfile.mkdtemp(prefix="stencilkit-test-cache-")
os.environ.setdefault("STENCILKIT_CACHE_DIR", _cache)
os.environ.setdefault("GT_CACHE_ROOT", _cache)  # GT4Py's own cache, out of the checkout
# OpenCL programs built unoptimized: PoCL then compiles a kernel ~2.5x faster (CPU time),
# which is most of the OpenCL cases' time; tests/test_opencl.py checks the optimized build
# (stencilkit's default) on every kind.
os.environ.setdefault("STENCILKIT_OPENCL_OPTIONS", "-cl-opt-disable")
# every kernel a test builds has its kernel IR verified after each stage (ir/verify.py)
os.environ.setdefault("STENCILKIT_VERIFY", "1")
# the C backend's measured choices (issue 30) are tested by tests/test_tuning.py, which asks
# for them; elsewhere a large call runs the default variant, so that the suite's time does
# not include timing candidates (results are bit-identical whatever the choice: tested)
os.environ.setdefault("STENCILKIT_AUTOTUNE", "off")

import stencilkit as sk  # noqa: E402

if os.environ.get("STENCILKIT_CUDA_EMULATOR") == "1":  # "cuda" on the CPU: tests/cuda_emulator.py
    from .cuda_emulator import install

    install()

from stencilkit.registry import REGISTRY, implemented  # noqa: E402

from . import tiers  # noqa: E402


def pytest_addoption(parser):
    tiers.add_options(parser)
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ with today's generated sources "
                          "(tests/test_golden_sources.py)")


def pytest_configure(config):
    tiers.configure(config)


def pytest_collection_modifyitems(config, items):
    tiers.select(config, items)


def _backend_params():
    # Every backend the registry says is built runs the whole parametrized suite (skipped,
    # with its probe's reason, where it cannot run here): registering a backend is enough.
    # STENCILKIT_TEST_BACKENDS=c runs the backend-parametrized tests on those backends only
    # (the CI's sanitizer step).
    only = [b for b in os.environ.get("STENCILKIT_TEST_BACKENDS", "").split(",") if b]
    out = []
    for name in implemented():
        if only and name not in only:
            continue
        reason = REGISTRY[name].probe()
        marks = [pytest.mark.skip(reason=f"backend {name}: {reason}")] if reason else []
        out.append(pytest.param(name, marks=marks, id=name))
    return out


@pytest.fixture(params=_backend_params())
def backend(request) -> str:
    return request.param


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A backend-parametrized test of a kind the backend does not build, or on data its
    dtypes exclude (complex numbers on "opencl" and "cuda"), is reported as skipped, with the
    BackendError's reason: the refusal itself is tested per backend."""
    outcome = yield
    report = outcome.get_result()
    exc = call.excinfo
    spec = getattr(item, "callspec", None)
    if (report.failed and exc is not None and spec is not None and "backend" in spec.params
            and exc.errisinstance(sk.BackendError)
            and ("does not build" in str(exc.value) or "does not compute on" in str(exc.value))):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: {exc.value.bare_message}")


@pytest.fixture
def numba_stencil():
    numba = pytest.importorskip("numba", reason="numba is not installed (pip install .[test])")
    return numba.stencil


@pytest.fixture(autouse=True)
def _config_restore():
    before = sk.config.current()
    yield
    sk.config._current = before  # tests may call sk.configure()

