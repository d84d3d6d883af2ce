"""Python's constructs in plain words, for messages (never an AST class name: a user wrote
``[x for x in a]``, not a ``ListComp``)."""

from __future__ import annotations

import ast

_WORDS: dict[type, str] = {
    ast.ListComp: "list comprehensions", ast.SetComp: "set comprehensions",
    ast.DictComp: "dict comprehensions", ast.GeneratorExp: "generator expressions",
    ast.Lambda: "lambda expressions", ast.JoinedStr: "f-strings",
    ast.FormattedValue: "f-strings", ast.Await: "`await`", ast.Yield: "`yield`",
    ast.YieldFrom: "`yield from`", ast.Starred: "starred expressions (`*x`)",
    ast.Dict: "dict literals", ast.Set: "set literals", ast.List: "list literals",
    ast.Tuple: "tuples", ast.NamedExpr: "assignment expressions (`:=`)",
    ast.Slice: "slices", ast.Attribute: "attribute access",
    ast.Expr: "expression statements (a value computed and dropped)",
    ast.With: "`with` blocks", ast.AsyncWith: "`async with` blocks",
    ast.Try: "`try` blocks", ast.Raise: "`raise`", ast.Assert: "`assert`",
    ast.Delete: "`del`", ast.Import: "imports", ast.ImportFrom: "imports",
    ast.Global: "`global`", ast.Nonlocal: "`nonlocal`", ast.FunctionDef: "nested functions",
    ast.AsyncFunctionDef: "nested functions", ast.ClassDef: "class definitions",
    ast.Break: "`break`", ast.Continue: "`continue`", ast.AsyncFor: "`async for`",
    ast.For: "`for` loops other than `for NAME in range(...)`",
    ast.AugAssign: "augmented assignments (`+=`) to this target",
    ast.AnnAssign: "annotated assignments", ast.Match: "`match` statements",
}
if hasattr(ast, "TryStar"):
    _WORDS[ast.TryStar] = "`try` blocks"


def construct(node: ast.AST) -> str:
    """What ``node`` is, in the words of the Python tutorial."""
    for t, words in _WORDS.items():
        if type(node) is t:
            return words
    return f"this construct (`{ast.unparse(node)[:40]}`)" if isinstance(
        node, (ast.expr, ast.stmt)) else "this construct"
