"""The command line: bad input gives one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import stencilkit as sk
from stencilkit.cli import main

SRC = str(Path(__file__).resolve().parents[1] / "src")

KERNELS = textwrap.dedent("""
    import numpy as np
    import stencilkit as sk

    @sk.stencil
    def blur(a):
        return 0.25 * (a[-1, 0] + a[1, 0] + a[0, -1] + a[0, 1])

    def blur_example():
        return (np.zeros((8, 8)),)

    @sk.stencil
    def untyped(a):
        return a[1, 0]

    def broken_example():
        raise RuntimeError("no example today")

    broken = blur
    not_a_stencil = 3
""")


@pytest.fixture
def kernels(tmp_path) -> Path:
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    return path


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        status = main(list(argv))
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return status, out, err


def assert_usage_error(capsys, *argv: str, says: str) -> None:
    status, out, err = cli(capsys, *argv)
    assert status == 2, (status, out, err)
    assert err.endswith("\n") and err.count("\n") == 1, err  # one line
    assert err.startswith("stencilkit") and "error: " in err, err
    assert "Traceback" not in err and says in err, err


def run(*argv: str, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.run([sys.executable, "-m", "stencilkit.cli", *argv], capture_output=True,
                          text=True, env=env, timeout=120, **kw)


# ----------------------------------------------------------------------------- show

def test_show_prints_generated_code(capsys, kernels):
    status, out, err = cli(capsys, "show", f"{kernels}:blur", "--backend", "c")
    assert status == 0 and err == ""
    assert "kernels.py:7" in out and "#pragma omp" in out


@pytest.mark.parametrize("target, says", [
    ("{k}:nothing_here", "defines no 'nothing_here'"),
    ("{k}:not_a_stencil", "is of type int"),
    ("{k}:untyped", "untyped_example()"),
    ("{k}:broken", "no example today"),
    ("{d}/missing.py:blur", "no such file"),
    ("{d}:blur", "not a file"),
    ("{k}", "expected FILE.py:NAME"),
    ("{k}:", "expected FILE.py:NAME"),
])
def test_show_bad_target(capsys, kernels, target, says):
    assert_usage_error(capsys, "show", target.format(k=kernels, d=kernels.parent), says=says)


def test_show_file_that_fails(capsys, tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    assert_usage_error(capsys, "show", f"{bad}:f", says="bad.py:1: syntax error")
    raising = tmp_path / "raising.py"
    raising.write_text("raise ImportError('missing dependency')\n")
    assert_usage_error(capsys, "show", f"{raising}:f", says="missing dependency")
    exiting = tmp_path / "exiting.py"
    exiting.write_text("import sys\nsys.exit(3)\n")
    assert_usage_error(capsys, "show", f"{exiting}:f", says="SystemExit")


@pytest.mark.parametrize("backend, says", [("fortran", "invalid choice: 'fortran'"),
                                           ("planned", "backend 'planned' is not available")])
def test_show_bad_backend(capsys, kernels, backend, says, monkeypatch):
    from stencilkit.registry import base

    planned = base.Backend("planned", "not yet", needs="nothing", probe=base.not_built)
    monkeypatch.setitem(sk.registry.REGISTRY, "planned", planned)  # declared, not built
    assert_usage_error(capsys, "show", f"{kernels}:blur", "--backend", backend, says=says)


def test_show_cuda_source_without_a_device(capsys, kernels):
    """A built backend's source is shown where it cannot run."""
    status, out, err = cli(capsys, "show", f"{kernels}:blur", "--backend", "cuda")
    assert status == 0 and "__global__" in out, err


def test_show_into_a_closed_pipe_exits_quietly(kernels):
    for _ in range(2):  # shell pipeline, and a reader that closed before anything came
        shell = subprocess.run(
            f"{sys.executable} -m stencilkit.cli show {kernels}:blur --backend c | head -1",
            shell=True, capture_output=True, text=True, timeout=120,
            env=dict(os.environ, PYTHONPATH=SRC))
        assert shell.returncode == 0 and shell.stdout.startswith("#include"), shell
        assert shell.stderr == "", shell.stderr
    proc = subprocess.Popen([sys.executable, "-m", "stencilkit.cli", "show", f"{kernels}:blur",
                             "--backend", "c"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, PYTHONPATH=SRC))
    proc.stdout.close()  # nobody reads: every write gets EPIPE
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == "", err


# ----------------------------------------------------------------------------- demo

@pytest.mark.parametrize("argv, says", [
    (["--steps", "-5"], "--steps: expected an integer of at least 0, got -5"),
    (["--size", "0"], "--size: expected an integer from 3"),
    (["--size", "2"], "--size: expected an integer from 3"),
    (["--size", "100000"], "--size: expected an integer from 3 to 8192"),
    (["--size", "many"], "expected an integer, got 'many'"),
    (["--output", "/nonexistent-dir/x.png"], "does not exist"),
    (["--output", "{d}"], "is a directory"),
    (["--output", "{d}/picture.xyz"], "unknown picture format '.xyz'"),
    (["--output", "/proc/self/demo.png"], "/proc/self/demo.png"),
    (["--frobnicate"], "unrecognized arguments: --frobnicate"),
])
def test_demo_bad_input(capsys, tmp_path, argv, says):
    argv = [a.format(d=tmp_path) for a in argv]
    assert_usage_error(capsys, "demo", "--quiet", *argv, says=says.format(d=tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("size, steps", [(16, 0), (3, 2)])
def test_demo_small_and_empty_runs_make_sense(capsys, tmp_path, size, steps):
    picture = tmp_path / "demo.png"
    status, out, err = cli(capsys, "demo", "--quiet", "--size", str(size), "--steps",
                           str(steps), "--output", str(picture))
    assert status == 0, err
    assert picture.stat().st_size > 0 and f"wrote {picture}" in out
    assert "nan" not in out and "inf" not in out, out


# ----------------------------------------------------------------------------- the rest

def test_version():
    proc = run("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"stencilkit {sk.__version__}"


def test_no_command_and_unknown_command(capsys):
    assert_usage_error(capsys, says="required: COMMAND")
    assert_usage_error(capsys, "frobnicate", says="invalid choice: 'frobnicate'")


def test_bad_input_in_a_real_process_has_no_traceback():
    proc = run("demo", "--size", "0")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", ["demo", "bench", "show", "backends"])
def test_every_option_has_help(capsys, command):
    import argparse

    from stencilkit.cli import _parser

    (subparsers,) = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    sub = subparsers.choices[command]
    assert sub.description
    for action in sub._actions:
        assert action.help, f"stencilkit {command}: {action.option_strings or action.dest} has no help"
    status, out, _ = cli(capsys, command, "--help")
    assert status == 0 and out.startswith(f"usage: stencilkit {command}")


def test_top_level_help_lists_every_command(capsys):
    status, out, _ = cli(capsys, "--help")
    assert status == 0
    for command in ("demo", "bench", "show", "backends"):
        assert command in out
    assert "--version" in out


def test_backends_lists_every_backend(capsys):
    status, out, _ = cli(capsys, "backends")
    assert status == 0
    for name in sk.registry.REGISTRY:
        assert out.count(f"{name} ") >= 1
    assert "numpy" in out and "available" in out


def _bench_result(path: Path, ours: float, peer: float, copy: float) -> str:
    path.write_text(json.dumps({"stream_gbs": {"copy": copy, "triad": copy}, "cases": [
        {"name": "lap3d-64", "size": "64^3 float64", "bytes": 1,
         "seconds": {"stencilkit-c": ours, "hand-c": peer}, "spread": {}},
        {"name": "only-in-a", "size": "", "bytes": 0, "seconds": {"stencilkit-c": 1.0}}]}))
    return str(path)


def test_bench_compare_prints_the_ratios_of_two_runs(capsys, tmp_path):
    a = _bench_result(tmp_path / "a.json", ours=2e-3, peer=3e-3, copy=40.0)
    b = _bench_result(tmp_path / "b.json", ours=4e-3, peer=4.5e-3, copy=20.0)
    b_doc = json.loads(Path(b).read_text())
    b_doc["cases"].pop()  # a case that only one run has is left out
    Path(b).write_text(json.dumps(b_doc))
    status, out, _ = cli(capsys, "bench", "--compare", a, b)
    assert status == 0
    row = next(line for line in out.splitlines() if "hand-c" in line).split()
    # A, B, B/A, vs ours in A, vs ours in B, drift
    assert row[-4:] == ["1.50", "1.50", "1.12", "0.75"]
    assert "only-in-a" not in out


def test_bench_compare_refuses_what_is_no_result(capsys, tmp_path):
    (tmp_path / "x.json").write_text("[1, 2]")
    status, out, err = cli(capsys, "bench", "--compare", str(tmp_path / "x.json"),
                           str(tmp_path / "missing.json"))
    assert status == 2 and out == "" and err.count("\n") == 1


def test_bench_list_names_every_case(capsys):
    from stencilkit_apps.cases import CASES

    status, out, err = cli(capsys, "bench", "--list")
    assert status == 0 and err == ""
    assert [line.split()[0] for line in out.splitlines()] == list(CASES)


@pytest.mark.parametrize("argv", [["--only", "jacobi"], ["--only", "lap3d", "nope"]])
def test_bench_only_an_unknown_case_is_an_error(capsys, argv):
    from stencilkit_apps.cases import CASES

    wrong = argv[-1]
    assert_usage_error(capsys, "bench", *argv, says=f"unknown case '{wrong}'")
    _, _, err = cli(capsys, "bench", *argv)
    assert all(name in err for name in CASES)


def test_bench_only_an_unknown_case_in_a_real_process():
    proc = run("bench", "--only", "nope")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "unknown case 'nope'" in proc.stderr and "jacobi2d" in proc.stderr


def test_bench_goes_on_past_a_case_that_fails(capsys, monkeypatch):
    from stencilkit_apps import bench

    def fails():
        raise sk.BackendError("backend 'opencl' is not available: no device")

    good = {"name": "good", "size": "1", "bytes": 0, "seconds": {"stencilkit-c": 1e-3}}
    monkeypatch.setattr(bench, "stream", lambda n, repeats: {"copy": 10.0, "triad": 12.0})
    monkeypatch.setattr(bench, "runs", lambda quick, repeats: {
        "jacobi2d": fails, "lap3d": lambda: [good]})
    status, out, err = cli(capsys, "bench", "--quick")
    assert status == 0
    assert "good" in out and "jacobi2d" not in out
    assert err == ("stencilkit bench: the case 'jacobi2d' skipped: BackendError: backend "
                   "'opencl' is not available: no device\n")


def test_bench_leaves_out_an_implementation_that_fails(capsys):
    from stencilkit_apps.timing import median_times

    def broken():
        raise sk.BackendError("the OpenCL compiler rejected the generated code:\nerror: "
                              "unknown target CPU 'generic'")

    t = median_times({"works": lambda: None, "stencilkit-opencl": broken}, repeats=3)
    assert list(t) == ["works"] and t["works"] >= 0
    err = capsys.readouterr().err
    assert err == ("stencilkit bench: 'stencilkit-opencl' skipped: BackendError: the OpenCL "
                   "compiler rejected the generated code:; error: unknown target CPU "
                   "'generic'\n")


def test_bench_opencl_rows_where_pocl_cannot_build(capsys, monkeypatch):
    """The probe calls "opencl" available, yet its builds fail (as on the machine of issue
    25): the case is timed without those rows, which stderr names with the reason."""
    import dataclasses

    from stencilkit_apps import cases

    pyopencl = pytest.importorskip("pyopencl")
    opencl = sk.registry.REGISTRY["opencl"]
    monkeypatch.setitem(sk.registry.REGISTRY, "opencl", dataclasses.replace(opencl,
                                                                           probe=lambda: None))

    def unknown_cpu(self, *args, **kwargs):
        raise pyopencl.RuntimeError("clBuildProgram failed: BUILD_PROGRAM_FAILURE\n\n"
                                    "error: unknown target CPU 'generic'")

    monkeypatch.setattr(pyopencl.Program, "build", unknown_cpu)
    monkeypatch.setattr(cases, "_numba", lambda: None)
    from stencilkit.runtime import opencl as runtime

    monkeypatch.setattr(runtime, "_programs", {})
    result = cases.case_overhead(repeats=3)
    assert "stencilkit-c" in result["seconds"]
    assert not any("opencl" in k for k in result["seconds"])
    err = capsys.readouterr().err
    assert "'stencilkit-opencl' skipped: BackendError" in err
    assert "unknown target CPU 'generic'" in err


@pytest.mark.parametrize("backend", ["c", "opencl", "cuda", "numpy"])
def test_show_kernel_only(tmp_path, backend):
    if backend in ("c", "opencl") and sk.backends()[backend].reason:
        pytest.skip(sk.backends()[backend].reason)
    src = tmp_path / "mod.py"
    src.write_text("import numpy as np\nimport stencilkit as sk\n\n@sk.stencil\n"
                   "def blur(a):\n    return 0.5 * (a[-1] + a[1])\n\n"
                   "def blur_example():\n    return (np.arange(10.0),)\n")
    full = run("show", f"{src}:blur", "--backend", backend)
    only = run("show", f"{src}:blur", "--backend", backend, "--kernel-only")
    assert full.returncode == only.returncode == 0, full.stderr + only.stderr
    assert only.stdout and len(only.stdout) < len(full.stdout)
    assert full.stdout.endswith(only.stdout)  # the same kernel, nothing before it
    first = only.stdout.splitlines()[0]
    assert first.startswith("/* point kernel 'blur'") or first.startswith("def sk_blur")
