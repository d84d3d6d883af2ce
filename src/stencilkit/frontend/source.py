"""Source of a user function: its AST, where each node came from, and the names it can see."""

from __future__ import annotations

import ast
import builtins
import inspect
import textwrap
from dataclasses import dataclass
from types import FunctionType

from ..errors import Location, StencilSyntaxError


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
    """Parse ``func``'s source (not its bytecode); lambdas are found by their position."""
    if not isinstance(func, FunctionType):
        raise StencilSyntaxError(f"{func!r} is not a Python function",
                                 hint="decorate a plain `def` function")
    name = func.__name__
    try:
        lines, first = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        raise StencilSyntaxError(
            f"cannot read the source of '{name}' ({exc})", stencil=name,
            hint="define the kernel in a file (not in an interactive prompt without source)"
        ) from exc
    filename = inspect.getsourcefile(func) or func.__code__.co_filename
    text = textwrap.dedent("".join(lines))
    tree = _parse_fragment(text, name)
    target: ast.FunctionDef | ast.Lambda | None = None
    if name == "<lambda>":
        argnames = list(func.__code__.co_varnames[: func.__code__.co_argcount])
        lambdas = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
                   and [a.arg for a in n.args.args] == argnames]
        target = lambdas[0] if lambdas else None
    else:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == name:
                target = node
                break
    if target is None:
        raise StencilSyntaxError(f"cannot find the definition of '{name}' in its source",
                                 stencil=name, loc=Location(filename, first))
    if isinstance(target, ast.FunctionDef):
        target = _strip_decorators(target)
    return SourceFunction(name, filename, first, target, text, closure_namespace(func))


def _parse_fragment(text: str, name: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError:
        pass
    # A lambda inside a larger expression: keep the first line(s) that parse.
    lines = text.splitlines()
    for end in range(len(lines), 0, -1):
        chunk = "\n".join(lines[:end]).strip()
        for candidate in (chunk, chunk.rstrip(",)"), "(" + chunk + ")"):
            try:
                return ast.parse(candidate)
            except SyntaxError:
                continue
    raise StencilSyntaxError(f"cannot parse the source of '{name}'", stencil=name)


def _strip_decorators(node: ast.FunctionDef) -> ast.FunctionDef:
    node.decorator_list = []
    return node
