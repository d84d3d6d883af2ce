"""Source of a user function: its AST, where each node came from, and the names it can see."""

from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import functools
import inspect
import sys
import textwrap
from dataclasses import dataclass
from types import CodeType, FunctionType

from ..errors import Location, StencilSyntaxError
from . import dsl


@dataclass(frozen=True)
class SourceFunction:
    """A parsed function with the information needed to locate and resolve its names."""

    name: str
    filename: str
    first_line: int
    tree: ast.FunctionDef | ast.Lambda
    text: str
    namespace: dict[str, object]

    def loc(self, node: ast.AST) -> Location:
        return Location(self.filename, self.first_line + getattr(node, "lineno", 1) - 1,
                        getattr(node, "col_offset", 0) + 1)

    def line_text(self, line: int) -> str:
        lines = self.text.splitlines()
        i = line - self.first_line
        return lines[i].strip() if 0 <= i < len(lines) else ""

    def lookup(self, name: str) -> tuple[bool, object]:
        """(found, value) for a free name: closure, then module globals, then builtins."""
        if name in self.namespace:
            return True, self.namespace[name]
        if hasattr(builtins, name):
            return True, getattr(builtins, name)
        return False, None


def closure_namespace(func: FunctionType) -> dict[str, object]:
    ns = dict(func.__globals__)
    if func.__closure__:
        for name, cell in zip(func.__code__.co_freevars, func.__closure__):
            try:
                ns[name] = cell.cell_contents
            except ValueError:  # an empty cell: defined later in the enclosing scope
                pass
    return ns


def parse_function(func: object) -> SourceFunction:
    """Parse ``func``'s source (not its bytecode). The definition is found from the code
    object, never by name: its first line (``co_firstlineno``), ``co_name`` (which renaming
    ``__name__`` does not change) and, for lambdas, the columns of its instructions
    (``co_positions``), so that several kernels on one line are told apart."""
    if not isinstance(func, FunctionType):
        raise StencilSyntaxError(f"{func!r} is not a Python function",
                                 hint="decorate a plain `def` function")
    name = func.__name__
    try:
        all_lines, lnum = inspect.findsource(func)
    except (OSError, TypeError) as exc:
        raise StencilSyntaxError(
            f"cannot read the source of '{name}' ({exc})", stencil=name,
            hint="define the kernel in a file (not in an interactive prompt without source)"
        ) from exc
    filename = inspect.getsourcefile(func) or func.__code__.co_filename
    text = "".join(all_lines)
    index = _file_index(text)  # the whole file (or notebook cell): exact lines and columns
    first, indent, shift = 1, 0, 0
    shared = index is not None
    if index is None:  # only the definition's lines
        lines = inspect.getblock(all_lines[lnum:])
        first = lnum + 1
        text = textwrap.dedent("".join(lines))
        indent = len(lines[0].rstrip("\r\n")) - len(text.splitlines()[0]) if text else 0
        tree, shift = _parse_fragment(text, name)
        index = _Index.of(tree)
    target = _find_definition(index, func.__code__, first, indent, shift)
    if target is None:
        raise StencilSyntaxError(f"cannot find the definition of '{name}' in its source",
                                 stencil=name, loc=Location(filename, first))
    if shared:  # a copy: the frontend rewrites its tree in place
        try:
            target = copy.deepcopy(target)
        except RecursionError:  # too deep to copy: a fresh parse (the frontend says why)
            target = _find_definition(_Index.of(ast.parse(text)), func.__code__, 1, 0, 0)
            assert target is not None
    if isinstance(target, ast.FunctionDef):
        target = _strip_decorators(target)
    return SourceFunction(name, filename, first, target, text, closure_namespace(func))


@dataclass(frozen=True)
class _Index:
    """The function definitions (by their first line, decorators included) and lambdas (by
    line) of a parsed source: one walk of the tree, however many kernels the file holds."""

    defs: dict[int, list[ast.FunctionDef]]
    lambdas: dict[int, list[ast.Lambda]]

    @staticmethod
    def of(tree: ast.Module) -> _Index:
        defs: dict[int, list[ast.FunctionDef]] = {}
        lambdas: dict[int, list[ast.Lambda]] = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.FunctionDef):
                line = min([n.lineno] + [x.lineno for x in n.decorator_list])
                defs.setdefault(line, []).append(n)
            elif isinstance(n, ast.Lambda):
                lambdas.setdefault(n.lineno, []).append(n)
        return _Index(defs, lambdas)


@functools.lru_cache(maxsize=16)
def _file_index(text: str) -> _Index | None:
    """The index of a whole file's text, None if it does not parse. Cached by the text: a
    module of many kernels was parsed and walked once per kernel (and per frontend asking),
    which made building its kernels quadratic in their number. The nodes are shared: callers
    get copies (``parse_function``)."""
    try:
        return _Index.of(ast.parse(text))
    except SyntaxError:
        return None


def _find_definition(index: _Index, code: CodeType, first: int, indent: int, shift: int
                     ) -> ast.FunctionDef | ast.Lambda | None:
    """The node of ``index`` (of the source starting at line ``first``, dedented by
    ``indent`` columns, its first line shifted right by ``shift``) that compiled to ``code``."""
    line = code.co_firstlineno - first + 1
    if code.co_name != "<lambda>":
        defs = index.defs.get(line, [])
        return next((n for n in defs if n.name == code.co_name), defs[0] if defs else None)
    argnames = list(code.co_varnames[: code.co_argcount])
    lambdas = [n for n in index.lambdas.get(line, [])
               if [a.arg for a in n.args.args] == argnames]
    if len(lambdas) <= 1:
        return lambdas[0] if lambdas else None

    def span(n: ast.Lambda) -> tuple[tuple[int, int], tuple[int, int]]:
        def at(lineno: int, col: int) -> tuple[int, int]:
            return first + lineno - 1, col + indent - (shift if lineno == 1 else 0)
        return at(n.lineno, n.col_offset), at(n.end_lineno or n.lineno, n.end_col_offset or 0)

    if sys.version_info < (3, 11):  # no instruction columns (co_positions) to tell them apart
        return None
    # the body's instructions (the function's entry and exit have empty spans)
    positions = [(ln, col) for ln, _, col, end in code.co_positions()
                 if ln is not None and col is not None and end is not None and end > col]
    inside = [n for n in lambdas if all(span(n)[0] <= p < span(n)[1] for p in positions)]
    if not inside:
        return None
    # nested lambdas: the innermost one that holds every instruction
    return min(inside, key=lambda n: (span(n)[1][0] - span(n)[0][0], span(n)[1][1] - span(n)[0][1]))


def _parse_fragment(text: str, name: str) -> tuple[ast.Module, int]:
    """The parsed source, and how far its first line moved right (left when leading blanks
    were stripped, right by one when it was wrapped in parentheses to parse)."""
    try:
        return ast.parse(text), 0
    except SyntaxError:
        pass
    # A lambda inside a larger expression: keep the first line(s) that parse.
    lines = text.splitlines()
    for end in range(len(lines), 0, -1):
        raw = "\n".join(lines[:end])
        chunk = raw.strip()
        lead = len(raw) - len(raw.lstrip())
        for candidate, shift in ((chunk, -lead), (chunk.rstrip(",)"), -lead),
                                 ("(" + chunk + ")", 1 - lead)):
            try:
                return ast.parse(candidate), shift
            except SyntaxError:
                continue
    raise StencilSyntaxError(f"cannot parse the source of '{name}'", stencil=name)


def _strip_decorators(node: ast.FunctionDef) -> ast.FunctionDef:
    node.decorator_list = []
    return node


def dsl_source(func: FunctionType, stencil: str | None = None) -> SourceFunction:
    """``func``'s source, its free names resolved with the gtscript names underneath its own
    scope (as in GT4Py, a definition need not import ``computation``, ``sqrt``, ...)."""
    src = parse_function(func)
    return dataclasses.replace(src, namespace={**dsl.vocabulary(), **src.namespace})
