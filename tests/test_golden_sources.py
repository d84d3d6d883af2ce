"""The render-only golden tier: the generated sources of a small corpus
(``tests/golden/corpus.py``: lap3d, jacobi2d, a wrap-mode kernel, hdiff, a FORWARD/BACKWARD
tridiagonal solver, a ParLoop with an indirect INC) on every backend, compared with the files
under ``tests/golden/<backend>/``. It makes a change to the CUDA and OpenCL output
reviewable without a device: no GPU is needed (the CUDA source is rendered, not compiled).

A difference fails with the unified diff. When it is intended, rewrite the files with
``pytest tests/test_golden_sources.py --update-golden`` and review them in the commit.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
from pathlib import Path

import pytest

from stencilkit.build import machine

from .golden.corpus import CORPUS

GOLDEN = Path(__file__).parent / "golden"
#: Python sources end in .py.txt: ruff and pytest leave them alone
EXTENSIONS = {"c": "c", "cuda": "cu", "opencl": "cl", "numba": "py.txt", "numpy": "py.txt"}
#: the Python package a backend's generate() still imports (until generate() renders only)
NEEDS = {"opencl": "pyopencl", "numba": "numba"}
_ABSOLUTE = re.compile(r"(?<![\w.])/[^\s'\"]*/(?=[\w.-]+\.py\b)")
_DIGEST = re.compile(r"\b[0-9a-f]{16,}\b")


def normalize(source: str) -> str:
    """The source without what depends on the machine: absolute directories of source files
    (kept: the file name and line) and cache digests."""
    source = _ABSOLUTE.sub("", source)
    source = _DIGEST.sub("<digest>", source)
    return source.rstrip("\n") + "\n"


def golden_path(backend: str, name: str) -> Path:
    return GOLDEN / backend / f"{name}.{EXTENSIONS[backend]}"


@pytest.fixture(autouse=True)
def _reference_machine():
    """The C backend derives constants from the machine (build/machine.py): the goldens are
    rendered for the reference machine, whatever machine runs the test."""
    with machine.assumed(machine.REFERENCE):
        yield


@pytest.mark.parametrize("backend", list(EXTENSIONS))
def test_generated_sources_match_the_golden_files(backend, request):
    needed = NEEDS.get(backend)
    if needed is not None and importlib.util.find_spec(needed) is None:
        pytest.skip(f"generate(backend={backend!r}) needs {needed}, not installed")
    update = request.config.getoption("--update-golden")
    differences = []
    for name, render in CORPUS.items():
        path = golden_path(backend, name)
        text = normalize(render(backend))
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            continue
        assert path.exists(), f"{path} is missing: run pytest {__file__} --update-golden"
        expected = path.read_text()
        if text != expected:
            diff = difflib.unified_diff(expected.splitlines(), text.splitlines(),
                                        str(path), "generated", lineterm="", n=2)
            differences.append("\n".join(diff))
    assert not differences, ("generated sources differ from tests/golden (if intended, "
                             "rerun with --update-golden and review):\n"
                             + "\n\n".join(differences))


def test_every_golden_file_belongs_to_the_corpus():
    expected = {golden_path(b, n) for b in EXTENSIONS for n in CORPUS}
    found = {p for p in GOLDEN.rglob("*") if p.is_file() and p.parent != GOLDEN}
    assert found <= expected, f"stale golden files: {sorted(map(str, found - expected))}"


def test_normalize_keeps_file_names_and_drops_directories_and_digests():
    text = "/* kernel 'k' (/home/u/proj/tests/golden/corpus.py:20) key " + "ab12" * 8 + " */"
    assert normalize(text) == "/* kernel 'k' (corpus.py:20) key <digest> */\n"
