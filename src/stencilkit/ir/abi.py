"""The launch ABI: what a generated function takes and returns, in terms a launcher needs.

A description is derived from a lowered ``KernelFunction`` alone (``describe``): each
parameter's symbol carries properties that say what it is (``ir.kernel``: ``BasePointer``,
``ShapeOf``, ``ScalarArgument`` with its key, ``Output``, ``Temporary``, ``BlockList``,
``LoopArgument``, ...), so the description is what the lowering produced, never a reading of
the user's objects. Launchers (``runtime/``) consume descriptions and the values the user
objects bind to them (``ParLoopCall``: arrays and maps), and see no user object.

The enums here replace the strings that used to say the same things (``"indirect"``,
``"INC"``, ``"color"``, ``"gpu"``, ``"standard"``); ``sk.READ`` ... ``sk.MAX`` are the
members of ``Access``. This module is a leaf: it imports only ``ir/``, the standard
library and NumPy.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from . import kernel as k
from .core import Location, StrEnum, walk


class Kind(StrEnum):
    """What was compiled."""

    POINT = "point"
    COMPUTATION = "computation"
    PARLOOP = "parloop"


class Access(enum.Enum):
    """How a ParLoop argument is accessed (PyOP2's modes; public as ``sk.READ`` ...)."""

    READ = "READ"
    WRITE = "WRITE"
    RW = "RW"
    INC = "INC"
    MIN = "MIN"
    MAX = "MAX"

    def __repr__(self) -> str:
        return f"sk.{self.value}"

    @property
    def writes(self) -> bool:
        return self is not Access.READ

    @property
    def reduces(self) -> bool:
        """MIN or MAX: the result combines the old value with the kernel's."""
        return self is Access.MIN or self is Access.MAX


class ArgKind(StrEnum):
    """How a ParLoop argument reaches the kernel."""

    DIRECT = "direct"  # a Dat on the iteration set
    ENTRY = "entry"  # a Dat through one entry of a map (``map[i]``)
    INDIRECT = "indirect"  # a Dat through every entry of a map
    GLOBAL = "global"  # a Global
    MAT = "mat"  # a Mat through its (rowmap, colmap)

    @property
    def mapped(self) -> bool:
        """Through a map (whose values the loop function takes after the data)."""
        return self is ArgKind.ENTRY or self is ArgKind.INDIRECT

    @property
    def shares_targets(self) -> bool:
        """Elements may write one entry together (a map, or a Mat's local map)."""
        return self.mapped or self is ArgKind.MAT


class RaceMode(StrEnum):
    """How a ParLoop keeps elements that write one entry apart (``sk.configure(race=)``
    spells them "color" and "atomic")."""

    NONE = "none"  # nothing shared is written
    COLOUR = "color"  # blocks of one colour share no entry: no atomics
    ATOMIC = "atomic"  # every block at once, atomic updates


class Device(StrEnum):
    """Where a backend's arrays live."""

    CPU = "cpu"
    GPU = "gpu"


class Role(enum.Enum):
    """What a parameter of a generated function is."""

    PRIMARY_INPUT = "primary input"  # a point kernel's first array: the domain's shape
    RELATIVE_INPUT = "relative input"  # read at offsets from the point
    STANDARD_INPUT = "standard-indexed input"  # read at absolute indices
    SCALAR = "scalar"  # a user's scalar argument
    OUTPUT = "output"  # a point kernel's result
    FIELD = "field"  # a computation's field
    TEMPORARY = "temporary"  # a computation's temporary held in memory
    ORIGIN = "origin"  # where the domain starts in a field, along one axis
    DOMAIN_EXTENT = "domain extent"  # the domain's size along one axis
    BORDER_FILL = "border-fill flag"  # write cval where the neighbourhood leaves the array
    CVAL = "cval"  # the value outside the array
    SHAPE = "shape"  # an array's extent in one dimension
    STRIDE = "stride"  # an array's stride in one dimension, in elements
    BLOCK_COUNT = "block count"  # how many blocks a ParLoop's loop function runs
    BLOCK_LIST = "block list"  # the blocks: [start, end) pairs of elements
    LOOP_DATA = "loop data"  # a ParLoop argument's values
    MAP = "map"  # the map a ParLoop argument goes through (a Mat: its local map)


_GENERATED_ROLES: dict[type, Role] = {
    k.OriginOf: Role.ORIGIN, k.DomainExtent: Role.DOMAIN_EXTENT,
    k.BorderFill: Role.BORDER_FILL, k.FillValue: Role.CVAL, k.BlockCount: Role.BLOCK_COUNT}


@dataclass(frozen=True)
class StatusCode:
    code: int
    meaning: str


# What a generated function's status means (0: success); a run that met several conditions
# returns one of their codes (the last one set, ir/kernel.py's error channel)
STATUSES = (
    StatusCode(k.STATUS_OFFSET, "a run-time relative index left the neighbourhood (clamped)"),
    StatusCode(k.STATUS_INDEX, "an absolute index was out of range (the element read as 0)"),
    StatusCode(k.STATUS_RANGE_STEP, "a range() step was 0 (the loop did not run)"),
    StatusCode(k.STATUS_MEMORY, "a local array too large for the stack could not be "
                                "allocated (the work was skipped)"))
# the run-time index checks (runtime helper ``Op``s) report through the status too
REPORTING_OPS = {"checked_offset": k.STATUS_OFFSET, "wrap_index": k.STATUS_INDEX}
STATUS_OVERLAP = StatusCode(3, "the output overlaps an input (the CPython entry's, before "
                               "running: the caller copies and calls again)")


@dataclass(frozen=True)
class Parameter:
    """One parameter of a generated function.

    ``name``: the C identifier the generated code spells; ``key``: the argument it belongs
    to (an array's or scalar's name, or what a compiler-added scalar is, ``k.OriginOf``
    ...); ``access``: how the function uses an array (READ when it never writes through the
    pointer; for ParLoop data, the loop's access mode); ``ndim``, ``unit_stride_axis``: of
    the array a base pointer points to; ``dim``: the dimension of a shape or stride;
    ``loop_argument``: the ParLoop argument a data or map pointer belongs to."""

    name: str
    role: Role
    dtype: np.dtype
    key: k.ArgumentKey
    pointer: bool = False
    access: Access | None = None
    ndim: int = 0
    unit_stride_axis: int | None = None
    dim: int | None = None
    loop_argument: int | None = None

    @property
    def field(self) -> str | None:
        """The field an origin belongs to."""
        return self.key.field if isinstance(self.key, k.OriginOf) else None

    @property
    def axis(self) -> str | None:
        """The axis of an origin or a domain extent."""
        return self.key.axis if isinstance(self.key, (k.OriginOf, k.DomainExtent)) else None


#: Roles a launcher never passes: the entry point reads them from the arrays it is given
FROM_ARRAYS = frozenset({Role.SHAPE, Role.STRIDE})

#: Roles of a point kernel's inputs (the caller's arguments that are arrays)
POINT_INPUTS = frozenset({Role.PRIMARY_INPUT, Role.RELATIVE_INPUT, Role.STANDARD_INPUT})

#: What a point entry point takes after the caller's arguments, in this order, by role and
#: key (the kernel's parameters hold those it uses: "nearest" fills no border)
POINT_TAIL = (Role.OUTPUT, Role.BORDER_FILL, Role.CVAL)
POINT_TAIL_KEYS: tuple[k.ArgumentKey, ...] = ("out", k.BorderFill(), k.FillValue())


@dataclass(frozen=True)
class LaunchDescription:
    """A generated function's calling convention: its parameters in order, what it runs on,
    how a ParLoop's shared writes are kept apart, and the status codes it may return.

    ``call_order``: a point kernel's parameters as the caller passes them (the entry point
    takes them all; the kernel, and so ``parameters``, only those it uses)."""

    kind: Kind
    function: str
    parameters: tuple[Parameter, ...]
    device: Device = Device.CPU
    race: RaceMode = RaceMode.NONE
    statuses: tuple[StatusCode, ...] = ()
    call_order: tuple[str, ...] = ()

    def with_role(self, role: Role) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if p.role is role)

    @property
    def arguments(self) -> tuple[Parameter, ...]:
        """What a launcher passes, in order: every parameter but shapes and strides."""
        return tuple(p for p in self.parameters if p.role not in FROM_ARRAYS)

    @property
    def written(self) -> frozenset[str]:
        """The arrays the function may write (copied back from a device, checked for
        overlap)."""
        return frozenset(p.key for p in self.parameters if isinstance(p.key, str)
                         and p.pointer and p.access is not None and p.access.writes)

    @property
    def entry_keys(self) -> tuple[k.ArgumentKey, ...]:
        """The keys of what the entry point takes, in order: a point kernel's, every
        argument of the call and the output, border-fill flag and cval (used or not);
        any other's, its ``arguments``."""
        if self.kind is Kind.POINT:
            return (*self.call_order, *POINT_TAIL_KEYS)
        return tuple(p.key for p in self.arguments)

    def call_positions(self, roles: frozenset[Role]) -> tuple[int, ...]:
        """The positions in ``call_order`` of the arguments of ``roles``, ascending."""
        return tuple(sorted(self.call_order.index(p.key) for p in self.parameters
                            if p.role in roles and isinstance(p.key, str)))

    def parameter(self, key: k.ArgumentKey) -> Parameter:
        """The base pointer of array ``key``, or the scalar ``key``."""
        for p in self.parameters:
            if p.key == key and p.role not in (Role.SHAPE, Role.STRIDE):
                return p
        raise KeyError(f"{self.function} has no argument {key!r}")


def describe(kf: k.KernelFunction, kind: Kind | None = None, *, device: Device = Device.CPU,
             race: RaceMode = RaceMode.NONE, modes: Sequence[Access] = (),
             primary: str | None = None, call_order: Sequence[str] = ()) -> LaunchDescription:
    """The launch description of ``kf``, a lowered kernel function. Its parameters are the
    same before and after its platform; the status codes are read from its ``SetError``
    nodes (which the platform lowers: describe it before) and its index checks. ``kind``: default, what its
    parameters say (a block list: a ParLoop's; an origin or a domain extent: a
    computation's; else a point kernel's). ``modes``: a ParLoop's access modes, by
    argument; ``primary``: a point kernel's first argument (default: the first array that
    is not its output); ``call_order``: a point kernel's parameters, as a call passes them
    (each key of a caller's argument must be one of them)."""
    kind = infer_kind(kf) if kind is None else kind
    buffers = {b.name: b for b in kf.buffers}
    if kind is Kind.POINT and primary is None:
        primary = next((p.get(k.BasePointer).buffer for p in kf.params  # type: ignore[union-attr]
                        if p.has(k.BasePointer) and not p.has(k.Output)), None)
    written = written_pointers(kf)
    params = []
    for p in kf.params:
        params.append(_parameter(p, kind, buffers, modes, primary, written))
    codes = {n.code for n in walk(kf) if isinstance(n, k.SetError)} | {
        REPORTING_OPS[n.op] for n in walk(kf) if isinstance(n, k.Op) and n.op in REPORTING_OPS}
    statuses = tuple(s for s in STATUSES if s.code in codes)
    order = tuple(call_order)
    unknown = [p.key for p in params if order and p.role in POINT_INPUTS | {Role.SCALAR}
               and p.key not in order]
    if unknown:
        raise ValueError(f"{kf.name}: argument(s) {unknown} are not in the call order {order}")
    return LaunchDescription(kind, kf.name, tuple(params), device, race, statuses, order)


def infer_kind(kf: k.KernelFunction) -> Kind:
    """What ``kf`` was lowered from, as its parameters' properties say."""
    props = [q for p in kf.params for q in p.properties]
    if any(isinstance(q, k.BlockList) for q in props):
        return Kind.PARLOOP
    if any(isinstance(q, k.ScalarArgument) and isinstance(q.key, (k.OriginOf, k.DomainExtent))
           for q in props):
        return Kind.COMPUTATION
    return Kind.POINT


def written_pointers(kf: k.KernelFunction) -> frozenset[str]:
    """The pointer symbols ``kf`` may write through: stored to, updated, reduced into, or
    handed (as an address or a pointer) to a call, which may write through it. By symbol:
    a local copy of an array (a computation's column buffer) has the array's name."""
    found = set()
    for n in walk(kf):
        if isinstance(n, (k.Store, k.AtomicUpdate, k.Reduction, k.StreamedRow, k.Address)):
            found.add(n.buffer.base.name)
        elif isinstance(n, k.Call):
            found.update(a.symbol.name for a in n.args if isinstance(a, k.Sym) and a.symbol.pointer)
    return frozenset(found)


def race_of(kf: k.KernelFunction, shared: frozenset[int]) -> RaceMode:
    """How a ParLoop's loop function ``kf`` keeps the elements that write one entry apart,
    as it was lowered: ``shared`` are the arguments written through a map (or a Mat's local
    map); updated atomically, every block runs at once, else blocks run by colour."""
    if not shared:
        return RaceMode.NONE
    for n in walk(kf):
        if isinstance(n, k.AtomicUpdate):
            arg = n.buffer.base.get(k.LoopArgument)
            if isinstance(arg, k.LoopArgument) and arg.argument in shared:
                return RaceMode.ATOMIC
    return RaceMode.COLOUR


def status_lines() -> tuple[str, ...]:
    """What a generated function's status means, one line per code (its header's)."""
    return ("0: success", *(f"{s.code}: {s.meaning}" for s in (*STATUSES, STATUS_OVERLAP)))


def _parameter(p: k.Symbol, kind: Kind, buffers: dict[str, k.Buffer],
               modes: Sequence[Access], primary: str | None, written: frozenset[str]
               ) -> Parameter:
    for prop in p.properties:
        match prop:
            case k.ShapeOf(buffer=b, dim=dim):
                return Parameter(p.name, Role.SHAPE, p.dtype, b, dim=dim)
            case k.StrideOf(buffer=b, dim=dim):
                return Parameter(p.name, Role.STRIDE, p.dtype, b, dim=dim)
            case k.ScalarArgument(key=key):
                role = Role.SCALAR if isinstance(key, str) else _GENERATED_ROLES[type(key)]
                return Parameter(p.name, role, p.dtype, key)
            case k.BasePointer(buffer=b):
                buf = buffers.get(b)
                ndim = buf.ndim if buf is not None else 1
                unit = None if buf is None else next(
                    (i for i, s in enumerate(buf.strides)
                     if isinstance(s, k.Constant) and int(s.value) == 1), None)
                role, access, loop_arg = _array_role(p, kind, b, modes, primary, written)
                return Parameter(p.name, role, p.dtype, b, True, access, ndim, unit,
                                 loop_argument=loop_arg)
    raise ValueError(f"parameter {p.name} of a generated function has no argument property")


def _array_role(p: k.Symbol, kind: Kind, buffer: str, modes: Sequence[Access],
                primary: str | None, written: frozenset[str]
                ) -> tuple[Role, Access, int | None]:
    # a computation's fields are not declared const (the C entry takes them writable): what
    # the kernel stores to says which it writes
    read = Access.READ if p.has(k.ReadOnly) or p.name not in written else Access.RW
    if p.has(k.BlockList):
        return Role.BLOCK_LIST, Access.READ, None
    arg = p.get(k.LoopArgument)
    if isinstance(arg, k.LoopArgument):
        if arg.map:
            return Role.MAP, Access.READ, arg.argument
        mode = modes[arg.argument] if arg.argument < len(modes) else read
        return Role.LOOP_DATA, mode, arg.argument
    if p.has(k.Output):
        return Role.OUTPUT, Access.WRITE, None
    if p.has(k.Temporary):
        return Role.TEMPORARY, Access.RW, None
    if kind is Kind.COMPUTATION:
        return Role.FIELD, read, None
    if p.has(k.StandardIndexed):
        return Role.STANDARD_INPUT, Access.READ, None
    if buffer == primary:
        return Role.PRIMARY_INPUT, Access.READ, None
    return Role.RELATIVE_INPUT, Access.READ, None


def explain(param: Parameter) -> str:
    """One line saying what a parameter is (the generated headers' calling convention)."""
    key = param.key
    match param.role:
        case Role.SHAPE:
            return f"extent of array '{key}' in dimension {param.dim}"
        case Role.STRIDE:
            return f"stride of array '{key}' in dimension {param.dim}"
        case Role.SCALAR:
            return f"scalar '{key}'"
        case Role.ORIGIN:
            return f"origin of field '{param.field}' along {param.axis}"
        case Role.DOMAIN_EXTENT:
            return f"extent of the domain along {param.axis}"
        case Role.BORDER_FILL:
            return "border-fill flag: write cval where the neighbourhood leaves the array"
        case Role.CVAL:
            return "cval: the value outside the array"
        case Role.BLOCK_COUNT:
            return "number of blocks"
    return f"pointer to element [0, ...] of array '{key}'"


# ---------------------------------------------------------------- a ParLoop's values


@dataclass(frozen=True, eq=False)
class LoopArgumentValues:
    """The values bound to one ParLoop argument for one run.

    ``data``: its array; ``map_values``: the map the loop function takes after it ((set
    size, arity); a Mat: its local map into the CSR values); ``entry``: the map entry of an
    ENTRY argument; ``targets``: the entries each element writes through, for colouring
    (the map's values, one column of them, a Mat's row map); ``map_version`` identifies
    those values (colourings are cached by it, never reused); ``target_size``: the size of
    the set they index; ``colourings``: the cache the map owns (a new map never inherits a
    stale colouring)."""

    kind: ArgKind
    access: Access
    data: np.ndarray
    local_shape: tuple[int, ...]
    dim: int
    map_values: np.ndarray | None = None
    entry: int | None = None
    targets: np.ndarray | None = None
    map_version: int = 0
    target_size: int = 0
    colourings: dict | None = None


@dataclass(frozen=True, eq=False)
class ParLoopCall:
    """Everything a ParLoop launcher needs for one run: the loop's name and location (for
    errors), the size of the iteration set, its race mode, and each argument's values in
    the loop function's order."""

    name: str
    loc: Location | None
    set_size: int
    race: RaceMode
    arguments: tuple[LoopArgumentValues, ...]


@dataclass(frozen=True)
class BlockLayout:
    """How a ParLoop's elements run: blocks of ``block`` elements of a set of ``set_size``,
    grouped by colour (one group of every block when nothing shared is written, or with
    atomics); each group is an int64 (count, 2) array of [start, end) pairs."""

    set_size: int
    block: int
    colours: tuple[np.ndarray, ...]
