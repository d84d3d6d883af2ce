"""The module import graph of a package, read with ``ast`` (issue 26): its cycles and its
layer violations.

What counts as an edge ``a -> b`` (``a`` imports ``b``):

- every ``import`` and ``from ... import`` statement in ``a``, at module level or inside a
  function, class or ``try`` block: an import inside a function is still a dependency, it
  only runs later;
- except the statements under ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``), which
  never run; their names are for type checkers only;
- relative imports are resolved against ``a``'s package;
- ``from pkg import name`` is an edge to ``pkg.name`` when that is a module of the package,
  otherwise to ``pkg`` (``name`` is then an attribute of ``pkg``'s ``__init__``);
- ``import pkg.sub.mod`` is an edge to ``pkg.sub.mod`` only: Python also runs ``pkg`` and
  ``pkg.sub`` first, but that implicit parent-package edge is not counted (otherwise every
  module would depend on its package's ``__init__`` and every re-exporting ``__init__``
  would close a cycle).

Run as a script it prints the graph's cycles (strongly connected components of more than
one module, or a module importing itself) and the imports that break the layer table::

    python tools/import_graph.py [src/stencilkit]
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = ROOT / "src" / "stencilkit"


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's edge: who imports whom, where, and whether at call time."""

    source: str
    target: str
    line: int
    in_function: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        where = " (inside a function)" if self.in_function else ""
        return f"{self.source} -> {self.target}  [line {self.line}]{where}"


def discover(package_dir: Path) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file under ``package_dir`` (itself a package)."""
    modules: dict[str, Path] = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = path.relative_to(package_dir.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


class _ImportCollector(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: Iterable[str]) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.known = frozenset(known)
        self.depth = 0  # > 0 inside a function body
        self.imports: list[Import] = []

    def _add(self, target: str, node: ast.stmt) -> None:
        self.imports.append(Import(self.module, target, node.lineno, self.depth > 0))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):  # the body never runs; the else branch does
            for stmt in node.orelse:
                self.visit(stmt)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            # the deepest known module the dotted name names (`import a.b.c` -> a.b.c)
            parts = alias.name.split(".")
            for end in range(len(parts), 0, -1):
                name = ".".join(parts[:end])
                if name in self.known:
                    self._add(name, node)
                    break

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        to_package = False
        for alias in node.names:
            sub = f"{target}.{alias.name}"
            if alias.name != "*" and sub in self.known:
                self._add(sub, node)
            else:
                to_package = True
        if to_package and target in self.known:
            self._add(target, node)


def module_imports(module: str, path: Path, known: Iterable[str]) -> list[Import]:
    """The edges out of one module (see the module docstring for what counts)."""
    collector = _ImportCollector(module, path.name == "__init__.py", known)
    collector.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    return collector.imports


@dataclass(frozen=True)
class ImportGraph:
    """Modules and the import statements between them."""

    modules: tuple[str, ...]
    imports: tuple[Import, ...]

    @classmethod
    def of_package(cls, package_dir: Path = PACKAGE_DIR) -> ImportGraph:
        files = discover(package_dir)
        found = [imp for name, path in files.items() for imp in module_imports(name, path, files)]
        return cls(tuple(files), tuple(found))

    @classmethod
    def from_edges(cls, edges: Mapping[str, Iterable[str]]) -> ImportGraph:
        """A synthetic graph (for tests): ``{"a": ["b"], ...}``."""
        names = set(edges) | {t for targets in edges.values() for t in targets}
        found = tuple(Import(s, t, 0) for s, targets in edges.items() for t in targets)
        return cls(tuple(sorted(names)), found)

    def successors(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {m: set() for m in self.modules}
        for imp in self.imports:
            out[imp.source].add(imp.target)
        return out

    def cycles(self) -> list[frozenset[str]]:
        """The strongly connected components that contain a cycle, largest first."""
        succ = self.successors()
        found = [c for c in strongly_connected(succ)
                 if len(c) > 1 or next(iter(c)) in succ[next(iter(c))]]
        return sorted(found, key=lambda c: (-len(c), sorted(c)))

    def cyclic_modules(self) -> frozenset[str]:
        return frozenset().union(*self.cycles())

    def edges_within(self, component: frozenset[str]) -> list[Import]:
        """The import statements that close ``component``'s cycles (both ends inside it)."""
        return sorted((i for i in self.imports if i.source in component and i.target in component),
                      key=lambda i: (i.source, i.line, i.target))


def strongly_connected(succ: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """Tarjan's algorithm, iterative (a deep import chain must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[frozenset[str]] = []
    for root in sorted(succ):
        if root in index:
            continue
        # each frame: the node and an iterator over its successors not yet looked at
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(succ.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                members = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    members.add(top)
                    if top == node:
                        break
                components.append(frozenset(members))
    return components


# --- layers -----------------------------------------------------------------------------
#
# The dependency rule of issue 26 and DESIGN.md ("Who composes the pipeline"): user API ->
# driver -> {frontend, analysis, lowering, targets, printers, build} -> IR; runtime -> IR;
# adapters -> API. A layer may import its own modules and the layers ALLOWED lists.
#
# What the code showed and what was decided where the rule is silent:
# - The IR imports nothing of stencilkit: it is the bottom. The base (errors, dtypes, config,
#   log, arrays, _version) sits just above it: errors carry an IR Location, and everything
#   else imports the base. The base reaches nothing higher: what it needs from above (the
#   backend names configure() accepts, the lazy queue's flush, the traceback policy) is
#   installed into it by the layer above (a setter or a subscription), never imported.
# - The compiler stages form an order, not a web: frontend < analysis < passes < codegen <
#   build. Analyses read the frontend's products, lowering uses analyses, printers print what
#   the passes (platforms) planned; a pass never imports a printer and an analysis never a
#   pass (the names both read, like the single-exit RESULT, live in the IR).
# - The runtime may use the base, the IR and build (loading what was built); never a pass,
#   a printer or a user object (it works from the IR and, after issue 26, ir/abi.py).
# - The driver (compile/, registry/) composes all the stages and the runtime; the user API
#   (stencil, multistage, parloop, loop, storage, gtscript's stencil(), ...) sits on the
#   driver; adapters (adapters/, the distributed/ library they call, the Numba call
#   paths) sit on the API;
#   tools (bench, cli, the demo) on everything. The package's __init__ is the facade: it
#   re-exports from every layer and nothing inside the package imports it (the tools may:
#   they are application code, written as users write it).

IR = "ir"
BASE = "base"
FRONTEND = "frontend"  # parsing user definitions, and the gtscript DSL vocabulary it reads
ANALYSIS = "analysis"
PASSES = "lower"       # lowering and the targets (platform passes)
CODEGEN = "codegen"    # printers
BUILD = "build"
RUNTIME = "runtime"
DRIVER = "driver"      # compile/, registry/ (the backends' stage tables)
API = "api"            # the user objects and entry points
ADAPTERS = "adapters"  # adapters/ (but the protocol), distributed/, the Numba call paths
TOOLS = "tools"        # application code: bench, cli, the demo
FACADE = "facade"      # the package's __init__

#: Package (a prefix: every module under it) or module -> layer; the longest match wins.
#: A module matching nothing is an error: a new module gets its layer here.
LAYER_OF: dict[str, str] = {
    "stencilkit.ir": IR,
    "stencilkit.errors": BASE, "stencilkit.dtypes": BASE, "stencilkit.config": BASE,
    "stencilkit.log": BASE, "stencilkit.arrays": BASE, "stencilkit._version": BASE,
    "stencilkit.frontend": FRONTEND,
    "stencilkit.analysis": ANALYSIS,
    "stencilkit.lower": PASSES, "stencilkit.targets": PASSES,
    "stencilkit.codegen": CODEGEN,
    "stencilkit.build": BUILD,
    "stencilkit.runtime": RUNTIME,
    "stencilkit.compile": DRIVER, "stencilkit.registry": DRIVER,
    "stencilkit.api.stencil": API, "stencilkit.api.multistage": API, "stencilkit.api.parloop": API,
    "stencilkit.api.loop": API, "stencilkit.storage": API, "stencilkit.gtscript": API,
    "stencilkit.api.export": API, "stencilkit.api.show": API, "stencilkit.api": API,
    "stencilkit.integrations": ADAPTERS, "stencilkit.distributed": ADAPTERS,
    # the protocol is the user objects' (they ask it); the adapters plugged into it are not
    "stencilkit.adapters": API, "stencilkit.adapters.mpi": ADAPTERS,
    "stencilkit.adapters.device": ADAPTERS, "stencilkit.adapters.dask_xarray": ADAPTERS,
    "stencilkit.adapters.device_computation": ADAPTERS,
    "stencilkit.adapters.device_parloop": ADAPTERS,
    "stencilkit.adapters.pickling": ADAPTERS, "stencilkit.adapters.numba": ADAPTERS,
    "stencilkit.adapters.dask": ADAPTERS, "stencilkit.adapters.xarray": ADAPTERS,
    "stencilkit.adapters.mpi_point": ADAPTERS, "stencilkit.adapters.mpi_computation": ADAPTERS,
    "stencilkit.adapters.opencl_arrays": ADAPTERS,
    "stencilkit.adapters.numba_calls": ADAPTERS,
    "stencilkit.adapters.numba_computation_calls": ADAPTERS, "stencilkit.adapters.numba_hook": ADAPTERS,
    "stencilkit.api.parloop_checks": API,
    "stencilkit.bench": TOOLS, "stencilkit.bench_definitions": TOOLS,
    "stencilkit.bench_handc": TOOLS, "stencilkit.cli": TOOLS, "stencilkit.__main__": TOOLS,
    "stencilkit.distributed.demo": TOOLS,
    "stencilkit": FACADE,
}

_STAGES = (FRONTEND, ANALYSIS, PASSES, CODEGEN, BUILD)
#: layer -> the other layers it may import
ALLOWED: dict[str, frozenset[str]] = {
    IR: frozenset(),
    BASE: frozenset({IR}),
    FRONTEND: frozenset({IR, BASE}),
    ANALYSIS: frozenset({IR, BASE, FRONTEND}),
    PASSES: frozenset({IR, BASE, FRONTEND, ANALYSIS}),
    CODEGEN: frozenset({IR, BASE, ANALYSIS, PASSES}),
    BUILD: frozenset({IR, BASE, CODEGEN}),
    RUNTIME: frozenset({IR, BASE, BUILD}),
    DRIVER: frozenset({IR, BASE, *_STAGES, RUNTIME}),
    API: frozenset({IR, BASE, *_STAGES, RUNTIME, DRIVER}),
    ADAPTERS: frozenset({IR, BASE, *_STAGES, RUNTIME, DRIVER, API}),
    TOOLS: frozenset({IR, BASE, *_STAGES, RUNTIME, DRIVER, API, ADAPTERS, FACADE}),
    FACADE: frozenset({IR, BASE, *_STAGES, RUNTIME, DRIVER, API, ADAPTERS}),
}


def layer_of(module: str, table: Mapping[str, str] = LAYER_OF) -> str:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        # the top package's entry stands for its __init__ only, not for everything under it
        if name in table and (end > 1 or module == name):
            return table[name]
    raise KeyError(f"{module}: no layer in the table (add it to LAYER_OF)")


def layer_violations(graph: ImportGraph, table: Mapping[str, str] = LAYER_OF,
                     allowed: Mapping[str, frozenset[str]] = ALLOWED) -> list[Import]:
    """The imports from a layer into one it may not import."""
    bad = []
    for imp in graph.imports:
        src, dst = layer_of(imp.source, table), layer_of(imp.target, table)
        if src != dst and dst not in allowed[src]:
            bad.append(imp)
    return sorted(bad, key=lambda i: (i.source, i.line, i.target))


def main(argv: list[str]) -> int:
    package_dir = Path(argv[0]) if argv else PACKAGE_DIR
    graph = ImportGraph.of_package(package_dir)
    cycles = graph.cycles()
    print(f"{len(graph.modules)} modules, {len(graph.imports)} imports "
          f"({sum(i.in_function for i in graph.imports)} inside functions)")
    print(f"\n{len(cycles)} cycle(s):")
    for component in cycles:
        print(f"\n  {len(component)} modules: {', '.join(sorted(component))}")
        for imp in graph.edges_within(component):
            print(f"    {imp}")
    violations = layer_violations(graph)
    print(f"\n{len(violations)} layer violation(s):")
    for imp in violations:
        print(f"  {layer_of(imp.source)} -> {layer_of(imp.target)}: {imp}")
    return 1 if cycles or violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
