"""Run-time helpers of generated NumPy code: shifted views, masks, Numba-exact operations."""

from __future__ import annotations

import math

import numpy as np


class RangeStepError(Exception):
    """A ``range()`` in a kernel got a step of 0 (the caller turns it into an ArgumentError)."""


def checked_range(start, stop, step) -> range:
    if int(step) == 0:
        raise RangeStepError
    return range(int(start), int(stop), int(step))


def shifted(a: np.ndarray, offset: tuple, lo: tuple[int, ...], hi: tuple[int, ...],
            shape: tuple[int, ...]) -> np.ndarray:
    """The interior region of the first array (of ``shape``), shifted by ``offset``, as a view
    of ``a`` (which may be larger)."""
    if all(type(o) in (int, np.int64) or np.ndim(o) == 0 for o in offset):
        idx = []
        for n, o, l_, h in zip(shape, offset, lo, hi):
            o = int(o)
            if o < -l_ or o > h:
                raise IndexError(f"relative index {o} outside the neighbourhood")
            idx.append(slice(l_ + o, n - h + o))
        return a[tuple(idx)]
    # Offsets that vary per element: gather, clamped to the neighbourhood.
    region = tuple(np.arange(l_, n - h) for n, l_, h in zip(shape, lo, hi))
    grids = np.meshgrid(*region, indexing="ij")
    idx = []
    for g, o, l_, h in zip(grids, offset, lo, hi):
        o = np.asarray(o)
        if np.any((o < -l_) | (o > h)):
            raise IndexError("relative index outside the neighbourhood")
        idx.append(g + o)
    return a[tuple(idx)]


def gather(a: np.ndarray, index: tuple, shape: tuple[int, ...]) -> np.ndarray:
    """Absolute indexing with Python's negative-index wrap-around and a bounds check."""
    idx = []
    for n, i in zip(a.shape, index):
        i = np.asarray(i, dtype=np.int64)
        i = np.where(i < 0, i + n, i)
        if np.any((i < 0) | (i >= n)):
            raise IndexError("absolute index out of range")
        idx.append(i)
    out = a[tuple(idx)]
    return out[()] if np.ndim(out) == 0 else out


def cast(x, t):
    if isinstance(x, np.ndarray):
        return x.astype(t, copy=False)
    return t(x) if not isinstance(x, t) else x


def truth(x):
    return x != 0


def where(mask, a, b):
    if mask is True or (np.ndim(mask) == 0 and bool(mask)):
        return a
    out = np.where(mask, a, b)
    return out[()] if out.ndim == 0 else out


def py_min(a, b):
    return where(b < a, b, a)


def py_max(a, b):
    return where(b > a, b, a)


def sign(x):
    return np.sign(x)


def power(a, n):
    """``a ** n`` as Numba computes it: repeated squaring for integer exponents."""
    a = np.asarray(a)
    n_arr = np.asarray(n)
    if n_arr.dtype.kind not in "iu":
        return np.power(a, n_arr)
    t = a.dtype
    if n_arr.ndim == 0:
        return _powi_scalar_exponent(a, int(n_arr), t)
    out = np.empty(np.broadcast_shapes(a.shape, n_arr.shape), t)
    for e in np.unique(n_arr):
        m = n_arr == e
        out = np.where(m, _powi_scalar_exponent(a, int(e), t), out)
    return out


def _powi_scalar_exponent(a: np.ndarray, n: int, t: np.dtype):
    if t.kind in "iu":
        if n < 0:
            one = np.ones((), t)
            res = np.where(a == 1, one, np.zeros((), t))
            if t.kind == "i":
                res = np.where(a == -1, np.where(n % 2, a, one), res)
            return res.astype(t)
        r = np.ones(a.shape, np.uint64)
        x = a.astype(np.uint64)
        e = n
        while e:
            if e & 1:
                r = r * x
            x = x * x
            e >>= 1
        return r.astype(t)
    if abs(n) > 65536:
        return np.power(a.astype(np.float64), float(n)).astype(t)
    r = np.ones(a.shape, t)
    x = a.astype(t)
    e = abs(n)
    while e:
        if e & 1:
            r = r * x
        e >>= 1
        if e:
            x = x * x
    return (t.type(1) / r).astype(t) if n < 0 else r


def shl(a, n):
    a = np.asarray(a)
    n = np.asarray(n)
    bad = (n < 0) | (n >= 64)
    res = np.left_shift(a.astype(np.uint64), np.where(bad, 0, n).astype(np.uint64)).astype(a.dtype)
    return np.where(bad, np.zeros((), a.dtype), res)


def shr(a, n):
    a = np.asarray(a)
    n = np.asarray(n)
    zero = np.zeros((), a.dtype)
    fill = np.where(a < 0, -1, 0).astype(a.dtype) if a.dtype.kind == "i" else zero
    res = np.right_shift(a, np.clip(n, 0, 63).astype(a.dtype))
    res = np.where(n >= 64, fill, res)
    return np.where(n < 0, zero, res)


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def erf(x):
    x = np.asarray(x)
    return _erf(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)


def erfc(x):
    x = np.asarray(x)
    return _erfc(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)


def _gamma_scalar(x: float) -> float:
    """math.gamma with C's tgamma at poles and overflow (inf or nan instead of raising)."""
    try:
        return math.gamma(x)
    except ValueError:  # a pole: 0 (signed infinity) or a negative integer (nan)
        return math.copysign(math.inf, x) if x == 0 else math.nan
    except OverflowError:
        return math.inf


_gamma = np.vectorize(_gamma_scalar, otypes=[np.float64])


def gamma(x):
    x = np.asarray(x)
    return _gamma(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)


def fill_border(out: np.ndarray, lo: tuple[int, ...], hi: tuple[int, ...], cval) -> None:
    """Set every element outside the interior to ``cval``."""
    for dim, (l_, h) in enumerate(zip(lo, hi)):
        n = out.shape[dim]
        head = [slice(None)] * out.ndim
        head[dim] = slice(0, min(l_, n))
        out[tuple(head)] = cval
        tail = [slice(None)] * out.ndim
        tail[dim] = slice(max(n - h, 0), n)
        if h:
            out[tuple(tail)] = cval


def store(out: np.ndarray, lo: tuple[int, ...], hi: tuple[int, ...], value) -> None:
    region = tuple(slice(l_, n - h) for n, l_, h in zip(out.shape, lo, hi))
    np.copyto(out[region], value, casting="unsafe")


# ---------------------------------------------------------------- computations


def view(arr: np.ndarray, axes: str, origin: tuple[int, int, int],
         region: tuple[int, int, int, int, int, int], off: tuple[int, int, int]) -> np.ndarray:
    """The part of ``arr`` under ``region`` (relative to the compute domain) shifted by
    ``off``, as a 3-D view (absent axes have length 1 and broadcast)."""
    idx = []
    for axis, (o, lo, hi, d) in zip("IJK", ((origin[0], region[0], region[1], off[0]),
                                             (origin[1], region[2], region[3], off[1]),
                                             (origin[2], region[4], region[5], off[2]))):
        if axis in axes:
            idx.append(slice(o + lo + d, o + hi + d))
        else:
            idx.append(None)
    present = tuple(s for s in idx if s is not None)
    v = arr[present]
    return v[tuple(slice(None) if s is not None else None for s in idx)]


def in_region(region: tuple[int, int, int, int, int, int], ni: int, nj: int,
              bounds: tuple) -> tuple[int, int, int, int, int, int] | None:
    """The part of ``region`` inside a horizontal region given as [start, end) bounds along
    I and J (each ``(offset, from_end)`` or None for unbounded), or None if empty."""
    out = list(region)
    for axis, n in ((0, ni), (1, nj)):
        for side, b in enumerate(bounds[2 * axis: 2 * axis + 2]):
            if b is None:
                continue
            pos = n + b[0] if b[1] else b[0]
            if side == 0:
                out[2 * axis] = max(out[2 * axis], pos)
            else:
                out[2 * axis + 1] = min(out[2 * axis + 1], pos)
        if out[2 * axis] >= out[2 * axis + 1]:
            return None
    return tuple(out)  # type: ignore[return-value]


def view_k(arr: np.ndarray, axes: str, origin: tuple[int, int, int],
           region: tuple[int, int, int, int, int, int], off: tuple[int, int], dk, err: list,
           where: int) -> np.ndarray:
    """``f[di, dj, dk]`` over ``region`` with ``dk`` an integer (array) known at run time:
    gathered along K. A level outside the array is never read: it is reported in ``err``
    (as ``where``) and level 0 is read instead, so the call completes and then fails."""
    n = arr.shape[axes.index("K")]
    whole_k = (*region[:4], -origin[2], n - origin[2])
    column = view(arr, axes, origin, whole_k, (off[0], off[1], 0))
    ks = origin[2] + np.arange(region[4], region[5])[None, None, :] + np.asarray(dk, np.int64)
    ks = ks.reshape((1,) * (3 - ks.ndim) + ks.shape)
    bad = (ks < 0) | (ks >= n)
    if bad.any():
        err.append(where)
        ks = np.where(bad, 0, ks)
    return np.take_along_axis(column, np.broadcast_to(ks, np.broadcast_shapes(
        ks.shape, column.shape[:2] + (ks.shape[2],))), axis=2)


def assign(target: np.ndarray, value, mask) -> None:
    if mask is None:
        np.copyto(target, value, casting="unsafe")
    else:
        np.copyto(target, value, casting="unsafe", where=mask)


def bounds(start: int, start_from_end: bool, end: int, end_from_end: bool,
           nk: int) -> tuple[int, int]:
    k0 = nk + start if start_from_end else start
    k1 = nk + end if end_from_end else end
    k0, k1 = max(0, min(nk, k0)), max(0, min(nk, k1))
    return k0, max(k0, k1)
