"""Scalar types and Numba-compatible type promotion.

Point kernels must produce the dtype that ``numba.stencil`` produces, and Numba's scalar
rules differ from NumPy's: integer arithmetic widens to int64 (uint64 when both sides are
unsigned), ``int / int`` is float64, and a Python float or int constant is a 64-bit value
that takes part in promotion. Float/int mixes follow NumPy's ``promote_types`` (``float32 +
int8 -> float32`` but ``float32 + int32 -> float64``).
"""

from __future__ import annotations

import numpy as np

from .errors import StencilTypeError

DType = np.dtype

BOOL = np.dtype(np.bool_)
INT8, INT16, INT32, INT64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UINT8, UINT16, UINT32, UINT64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
FLOAT32, FLOAT64 = np.dtype(np.float32), np.dtype(np.float64)
COMPLEX64, COMPLEX128 = np.dtype(np.complex64), np.dtype(np.complex128)

SUPPORTED = frozenset({BOOL, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64,
                       FLOAT32, FLOAT64, COMPLEX64, COMPLEX128})


def is_bool(t: DType) -> bool:
    return t.kind == "b"


def is_int(t: DType) -> bool:
    """Integer proper (bool excluded)."""
    return t.kind in "iu"


def is_intlike(t: DType) -> bool:
    return t.kind in "biu"


def is_unsigned(t: DType) -> bool:
    return t.kind == "u"


def is_float(t: DType) -> bool:
    return t.kind == "f"


def is_complex(t: DType) -> bool:
    return t.kind == "c"


def as_dtype(obj: object) -> DType:
    """A supported NumPy dtype from a NumPy type, dtype, or ``float``/``int``/``bool``/``complex``."""
    try:
        t = np.dtype(obj)  # type: ignore[call-overload]
    except TypeError as exc:
        raise StencilTypeError(f"{obj!r} is not a scalar type") from exc
    if t not in SUPPORTED:
        raise StencilTypeError(f"dtype {t} is not supported",
                               hint=f"use one of {sorted(str(s) for s in SUPPORTED)}")
    return t


def of_python_value(value: object) -> DType:
    """The type Numba gives a Python or NumPy scalar (a Python int is int64, a float float64)."""
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, np.generic):
        return as_dtype(value.dtype)
    if isinstance(value, int):
        return UINT64 if value > np.iinfo(np.int64).max else INT64
    if isinstance(value, float):
        return FLOAT64
    if isinstance(value, complex):
        return COMPLEX128
    raise StencilTypeError(f"{type(value).__name__} value {value!r} is not a number")


def unify(a: DType, b: DType) -> DType:
    """The type two values merge into (variables assigned twice, branches of ``if``)."""
    if a == b:
        return a
    return np.promote_types(a, b)


def widen_int(a: DType, b: DType) -> DType:
    """Numba's integer arithmetic result: uint64 if both unsigned, else int64."""
    return UINT64 if is_unsigned(a) and is_unsigned(b) else INT64


def arithmetic(op: str, a: DType, b: DType) -> DType:
    """Result type of a binary operator under Numba's rules."""
    if op in ("<<", ">>"):
        if not (is_intlike(a) and is_intlike(b)):
            raise StencilTypeError(f"operator {op} needs integer operands, got {a} and {b}")
        return UINT64 if is_unsigned(a) else INT64
    if op in ("&", "|", "^"):
        if is_bool(a) and is_bool(b):
            return BOOL
        if not (is_intlike(a) and is_intlike(b)):
            raise StencilTypeError(f"operator {op} needs integer or bool operands, got {a} and {b}")
        return widen_int(a, b)
    if is_intlike(a) and is_intlike(b):
        return FLOAT64 if op == "/" else widen_int(a, b)
    if op == "**" and is_intlike(b) and not is_intlike(a):
        return a  # float ** int keeps the float type (Numba's integer-power path)
    if op in ("//", "%") and (is_complex(a) or is_complex(b)):
        raise StencilTypeError(f"operator {op} is not defined for complex numbers")
    return np.promote_types(a, b)


def operand_type(op: str, a: DType, b: DType, result: DType) -> tuple[DType, DType]:
    """The types the two operands are converted to before the operator is applied."""
    if op in ("<<", ">>"):
        return result, INT64
    if op == "**" and is_intlike(b) and not is_intlike(a):
        return result, INT64
    if op == "/" and is_intlike(a) and is_intlike(b):
        return FLOAT64, FLOAT64
    return result, result


def comparison_operand(a: DType, b: DType) -> DType:
    """The common type two values are compared in."""
    if is_intlike(a) and is_intlike(b):
        if is_bool(a) and is_bool(b):
            return BOOL
        if is_unsigned(a) != is_unsigned(b):
            return FLOAT64 if max(a.itemsize, b.itemsize) == 8 else INT64
        return widen_int(a, b)
    return np.promote_types(a, b)


def unary(op: str, a: DType) -> DType:
    """Result type of ``-x``, ``+x``, ``~x``, ``not x``."""
    if op == "not":
        return BOOL
    if op == "~":
        if is_bool(a):
            return BOOL
        if not is_int(a):
            raise StencilTypeError(f"operator ~ needs an integer operand, got {a}")
        return UINT64 if is_unsigned(a) else INT64
    if is_intlike(a):
        return UINT64 if is_unsigned(a) else INT64
    return a


def can_hold(value: object, t: DType) -> bool:
    """Whether ``cval`` converts to result type ``t`` under Numba's rule (complex to real fails)."""
    if isinstance(value, (str, bytes)) or value is None:
        return False
    try:
        vt = of_python_value(value)
    except StencilTypeError:
        return False
    return not (is_complex(vt) and not is_complex(t))


def c_name(t: DType) -> str:
    """The C99 spelling of a scalar type."""
    return _C_NAMES[t]


_C_NAMES = {
    BOOL: "bool", INT8: "int8_t", INT16: "int16_t", INT32: "int32_t", INT64: "int64_t",
    UINT8: "uint8_t", UINT16: "uint16_t", UINT32: "uint32_t", UINT64: "uint64_t",
    FLOAT32: "float", FLOAT64: "double", COMPLEX64: "float _Complex",
    COMPLEX128: "double _Complex",
}


# NumPy's rules (computations, docs/site/contract.md section 2): NEP 50, Python literals are "weak".

_DEFAULT = {"b": BOOL, "i": INT64, "u": INT64, "f": FLOAT64, "c": COMPLEX128}


def numpy_promote(a: DType, b: DType, a_weak: bool, b_weak: bool) -> DType:
    """``np.result_type`` of two operands, where a weak operand is a Python literal."""
    if a_weak and b_weak:
        return np.promote_types(_DEFAULT[a.kind], _DEFAULT[b.kind])
    if a_weak or b_weak:
        weak, strong = (a, b) if a_weak else (b, a)
        order = "biufc"
        if order.index(weak.kind) <= order.index(strong.kind) or (
                weak.kind in "iu" and strong.kind in "iu"):
            return strong if strong.kind != "b" or weak.kind == "b" else _DEFAULT[weak.kind]
        if weak.kind == "c" and strong.kind == "f":
            return np.dtype(f"c{2 * strong.itemsize}")
        return _DEFAULT[weak.kind]
    return np.promote_types(a, b)


def numpy_arithmetic(op: str, a: DType, b: DType, a_weak: bool, b_weak: bool) -> DType:
    """Result type of a binary operator under NumPy's rules."""
    t = numpy_promote(a, b, a_weak, b_weak)
    if op == "/" and is_intlike(t):
        return FLOAT64
    if op in ("<<", ">>", "&", "|", "^") and not is_intlike(t):
        raise StencilTypeError(f"operator {op} needs integer operands, got {a} and {b}")
    if op in ("//", "%") and is_complex(t):
        raise StencilTypeError(f"operator {op} is not defined for complex numbers")
    if op in ("+", "-", "*", "**", "//", "%") and is_bool(t):
        return INT64 if op in ("//", "%", "**") else t
    return t
