"""A computation called with one array for a written field and a read one (GT4Py's Burgers
demo passes the same array as input and output).

GT4Py has no aliasing rule: it hands the arrays through, and its ``"numpy"`` backend, the
reference, runs each statement over the compute domain (a PARALLEL interval at once, a
FORWARD/BACKWARD one level by level) with NumPy, which evaluates a right-hand side completely
before it assigns. So a read of the input sees the memory as the statements before it left
it. Here, with ``w`` the written field and ``r`` the read one:

- a read of ``r`` at no offset, or at a K offset only in a FORWARD/BACKWARD computation,
  becomes a read of ``w``: the schedule orders it after the writes before it and before
  those after it, as for any field;
- a read at another offset before ``w`` is first written (or in the statement that first
  writes it) reads ``r``, which the call binds to a copy of the array made before it runs:
  the values the memory still holds then;
- a read at such an offset after ``w`` was written (or at a horizontal offset anywhere in
  a FORWARD/BACKWARD computation that writes ``w``) would read new values inside the
  compute domain and old ones in the halo in GT4Py, an order no schedule reproduces (GT4Py
  rejects that read under the field's own name): an ``ArgumentError`` says to pass a copy.

Only identical arrays alias (same address, shape, strides and dtype); other overlaps stay
an error (``runtime.computation_args``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import ArgumentError
from ..ir import computation as c
from ..ir import definition as d
from ..ir.core import rewrite, walk


def same_array(a: object, b: object) -> bool:
    """Whether ``a`` and ``b`` are views of exactly the same elements."""
    if a is b:
        return isinstance(a, np.ndarray)
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) \
            or not np.may_share_memory(a, b):  # every call asks: the cheap test first
        return False
    return a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype and \
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]


def aliased_pairs(fields: dict[str, object], written: tuple[str, ...]
                  ) -> frozenset[tuple[str, str]]:
    """(written field, read-only field) for each pair passed the same array (every call
    asks: plain loops, and ``same_array`` only for arrays of one shape)."""
    pairs = None
    for w in written:
        a = fields[w]
        shape = getattr(a, "shape", None)
        for r, b in fields.items():
            if b is a or (getattr(b, "shape", None) == shape and r != w and same_array(a, b)):
                if r != w and r not in written:
                    pairs = pairs or set()
                    pairs.add((w, r))
    return _NONE if pairs is None else frozenset(pairs)


_NONE: frozenset[tuple[str, str]] = frozenset()


def mergeable(definition: c.ComputationDef, pairs: frozenset[tuple[str, str]]) -> bool:
    """Whether each pair declares the same field type and each read field aliases one
    written field (else the overlap stays an error)."""
    for w, r in pairs:
        fw, fr = definition.field(w), definition.field(r)
        if fw is None or fr is None or (fw.axes, fw.dtype, fw.data_dims) != (
                fr.axes, fr.dtype, fr.data_dims):
            return False
    return len({r for _, r in pairs}) == len(pairs)


def snapshot(values: dict[str, object], pairs: frozenset[tuple[str, str]]) -> dict[str, object]:
    """The call's values with each read field of ``pairs`` a copy made now."""
    out = dict(values)
    for _, r in pairs:
        out[r] = np.array(values[r], copy=True, order="K")
    return out


def merge_aliases(definition: c.ComputationDef, pairs: frozenset[tuple[str, str]]
                  ) -> c.ComputationDef:
    """``definition`` (parsed, untyped) with the reads of each read field of ``pairs``
    rewritten for GT4Py's ``"numpy"`` semantics of the two sharing memory."""
    to = {r: w for w, r in pairs}
    done: set[str] = set()  # written fields an earlier statement wrote

    def reads(e, sequential: bool, block_writes: set[str]):
        def visit(n):
            if not (isinstance(n, d.Access) and n.field in to):
                return None
            w = to[n.field]
            di, dj, dk = _offsets(n)[:3]
            if (di, dj, dk) == (0, 0, 0) or (sequential and (di, dj) == (0, 0)):
                return dataclasses.replace(n, field=w)
            if w in done or (sequential and w in block_writes):
                raise ArgumentError(
                    f"fields '{n.field}' and '{w}' are passed the same array, and "
                    f"'{n.field}' is read at the offset ({di}, {dj}, {dk}) "
                    + ("after" if w in done else "in a FORWARD/BACKWARD computation where")
                    + f" '{w}' is written: GT4Py reads new values inside the domain and old "
                    "ones in the halo there", stencil=definition.name, loc=n.loc,
                    hint=f"pass a copy of the array for '{n.field}'")
            return None  # the copy of the array made before the call
        return rewrite(e, visit)

    def stmts(body: tuple[d.Stmt, ...], sequential: bool, block_writes: set[str]
              ) -> tuple[d.Stmt, ...]:
        out: list[d.Stmt] = []
        for s in body:
            if isinstance(s, d.If):
                cond = reads(s.cond, sequential, block_writes)
                before = set(done)
                then = stmts(s.body, sequential, block_writes)
                written_then = set(done)
                done.intersection_update(before)  # the branches are alternatives
                orelse = stmts(s.orelse, sequential, block_writes)
                done.update(written_then)
                out.append(dataclasses.replace(s, cond=cond, body=then, orelse=orelse))
                continue
            out.append(reads(s, sequential, block_writes))
            if isinstance(s, d.Assign):
                done.add(s.target)
            elif any(isinstance(n, d.Assign) for n in walk(s)):  # a loop: its body writes
                done.update(n.target for n in walk(s) if isinstance(n, d.Assign))
        return tuple(out)

    blocks = []
    for block in definition.blocks:
        writes = {n.target for iv in block.intervals for n in walk(iv)
                  if isinstance(n, d.Assign)}
        sequential = block.policy != "PARALLEL"
        blocks.append(dataclasses.replace(block, intervals=tuple(
            dataclasses.replace(iv, body=stmts(iv.body, sequential, writes))
            for iv in block.intervals)))
    return dataclasses.replace(definition, blocks=tuple(blocks))


def _offsets(access: d.Access) -> tuple[int, ...]:
    """The offsets, a non-constant one (a data-dimension index) counted as 1."""
    return tuple(o.value if isinstance(o, d.Const) and isinstance(o.value, int) else 1
                 for o in access.offset)
