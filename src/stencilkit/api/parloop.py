"""Parallel loops over unstructured sets (contract.md section 3, after PyOP2's backend API).

``Set``, ``Map``, ``Dat``, ``Global``, ``Sparsity``, ``Mat`` hold data; ``dat(mode, map)``
makes an ``Arg``; ``ParLoop(kernel, set, *args)`` records a loop, ``generate()`` returns its
code (independent of set sizes and data, cached) and ``compute()`` runs it.

What the generated loops trust cannot change behind their back: a Set's size is fixed, a
Map's values are a validated, immutable private copy (reassigning ``values`` validates
again), and every array's shape, dtype, layout and writability is checked before each run
(a few attribute reads per argument). One object may appear in several arguments of a
loop only if all of them READ it, as in PyOP2.
"""

from __future__ import annotations

import functools
import itertools
import sys
from dataclasses import dataclass
from types import FunctionType

import numpy as np

from .. import adapters, config, dtypes
from ..errors import ArgumentError, Location, StencilError
from ..ir.abi import Access, ArgKind

READ, WRITE, RW, INC, MIN, MAX = (Access.READ, Access.WRITE, Access.RW, Access.INC, Access.MIN,
                                  Access.MAX)


def _flush() -> None:
    from ..runtime import lazy

    lazy.flush()


class Set:
    """An iteration set of ``size`` elements; the size is fixed (Maps and Dats rely on it)."""

    _count = 0

    def __init__(self, size: int, name: str | None = None) -> None:
        self._size = _count_arg(size, "Set size", "sk.Set(10)")
        Set._count += 1
        self.name = name or f"set{Set._count}"

    @property
    def size(self) -> int:
        return self._size

    @size.setter
    def size(self, value: object) -> None:
        # Maps and Dats on this set hold exactly `size` rows; a new size would let the
        # generated loop run past them
        raise ArgumentError(f"the size of Set {self.name} cannot change ({self._size} -> "
                            f"{value!r}): its Maps and Dats hold {self._size} rows",
                            hint="build a new sk.Set, with new Maps and Dats on it")

    def __repr__(self) -> str:
        return f"Set({self.size}, name={self.name!r})"


def _count_arg(value: object, what: str, example: str, minimum: int = 0) -> int:
    """``value`` as an int >= minimum, or a clear error (never int()'s own exceptions)."""
    try:
        n = int(value)  # type: ignore[call-overload]
        ok = n == value and not isinstance(value, (str, bytes)) and n >= minimum
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        kind = "a positive" if minimum == 1 else "a non-negative"
        raise ArgumentError(f"{what} must be {kind} integer, got {value!r}", hint=example)
    return n


def _need_set(obj: object, what: str, example: str) -> Set:
    if not isinstance(obj, Set):
        raise ArgumentError(f"{what} must be an sk.Set, got {obj!r}", hint=example)
    return obj


_versions = itertools.count(1)


def _frozen_copy(arr: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A private, immutable C-contiguous copy: an array over a read-only memoryview of the
    copy, so neither the caller's array nor ``flags.writeable = True`` can change it."""
    owned = np.array(arr, dtype=dtype, order="C", copy=True)
    return np.frombuffer(memoryview(owned).toreadonly(), dtype=dtype).reshape(arr.shape)


class Map:
    """``arity`` entries of ``to_set`` for each element of ``from_set``.

    The values are a private immutable copy (int32, or int64 for target sets of 2**31
    elements or more): generated loops index Dats with them unchecked, so they are
    validated once here and cannot change behind the loops' back. Assigning ``values``
    validates and copies again, and gives the map a new ``version`` (never reused).
    """

    def __init__(self, from_set: Set, to_set: Set, arity: int, values: object,
                 name: str | None = None) -> None:
        example = "sk.Map(cells, nodes, 3, values)"
        self._from_set = _need_set(from_set, "the first argument of Map (from_set)", example)
        self._to_set = _need_set(to_set, "the second argument of Map (to_set)", example)
        self._arity = _count_arg(arity, "Map arity", example, minimum=1)
        self.name = name or f"map_{from_set.name}_{to_set.name}"
        self._colorings: dict[tuple, list[np.ndarray]] = {}
        self.values = values

    from_set = property(lambda self: self._from_set)
    to_set = property(lambda self: self._to_set)
    arity = property(lambda self: self._arity)

    @property
    def values(self) -> np.ndarray:
        """The targets, shape (from_set.size, arity); read-only."""
        return self._values

    @values.setter
    def values(self, values: object) -> None:
        if hasattr(self, "_values"):
            _flush()  # loops queued before the change run with the old values
        n, arity, size = self._from_set.size, self._arity, self._to_set.size
        try:
            vals = np.asarray(values)
        except (TypeError, ValueError) as exc:
            raise ArgumentError(f"Map {self.name}: values are not an array ({exc})") from exc
        if vals.ndim == 1 and arity == 1:
            vals = vals.reshape(-1, 1)
        if vals.shape != (n, arity):
            raise ArgumentError(f"Map {self.name}: values have shape {vals.shape}, expected "
                                f"({n}, {arity}) for {n} elements of arity {arity}",
                                hint="pass one row of targets per element")
        if vals.size and (vals.dtype.kind not in "iu" or vals.dtype == np.bool_):
            raise ArgumentError(f"Map {self.name}: values must be integers, got {vals.dtype}",
                                hint="pass an integer array, e.g. values.astype(np.int64)")
        if vals.size:
            lo, hi = int(vals.min()), int(vals.max())
            if lo < 0 or hi >= size:
                bad = lo if lo < 0 else hi
                raise ArgumentError(f"Map {self.name}: value {bad} points outside the target "
                                    f"set of size {size}",
                                    hint="every entry must be in [0, to_set.size)")
        self._values = _frozen_copy(vals, np.dtype(np.int32 if size < 2**31 - 1 else np.int64))
        self.version = next(_versions)
        self._colorings.clear()

    def __getitem__(self, i: int) -> MapEntry:
        if not isinstance(i, (int, np.integer)) or not 0 <= i < self.arity:
            raise ArgumentError(f"map entry {i!r} out of range for {self.name} of arity "
                                f"{self.arity}", hint=f"use map[0] ... map[{self.arity - 1}]")
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


def _mode(mode: object, owner: str) -> Access:
    if isinstance(mode, Access):
        return mode
    if isinstance(mode, str) and mode.upper() in Access.__members__:
        return Access[mode.upper()]
    raise ArgumentError(f"{owner}: {mode!r} is not an access mode",
                        hint="use sk.READ, sk.WRITE, sk.RW, sk.INC, sk.MIN or sk.MAX")


def _set_data(owner: _DataCarrier, value: object) -> None:
    """Copy ``value`` into the carrier's array (same shape, same dtype), as ``x.data = v``."""
    _flush()
    target = owner._data
    if adapters.is_device(target):  # the array library's own assignment (CuPy's)
        if not np.isscalar(value) and not adapters.is_device(value):
            # CuPy assigns scalars and device arrays only (a host array would go to
            # ndarray.fill, which refuses it): the values go to the device first
            from .. import registry, storage

            value = storage.array_module(registry.resolve("cuda")).asarray(np.asarray(value))
        target[...] = value  # type: ignore[index]
        return
    try:
        arr = np.asarray(value)
        if arr.size != target.size:
            raise ValueError(f"{arr.size} values for {target.size}")
        np.copyto(target, arr.reshape(target.shape), casting="same_kind")
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"{type(owner).__name__} {owner.name}: cannot assign data of shape "
                            f"{np.shape(value)} to data of shape {target.shape} and dtype "
                            f"{target.dtype} ({exc})",
                            hint="assign values of the same shape and kind; the shape and "
                                 "dtype of a Dat or Global are fixed") from None


class Dat(_DataCarrier):
    """Data on a set: ``dim`` values per element; ``.data`` is a NumPy view.

    The array is the Dat's own (the constructor copies). Its shape, dtype and layout are
    checked each time a loop runs, so changing them in place gives an error, not a crash.
    """

    def __init__(self, dataset: Set, data: object = None, dtype: object = None, dim: int = 1,
                 name: str | None = None) -> None:
        self.dataset = _need_set(dataset, "the first argument of Dat", "sk.Dat(nodes, dim=2)")
        self.dim = _count_arg(dim, "Dat dim", "sk.Dat(nodes, dim=2)", minimum=1)
        shape = (dataset.size,) if self.dim == 1 else (dataset.size, self.dim)
        t = dtypes.as_dtype(dtype) if dtype is not None else None
        if data is None:
            try:
                arr = np.zeros(shape, t or dtypes.FLOAT64)
            except (MemoryError, ValueError):
                raise ArgumentError(f"no memory for a Dat of shape {shape}",
                                    hint="check the Set size and dim") from None
        elif adapters.is_device(data):  # a GPU array: the Dat holds it, no copy
            arr = adapters.for_value(data).dat_data(  # type: ignore[union-attr,assignment]
                dataset.size, self.dim, data, t)
        else:
            try:
                arr = np.asarray(data)
                if t is not None:
                    arr = arr.astype(t)
            except (TypeError, ValueError) as exc:
                raise ArgumentError(f"Dat data is not a numeric array ({exc})",
                                    hint="pass an array of shape (set size, dim)") from None
            if arr.dtype.kind in "iub" and arr.dtype != np.bool_:
                arr = arr.astype(dtypes.INT64 if arr.dtype.kind == "i" else arr.dtype)
            arr = np.array(arr, copy=True, order="C")
            if arr.size != dataset.size * self.dim:
                raise StencilError(f"Dat data has {arr.size} values, expected {dataset.size} "
                                   f"elements x dim {self.dim}")
            flat = dataset.size * self.dim
            if arr.shape not in ((flat,), (dataset.size, self.dim)) and arr.ndim:
                # e.g. a transposed (dim, n) array: reshaping would scramble it silently
                raise ArgumentError(f"Dat data has shape {arr.shape}, expected "
                                    f"({dataset.size}, {self.dim}) or ({flat},)",
                                    hint="one row of dim values per element (transpose?)")
            arr = arr.reshape(shape)
        dtypes.as_dtype(arr.dtype)
        self._data = arr
        self.dtype = np.dtype(arr.dtype)
        self.name = name or f"dat{id(self) % 10000}"

    @property
    def data(self) -> np.ndarray:
        _flush()
        return self._data

    @data.setter
    def data(self, value: object) -> None:
        _set_data(self, value)

    @property
    def data_ro(self) -> np.ndarray:
        _flush()
        if adapters.is_device(self._data):
            return self._data  # CuPy has no read-only arrays: the array itself
        v = self._data.view()
        v.flags.writeable = False
        return v

    def __call__(self, mode: Access, path: Map | MapEntry | None = None) -> Arg:
        mode = _mode(mode, f"Dat {self.name}")
        if path is not None and not isinstance(path, (Map, MapEntry)):
            raise ArgumentError(f"Dat {self.name}: {path!r} is not a map",
                                hint="write dat(mode), dat(mode, map) or dat(mode, map[i])")
        return Arg(self, mode, path)

    def __repr__(self) -> str:
        return f"Dat({self.dataset.name}, dim={self.dim}, dtype={self.dtype})"


class Global(_DataCarrier):
    """A global value of ``dim`` entries (a reduction target or a constant)."""

    def __init__(self, dim: int = 1, data: object = None, dtype: object = None,
                 name: str | None = None) -> None:
        self.dim = _count_arg(dim, "Global dim", "sk.Global(1, 0.0)", minimum=1)
        t = dtypes.as_dtype(dtype) if dtype is not None else None
        if data is None:
            arr = np.zeros(self.dim, t or dtypes.FLOAT64)
        else:
            try:
                arr = np.array(data, dtype=t, ndmin=1).reshape(-1)
            except (TypeError, ValueError) as exc:
                raise ArgumentError(f"Global data {data!r} is not numeric ({exc})") from None
            if arr.dtype.kind == "i":
                arr = arr.astype(dtypes.INT64)
            if arr.size != self.dim:
                raise StencilError(f"Global data has {arr.size} values, expected dim "
                                   f"{self.dim}")
        dtypes.as_dtype(arr.dtype)
        self._data = arr
        self.dtype = np.dtype(arr.dtype)
        self.name = name or f"glob{id(self) % 10000}"

    @property
    def data(self) -> np.ndarray:
        _flush()
        return self._data

    @data.setter
    def data(self, value: object) -> None:
        _set_data(self, value)

    def __call__(self, mode: Access) -> Arg:
        return Arg(self, _mode(mode, f"Global {self.name}"), None)

    def __repr__(self) -> str:
        return f"Global(dim={self.dim}, dtype={self.dtype})"


class Sparsity:
    """The non-zero pattern of a matrix assembled through ``(rowmap, colmap)``."""

    def __init__(self, rowmap: Map, colmap: Map) -> None:
        for m in (rowmap, colmap):
            if not isinstance(m, Map):
                raise ArgumentError(f"a Sparsity is built from two sk.Map, got {m!r}",
                                    hint="sk.Sparsity(cell2node, cell2node)")
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
        self.lmap = _frozen_copy(inverse.reshape(n, rowmap.arity, colmap.arity), np.int64)
        self.nnz = len(unique)
        # a map given new values no longer matches this pattern (checked before each loop)
        self.versions = (rowmap.version, colmap.version)


class Mat(_DataCarrier):
    """A sparse matrix on a ``Sparsity``; ``to_scipy()`` returns a CSR matrix."""

    def __init__(self, sparsity: Sparsity, dtype: object = None, name: str | None = None) -> None:
        if not isinstance(sparsity, Sparsity):
            raise ArgumentError(f"a Mat is built on an sk.Sparsity, got {sparsity!r}",
                                hint="sk.Mat(sk.Sparsity(rowmap, colmap))")
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
        mode = _mode(mode, f"Mat {self.name}")
        if mode is not INC and mode is not WRITE:
            raise StencilError(f"matrices take INC (or WRITE), not {mode.value}")
        if not isinstance(maps, tuple) or len(maps) != 2:
            raise ArgumentError(f"Mat {self.name}: {maps!r} is not a (rowmap, colmap) pair",
                                hint="mat(sk.INC, (rowmap, colmap))")
        rm, cm = maps
        if rm is not self.sparsity.rowmap or cm is not self.sparsity.colmap:
            raise StencilError("a Mat argument must use the maps of its Sparsity")
        return Arg(self, mode, maps)


@dataclass(frozen=True, eq=False)
class Arg:
    obj: Dat | Global | Mat
    mode: Access
    path: Map | MapEntry | tuple[Map, Map] | None

    @functools.cached_property  # read on every run: the object and path never change
    def kind(self) -> ArgKind:
        if isinstance(self.obj, Global):
            return ArgKind.GLOBAL
        if isinstance(self.obj, Mat):
            return ArgKind.MAT
        if self.path is None:
            return ArgKind.DIRECT
        if isinstance(self.path, MapEntry):
            return ArgKind.ENTRY
        return ArgKind.INDIRECT

    @property
    def map(self) -> Map | None:
        if isinstance(self.path, Map):
            return self.path
        if isinstance(self.path, MapEntry):
            return self.path.map
        return None

    @functools.cached_property
    def local_shape(self) -> tuple[int, ...]:
        """The shape of the argument as the kernel sees it for one element."""
        if self.kind is ArgKind.MAT:
            rm, cm = self.path  # type: ignore[misc]
            return (rm.arity, cm.arity)
        if self.kind is ArgKind.INDIRECT:
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
                 backend: str | None = None, fast_math: bool | None = None) -> None:
        if isinstance(code, FunctionType):
            self.func: FunctionType | None = code
            self.code: str | None = None
            self.name = name or code.__name__
        else:
            if not name:
                raise StencilError("a C-string Kernel needs the name of its function",
                                   hint="sk.Kernel(code, 'my_kernel')")
            _check_c_name(name)
            self.func = None
            self.code = str(code)
            self.name = name
        self.backend = backend
        self.__name__ = self.name
        # contraction allowed (docs/numerics.md); None: sk.configure's default, read now
        code_obj = getattr(self.func, "__code__", None)
        loc = None if code_obj is None else Location(code_obj.co_filename,
                                                     code_obj.co_firstlineno, 1)
        self.fast_math = config.checked_fast_math(fast_math, self.name, loc)

    def __repr__(self) -> str:
        return f"Kernel({self.name!r}, {'python' if self.func else 'C'})"

    def __reduce__(self):
        return adapters.reduce(self)  # a Python kernel by source

    def generate(self, backend: str | None = None) -> str:
        if self.code is not None:
            return self.code
        from ..frontend.parloop_kernel import parse_kernel
        from ..ir.definition import format_point_kernel

        return format_point_kernel(parse_kernel(self.func)[0])


# C99/C11 keywords and the GNU spellings the generated code's compilers know: a function
# cannot be named by one
_C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum
extern float for goto if inline int long register restrict return short signed sizeof static
struct switch typedef union unsigned void volatile while _Alignas _Alignof _Atomic _Bool
_Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local asm typeof __asm__
__attribute__ __inline __inline__ __restrict __restrict__ __typeof__ __extension__
__volatile__ __const __signed__""".split())


def _check_c_name(name: object) -> None:
    """The name of a C-string kernel is pasted into the generated C as the function to call:
    anything but a plain C identifier would change the program (issue 25: a name such as
    "kc(0,0); int x" compiled, and the loop crashed the interpreter)."""
    if isinstance(name, str) and name.isascii() and name.isidentifier() \
            and name not in _C_KEYWORDS:
        return
    why = ("a C keyword" if name in _C_KEYWORDS else "not a C identifier") \
        if isinstance(name, str) else f"a {type(name).__name__}, not a string"
    frame = sys._getframe(2)  # the caller of Kernel(...)
    raise StencilError(f"the C-string Kernel's name {name!r} is {why}",
                       loc=Location(frame.f_code.co_filename, frame.f_lineno, 1),
                       hint="pass the name of the C function the code defines (letters, "
                            "digits and '_', not starting with a digit): "
                            "sk.Kernel(code, 'my_kernel')")


def kernel(func: FunctionType | None = None, *, backend: str | None = None,
           fast_math: bool | None = None):
    """``@sk.kernel``: a ParLoop kernel written in Python (``fast_math``: as for stencils)."""
    if func is None:
        return lambda f: Kernel(f, backend=backend, fast_math=fast_math)
    return Kernel(func, backend=backend, fast_math=fast_math)


# Each element's local blocks live on the (OpenMP thread's) stack in the C loop.
MAX_LOCAL_BYTES = 256 * 1024


def check_args(kern: Kernel, iterset: Set, args: tuple[Arg, ...]) -> None:
    """The construction-time checks of a ParLoop: clear errors, never a crash later."""
    name = kern.name
    for i, a in enumerate(args):
        if not isinstance(a, Arg):
            raise ArgumentError(f"argument {i + 1} is {a!r}, not dat(mode[, map])",
                                stencil=name, hint="write dat(sk.READ) or dat(sk.INC, map)")
        kind = a.kind
        if kind is ArgKind.GLOBAL:
            if a.mode in (WRITE, RW):
                raise ArgumentError(f"argument {i + 1}: a Global cannot be {a.mode.value}",
                                    stencil=name, hint="use READ, INC, MIN or MAX")
            continue
        if kind is ArgKind.MAT:
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
        else:
            if m.from_set is not iterset:
                raise ArgumentError(f"argument {i + 1}: map {m.name} starts from "
                                    f"{m.from_set.name}, the loop iterates over {iterset.name}",
                                    stencil=name)
            if m.to_set is not dataset:
                raise ArgumentError(f"argument {i + 1}: map {m.name} points into "
                                    f"{m.to_set.name}, the Dat lives on {dataset.name}",
                                    stencil=name)
    # One object in several arguments is only defined when none of them writes it: the
    # backends gather, scatter and reduce per argument at different times, and the C loop
    # declares every argument `restrict` (PyOP2 rejects such conflicts too).
    first: dict[int, int] = {}
    for i, a in enumerate(args):
        j = first.setdefault(id(a.obj), i)
        if j != i and (a.mode is not READ or args[j].mode is not READ):
            what = "also writes" if a.mode is not READ else "also reads"
            raise ArgumentError(f"argument {j + 1} passes {type(a.obj).__name__} "
                                f"{a.obj.name} {args[j].mode.value} and argument {i + 1} "
                                f"{what} it ({a.mode.value}); an object may appear in "
                                "several arguments only if all of them READ it",
                                stencil=name,
                                hint="pass it once (RW, or INC and read the current value "
                                     "from that argument), or copy it into a second Dat")
    local_bytes = sum(int(np.prod(a.local_shape)) * a.obj.dtype.itemsize for a in args
                      if a.kind.shares_targets or (
                          a.kind is not ArgKind.DIRECT and a.mode.writes) or a.mode.reduces)
    if local_bytes > MAX_LOCAL_BYTES:
        raise ArgumentError(f"the kernel's local blocks take {local_bytes} bytes per element "
                            f"(limit {MAX_LOCAL_BYTES}): map arity x dim is too large",
                            stencil=name, hint="split the map, or use a smaller dim")
