"""Deep columns: local (column) buffers larger than the stack budget live on the heap.

A column sweep keeps per-thread buffers of (block of columns) x (K levels) values. They were
variable-length arrays on the thread's stack, and a few hundred thousand levels overflowed it:
the process died with a segfault. Now they take the heap beyond ``STACK_ARRAY_BYTES``, and an
allocation that fails is an ``ArgumentError`` instead of a write through NULL.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.codegen.c import STACK_ARRAY_BYTES

from .requires import needs_c

DEFINITION = '''
import numpy as np
from stencilkit import BACKWARD, FORWARD, Field, computation, interval


def tridiag(a: Field[np.float64], b: Field[np.float64], c: Field[np.float64],
            d: Field[np.float64], x: Field[np.float64]):
    with computation(FORWARD):
        with interval(0, 1):
            cp = c / b
            dp = d / b
        with interval(1, None):
            cp = c / (b - a * cp[0, 0, -1])
            dp = (d - a * dp[0, 0, -1]) / (b - a * cp[0, 0, -1])
    with computation(BACKWARD):
        with interval(-1, None):
            x = dp
        with interval(0, -1):
            x = dp - cp * x[0, 0, 1]
'''


def _fields(shape, order="C"):
    rng = np.random.default_rng(0)
    fs = [np.asarray(rng.random(shape) + (4.0 if i == 1 else 0.0), order=order)
          for i in range(4)]
    return fs + [np.zeros(shape, order=order)]


@pytest.fixture(scope="module")
def tridiag(tmp_path_factory):
    path = tmp_path_factory.mktemp("deep") / "deep_tridiag.py"
    path.write_text(DEFINITION)
    sys.path.insert(0, str(path.parent))
    try:
        import deep_tridiag
    finally:
        sys.path.remove(str(path.parent))
    return deep_tridiag.tridiag


@pytest.mark.parametrize("nk", [5, STACK_ARRAY_BYTES // 64 - 1, STACK_ARRAY_BYTES // 64 + 3,
                                20_000])
@pytest.mark.parametrize("order", ["C", "F"])
def test_deep_columns_match_numpy(tridiag, nk, order):
    """Just below and above the stack budget (8 columns of float64 per block), and far
    beyond it; both layouts (the C-ordered one stages its fields in column buffers)."""
    needs_c()
    ours = sk.stencil(tridiag, backend="c")
    ref = sk.stencil(tridiag, backend="numpy")
    got, want = _fields((3, 11, nk), order), _fields((3, 11, nk), order)
    ours(*got)
    ref(*want)
    np.testing.assert_allclose(got[-1], want[-1], rtol=1e-12, atol=1e-12)


def test_generated_code_keeps_large_buffers_off_the_stack(tridiag):
    needs_c()
    st = sk.stencil(tridiag, backend="c")
    st(*_fields((2, 9, 7)))
    src = st.generate()
    assert "malloc(" in src and "cleanup(sk_free_local)" in src
    assert "_column_[8 *" not in src  # no variable-length array sized by the levels


CHILD = textwrap.dedent('''
    import resource, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import stencilkit as sk
    from deep_tridiag import tridiag
    st = sk.stencil(tridiag, backend="c")
    rng = np.random.default_rng(0)
    def fields(nk):
        fs = [rng.random((1, 1, nk)) + (4.0 if i == 1 else 0.0) for i in range(4)]
        return fs + [np.zeros((1, 1, nk))]
    st(*fields(10))  # built and loaded before the limit
    big = fields(int(sys.argv[2]))
    # the address space now allowed: what is mapped plus 64 MiB, far below the column
    # buffers the deep call asks for (hundreds of MiB per thread)
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[0])
    limit = pages * resource.getpagesize() + (64 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        st(*big)
    except sk.ArgumentError as exc:
        assert "could not be allocated" in str(exc), exc
        print("refused")
    else:
        print("ran")
''')


def test_a_failed_allocation_is_an_error_not_a_crash(tridiag, tmp_path):
    needs_c()
    import deep_tridiag  # noqa: F401  (written by the fixture)

    folder = str(__import__("pathlib").Path(deep_tridiag.__file__).parent)
    proc = subprocess.run([sys.executable, "-c", CHILD, folder, "1000000"],
                          capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "refused", proc.stdout + proc.stderr[-2000:]
