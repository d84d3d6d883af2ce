"""Integer literal expressions folded as CPython folds them before Numba sees the bytecode.

``-9223372036854775808``, ``2**63`` or ``1 << 63`` reach Numba as one constant (CPython's AST
optimizer, Python/ast_opt.c, folds constant operands), typed by its value: int64, or uint64
from 2**63 up. Translated operation by operation in int64 they would wrap instead (2**63 ->
-2**63). ``fold_int_literal`` evaluates such an expression with Python's arithmetic and
CPython's size limits (a result it would not fold is not folded here either).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

# CPython's limit on the bits of a folded int (MAX_INT_SIZE in Python/ast_opt.c)
_MAX_INT_SIZE = 128

_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor}


def fold_int_literal(node: ast.expr) -> int | float | None:
    """The value of an operation on int literals only (no bools), or None where CPython would
    leave it to run time (another operand, a division by zero, too large). The value is an
    int, or a float where a negative power made one (``2**-1`` is 0.5, as in Numba)."""
    if not isinstance(node, (ast.UnaryOp, ast.BinOp)):
        return None
    return _value(node)


def _value(node: ast.expr) -> int | float | None:
    if isinstance(node, ast.Constant):
        v = node.value
        return v if type(v) is int else None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        v = _value(node.operand)
        if v is None or (type(v) is float and type(node.op) is ast.Invert):
            return None
        return _UNARY[type(node.op)](v)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        a, b = _value(node.left), _value(node.right)
        if a is None or b is None or not _folds(type(node.op), a, b):
            return None
        try:
            result = _BINARY[type(node.op)](a, b)
        except (OverflowError, ZeroDivisionError):  # what CPython leaves unfolded
            return None
        return result if type(result) in (int, float) else None
    return None


def _folds(op: type, a: int | float, b: int | float) -> bool:
    """CPython's safe_multiply/safe_power/safe_lshift, and no exception at run time; a float
    operand (from a negative power) only in +, - and *, where Python's float arithmetic is
    IEEE double arithmetic as at run time."""
    if isinstance(a, float) or isinstance(b, float):  # (never a subclass: see _value)
        return op in (ast.Add, ast.Sub, ast.Mult)
    if op in (ast.FloorDiv, ast.Mod):
        return b != 0
    if op is ast.Mult and a and b:
        return a.bit_length() + b.bit_length() <= _MAX_INT_SIZE
    if op is ast.Pow and a and b > 0:
        return a.bit_length() <= _MAX_INT_SIZE // b
    if op is ast.Pow:
        return b >= 0 or a != 0  # 0 ** -1 raises
    if op is ast.LShift and a and b > 0:
        return b <= _MAX_INT_SIZE and a.bit_length() <= _MAX_INT_SIZE - b
    if op in (ast.LShift, ast.RShift):
        return b >= 0  # a negative shift count raises
    return True
