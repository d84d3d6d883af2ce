"""Helper functions of generated Numba code, one per (operation, dtype), printed into the
generated module as the C printer prints its ``static inline`` helpers.

Each is the Python twin of the C helper of the same name (``codegen/c.py``), so that the two
backends give bit-identical results: Python's floor division and modulo with NumPy's answer
for a zero divisor (0 for integers, inf/nan for floats), Numba's integer-power loop, shifts
defined for every count, min/max with C's operand order, NumPy's NaN rules for
minimum/maximum, and indices that record an error status instead of reading out of bounds.

``$T`` is the NumPy type (``_np.float32``), ``$S`` the type suffix (``f32``). Every constant
is typed (``$T(1)``): a bare ``1`` would make Numba compute float32 arithmetic in float64.
The helpers are compiled with ``error_model="numpy"`` and called, not inlined into the Numba
IR of the kernel: the kernel may be inlined into a user's function compiled with Python's
error model, and a float division by zero must still give inf/nan, as on the other backends.
LLVM inlines them after linking.
"""

from __future__ import annotations

from string import Template

import numpy as np

from .. import dtypes

_SIGNED = {
    "floordiv": """def sk_floordiv_$S(a, b):
    if b == 0:
        return $T(0)  # NumPy's result; Numba would raise
    if b == -1:
        return $T(_np.int64(0) - _np.int64(a))  # wraps for the minimum, as in C
    return $T(a // b)""",
    "mod": """def sk_mod_$S(a, b):
    if b == 0 or b == -1:
        return $T(0)
    return $T(a % b)""",
    "powi": """def sk_powi_$S(a, n):
    if n < 0:  # Numba: integer results, 1 and -1 are the only non-zero ones
        if a == 1:
            return $T(1)
        if a == -1:
            return a if n & 1 else $T(1)
        return $T(0)
    r = _np.uint64(1)
    x = _np.uint64(a)
    while n:
        if n & 1:
            r = r * x
        x = x * x
        n = n >> 1
    return $T(r)""",
    "shr": """def sk_shr_$S(a, n):
    if n < 0:
        return $T(0)
    if n >= 64:
        return $T(-1) if a < 0 else $T(0)
    return $T(_np.int64(a) >> _np.int64(n))""",
}
_UNSIGNED = {
    "floordiv": """def sk_floordiv_$S(a, b):
    if b == 0:
        return $T(0)
    return $T(a // b)""",
    "mod": """def sk_mod_$S(a, b):
    if b == 0:
        return $T(0)
    return $T(a % b)""",
    "powi": """def sk_powi_$S(a, n):
    if n < 0:
        return $T(1) if a == 1 else $T(0)
    r = _np.uint64(1)
    x = _np.uint64(a)
    while n:
        if n & 1:
            r = r * x
        x = x * x
        n = n >> 1
    return $T(r)""",
    "shr": """def sk_shr_$S(a, n):
    if n < 0 or n >= 64:
        return $T(0)
    return $T(_np.uint64(a) >> _np.uint64(n))""",
}
_INT_COMMON = {
    "shl": """def sk_shl_$S(a, n):
    if n < 0 or n >= 64:
        return $T(0)
    return $T(_np.uint64(a) << _np.uint64(n))""",
    "minimum": """def sk_minimum_$S(a, b):
    return a if a <= b else b""",
    "maximum": """def sk_maximum_$S(a, b):
    return a if a >= b else b""",
    "abs": """def sk_abs_$S(a):
    return $T(0 - a) if a < 0 else a""",
}
_FLOAT = {
    "div": """def sk_div_$S(a, b):
    return a / b""",
    "floordiv": """def sk_floordiv_$S(a, b):
    if b == 0:
        return $T(a / b)  # NumPy: inf or nan
    mod = $T(_np.fmod(a, b))
    div = $T((a - mod) / b)
    if mod != 0 and ((b < 0) != (mod < 0)):
        div = $T(div - $T(1))
    if div != 0:
        fl = $T(_np.floor(div))
        if div - fl > $T(0.5):
            fl = $T(fl + $T(1))
    else:
        fl = $T(_math.copysign($T(0), a / b))
    return fl""",
    "mod": """def sk_mod_$S(a, b):
    mod = $T(_np.fmod(a, b))
    if b == 0:
        return mod
    if mod != 0:
        if (b < 0) != (mod < 0):
            mod = $T(mod + b)
    else:
        mod = $T(_math.copysign($T(0), b))
    return mod""",
    "powi": """def sk_powi_$S(a, n):
    # Numba's integer-power loop, so that results are bit-identical
    if n > 65536 or n < -65536:
        return $T(_np.float64(a) ** _np.float64(n))
    invert = n < 0
    e = _np.uint64(-n) if invert else _np.uint64(n)
    r = $T(1)
    while e:
        if e & _np.uint64(1):
            r = $T(r * a)
        e = e >> _np.uint64(1)
        a = $T(a * a)
    return $T($T(1) / r) if invert else r""",
    "minimum": """def sk_minimum_$S(a, b):
    return a if (_math.isnan(a) or a <= b) else b""",
    "maximum": """def sk_maximum_$S(a, b):
    return a if (_math.isnan(a) or a >= b) else b""",
}
_COMPLEX = {
    "div": """def sk_div_$S(a, b):
    return a / b""",
}
_REAL = {
    "min": """def sk_min_$S(a, b):
    return b if b < a else a""",
    "max": """def sk_max_$S(a, b):
    return b if b > a else a""",
    "sign": """def sk_sign_$S(a):
    if a > 0:
        return $T(1)
    if a < 0:
        return $T(-1)
    return a""",
}
_INDEX = {
    "checked_offset": """def sk_checked_offset(x, lo, hi, status):
    # outside the declared neighbourhood: read the centre, never out of bounds
    if x < lo or x > hi:
        status[0] = 1
        return _np.int64(0)
    return _np.int64(x)""",
    "wrap_index": """def sk_wrap_index(x, n, status):
    x = _np.int64(x)
    if x < 0:
        x += n
    if x < 0 or x >= n:
        status[0] = 2
        return _np.int64(0)
    return x""",
}


# Float to integer as LLVM's fptosi lowers on x86-64 (what Numba's own stencils give, and the
# C backend's sk_f2i): NaN and values outside the range give the "integer indefinite" value
# INT64_MIN (INT32_MIN for 32 bits); 8- and 16-bit results are the 32-bit conversion
# truncated. A plain conversion in a loop LLVM vectorizes would give other values.
_F2I = {
    8: """def sk_f2i_$S(x):
    if x >= -9223372036854775808.0 and x < 9223372036854775808.0:
        return _np.int64(x)
    return _np.int64(-9223372036854775808)""",
    4: """def sk_f2i_$S(x):
    if x > -2147483649.0 and x < 2147483648.0:
        return _np.int32(x)
    return _np.int32(-2147483648)""",
    2: """def sk_f2i_$S(x):
    if x > -2147483649.0 and x < 2147483648.0:
        return $T(_np.uint32(_np.int32(x)))
    return $T(_np.uint32(2147483648))""",
}
_F2I[1] = _F2I[2]


def guarded_conversion(source: np.dtype, target: np.dtype) -> bool:
    """Float to signed or narrow integer (the C printer's rule): uint32/uint64 are left to
    the conversion, whose result Numba leaves to the CPU."""
    return dtypes.is_float(source) and dtypes.is_int(target) and (
        not dtypes.is_unsigned(target) or target.itemsize <= 2)


def type_suffix(t: np.dtype) -> str:
    """``f32``, ``i64``, ``u8``, ``c128``, ``b``: the C printer's suffixes, spelled shorter."""
    if t == dtypes.BOOL:
        return "b"
    return {"f": "f", "c": "c", "i": "i", "u": "u"}[t.kind] + str(t.itemsize * 8)


def numpy_type(t: np.dtype) -> str:
    return "_np.bool_" if t == dtypes.BOOL else f"_np.{t.name}"


def helper_name(op: str, t: np.dtype) -> str:
    if op in _INDEX:
        return f"sk_{op}"
    return f"sk_{op}_{type_suffix(t)}"


def helper_source(op: str, t: np.dtype) -> str:
    """The definition of helper ``op`` for operands of type ``t`` (KeyError: none exists,
    as in the C printer)."""
    if op in _INDEX:
        return _INDEX[op]
    if op == "f2i":
        return Template(_F2I[t.itemsize]).substitute(T=numpy_type(t), S=type_suffix(t))
    if dtypes.is_complex(t):
        table = _COMPLEX
    elif dtypes.is_float(t):
        table = {**_REAL, **_FLOAT}
    elif dtypes.is_unsigned(t):
        table = {**_REAL, **_INT_COMMON, **_UNSIGNED}
    else:
        table = {**_REAL, **_INT_COMMON, **_SIGNED}
    return Template(table[op]).substitute(T=numpy_type(t), S=type_suffix(t))
