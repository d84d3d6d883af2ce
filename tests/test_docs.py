"""Every ```python block of README.md and of the documentation site runs, as written.

A page's blocks run in order in one namespace, in a fresh interpreter with a temporary
working directory, so a page is a script a reader could paste; ``assert`` statements in the
blocks check what the text claims. Tracebacks name the Markdown file and its line. Markers in
the Markdown, as HTML comments (invisible on the rendered page):

- ``<!-- skip: REASON -->`` on the line before a block: not run (an MPI launch, a GPU, a data
  file); reported here as a skipped test with REASON.
- ``<!-- requires: mod1 mod2 -->`` anywhere on a page: the page is skipped when one of these
  modules cannot be imported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "docs" / "site"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)$")
_SKIP = re.compile(r"^\s*<!--\s*skip:\s*(?P<reason>.*?)\s*-->\s*$")
_REQUIRES = re.compile(r"<!--\s*requires:\s*(?P<mods>[\w. ]+?)\s*-->")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # the 1-based line of the block's first code line
    code: str
    skip: str | None  # the reason, when marked


def blocks(path: Path) -> list[Block]:
    """The ```python blocks of a Markdown file (``python title="..."`` and the like count)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        info, indent = m["info"].strip(), m["indent"]
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if info.split(" ")[0] in ("python", "py"):
            skip = None
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            if k >= 0 and (s := _SKIP.match(lines[k])):
                skip = s["reason"]
            body = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[i + 1:j]]
            found.append(Block(path, i + 2, "\n".join(body) + "\n", skip))
        i = j + 1
    return found


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(SITE.rglob("*.md"))]


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _required_modules(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [mod for m in _REQUIRES.finditer(text) for mod in m["mods"].split()]


# The child: runs the blocks in one namespace, each compiled under the Markdown file's name
# with its own line numbers, so a traceback points at the page and line to fix.
_RUNNER = r"""
import json, sys
blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
for path, line, code in blocks:
    exec(compile("\n" * (line - 1) + code, path, "exec"), namespace)
"""


def _page_params() -> list:
    return [pytest.param(p, id=_rel(p)) for p in pages() if any(not b.skip for b in blocks(p))]


def _skipped_params() -> list:
    return [pytest.param(b, id=f"{_rel(b.path)}:{b.line}") for p in pages() for b in blocks(p) if b.skip]


@pytest.mark.parametrize("page", _page_params())
def test_page_runs(page: Path, tmp_path: Path) -> None:
    missing = [m for m in _required_modules(page) if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{_rel(page)} needs {', '.join(missing)}")
    runnable = [(str(b.path), b.line, b.code) for b in blocks(page) if not b.skip]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    env.setdefault("MPLBACKEND", "Agg")
    proc = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps(runnable), cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (
        f"{_rel(page)}: a code block failed\n{proc.stdout[-2000:]}\n{proc.stderr[-6000:]}")


@pytest.mark.parametrize("block", _skipped_params())
def test_marked_blocks_are_reported(block: Block) -> None:
    pytest.skip(f"{_rel(block.path)}:{block.line}: {block.skip}")


def test_collector_finds_the_pages() -> None:
    # a collector that found nothing would pass every page: the README alone has blocks
    assert len(blocks(ROOT / "README.md")) >= 6
    assert (SITE / "index.md").exists()
    assert sum(len(b) for b in map(blocks, pages())) >= 40


def test_collector_reads_markers(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text("text\n\n```python\nx = 1\n```\n\n<!-- skip: needs a GPU -->\n```python title=\"t\"\n"
                    "import cupy\n```\n\n    ```python\n    y = x\n    ```\n```bash\nls\n```\n")
    found = blocks(page)
    assert [(b.line, b.code, b.skip) for b in found] == [
        (4, "x = 1\n", None), (9, "import cupy\n", "needs a GPU"), (13, "y = x\n", None)]


def test_no_page_or_docstring_points_outside_the_repository() -> None:
    # "API.md" was a file in neither the repository nor the wheel; the contract is
    # docs/site/contract.md now
    offenders = [f"{_rel(p)}:{n}" for base in ("src", "docs", "examples")
                 for p in sorted((ROOT / base).rglob("*")) if p.suffix in (".py", ".md")
                 for n, ln in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if "API.md" in ln]
    offenders += [f"README.md:{n}" for n, ln in enumerate((ROOT / "README.md").read_text().splitlines(), 1)
                  if "API.md" in ln]
    assert not offenders, offenders


def test_all_extra_names_every_other_extra() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    (spec,) = extras["all"]
    named = set(re.fullmatch(r"stencilkit\[([\w,]+)\]", spec)[1].split(","))
    assert named == set(extras) - {"all", "test"}
    assert any(req.startswith("mkdocs") for req in extras["docs"])
    assert any(req.startswith("mkdocstrings[python]") for req in extras["docs"])
