"""The applications (``stencilkit_apps``: the demo, the bench) live outside the compiler:
the compiler imports and runs without matplotlib and tqdm, the demo writes its picture and
shows its progress without them, and the apps use stencilkit through its public API but
for the internals named in ``stencilkit_apps._internals``."""

from __future__ import annotations

import ast
import json
import os
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

# Run as the first lines of a child process: importing either package raises ImportError
BLOCK_EXTRAS = 'import sys\nsys.modules["matplotlib"] = None\nsys.modules["tqdm"] = None\n'


def python(code: str, tmp_path: Path, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300, **kw)


def cli(argv: list[str], tmp_path: Path, *, blocked: bool) -> subprocess.CompletedProcess:
    head = BLOCK_EXTRAS if blocked else "import sys\n"
    return python(head + f"from stencilkit.cli import main\nsys.exit(main({argv!r}))\n", tmp_path)


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """The chunks of a PNG file, each checked against its CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, pos = [], 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(kind + body), kind
        chunks.append((kind, body))
        pos += 12 + length
    assert chunks[0][0] == b"IHDR" and chunks[-1] == (b"IEND", b"")
    return chunks


# ----------------------------------------------------------------------------- the PNG writer

def test_png_holds_the_pixels_it_was_given():
    from stencilkit_apps import png

    rgb = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    chunks = dict(png_chunks(png.encode(rgb, "a title")))
    assert struct.unpack(">IIBBBBB", chunks[b"IHDR"]) == (7, 5, 8, 2, 0, 0, 0)
    assert chunks[b"tEXt"] == b"Title\0a title"
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(5, 1 + 7 * 3)
    assert (rows[:, 0] == 0).all()  # filter type 0: the bytes are the pixels
    np.testing.assert_array_equal(rows[:, 1:].reshape(5, 7, 3), rgb)


def test_png_is_read_back_by_matplotlib(tmp_path):
    image = pytest.importorskip("matplotlib.image")
    from stencilkit_apps import png

    rgb = np.random.default_rng(1).integers(0, 256, (4, 3, 3), dtype=np.uint8)
    (tmp_path / "x.png").write_bytes(png.encode(rgb))
    np.testing.assert_array_equal(np.rint(image.imread(tmp_path / "x.png") * 255), rgb)


@pytest.mark.parametrize("bad", [np.zeros((2, 2), np.uint8), np.zeros((2, 2, 4), np.uint8),
                                 np.zeros((2, 2, 3)), np.zeros((0, 2, 3), np.uint8)])
def test_png_refuses_what_is_no_rgb_image(bad):
    from stencilkit_apps import png

    with pytest.raises(ValueError, match="expected a non-empty"):
        png.encode(bad)


def test_colour_scale_ends_and_orientation():
    from stencilkit_apps import png

    u = np.zeros((4, 4))
    u[0, 0] = 100.0  # row 0 is drawn at the bottom, as the matplotlib figure's origin="lower"
    rgb = png.colour(u, min_side=8)
    assert rgb.shape == (8, 8, 3) and rgb.dtype == np.uint8
    assert tuple(rgb[-1, 0]) == (252, 255, 164) and tuple(rgb[0, 0]) == (0, 0, 4)
    assert tuple(rgb[-2, 1]) == (252, 255, 164)  # each value a 2x2 square
    flat = png.colour(np.full((3, 3), 7.0), min_side=3)  # no range: no division by zero
    assert (flat == flat[0, 0]).all()
    holes = png.colour(np.array([[np.nan, 1.0], [0.0, 2.0]]), min_side=2)
    assert holes.shape == (2, 2, 3)


# ----------------------------------------------------------------------------- progress

def test_plain_progress_line(capsys, monkeypatch):
    from stencilkit_apps import progress

    monkeypatch.setitem(sys.modules, "tqdm", None)
    assert list(progress.steps(1000, "heat")) == list(range(1000))
    err = capsys.readouterr().err
    assert err.count("\r") == 101 and err.endswith("heat: 100% (1000/1000 steps)\n")
    assert list(progress.steps(5, "heat", disable=True)) == list(range(5))
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- the demo

@pytest.mark.parametrize("blocked", [True, False], ids=["without-extras", "with-extras"])
def test_demo_writes_a_png(tmp_path, blocked):
    if not blocked:
        pytest.importorskip("matplotlib")
        pytest.importorskip("tqdm")
    picture = tmp_path / "demo.png"
    proc = cli(["demo", "--size", "48", "--steps", "20", "--output", str(picture)], tmp_path,
               blocked=blocked)
    assert proc.returncode == 0, proc.stderr
    assert "us per step" in proc.stdout and f"wrote {picture}" in proc.stdout
    assert "20/20" in proc.stderr  # the progress bar, tqdm's or the plain line
    chunks = png_chunks(picture.read_bytes())
    width, height = struct.unpack(">II", chunks[0][1][:8])
    assert width >= 256 and height >= 256


def test_demo_without_matplotlib_refuses_other_formats(tmp_path):
    proc = cli(["demo", "--quiet", "--output", str(tmp_path / "x.svg")], tmp_path, blocked=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "unknown picture format '.svg'; use one of .png" in proc.stderr
    assert "stencilkit[apps]" in proc.stderr and list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- the bench

def test_bench_runs_cases_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    proc = cli(["bench", "--quick", "--only", "jacobi2d", "compile", "--json", str(out)],
               tmp_path, blocked=False)
    assert proc.returncode == 0, proc.stderr
    assert "the case" not in proc.stderr  # a row may be left out (a backend absent), no case
    result = json.loads(out.read_text())
    jacobi, compile_ = result["cases"]
    assert jacobi["name"] == "jacobi2d"
    # ours and the hand-written C peer (checked equal to ours before it was timed)
    assert {"stencilkit-c", "stencilkit-numpy", "hand-c"} <= set(jacobi["seconds"])
    # the time to first result, each in a new process
    assert compile_["name"] == "compile" and min(compile_["seconds"].values()) > 0
    assert result["stream_gbs"]["copy"] > 0


def test_bench_plot_without_matplotlib_is_refused_before_the_run(tmp_path):
    proc = cli(["bench", "--quick", "--only", "jacobi2d", "--plot", str(tmp_path / "b.png")],
               tmp_path, blocked=True)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.count("\n") == 1 and "needs matplotlib" in proc.stderr


# ----------------------------------------------------------------------------- the compiler

def test_the_compiler_needs_neither_matplotlib_nor_tqdm(tmp_path):
    (tmp_path / "kernels.py").write_text(textwrap.dedent("""
        import numpy as np
        import stencilkit as sk

        def average(a):
            return 0.5 * (a[-1] + a[1])

        blur = sk.stencil(average)

        def blur_example():
            return (np.arange(6.0),)
    """))
    code = BLOCK_EXTRAS + textwrap.dedent(f"""
        import numpy as np
        import stencilkit as sk
        from stencilkit.cli import main

        from kernels import average

        for backend in ("c", "numpy"):
            got = sk.stencil(average, backend=backend)(np.arange(6.0))
            assert list(got) == [0, 1, 2, 3, 4, 0], (backend, got)
        assert main(["backends"]) == 0
        assert main(["show", {str(tmp_path / "kernels.py:blur")!r}, "--backend", "c"]) == 0
        assert not [m for m in sys.modules if m.startswith("stencilkit_apps")]
        print("compiler ok")
    """)
    proc = python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "compiler ok" in proc.stdout and "sk_average" in proc.stdout


# ----------------------------------------------------------------------------- the boundary

def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


# The stencilkit modules the apps may import: the package (its public names) and the
# documented gtscript vocabulary; ``_internals`` alone reaches further, each use explained
PUBLIC = {"stencilkit", "stencilkit.gtscript"}
INTERNALS = {"stencilkit.build.toolchain", "stencilkit.runtime.opencl",
             "stencilkit.runtime.parloop_blocks"}


def test_the_apps_use_the_public_api_but_in_one_module():
    apps = sorted((SRC / "stencilkit_apps").glob("*.py"))
    assert len(apps) > 10
    for path in apps:
        used = {n for n in _imports(path) if n.split(".")[0] == "stencilkit"}
        allowed = PUBLIC | INTERNALS if path.name == "_internals.py" else PUBLIC
        assert used <= allowed, f"{path.name} imports {sorted(used - allowed)}"
    assert {n for n in _imports(SRC / "stencilkit_apps" / "_internals.py")
            if n.startswith("stencilkit.")} == INTERNALS


def test_the_compiler_reaches_the_apps_only_from_the_command_line():
    users = sorted(str(p.relative_to(SRC)) for p in (SRC / "stencilkit").rglob("*.py")
                   if any(n.split(".")[0] == "stencilkit_apps" for n in _imports(p)))
    assert users == ["stencilkit/cli.py"]
    for extra in ("matplotlib", "tqdm"):
        assert not [str(p) for p in (SRC / "stencilkit").rglob("*.py")
                    if any(n.split(".")[0] == extra for n in _imports(p))], extra
