"""A good "cuda" call after a bad one, in the same process (issue 24, item 2).

On a GPU, a kernel that reads outside an allocation ends in ``cudaErrorIllegalAddress``, and
every later CUDA call of the process fails: the bad input's own test may even pass (its
error was raised), while the user's next call, and all the data on the device, are gone. So
after each bad call a good one must still give the right answer.

- As a pytest plugin (``-p tests.cuda_aftercare``): after every test parametrized with
  ``backend == "cuda"``, ``good_call()`` runs in the same process; if it fails, the test
  fails, naming itself as the one after which the context was dead. With
  ``STENCILKIT_AFTERCARE_LOG`` set, each checked test's node id is appended to that file.
- ``tests/fuzz_child.py`` calls ``good_call()`` after each of its cases on "cuda".

``tests/test_cuda_after_bad_input.py`` runs both in child processes.
"""

from __future__ import annotations

import os

import numpy as np
import pytest


def _good(a):
    return a[0, 1] + 2.0 * a[1, 0]


def good_call() -> None:
    """A point kernel on "cuda" against its NumPy value: raises if it fails or differs."""
    import stencilkit as sk

    a = np.arange(30.0).reshape(5, 6)
    got = sk.stencil(_good, backend="cuda")(a)
    want = np.zeros_like(a)
    want[:-1, :-1] = a[:-1, 1:] + 2.0 * a[1:, :-1]
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    spec = getattr(item, "callspec", None)
    if spec is None or spec.params.get("backend") != "cuda":
        return (yield)
    try:
        return (yield)
    finally:
        try:
            good_call()
        except Exception as exc:
            raise AssertionError(f"a good 'cuda' call after {item.nodeid} failed: "
                                 f"{type(exc).__name__}: {exc}") from exc
        log = os.environ.get("STENCILKIT_AFTERCARE_LOG")
        if log:
            with open(log, "a") as f:
                f.write(item.nodeid + "\n")
