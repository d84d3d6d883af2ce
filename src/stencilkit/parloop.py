"""Parallel loops over unstructured sets (API.md section 3, after PyOP2's backend API).

``Set``, ``Map``, ``Dat``, ``Global``, ``Sparsity``, ``Mat`` hold data; ``dat(mode, map)``
makes an ``Arg``; ``ParLoop(kernel, set, *args)`` records a loop, ``generate()`` returns its
code (independent of set sizes and data, cached) and ``compute()`` runs it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from types import FunctionType

import numpy as np

from . import dtypes
from .errors import ArgumentError, StencilError


class Access(enum.Enum):
    READ = "READ"
    WRITE = "WRITE"
    RW = "RW"
    INC = "INC"
    MIN = "MIN"
    MAX = "MAX"

    def __repr__(self) -> str:
        return f"sk.{self.value}"


READ, WRITE, RW, INC, MIN, MAX = (Access.READ, Access.WRITE, Access.RW, Access.INC, Access.MIN,
                                  Access.MAX)


def _flush() -> None:
    from .runtime import lazy

    lazy.flush()


class Set:
    """An iteration set of ``size`` elements."""

    _count = 0

    def __init__(self, size: int, name: str | None = None) -> None:
        if int(size) != size or size < 0:
            raise StencilError(f"Set size must be a non-negative integer, got {size!r}")
        Set._count += 1
        self.size = int(size)
        self.name = name or f"set{Set._count}"

    def __repr__(self) -> str:
        return f"Set({self.size}, name={self.name!r})"


class Map:
    """``arity`` entries of ``to_set`` for each element of ``from_set``."""

    def __init__(self, from_set: Set, to_set: Set, arity: int, values: object,
                 name: str | None = None) -> None:
        vals = np.asarray(values)
        if vals.ndim == 1 and arity == 1:
            vals = vals.reshape(-1, 1)
        if vals.shape != (from_set.size, arity):
            raise StencilError(f"Map values have shape {vals.shape}, expected "
                               f"({from_set.size}, {arity}) for {from_set.size} elements of "
                               f"arity {arity}", hint="pass one row of targets per element")
        if vals.size and vals.dtype.kind not in "iu":
            raise StencilError(f"Map values must be integers, got {vals.dtype}")
        if vals.size and (vals.min() < 0 or vals.max() >= to_set.size):
            bad = int(vals.min()) if vals.min() < 0 else int(vals.max())
            raise StencilError(f"Map value {bad} points outside the target set of size "
                               f"{to_set.size}", hint="every entry must be in [0, to_set.size)")
        self.from_set, self.to_set, self.arity = from_set, to_set, int(arity)
        self.values = np.ascontiguousarray(vals, dtype=np.int32 if to_set.size < 2**31 - 1
                                           else np.int64)
        self.values.flags.writeable = False
        self.name = name or f"map_{from_set.name}_{to_set.name}"
        self._colorings: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def __getitem__(self, i: int) -> MapEntry:
        if not 0 <= i < self.arity:
            raise StencilError(f"map entry {i} out of range for arity {self.arity}")
        return MapEntry(self, int(i))

    def __repr__(self) -> str:
        return f"Map({self.from_set.name} -> {self.to_set.name}, arity={self.arity})"


@dataclass(frozen=True)
class MapEntry:
    map: Map
    index: int


class _DataCarrier:
    _data: np.ndarray

    def __array__(self, dtype=None, copy=None):
        data = self.data
        return data if dtype is None else data.astype(dtype)


class Dat(_DataCarrier):
    """Data on a set: ``dim`` values per element; ``.data`` is a NumPy view."""

    def __init__(self, dataset: Set, data: object = None, dtype: object = None, dim: int = 1,
                 name: str | None = None) -> None:
        self.dataset = dataset
        self.dim = int(dim)
        shape = (dataset.size,) if self.dim == 1 else (dataset.size, self.dim)
        t = dtypes.as_dtype(dtype) if dtype is not None else None
        if data is None:
            arr = np.zeros(shape, t or dtypes.FLOAT64)
        else:
            arr = np.asarray(data)
            if t is not None:
                arr = arr.astype(t)
            elif arr.dtype.kind in "iub" and arr.dtype != np.bool_:
                arr = arr.astype(dtypes.INT64 if arr.dtype.kind == "i" else arr.dtype)
            arr = np.array(arr, copy=True, order="C")
            if arr.size != dataset.size * self.dim:
                raise StencilError(f"Dat data has {arr.size} values, expected {dataset.size} "
                                   f"elements x dim {self.dim}")
            arr = arr.reshape(shape)
        dtypes.as_dtype(arr.dtype)
        self._data = arr
        self.dtype = arr.dtype
        self.name = name or f"dat{id(self) % 10000}"

    @property
    def data(self) -> np.ndarray:
        _flush()
        return self._data

    @property
    def data_ro(self) -> np.ndarray:
        _flush()
        v = self._data.view()
        v.flags.writeable = False
        return v

    def __call__(self, mode: Access, path: Map | MapEntry | None = None) -> Arg:
        return Arg(self, mode, path)

    def __repr__(self) -> str:
        return f"Dat({self.dataset.name}, dim={self.dim}, dtype={self.dtype})"


class Global(_DataCarrier):
    """A global value of ``dim`` entries (a reduction target or a constant)."""

    def __init__(self, dim: int = 1, data: object = None, dtype: object = None,
                 name: str | None = None) -> None:
        self.dim = int(dim)
        t = dtypes.as_dtype(dtype) if dtype is not None else None
        if data is None:
            arr = np.zeros(self.dim, t or dtypes.FLOAT64)
        else:
            arr = np.array(data, dtype=t, ndmin=1).reshape(-1)
            if arr.dtype.kind == "i":
                arr = arr.astype(dtypes.INT64)
            if arr.size != self.dim:
                raise StencilError(f"Global data has {arr.size} values, expected dim "
                                   f"{self.dim}")
        dtypes.as_dtype(arr.dtype)
        self._data = arr
        self.dtype = arr.dtype
        self.name = name or f"glob{id(self) % 10000}"

    @property
    def data(self) -> np.ndarray:
        _flush()
        return self._data

    @data.setter
    def data(self, value: object) -> None:
        _flush()
        self._data[...] = value

    def __call__(self, mode: Access) -> Arg:
        return Arg(self, mode, None)

    def __repr__(self) -> str:
        return f"Global(dim={self.dim}, dtype={self.dtype})"


class Sparsity:
    """The non-zero pattern of a matrix assembled through ``(rowmap, colmap)``."""

    def __init__(self, rowmap: Map, colmap: Map) -> None:
        if rowmap.from_set is not colmap.from_set:
            raise StencilError("row and column maps of a Sparsity must share their "
                               "iteration set")
        self.rowmap, self.colmap = rowmap, colmap
        self.shape = (rowmap.to_set.size, colmap.to_set.size)
        n = rowmap.from_set.size
        rows = np.repeat(rowmap.values.astype(np.int64), colmap.arity, axis=1).reshape(-1)
        cols = np.tile(colmap.values.astype(np.int64), (1, rowmap.arity)).reshape(-1)
        keys = rows * self.shape[1] + cols
        unique, inverse = np.unique(keys, return_inverse=True)
        self.indptr = np.zeros(self.shape[0] + 1, np.int64)
        np.add.at(self.indptr, unique // self.shape[1] + 1, 1)
        self.indptr = np.cumsum(self.indptr)
        self.indices = (unique % self.shape[1]).astype(np.int64)
        # position in the CSR values of each (element, row entry, column entry)
        self.lmap = inverse.reshape(n, rowmap.arity, colmap.arity).astype(np.int64)
        self.nnz = len(unique)


class Mat(_DataCarrier):
    """A sparse matrix on a ``Sparsity``; ``to_scipy()`` returns a CSR matrix."""

    def __init__(self, sparsity: Sparsity, dtype: object = None, name: str | None = None) -> None:
        self.sparsity = sparsity
        self.dtype = dtypes.as_dtype(dtype) if dtype is not None else dtypes.FLOAT64
        self._data = np.zeros(sparsity.nnz, self.dtype)
        self.name = name or f"mat{id(self) % 10000}"
        self.dim = 1

    @property
    def values(self) -> np.ndarray:
        _flush()
        return self._data

    data = values

    def zero(self) -> None:
        _flush()
        self._data[...] = 0

    def to_scipy(self):
        import scipy.sparse

        _flush()
        sp = self.sparsity
        return scipy.sparse.csr_matrix((self._data.copy(), sp.indices, sp.indptr), shape=sp.shape)

    def __call__(self, mode: Access, maps: tuple[Map, Map]) -> Arg:
        if mode is not INC and mode is not WRITE:
            raise StencilError(f"matrices take INC (or WRITE), not {mode.value}")
        rm, cm = maps
        if rm is not self.sparsity.rowmap or cm is not self.sparsity.colmap:
            raise StencilError("a Mat argument must use the maps of its Sparsity")
        return Arg(self, mode, maps)


@dataclass(frozen=True, eq=False)
class Arg:
    obj: Dat | Global | Mat
    mode: Access
    path: Map | MapEntry | tuple[Map, Map] | None

    @property
    def kind(self) -> str:
        if isinstance(self.obj, Global):
            return "global"
        if isinstance(self.obj, Mat):
            return "mat"
        if self.path is None:
            return "direct"
        if isinstance(self.path, MapEntry):
            return "entry"
        return "indirect"

    @property
    def map(self) -> Map | None:
        if isinstance(self.path, Map):
            return self.path
        if isinstance(self.path, MapEntry):
            return self.path.map
        return None

    @property
    def local_shape(self) -> tuple[int, ...]:
        """The shape of the argument as the kernel sees it for one element."""
        if self.kind == "mat":
            rm, cm = self.path  # type: ignore[misc]
            return (rm.arity, cm.arity)
        if self.kind == "indirect":
            return (self.path.arity, self.obj.dim)  # type: ignore[union-attr]
        return (self.obj.dim,)

    def signature(self) -> tuple:
        """What the generated code depends on (never sizes or values)."""
        return (self.kind, self.mode.value, str(self.obj.dtype), self.local_shape,
                self.path.index if isinstance(self.path, MapEntry) else None,
                self.obj.dim)


class Kernel:
    """A kernel: a Python function (``@sk.kernel``) or C source (``Kernel(code, name)``)."""

    def __init__(self, code: str | FunctionType, name: str | None = None,
                 backend: str | None = None) -> None:
        if isinstance(code, FunctionType):
            self.func: FunctionType | None = code
            self.code: str | None = None
            self.name = name or code.__name__
        else:
            if not name:
                raise StencilError("a C-string Kernel needs the name of its function",
                                   hint="sk.Kernel(code, 'my_kernel')")
            self.func = None
            self.code = str(code)
            self.name = name
        self.backend = backend
        self.__name__ = self.name

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, {'python' if self.func else 'C'})"

    def generate(self, backend: str | None = None) -> str:
        if self.code is not None:
            return self.code
        from .frontend.parloop_kernel import parse_kernel
        from .ir.definition import format_point_kernel

        return format_point_kernel(parse_kernel(self.func)[0])


def kernel(func: FunctionType | None = None, *, backend: str | None = None):
    """``@sk.kernel``: a ParLoop kernel written in Python."""
    if func is None:
        return lambda f: Kernel(f, backend=backend)
    return Kernel(func, backend=backend)


def check_args(kern: Kernel, iterset: Set, args: tuple[Arg, ...]) -> None:
    """The construction-time checks of a ParLoop: clear errors, never a crash later."""
    name = kern.name
    direct_writers: dict[int, list[int]] = {}
    for i, a in enumerate(args):
        if not isinstance(a, Arg):
            raise ArgumentError(f"argument {i + 1} is {a!r}, not dat(mode[, map])",
                                stencil=name, hint="write dat(sk.READ) or dat(sk.INC, map)")
        kind = a.kind
        if kind == "global":
            if a.mode in (WRITE, RW):
                raise ArgumentError(f"argument {i + 1}: a Global cannot be {a.mode.value}",
                                    stencil=name, hint="use READ, INC, MIN or MAX")
            continue
        if kind == "mat":
            if a.mode in (MIN, MAX):
                raise ArgumentError(f"argument {i + 1}: matrices take INC or WRITE, not "
                                    f"{a.mode.value}", stencil=name)
            rm, cm = a.path  # type: ignore[misc]
            if rm.from_set is not iterset:
                raise ArgumentError(f"argument {i + 1}: the matrix maps iterate over "
                                    f"{rm.from_set.name}, not {iterset.name}", stencil=name)
            continue
        dataset = a.obj.dataset  # type: ignore[union-attr]
        m = a.map
        if m is None:
            if dataset is not iterset:
                raise ArgumentError(f"argument {i + 1}: direct Dat lives on {dataset.name}, "
                                    f"the loop iterates over {iterset.name}", stencil=name,
                                    hint="pass a map: dat(mode, map)")
            if a.mode is not READ:
                direct_writers.setdefault(id(a.obj), []).append(i)
        else:
            if m.from_set is not iterset:
                raise ArgumentError(f"argument {i + 1}: map {m.name} starts from "
                                    f"{m.from_set.name}, the loop iterates over {iterset.name}",
                                    stencil=name)
            if m.to_set is not dataset:
                raise ArgumentError(f"argument {i + 1}: map {m.name} points into "
                                    f"{m.to_set.name}, the Dat lives on {dataset.name}",
                                    stencil=name)
    for i, a in enumerate(args):
        if a.kind == "direct" and a.mode is INC:
            others = [j for j in direct_writers.get(id(a.obj), []) if j != i]
            if others:
                raise ArgumentError(f"argument {i + 1} increments a direct Dat that argument "
                                    f"{others[0] + 1} also writes", stencil=name,
                                    hint="pass the Dat once, with mode RW")
