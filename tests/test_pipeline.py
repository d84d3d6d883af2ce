"""The pipeline's printable stages, the caches, the CLI."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.ir import definition as d
from stencilkit.ir.core import rewrite

from . import kernels as K

A = np.random.default_rng(0).random((8, 9))


def test_ir_is_frozen_and_location_free_in_equality():
    x = d.Name("x", loc=sk.errors.Location("a.py", 1))
    y = d.Name("x", loc=sk.errors.Location("b.py", 9))
    assert x == y
    with pytest.raises(AttributeError):
        x.id = "y"  # type: ignore[misc]


def test_rewrite_is_bottom_up():
    e = d.BinOp("+", d.Const(1), d.BinOp("*", d.Const(2), d.Const(3)))
    seen = []

    def visit(n):
        if isinstance(n, d.BinOp):
            seen.append(n.op)

    rewrite(e, visit)
    assert seen == ["*", "+"]


def test_ir_text_shows_types_and_lines():
    st = sk.stencil(K.local_vars)
    assert "point_kernel local_vars(a: relative)" in st.ir  # before any call: the parsed IR
    st(A)
    text = st.ir
    assert "-> float64" in text and "relative float64" in text and "# line" in text


def test_generated_c_is_readable_and_deterministic():
    st1 = sk.stencil(K.blur, backend="c")
    st2 = sk.stencil(K.blur, backend="c")
    st1(A)
    st2(A)
    code = st1.generate()
    assert code == st2.generate()
    assert "kernels.py:" in code and "return 0.25 * (a[-1, 0]" in code
    assert "#pragma omp parallel for" in code
    numpy_code = st1.generate(A, backend="numpy")
    assert "def sk_blur" in numpy_code and "for " not in numpy_code.split("with np.errstate")[1]


def test_dump_prints_every_stage(tmp_path):
    script = tmp_path / "dumped.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, stencilkit as sk
        @sk.stencil(backend="c")
        def k(a):
            return a[0, 1] * 2
        k(np.ones((4, 4)))
    """))
    env = dict(os.environ, STENCILKIT_DUMP="ir,typed,kernel,code")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                         check=True)
    for stage in ("ir:", "typed:", "kernel:", "code:"):
        assert f"---- {stage}" in out.stderr
    assert "buffer out: float64" in out.stderr


def test_cache_reuses_compiled_code():
    sk.cache.clear(disk=False)
    before = sk.cache.info()
    sk.stencil(K.lap1d, backend="c")(np.ones(16))
    sk.stencil(K.lap1d, backend="c")(np.ones(16))  # a new object with identical code
    after = sk.cache.info()
    assert after["memory_hits"] >= before["memory_hits"] + 1
    assert after["disk_entries"] >= 1


def test_concurrent_processes_share_one_cache_entry(tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, stencilkit as sk
        def k(a):
            return a[-1] + 3.0 * a[1]
        r = sk.stencil(k, backend="c")(np.arange(50.0))
        assert r[1] == 0.0 + 3 * 2.0, r[:3]
        print(sk.cache.info()["builds"], sk.cache.info()["disk_hits"])
    """))
    env = dict(os.environ, STENCILKIT_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              env=env) for _ in range(4)]
    outputs = [p.communicate()[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(int(o[0]) for o in outputs) == 1  # exactly one process compiled
    entries = [p for p in (tmp_path / "cache" / f"v{sk.cache.FORMAT}").glob("??/*") if p.is_dir()]
    assert len(entries) == 1 and not any(p.name.startswith(".") for p in entries)


def test_compile_error_is_a_backend_error(monkeypatch):
    import dataclasses

    from stencilkit.build import toolchain

    monkeypatch.setenv("STENCILKIT_CFLAGS", "-fthis-flag-does-not-exist")
    toolchain.toolchain.cache_clear()
    sk.configure(cflags="-fthis-flag-does-not-exist")
    try:
        # the probe's one-line library fails first, and the refusal names the flag
        with pytest.raises(sk.BackendError, match="not available.*-fthis-flag-does-not-exist"):
            sk.stencil(K.lap1d, backend="c")(np.ones(7))
        # past the probe, the build's own error names the generated source file
        c = sk.registry.REGISTRY["c"]
        monkeypatch.setitem(sk.registry.REGISTRY, "c", dataclasses.replace(c, probe=lambda: None))
        with pytest.raises(sk.BackendError, match=r"\.c"):
            sk.stencil(K.lap1d, backend="c")(np.ones(7))
    finally:
        toolchain.toolchain.cache_clear()


def test_cli_show(tmp_path):
    f = tmp_path / "mod.py"
    f.write_text("import numpy as np\n"
                 "def k(a):\n    return a[1] - a[-1]\n"
                 "import stencilkit as sk\nk = sk.stencil(k)\n"
                 "def k_example():\n    return (np.ones(8),)\n")
    out = subprocess.run([sys.executable, "-m", "stencilkit.cli", "show", f"{f}:k"],
                         capture_output=True, text=True, check=True)
    assert "int sk_k_point(" in out.stdout


def test_cli_demo(tmp_path):
    png = tmp_path / "demo.png"
    out = subprocess.run([sys.executable, "-m", "stencilkit.cli", "demo", "--size", "64",
                          "--steps", "20", "--quiet", "--output", str(png)],
                         capture_output=True, text=True, check=True)
    assert "us per step" in out.stdout
    assert png.stat().st_size > 1000 and Path(png).read_bytes()[:4] == b"\x89PNG"


def test_no_compiler_falls_back_to_numpy_with_one_warning(monkeypatch):
    import dataclasses
    import warnings

    from stencilkit import registry

    no_c = dataclasses.replace(registry.REGISTRY["c"], probe=lambda: "no C compiler found")
    monkeypatch.setitem(registry.REGISTRY, "c", no_c)
    monkeypatch.setattr(registry, "_warned_fallback", False)
    sk.configure(backend=None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r1 = sk.stencil(K.blur)(A)
        r2 = sk.stencil(K.lap1d)(np.arange(5.0))
    assert len([w for w in caught if "numpy" in str(w.message)]) == 1
    np.testing.assert_array_equal(r1, sk.stencil(K.blur, backend="numpy")(A))
    assert r2[2] == 0.0
    with pytest.raises(sk.BackendError, match="not available"):
        sk.stencil(K.blur, backend="c")(A)


def test_planned_backends_say_they_are_not_built(monkeypatch):
    # every backend of the contract is built now: a declared-only one stands in
    from stencilkit.registry import base

    planned = base.Backend("planned", "not yet", needs="nothing", probe=base.not_built)
    monkeypatch.setitem(sk.registry.REGISTRY, "planned", planned)
    with pytest.raises(sk.BackendError, match="not built yet"):
        sk.stencil(K.blur, backend="planned")(A)
    assert set(sk.registry.available()) >= {"numpy"}


def test_an_unavailable_backend_says_why_but_generates():
    reason = sk.registry.REGISTRY["cuda"].probe()
    if reason is None:
        pytest.skip("a CUDA device is available here")
    with pytest.raises(sk.BackendError, match="not available"):
        sk.stencil(K.blur, backend="cuda")(A)
    assert "__global__" in sk.stencil(K.blur).generate(A, backend="cuda")


def test_backends_reports_every_backend_of_the_contract():
    report = sk.backends()
    assert list(report) == ["numpy", "c", "numba", "cuda", "opencl"]
    assert report["numpy"].available and report["numpy"].reason is None and report["numpy"]
    for name in ("cuda", "opencl"):  # built: available, or a reason that is not "not built"
        assert report[name] or "not built yet" not in report[name].reason
    numba_found = importlib.util.find_spec("numba") is not None
    assert report["numba"].available == numba_found
    assert numba_found or "not installed" in report["numba"].reason
    assert report["c"].available == (sk.registry.REGISTRY["c"].probe() is None)
