"""The compile driver: stages as data, the hooks around them, the two keys, render-only."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import registry
from stencilkit.build import cache
from stencilkit.compile import (
    PIPELINES,
    ComputationRequest,
    Kind,
    ParLoopRequest,
    PointRequest,
    Stage,
    declared,
    driver,
    hooks,
    keys,
)
from stencilkit.ir.kernel import KernelFunction

from . import computations as C
from . import kernels as K

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _fresh_renders(monkeypatch):
    """Every test renders from scratch (the driver keeps rendered work by front key)."""
    driver.forget_rendered()


def _point(backend: str = "c", func=K.lap3d, shape=(6, 7, 8), mode="constant",
           fast_math=False) -> PointRequest:
    st = sk.stencil(mode)(func)
    a = np.ones(shape)
    st.generate(a, backend="numpy")  # the typed kernel and layout of this signature
    typed, layout, out_dtype, types = st._last_build
    return PointRequest(registry.REGISTRY[backend], typed, layout, st._parse()[1], out_dtype,
                        types, mode, fast_math)


def _computation(backend: str = "c", func=C.lap3d) -> ComputationRequest:
    comp = sk.stencil(func, backend="numpy")
    return comp._request(registry.REGISTRY[backend], None)


@sk.kernel
def spread(v, acc):
    for i in range(3):
        acc[i, 0] += v[0]


def _parloop(backend: str = "c", race: str = "color") -> ParLoopRequest:
    cells, nodes = sk.Set(2), sk.Set(3)
    loop = sk.ParLoop(spread, cells, sk.Dat(cells)(sk.READ),
                      sk.Dat(nodes)(sk.INC, sk.Map(cells, nodes, 3, [[0, 1, 2], [2, 1, 0]])),
                      backend="numpy", race=race)
    return loop._request(registry.REGISTRY[backend])


# ------------------------------------------------------------------ stages as data

def test_every_kind_runs_the_stages_of_its_pipeline_in_order():
    for name, b in registry.REGISTRY.items():
        if not b.built:
            continue
        for kind in b.capabilities.kinds:
            named = driver.stages(b, kind)
            order = [PIPELINES[Kind(kind)].index(s.stage) for s in named]
            assert order == sorted(order), (name, kind, named)
            assert [s.stage for s in named].count(Stage.PRINT) == 1, (name, kind)
            for s in named:
                assert callable(declared.load(s.ref)), s.ref


def test_the_stages_of_each_backend():
    def names(backend, kind):
        return tuple(s.name for s in driver.stages(registry.REGISTRY[backend], kind))

    tail = ("platform", "print", "key", "toolchain")
    assert names("c", "point") == ("lower", "simplify", "hoist_rows", "entry_arguments", *tail)
    assert names("c", "computation") == ("lower", "collapse_rows", "simplify", "hoist_rows",
                                         "entry_arguments", *tail, "launcher")
    assert names("c", "parloop") == ("lower", "lower_loop", "simplify", "hoist_rows", *tail)
    # lowered for its launch description only
    assert names("numpy", "point") == ("lower", "print", "key", "toolchain")
    assert names("numpy", "computation") == ("print", "key", "toolchain", "launcher")
    assert names("numba", "point") == ("lower", "print", "key", "toolchain")
    assert names("numba", "parloop") == ("lower", "lower_loop", *tail)
    assert names("cuda", "point") == ("lower", "simplify", "complex_functions",
                                      "mark_parallel", "hoist_rows", "platform", "print",
                                      "toolchain")
    assert names("cuda", "parloop") == ("lower", "lower_loop", "simplify", "complex_functions",
                                        "hoist_rows", "platform", "print", "toolchain")
    assert names("opencl", "computation") == ("lower", "simplify", "hoist_rows", "platform",
                                              "print", "toolchain", "launcher")
    assert PIPELINES[Kind.PARLOOP][:2] == (Stage.LOWER, Stage.LOWER_LOOP)


def test_a_kind_a_backend_does_not_declare_is_refused(monkeypatch):
    numpy = registry.REGISTRY["numpy"]
    import dataclasses

    pieces = dataclasses.replace(numpy.pieces, stages=dataclasses.replace(
        numpy.pieces.stages, parloop=None))
    with pytest.raises(sk.BackendError, match="does not build ParLoops"):
        driver.stages(dataclasses.replace(numpy, pieces=pieces), "parloop")


# ------------------------------------------------------------------ hooks

def test_every_stage_is_timed_and_logged(caplog):
    caplog.set_level(logging.DEBUG, logger="stencilkit")
    for request in (_point("c"), _computation("numpy"), _parloop("c")):
        built = driver.run(request)
        expected = [s.name for s in driver.stages(request.backend, request.kind)]
        assert [name for name, _ in built.timings] == expected
        assert all(seconds >= 0 for _, seconds in built.timings)
        logged = [r.getMessage() for r in caplog.records if "stage" in r.getMessage()
                  and repr(request.name) in r.getMessage()]
        for stage in expected:
            assert any(f"stage {stage} took" in m for m in logged), (stage, logged)
        caplog.clear()


def test_rendering_stops_after_print_and_building_goes_on_from_there():
    request = _point("c")
    rendered = driver.render(request)
    assert rendered.entry is None and rendered.back_key == ""
    assert [n for n, _ in rendered.timings][-1] == "print"
    built = driver.run(request)  # the rendered work is kept: the key stage comes first
    assert [n for n, _ in built.timings] == ["key", "toolchain"]
    assert built.source == rendered.source and callable(built.entry)


def _recording():
    seen: list[KernelFunction] = []

    def check(kf: KernelFunction, **context: object) -> None:
        seen.append(kf)

    return seen, check


def test_the_verifier_runs_on_the_kernel_ir_of_every_stage_that_makes_some(monkeypatch):
    seen, check = _recording()
    with hooks.verifying(check):
        built = driver.run(_parloop("c"))
    kernel, loop = built.work.kernels
    # lower (the kernel), lower_loop (the loop), simplify (what it changed), platform (both
    # again, lowered)
    assert len(seen) in (5, 6)
    assert seen[-2] is kernel and seen[-1] is loop
    assert seen[0].name == kernel.name and seen[0] is not kernel

    seen, check = _recording()
    request = _point("cuda")  # (its numpy rendering lowers the kernel too: not counted)
    with hooks.verifying(check):
        driver.render(request)
    # lower, simplify, mark_parallel, hoist_rows (complex_functions only checks: the same
    # kernel)
    assert len(seen) == 4 and len({id(kf) for kf in seen}) == 4
    seen, check = _recording()
    monkeypatch.delenv("STENCILKIT_VERIFY", raising=False)  # (tests/conftest.py sets it)
    driver.render(_point("c", func=K.blur, shape=(5, 5)))
    assert seen == []  # off by default


def test_a_verifier_that_rejects_names_the_stage(monkeypatch):
    calls = []

    def reject_after_the_platform(kf, **context):
        calls.append(kf)
        if context["platform_lowered"]:
            raise ValueError("bad kernel IR")

    with hooks.verifying(reject_after_the_platform), \
            pytest.raises(ValueError, match="bad kernel IR") as info:
        driver.render(_point("c"))
    assert "after stage 'platform' on backend 'c'" in "\n".join(info.value.__notes__)


def test_stencilkit_verify_turns_the_default_verifier_on(monkeypatch):
    seen, check = _recording()
    monkeypatch.setattr(sys.modules[__name__], "_env_checker", check, raising=False)
    monkeypatch.setattr(hooks, "DEFAULT_VERIFIER", f"{__name__}:_env_checker")
    monkeypatch.delenv("STENCILKIT_VERIFY", raising=False)  # (tests/conftest.py sets it)
    driver.render(_computation("c"))
    assert seen == []
    monkeypatch.setenv("STENCILKIT_VERIFY", "1")
    driver.forget_rendered()
    driver.render(_computation("c"))
    assert len(seen) >= 2  # lower, platform (and collapse_rows where it collapses)


def test_the_dump_hook_prints_the_stages_it_names(capsys):
    with sk.configure(dump="kernel,code"):
        driver.render(_parloop("c"))
    err = capsys.readouterr().err
    # the kernel IR before the platform (the kernel, the loop), then the source
    assert [line for line in err.splitlines() if line.startswith("-" * 20)] == [
        f"{'-' * 20} {title} {'-' * 20}" for title in
        ("kernel: spread", "kernel: spread (sk_parloop_spread)", "code: spread [c]")]
    with sk.configure(dump=()):
        driver.forget_rendered()
        driver.render(_parloop("c"))
    assert capsys.readouterr().err == ""


# ------------------------------------------------------------------ keys

def test_the_front_key_is_the_definition_the_options_and_the_target():
    a, b = _point("c"), _point("c")  # two stencils of one definition
    assert a is not b and keys.front_key(a) == keys.front_key(b)
    assert keys.front_key(_point("c", mode="wrap")) != keys.front_key(a)
    assert keys.front_key(_point("c", fast_math=True)) != keys.front_key(a)
    assert keys.front_key(_point("c", shape=(6, 7, 9))) == keys.front_key(a)  # sizes: no
    assert keys.front_key(_point("numba")) != keys.front_key(a)
    assert keys.front_key(_point("c", func=K.lap1d, shape=(6,))) != keys.front_key(a)
    assert keys.front_key(_parloop("c", "atomic")) != keys.front_key(_parloop("c"))


def test_the_front_key_sees_the_environment_the_lowerings_read(monkeypatch):
    """STENCILKIT_STREAM_MIN_BYTES changes the point kernels' C: a source rendered under
    another value is not reused."""
    monkeypatch.setenv("STENCILKIT_STREAM_MIN_BYTES", "64")
    small = driver.render(_point("c"))
    monkeypatch.setenv("STENCILKIT_STREAM_MIN_BYTES", str(1 << 30))
    large = driver.render(_point("c"))
    assert small.front_key != large.front_key and small.source != large.source


def test_every_variable_code_generation_reads_is_in_the_front_key():
    import re

    package = REPO / "src" / "stencilkit"
    read = set()
    for folder in ("analysis", "codegen", "compile", "frontend", "ir", "lower", "targets",
                   "registry"):
        for path in (package / folder).rglob("*.py"):
            read |= set(re.findall(r"environ(?:\.get)?[\[(]\s*[\"'](STENCILKIT_\w+)",
                                   path.read_text()))
    assert read - {"STENCILKIT_VERIFY"} == set(keys.GENERATION_ENVIRONMENT)


def test_a_different_toolchain_changes_the_back_key_only():
    request = _point("c", func=K.blur, shape=(5, 5))
    with sk.configure(cflags="-O2"):
        first = driver.run(request)
    with sk.configure(cflags="-O1"):
        second = driver.run(request)
    assert first.front_key == second.front_key and first.source == second.source
    assert first.back_key != second.back_key
    # the disk cache's entries are stored under the back key
    for built in (first, second):
        assert cache.verified_artifact(built.back_key,
                                       cache.extension_filename(
                                           f"sk_{built.back_key[:24]}")) is not None
    assert keys.back_key("x", "src", ("cc 1",)) != keys.back_key("x", "src", ("cc 2",))
    assert keys.back_key("x", "src", "cc") == keys.back_key("x", "src", ("cc",))


# ------------------------------------------------------------------ render-only

_RENDER_ONLY = textwrap.dedent("""
    import sys
    for name in ("numba", "llvmlite", "cupy", "cuda", "cuda.bindings", "pyopencl"):
        sys.modules[name] = None  # any import of them fails
    import numpy as np
    import stencilkit as sk
    from tests import computations as C, kernels as K

    @sk.kernel
    def spread(v, acc):
        for i in range(3):
            acc[i, 0] += v[0]

    cells, nodes = sk.Set(2), sk.Set(3)
    loop = sk.ParLoop(spread, cells, sk.Dat(cells)(sk.READ),
                      sk.Dat(nodes)(sk.INC, sk.Map(cells, nodes, 3, [[0, 1, 2], [2, 1, 0]])))
    st, comp = sk.stencil(K.lap3d), sk.stencil(C.upwind)
    a = np.ones((5, 6, 7))
    marks = {"c": "#include", "numba": "import", "cuda": "__global__", "opencl": "__kernel",
             "numpy": "def "}
    for backend, mark in marks.items():
        for what, source in (("point", st.generate(a, backend=backend)),
                             ("computation", comp.generate(backend=backend)),
                             ("parloop", loop.generate(backend=backend))):
            assert mark in source, (backend, what, source[:300])
            print(backend, what, len(source))
    blocked = [n for n in ("numba", "cupy", "pyopencl") if sys.modules.get(n) is not None]
    assert not blocked, blocked
""")


def test_generate_renders_every_backend_without_compilers_or_gpu_packages(tmp_path):
    env = {**os.environ, "CC": "/nonexistent", "STENCILKIT_BACKEND": "numpy",
           "STENCILKIT_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    env.pop("STENCILKIT_CUDA_EMULATOR", None)
    script = tmp_path / "render_only.py"  # a file: the kernels' source is read from it
    script.write_text(_RENDER_ONLY)
    proc = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(proc.stdout.splitlines()) == 15, proc.stdout
    # and nothing was compiled: no entry in the cache
    assert not list((tmp_path / "cache").glob("**/*.so"))
