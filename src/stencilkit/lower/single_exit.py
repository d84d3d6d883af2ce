"""Turn every ``return`` of a point kernel into an assignment of one result variable.

Requires: an untyped point kernel. Ensures: no ``Return`` remains; every path assigns
``RESULT``; statements after a conditional return are copied into the branches that fall
through, and returns inside loops set ``DONE``, which guards the rest of the loop and what
follows it. A path that ends without returning is an error.
"""

from __future__ import annotations

import dataclasses

from .. import dtypes
from ..errors import StencilSyntaxError, StencilTypeError
from ..ir import definition as d
from ..ir.core import walk
from ..ir.definition import DONE, RESULT


def _has_return(stmts: tuple[d.Stmt, ...]) -> bool:
    return any(isinstance(n, d.Return) for s in stmts for n in walk(s))


def _not_done(loc) -> d.Expr:
    return d.UnaryOp("not", d.Name(DONE, loc=loc), loc=loc)


def _rewrite(stmts: tuple[d.Stmt, ...], in_loop: bool) -> tuple[tuple[d.Stmt, ...], bool]:
    """(rewritten statements, whether every path through them returns)."""
    out: list[d.Stmt] = []
    for i, s in enumerate(stmts):
        rest = stmts[i + 1:]
        match s:
            case d.Return(value=v):
                out.append(d.Assign(RESULT, v, loc=s.loc))
                if in_loop:
                    out.append(d.Assign(DONE, d.Const(True, dtype=dtypes.BOOL), loc=s.loc))
                return tuple(out), True
            case d.If(cond=c, body=b, orelse=o) if _has_return((s,)):
                b2, b_all = _rewrite(b + rest, in_loop)
                o2, o_all = _rewrite(o + rest, in_loop)
                out.append(d.If(c, b2, o2, loc=s.loc))
                return tuple(out), b_all and o_all
            case d.For(body=body) | d.While(body=body) if _has_return((s,)):
                inner, _ = _rewrite(body, True)
                guarded = (d.If(_not_done(s.loc), inner, (), loc=s.loc),)
                loop: d.Stmt
                if isinstance(s, d.While):
                    cond = d.BoolOp("and", _not_done(s.loc), s.cond, loc=s.loc)
                    loop = dataclasses.replace(s, cond=cond, body=guarded)
                else:
                    loop = dataclasses.replace(s, body=guarded)
                out.append(d.Assign(DONE, d.Const(False, dtype=dtypes.BOOL), loc=s.loc))
                out.append(loop)
                after, after_all = _rewrite(rest, in_loop)
                if after:
                    out.append(d.If(_not_done(s.loc), after, (), loc=s.loc))
                return tuple(out), after_all
            case _:
                out.append(s)
    return tuple(out), False


def single_exit(kernel: d.PointKernel) -> d.PointKernel:
    body, always = _rewrite(kernel.body, False)
    if not any(isinstance(n, d.Return) for n in walk(kernel)):
        # most often a gtscript definition whose statements are not in a computation block
        raise StencilSyntaxError(
            "the kernel has no `return` and no `with computation(...)` block", stencil=kernel.name,
            loc=kernel.loc, hint="a point kernel returns the value of one element "
            "(`return a[-1, 0] + a[1, 0]`); a gtscript computation puts its statements in "
            "`with computation(PARALLEL), interval(...):` blocks")
    if not always:
        raise StencilTypeError("not every path through the kernel returns a value",
                               stencil=kernel.name, loc=kernel.loc,
                               hint="end every branch with `return <expression>`")
    return dataclasses.replace(kernel, body=body)
