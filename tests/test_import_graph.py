"""No import cycle, and imports that follow the layers (issue 26; DESIGN.md, "Who composes
the pipeline").

The graph is ``tools/import_graph.py``'s: every import statement of ``src/stencilkit``, at
module level or inside a function, but those under ``if TYPE_CHECKING:``. Two frozen
allowlists hold what the parts of issue 26 still being rewritten leave: ``STILL_CYCLIC``
(modules in a cycle) and ``STILL_CROSSING`` (imports against the layer table). Both may
only shrink: a module or import that no longer needs its entry fails the test until the
entry is deleted.
"""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools" / "import_graph.py")
ig = importlib.util.module_from_spec(_spec)
sys.modules["import_graph"] = ig  # dataclasses look their module up by name
_spec.loader.exec_module(ig)

# No module is in a cycle any more (issue 26 is in): an entry here would have to name the
# modules of a new cycle, and the test fails until it is deleted again.
STILL_CYCLIC: frozenset[str] = frozenset()

# Imports against the layer table (tools/import_graph.py, LAYER_OF and ALLOWED), as
# "importer -> imported", each with why it is still there.
STILL_CROSSING = frozenset({
    # build -> runtime: the Numba module loader hands the thread count to Numba
    "stencilkit.build.numba_module -> stencilkit.runtime.threads",
    # frontend -> analysis: np.array([...]) in a point kernel types its elements as the
    # typing pass does (issue 28's window arrays)
    "stencilkit.frontend.local_arrays -> stencilkit.analysis.typing",
    # passes -> codegen: OpenCL's platform reads the C-family printer's names
    "stencilkit.targets.opencl -> stencilkit.codegen.cfamily",
    # runtime -> analysis, codegen: a computation's run-time K error names the reads (the
    # schedule's), a point call's error names Numba's messages, OpenCL's launcher prints
    # the variants a call plans
    "stencilkit.runtime.computation -> stencilkit.analysis.schedule",
    "stencilkit.runtime.launch -> stencilkit.codegen.numba",
    "stencilkit.runtime.opencl_launch -> stencilkit.codegen.opencl",
})


def cycle_problems(graph: ig.ImportGraph, allowed: frozenset[str]) -> list[str]:
    """What is wrong with ``graph``'s cycles given the allowlist: a module in a cycle it does
    not name, or a name it holds of a module that is in none (or gone)."""
    problems = []
    for component in graph.cycles():
        new = sorted(component - allowed)
        if new:
            closing = "\n    ".join(map(str, graph.edges_within(component)))
            problems.append(f"import cycle through {new} ({len(component)} modules in all); "
                            f"the imports that close it:\n    {closing}")
    stale = sorted(allowed - graph.cyclic_modules())
    if stale:
        problems.append(f"no longer in a cycle, delete from STILL_CYCLIC: {stale}")
    return problems


def layer_problems(graph: ig.ImportGraph, allowed: frozenset[str]) -> list[str]:
    """Imports against the layer table that the allowlist does not name, and names in it
    that no longer cross a layer."""
    crossing = {f"{i.source} -> {i.target}": i for i in ig.layer_violations(graph)}
    problems = [f"{ig.layer_of(i.source)} may not import {ig.layer_of(i.target)}: {i}"
                for key, i in sorted(crossing.items()) if key not in allowed]
    stale = sorted(allowed - set(crossing))
    if stale:
        problems.append(f"no longer against the layers, delete from STILL_CROSSING: {stale}")
    return problems


@pytest.fixture(scope="module")
def graph() -> ig.ImportGraph:
    return ig.ImportGraph.of_package()


def test_no_import_cycle_beyond_the_allowlist(graph):
    assert not cycle_problems(graph, STILL_CYCLIC), "\n".join(cycle_problems(graph, STILL_CYCLIC))


def test_imports_follow_the_layers(graph):
    problems = layer_problems(graph, STILL_CROSSING)
    assert not problems, "\n".join(problems)


def test_the_low_layers_are_out_of_every_cycle(graph):
    """What issue 26's "cycles" part freed, named so that the allowlist cannot take it back."""
    low = [m for m in graph.modules if ig.layer_of(m) in
           (ig.IR, ig.BASE, ig.FRONTEND, ig.ANALYSIS, ig.CODEGEN)
           or m in ("stencilkit.build.cache", "stencilkit.build.toolchain",
                    "stencilkit.build.verdicts", "stencilkit.build.extension",
                    "stencilkit.gtscript")
           or (m.startswith("stencilkit.lower.") and not m.startswith("stencilkit.targets"))]
    assert len(low) > 50
    assert sorted(set(low) & graph.cyclic_modules()) == []
    assert sorted(set(low) & STILL_CYCLIC) == []


# ---------------------------------------------------------------- the checks can fail


def _with(graph: ig.ImportGraph, *edges: tuple[str, str]) -> ig.ImportGraph:
    extra = tuple(ig.Import(a, b, 1, True) for a, b in edges)
    return ig.ImportGraph(graph.modules, graph.imports + extra)


def test_a_new_cycle_fails(graph):
    # errors asking the registry something inside a function: the kind of edge this removed
    bad = _with(graph, ("stencilkit.errors", "stencilkit.registry"))
    problems = cycle_problems(bad, STILL_CYCLIC)
    assert len(problems) == 1 and "stencilkit.errors" in problems[0]
    assert "stencilkit.errors -> stencilkit.registry  [line 1] (inside a function)" in problems[0]
    # ... also between two modules no allowlist mentions
    bad = _with(graph, ("stencilkit.ir.core", "stencilkit.ir.kernel"))
    assert "['stencilkit.ir.core', 'stencilkit.ir.kernel']" in cycle_problems(bad, STILL_CYCLIC)[0]


def test_the_allowlists_only_shrink(graph):
    problems = cycle_problems(graph, STILL_CYCLIC | {"stencilkit.dtypes", "stencilkit.gone"})
    assert problems == ["no longer in a cycle, delete from STILL_CYCLIC: "
                        "['stencilkit.dtypes', 'stencilkit.gone']"]
    problems = layer_problems(graph, STILL_CROSSING | {"stencilkit.ir.core -> stencilkit.errors"})
    assert problems == ["no longer against the layers, delete from STILL_CROSSING: "
                        "['stencilkit.ir.core -> stencilkit.errors']"]


def test_an_upward_import_fails(graph):
    bad = _with(graph, ("stencilkit.config", "stencilkit.registry"),
                ("stencilkit.codegen.c", "stencilkit.build.toolchain"))
    problems = layer_problems(bad, STILL_CROSSING)
    assert problems == [
        "codegen may not import build: stencilkit.codegen.c -> stencilkit.build.toolchain  "
        "[line 1] (inside a function)",
        "base may not import driver: stencilkit.config -> stencilkit.registry  "
        "[line 1] (inside a function)"]


def test_the_layers_are_an_order():
    """No two layers may import each other, directly or around: the table itself is free
    of cycles, so that fixing the crossings leaves none between layers."""
    assert ig.ImportGraph.from_edges(ig.ALLOWED).cycles() == []
    assert ig.ImportGraph.from_edges({**ig.ALLOWED, ig.IR: {ig.BASE}}).cycles() != []


def test_every_module_has_a_layer(graph):
    for module in graph.modules:
        assert ig.layer_of(module) in ig.ALLOWED
    with pytest.raises(KeyError, match="stencilkit.newthing: no layer"):
        ig.layer_of("stencilkit.newthing")
    assert ig.layer_of("stencilkit") == ig.FACADE
    assert ig.layer_of("stencilkit.distributed.demo") == ig.TOOLS
    assert ig.layer_of("stencilkit.distributed.halo") == ig.ADAPTERS


# ---------------------------------------------------------------- the graph code


def test_strongly_connected_components():
    g = ig.ImportGraph.from_edges({"a": ["b"], "b": ["c"], "c": ["a", "d"], "d": [],
                                   "e": ["e"], "f": ["a"]})
    assert g.cycles() == [frozenset("abc"), frozenset("e")]
    assert g.cyclic_modules() == frozenset("abce")
    assert ig.ImportGraph.from_edges({"a": ["b"], "b": ["c"], "d": ["b"]}).cycles() == []


def test_a_deep_chain_needs_no_recursion():
    n = 3 * sys.getrecursionlimit()
    chain = {f"m{i}": [f"m{i + 1}"] for i in range(n)}
    assert ig.ImportGraph.from_edges(chain).cycles() == []
    chain[f"m{n}"] = ["m0"]
    assert len(ig.ImportGraph.from_edges(chain).cycles()[0]) == n + 1


def test_what_counts_as_an_import(tmp_path):
    pkg = tmp_path / "pkg"
    files = {
        "__init__.py": "from . import a\n",
        "a.py": """\
            from typing import TYPE_CHECKING

            import pkg.sub.deep
            from .sub import helper_name, other

            if TYPE_CHECKING:
                from . import b
            else:
                from . import c

            def late():
                from .b import thing
                return thing
            """,
        "b.py": "import typing\nif typing.TYPE_CHECKING:\n    from pkg import a\n",
        "c.py": "",
        "sub/__init__.py": "helper_name = 1\n",
        "sub/other.py": "from .. import c\nfrom ..sub import *\n",
        "sub/deep.py": "from ... import outside\n",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(textwrap.dedent(text))
    g = ig.ImportGraph.of_package(pkg)
    assert sorted(g.modules) == ["pkg", "pkg.a", "pkg.b", "pkg.c", "pkg.sub", "pkg.sub.deep",
                                 "pkg.sub.other"]
    got = {(i.source, i.target, i.line, i.in_function) for i in g.imports}
    assert got == {
        ("pkg", "pkg.a", 1, False),
        # `import pkg.sub.deep`: the module named, not the packages above it
        ("pkg.a", "pkg.sub.deep", 3, False),
        # a name of the package and a submodule: one edge each
        ("pkg.a", "pkg.sub", 4, False), ("pkg.a", "pkg.sub.other", 4, False),
        # the TYPE_CHECKING branch is left out, its else branch is not
        ("pkg.a", "pkg.c", 9, False),
        ("pkg.a", "pkg.b", 12, True),  # inside a function: counted
        ("pkg.sub.other", "pkg.c", 1, False), ("pkg.sub.other", "pkg.sub", 2, False),
        # `from ... import outside` leaves the package: no edge
    }


def test_the_script_prints_the_cycles(tmp_path):
    pkg = tmp_path / "stencilkit"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("def f():\n    from .config import x\n")
    (pkg / "config.py").write_text("from .errors import f\n")
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "import_graph.py"), str(pkg)],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 1, run.stderr
    assert "1 cycle(s):" in run.stdout and "2 modules: stencilkit.config, stencilkit.errors" \
        in run.stdout
    assert "stencilkit.errors -> stencilkit.config  [line 2] (inside a function)" in run.stdout
    assert "0 layer violation(s)" in run.stdout


# ---------------------------------------------------------------- the gtscript split


def test_gtscript_is_the_vocabulary_plus_stencil():
    from stencilkit import gtscript
    from stencilkit.frontend import dsl

    for name in (*dsl.DSL_NAMES, "function", "GTFunction", "Policy", "FieldType", "Axis"):
        assert getattr(gtscript, name) is getattr(dsl, name), name
    star: dict[str, object] = {}
    exec("from stencilkit.gtscript import *", star)
    assert {"stencil", "map_backend", "BACKEND_NAMES", "Field", "computation", "sqrt",
            "round_away_from_zero"} <= set(star)
    assert gtscript.vocabulary() == dsl.vocabulary()


def test_a_helper_pickles_by_source_in_a_fresh_process(tmp_path):
    """GTFunction's reducer is registered by the pickling adapter (copyreg), which the
    package imports: `from stencilkit import gtscript` alone must be enough."""
    code = textwrap.dedent("""\
        import pickle
        from stencilkit import gtscript

        def twice(x):
            return 2 * x

        helper = gtscript.function(twice)
        clone = pickle.loads(pickle.dumps(helper))
        assert type(clone) is gtscript.GTFunction and clone.func is not twice, clone
        assert clone(3) == 6 and clone.func.__name__ == "twice"
        print("ok")
        """)
    script = tmp_path / "helper.py"
    script.write_text(code)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         check=False)
    assert run.stdout.strip() == "ok", run.stderr


def test_the_configuration_reaches_up_through_hooks():
    """config imports neither the registry, the loops nor the runtime: what it needs from
    them is installed into it (backend names, the race modes, the lazy queue's flush)."""
    import stencilkit as sk
    from stencilkit import errors
    from stencilkit.runtime import lazy

    with pytest.raises(sk.StencilError, match="backend=.*'nope'.*a backend name"):
        sk.configure(backend="nope")
    with pytest.raises(sk.StencilError, match="race='wild'.*one of"):
        sk.configure(race="wild")
    before = sk.config.current().full_tracebacks
    with sk.configure(full_tracebacks=not before):
        assert errors._full_tracebacks() is (not before)
    assert errors._full_tracebacks() is before
    ran = []
    with sk.configure(lazy=True):
        lazy.enqueue(lambda: ran.append(1))
        assert ran == []
    assert ran == [1]
    assert pickle.loads(pickle.dumps(sk.PARALLEL)) is sk.PARALLEL
