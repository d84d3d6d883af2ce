"""Point kernels on dask arrays: a lazy dask array with the values of the NumPy call.

How the global border stays exactly that of the NumPy call, whatever the chunking:

- ``"constant"``: every relatively indexed array is cut to the first one's shape (a kernel
  reads no element beyond it, Numba's rule), split into the same chunks, and each chunk is
  extended by the kernel's border from its neighbours (``overlap`` with ``boundary="none"``:
  nothing is added at the array's own edges). The kernel runs on each extended chunk as on
  any NumPy array: points whose neighbourhood leaves the extended chunk get ``cval``. Those
  are exactly the points of the global border, plus the overlap, which is trimmed off again.
- other modes (``"nearest"``, ``"reflect"``, ``"mirror"``, ``"wrap"``): by their definition
  (contract.md section 1) the result is the constant-mode kernel on the interior of every
  relatively indexed array padded like ``np.pad`` and cropped back. The padding is built as
  dask slices of the array chosen by ``np.pad`` itself applied to ``arange(n)`` (so any pad
  width and any array size agree with NumPy), the constant-mode kernel runs as above, and
  the result is cropped back to the first array's shape.
- one mode per axis (contract.md section 9): the remapped axes are padded as above, the
  "constant" ones are not, and the constant-mode kernel (with ``cval``) runs on the result.

Uneven neighbourhoods overlap unevenly (per axis ``(lo, hi)``, which dask allows with
``boundary="none"``). Chunks smaller than the overlap are merged with their neighbours
first; an axis held in one chunk needs no overlap. ``standard_indexing`` arrays reach every
chunk whole (one single-chunk dask array in the graph), scalars as they are.
"""

from __future__ import annotations

import math
import uuid
import weakref

import numpy as np

from ..compile.point import analyse
from ..errors import ArgumentError
from ..ir import border_modes
from ..runtime.launch import check_shapes

_SCALARS = (bool, int, float, complex, np.generic)


def _dask():
    import dask.array as da

    return da


def is_dask_array(value: object) -> bool:
    return type(value).__module__.startswith("dask.") and hasattr(value, "__dask_graph__") \
        and hasattr(value, "chunks")


def border_mode(st) -> border_modes.Mode:
    """The stencil's border mode (``func_or_mode``, kept as ``st.mode``): one name, or one
    per axis."""
    return getattr(st, "mode", "constant")


# ---------------------------------------------------------------- the call


def point_call(st, args: tuple, out: object):
    """``st(*args)`` with dask arrays among ``args``: a lazy dask array."""
    name = st.__name__
    if out is not None:
        raise ArgumentError(
            "out= cannot be used when an argument is a dask array: the call returns a lazy "
            "dask array and writes nothing", stencil=name, loc=_loc(st),
            hint="use the returned array (result = st(x); result.compute(), or "
                 "da.store(result, target) to write it into an existing array)")
    args = tuple(_as_operand(st, i, a) for i, a in enumerate(args))
    border, dtype, relative = _analyse(st, args)
    return _build(st, args, border, dtype, relative)


def _loc(st):
    code = getattr(getattr(st, "func", None), "__code__", None)
    if code is None:
        return None
    from ..errors import Location

    return Location(code.co_filename, code.co_firstlineno, 1)


def _as_operand(st, i: int, a: object) -> object:
    """Dask arrays and NumPy arrays as they are, numbers as they are, the rest as arrays."""
    if is_dask_array(a):
        if any(math.isnan(c) for cs in a.chunks for c in cs):
            raise ArgumentError(f"argument {i + 1} is a dask array of unknown chunk sizes "
                                f"(shape {a.shape})", stencil=st.__name__, loc=_loc(st),
                                hint="call x.compute_chunk_sizes() first")
        if a.ndim == 0:
            raise ArgumentError(f"argument {i + 1} is a 0-dimensional dask array",
                                stencil=st.__name__, loc=_loc(st),
                                hint="pass a number for a scalar, or an array with dimensions")
        return a
    if isinstance(a, (np.ndarray, *_SCALARS)):
        return a
    return st._normalize((a,))[0]


def _stand_in(a: object) -> object:
    """A zero-cost NumPy array with ``a``'s shape and (native) dtype, for the analyses."""
    if not is_dask_array(a):
        return a
    dtype = a.dtype if a.dtype.isnative else a.dtype.newbyteorder("=")
    return np.broadcast_to(np.zeros((), dtype), a.shape)


def _analyse(st, args: tuple) -> tuple[tuple[tuple[int, int], ...], np.dtype, tuple[int, ...]]:
    """What the NumPy call would decide, decided now (errors at call time, not at compute
    time): the border per axis, the result dtype and the relatively indexed positions."""
    kernel, _ = st._parse()
    stand = tuple(_stand_in(a) for a in args)
    for i, a in enumerate(stand):
        if isinstance(a, np.ndarray) and a.ndim == 0:
            raise ArgumentError(f"argument {i + 1} is a 0-dimensional array",
                                stencil=st.__name__,
                                hint="pass a number for a scalar, or an array with dimensions")
    types = st._arg_types(stand)
    typed = analyse(kernel, types, st.explicit_neighborhood)
    if st._neighborhood is None:
        st._neighborhood = typed.neighborhood.neighborhood
    rt = typed.kernel.return_type
    st.axis_modes(typed.kernel.ndim)
    if border_modes.any_constant(border_mode(st)):  # cval applies to "constant" axes only
        st._converted_cval(rt, rt, kernel)  # the NumPy call's checks of it
    relative = tuple(i for i, p in enumerate(kernel.params)
                     if p in kernel.relative and types[i].is_array)
    check_shapes(stand, None, relative, st.__name__, kernel.loc)
    return typed.neighborhood.border, rt, relative


# ---------------------------------------------------------------- the graph


def _build(st, args: tuple, border, dtype: np.dtype, relative: tuple[int, ...]):
    da = _dask()
    from dask.array.overlap import overlap, trim_internal

    shape = tuple(int(n) for n in np.shape(args[0]))
    ndim = len(shape)
    mode = border_mode(st)
    modes = border_modes.per_axis(mode, ndim)
    depth = tuple((-lo, hi) for lo, hi in border)
    if mode == "constant" or 0 in shape:
        # an empty array has no border to fill in any mode
        pads = ((0, 0),) * ndim
        runner = st
    else:
        pads = tuple((0, 0) if m == "constant" else d for m, d in zip(modes, depth))
        runner = constant_twin(st)
    ext_shape = tuple(n + lo + hi for n, (lo, hi) in zip(shape, pads))
    extended = {i: _extended(args[i], shape, pads, modes) for i in relative}
    base = next((x.chunks for x in extended.values() if is_dask_array(x)),
                tuple((n,) for n in ext_shape))
    chunks = tuple(_merged(c, max(d)) for c, d in zip(base, depth))
    # an axis in one chunk needs no overlap
    axis_depth = {ax: (depth[ax] if len(chunks[ax]) > 1 else 0) for ax in range(ndim)}
    out_ind = tuple(range(ndim))
    pairs: list[object] = []
    tokens: list[object] = [_stencil_token(runner), mode, border]
    for i, a in enumerate(args):
        if i in extended:
            x = extended[i]
            x = x.rechunk(chunks) if is_dask_array(x) else da.from_array(x, chunks=chunks)
            x = overlap(x, depth=axis_depth, boundary="none", allow_rechunk=False)
            pairs += [x, out_ind]
            tokens.append(x.name)
        elif isinstance(a, np.ndarray) or is_dask_array(a):
            # whole, in every chunk: one block, its indices contracted (never in the output)
            whole = a.rechunk(-1) if is_dask_array(a) else da.from_array(a, chunks=-1)
            pairs += [whole, tuple(range(ndim + 100 * (i + 1), ndim + 100 * (i + 1) + a.ndim))]
            tokens.append(whole.name)
        else:
            pairs += [a, None]
            tokens.append((type(a).__name__, repr(a)))
    from dask.base import tokenize

    name = f"{st.__name__}-{tokenize(*tokens)}"
    result = da.blockwise(runner, out_ind, *pairs, dtype=dtype, concatenate=True, name=name,
                          meta=np.empty((0,) * ndim, dtype))
    result = trim_internal(result, axis_depth, boundary="none")
    if any(lo or hi for lo, hi in pads):
        result = result[tuple(slice(lo, lo + n) for n, (lo, _) in zip(shape, pads))]
    return result


def _extended(a: object, shape: tuple[int, ...], pads, modes: tuple[str, ...]) -> object:
    """A relatively indexed array as the kernel sees it: cut to the first array's shape
    ("constant"), or padded as ``np.pad`` pads it and cut to the padded first array's shape."""
    if all(lo == hi == 0 for lo, hi in pads):
        if tuple(a.shape) != shape:
            a = a[tuple(slice(0, n) for n in shape)]
        return a
    for ax, (n, (lo, hi)) in enumerate(zip(shape, pads)):
        m = a.shape[ax]
        if not (lo or hi):  # a "constant" axis: cut to the first array's extent only
            if m != n:
                a = a[(slice(None),) * ax + (slice(0, n),)]
            continue
        idx = np.pad(np.arange(m), (lo, hi), mode=border_modes.np_pad_mode(modes[ax]))[:n + lo + hi]
        a = _gather(a, ax, idx)
    return a


def _gather(a: object, axis: int, idx: np.ndarray) -> object:
    """``a`` indexed by ``idx`` along ``axis``: increasing runs as slices (the bulk of the
    array, kept in its chunks), the few other positions (the padding) by integer indexing."""
    if not is_dask_array(a):
        return np.take(a, idx, axis=axis)
    da = _dask()
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    runs = np.split(idx, breaks)
    parts = []
    pending: list[int] = []
    lead = (slice(None),) * axis
    for run in runs:
        if len(run) > 1:
            if pending:
                parts.append(a[lead + (np.array(pending),)])
                pending = []
            parts.append(a[lead + (slice(int(run[0]), int(run[-1]) + 1),)])
        else:
            pending += [int(v) for v in run]
    if pending:
        parts.append(a[lead + (np.array(pending),)])
    return parts[0] if len(parts) == 1 else da.concatenate(parts, axis=axis)


def _merged(chunks: tuple[int, ...], least: int) -> tuple[int, ...]:
    """``chunks`` with every chunk at least ``least`` long (neighbours merged), so that each
    chunk can lend its neighbours the overlap they need; one chunk if the axis is shorter."""
    if least <= 0 or len(chunks) <= 1:
        return tuple(chunks)
    out: list[int] = []
    acc = 0
    for c in chunks:
        acc += c
        if acc >= least:
            out.append(acc)
            acc = 0
    if acc:
        if out:
            out[-1] += acc
        else:
            out.append(acc)
    return tuple(out)


# ---------------------------------------------------------------- stencil identity


_TWINS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_TOKENS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def constant_twin(st):
    """The same kernel in ``"constant"`` mode: it computes the interior of padded blocks."""
    twin = _TWINS.get(st)
    if twin is None:
        from ..api.stencil import PointStencil

        # with cval where some axis is "constant": the twin's border along it is the call's
        cval = st.cval if border_modes.any_constant(st.mode) else None
        twin = PointStencil(st.func, neighborhood=st.explicit_neighborhood, cval=cval,
                            standard_indexing=st.standard_indexing, backend=st.backend,
                            fast_math=st.fast_math)
        twin.__name__ = st.__name__
        _TWINS[st] = twin
    return twin


def _stencil_token(st) -> str:
    """A name for the kernel in graph keys, one per stencil object (dask would otherwise
    pickle the stencil to hash it at every call). Not derived from the source: kernels made
    by one factory share their source but not their closures."""
    token = _TOKENS.get(st)
    if token is None:
        token = _TOKENS[st] = uuid.uuid4().hex[:16]
    return token
