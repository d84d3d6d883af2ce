"""The geometry of a computation call: origins, domain, K need, halos, and their errors.

Computed once per (definition, plan, argument shapes, origin, domain) from the
:class:`Rules` of a definition, by the one function :func:`resolve`; the call from Python
(``ComputationStencil``), the MPI split (``adapters.mpi_computation``, on the global shapes)
and the call from jitted code use it. Jitted code cannot call Python, so for the default
origin and domain (the only ones it takes) the same rules are also given as integer tables
(:func:`tables`) read by :func:`default_geometry`, plain Python that Numba compiles
(``numba_computation_calls``); :func:`table_error` turns its status into the error
:func:`resolve` raises for the same shapes, and the tests check the two agree.

Requires: a typed definition and its schedule (``analysis.schedule``). Ensures: every access
of the generated code lies inside the arrays when no error is raised (``validate``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import ArgumentError, Location, did_you_mean
from ..ir import computation as c
from . import schedule as sch

Origin = tuple[int, int, int]
Shapes = dict[str, tuple[int, ...]]

_AXES = "IJK"


@dataclass(frozen=True)
class Geometry:
    """Origins of every field and temporary, the domain, and the temporaries' shapes."""

    origins: dict[str, Origin]
    domain: tuple[int, int, int]
    temp_shapes: dict[str, tuple[int, int, int]]
    # the shapes of the fields the stencil allocates: 2-D temporaries (I, J), the level
    # index (K)
    plane_shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Rules:
    """What the geometry of one definition, as one backend compiles it, depends on.

    ``schedule`` is the definition's (the fields' extents and K accesses, what the caller's
    arrays must hold); ``plan_definition`` and ``plan_schedule`` are what the backend
    compiles (inlined or not: the temporaries it allocates)."""

    stencil: str
    loc: Location | None
    params: tuple[c.FieldDecl, ...]
    schedule: sch.Schedule
    plan_definition: c.ComputationDef
    plan_schedule: sch.Schedule
    planes: tuple[str, ...] = ()
    level_index: str | None = None


# ---------------------------------------------------------------- the rules, one at a time


def k_need(schedule: sch.Schedule, name: str, nk: int) -> tuple[int, int]:
    """The levels ``name`` is read below and above a domain of ``nk`` levels."""
    below = above = 0
    for acc in schedule.k_accesses:
        if acc.name != name:
            continue
        k0, k1 = acc.interval.bounds(nk)
        if k1 <= k0:
            continue
        below = max(below, -(k0 + acc.dk_lo))
        above = max(above, (k1 - 1 + acc.dk_hi) - (nk - 1))
    return below, above


def own_origin(rules: Rules, name: str) -> Origin:
    """The default origin: the horizontal halo the field needs, and 0 in K. Intervals
    name levels counted from the origin, so a K default moved by the vertical halo would
    change what every interval of the definition means (``interval(...)`` would skip
    level 0); a vertical halo the field lacks is an error, as in GT4Py."""
    ext = rules.schedule.extent(name)
    return (-ext[0], -ext[2], 0)


def int_tuple(rules: Rules, value: object, what: str, lengths: tuple[int, ...]
              ) -> tuple[int, ...]:
    """``value`` as a tuple of Python ints of one of ``lengths``, or an ArgumentError."""
    try:
        if isinstance(value, (str, bytes)):
            raise TypeError
        out: tuple | None = tuple(value)  # type: ignore[arg-type]
    except TypeError:
        out = None
    if out is None or len(out) not in lengths or not all(
            isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))
            for x in out):
        raise ArgumentError(f"{what} must be a tuple of {' or '.join(map(str, lengths))} "
                            f"integers, got {value!r}", stencil=rules.stencil,
                            loc=rules.loc, hint=f"pass e.g. {what.split()[0]}="
                                                f"{(0,) * lengths[-1]}")
    ints = tuple(int(x) for x in out)
    if any(abs(x) >= 2**62 for x in ints):
        raise ArgumentError(f"{what} {ints} is out of range", stencil=rules.stencil,
                            loc=rules.loc, hint="pass sizes that fit the arrays")
    return ints


def default_domain(rules: Rules, shapes: Shapes, origins: dict[str, Origin]
                   ) -> tuple[int, int, int]:
    """The largest domain every field holds from its origin, with the halo it needs."""
    dom = []
    for axis_i, axis in enumerate(_AXES):
        best = None
        for f in rules.params:
            if axis not in f.axes:
                continue
            n = shapes[f.name][f.axes.index(axis)]
            ext = rules.schedule.extent(f.name)
            hi = (ext[1], ext[3], 0)[axis_i]
            size = n - origins[f.name][axis_i] - hi
            best = size if best is None else min(best, size)
        dom.append(0 if best is None else max(0, best))
    nk = dom[2]
    for _ in range(4):  # K halo above may depend on nk through interval bounds
        shrink = 0
        for f in rules.params:
            if "K" in f.axes:
                _, above = k_need(rules.schedule, f.name, nk)
                n = shapes[f.name][f.axes.index("K")]
                shrink = max(shrink, origins[f.name][2] + nk + above - n)
        if shrink <= 0:
            break
        nk = max(0, nk - shrink)
    dom[2] = nk
    return tuple(dom)  # type: ignore[return-value]


def min_domain_error(rules: Rules, axis: str, n: int, least: int) -> ArgumentError:
    return ArgumentError(
        f"the domain has {n} point(s) along {axis}, but its horizontal regions "
        f"read from one end of the domain as far as the other: at least {least} "
        "are needed", stencil=rules.stencil, loc=rules.loc,
        hint=f"use a domain of at least {least} points along {axis}")


def halo_error(rules: Rules, name: str, axis: str, lo: int, hi: int, o: int, d: int, n: int
               ) -> ArgumentError:
    return ArgumentError(
        f"field '{name}' lacks the halo the stencil needs along {axis}: "
        f"it reads {lo} point(s) before and {hi} after the domain "
        f"(origin {o}, domain {d}, extent {n})",
        stencil=rules.stencil, loc=rules.loc,
        hint=f"give '{name}' an origin of at least {lo} and a size of at "
             f"least origin + domain + {hi} along {axis}")


def check_min_domain(rules: Rules, dom: tuple[int, ...]) -> None:
    for axis, n, least in zip("IJ", dom, rules.plan_schedule.min_domain):
        if 0 < n < least:
            raise min_domain_error(rules, axis, n, least)


def check_halos(rules: Rules, shapes: Shapes, origins: dict[str, Origin],
                dom: tuple[int, ...]) -> None:
    for f in rules.params:
        shape = shapes[f.name]
        ext = rules.schedule.extent(f.name)
        below, above = k_need(rules.schedule, f.name, dom[2])
        o = origins[f.name]
        needs = {"I": (-ext[0], ext[1]), "J": (-ext[2], ext[3]), "K": (below, above)}
        for axis in f.axes:
            ai = _AXES.index(axis)
            lo, hi = needs[axis]
            n = shape[f.axes.index(axis)]
            if o[ai] - lo < 0 or o[ai] + dom[ai] + hi > n:
                raise halo_error(rules, f.name, axis, lo, hi, o[ai], dom[ai], n)


def shared_origin(params: tuple[c.FieldDecl, ...], shapes: Shapes,
                  own: dict[str, Origin]) -> dict[str, Origin]:
    """When every 3-D field has one shape: the origin they share (per axis, the largest halo
    any of them needs), so that equally shaped arrays are indexed alike; 2-D and 1-D fields of
    the same sizes along their axes share it too."""
    found = {tuple(shapes[f.name])[:3] for f in params if f.axes == "IJK"}
    if len(found) != 1:
        return {}
    shape = found.pop()
    members = [f for f in params
               if all(i < len(shapes[f.name]) and
                      shapes[f.name][i] == shape[_AXES.index(a)]
                      for i, a in enumerate(f.axes))]
    origin = tuple(max((own[f.name][a] for f in members if _AXES[a] in f.axes), default=0)
                   for a in range(3))
    return {f.name: origin for f in members}  # type: ignore[misc]


def expand(o: tuple[int, ...], axes: str) -> Origin:
    """An origin over a field's own axes as an (I, J, K) origin (0 along the others)."""
    full = [0, 0, 0]
    for v, a in zip(o, axes):
        full[_AXES.index(a)] = v
    return tuple(full)  # type: ignore[return-value]


# ---------------------------------------------------------------- the analysis


def resolve(rules: Rules, shapes: Shapes, origin: object, domain: object,
            validate: bool = True) -> Geometry:
    """The geometry of a call on arrays of ``shapes`` (by field name) with the call's
    ``origin`` (None, one tuple, or a dict by field name with ``"_all_"``) and ``domain``
    (None or three sizes); ``validate``: check every field's halo."""
    params = rules.params
    given: dict[str, tuple[int, ...]] = {}
    names = {f.name for f in params} | {"_all_"}
    if isinstance(origin, dict):
        for k, v in origin.items():
            if k not in names:
                raise ArgumentError(f"origin names '{k}', which is not a field"
                                    + did_you_mean(k, names - {"_all_"}),
                                    stencil=rules.stencil, loc=rules.loc,
                                    hint=f"use field names from {sorted(names - {'_all_'})}")
            given[k] = int_tuple(rules, v, f"origin of '{k}'", (1, 2, 3))
    elif origin is not None:
        o = int_tuple(rules, origin, "origin", (1, 2, 3))
        given = {f.name: o for f in params}
    origins: dict[str, Origin] = {}
    defaults = {f.name: own_origin(rules, f.name) for f in params}
    shared = shared_origin(params, shapes, defaults)
    for f in params:
        default = shared.get(f.name, defaults[f.name])
        if f.name in given:
            o = given[f.name]
            o3 = expand(o, f.axes) if len(o) != 3 else o
            origins[f.name] = tuple(int(x) for x in o3)  # type: ignore[assignment]
        elif "_all_" in given:
            o = given["_all_"]
            origins[f.name] = expand(o, f.axes) if len(o) != 3 else o
        else:
            origins[f.name] = default
    if domain is not None:
        dom = int_tuple(rules, domain, "domain", (3,))
        if any(x < 0 for x in dom):
            raise ArgumentError(f"domain {dom} has a negative size", stencil=rules.stencil,
                                loc=rules.loc, hint="pass three sizes >= 0")
    else:
        dom = default_domain(rules, shapes, origins)
    check_min_domain(rules, dom)
    if validate:
        check_halos(rules, shapes, origins, dom)
    temp_shapes = {}
    plan_schedule = rules.plan_schedule
    for t, _ in rules.plan_definition.temporaries:
        ext = plan_schedule.extent(t)
        below, above = k_need(plan_schedule, t, dom[2])
        origins[t] = (-ext[0], -ext[2], below)
        temp_shapes[t] = (dom[0] + ext[1] - ext[0], dom[1] + ext[3] - ext[2],
                          dom[2] + below + above)
    plane_shapes: dict[str, tuple[int, ...]] = {}
    for t in rules.planes:
        ext = plan_schedule.extent(t)
        origins[t] = (-ext[0], -ext[2], 0)
        plane_shapes[t] = (dom[0] + ext[1] - ext[0], dom[1] + ext[3] - ext[2])
    if rules.level_index:  # read shifted through helpers: levels beyond the domain too
        below, above = k_need(plan_schedule, rules.level_index, dom[2])
        origins[rules.level_index] = (0, 0, below)
        plane_shapes[rules.level_index] = (dom[2] + below + above,)
    return Geometry(origins, dom, temp_shapes, plane_shapes)  # type: ignore[arg-type]


# ---------------------------------------------------------------- as tables (jitted calls)


class TableStatus:
    """What :func:`default_geometry` returns first (ints: Numba compiles it)."""

    OK = 0
    MIN_DOMAIN = 1  # info: axis, domain size, least
    HALO = 2  # info: field, axis, lo, hi, origin, domain, extent


def tables(rules: Rules) -> dict[str, np.ndarray]:
    """What :func:`default_geometry` needs of the rules, as int64 arrays."""
    params, sched = rules.params, rules.schedule
    fields = [f.name for f in params]
    temps = [t for t, _ in rules.plan_definition.temporaries]
    has = np.array([[a in f.axes for a in _AXES] for f in params], np.int64).reshape(-1, 3)
    own = np.array([own_origin(rules, f) for f in fields], np.int64).reshape(-1, 3)
    hi = np.array([(sched.extent(f)[1], sched.extent(f)[3], 0) for f in fields],
                  np.int64).reshape(-1, 3)
    ijk = np.array([f.axes == "IJK" for f in params], np.int64)
    order = np.array([[_AXES.index(a) for a in f.axes] + [-1] * (3 - len(f.axes))
                      for f in params], np.int64).reshape(-1, 3)

    def k_table(schedule, names):
        rows = [(names.index(a.name), a.interval.start.offset, a.interval.start.from_end,
                 a.interval.end.offset, a.interval.end.from_end, a.dk_lo, a.dk_hi)
                for a in schedule.k_accesses if a.name in names]
        return np.array(rows, np.int64).reshape(-1, 7)

    t_ext = np.array([rules.plan_schedule.extent(t)[:4] for t in temps],
                     np.int64).reshape(-1, 4)
    return {"HAS": has, "OWN": own, "HI": hi, "IJK": ijk, "ORDER": order,
            "KF": k_table(sched, fields),
            "MIN": np.array(rules.plan_schedule.min_domain, np.int64),
            "KT": k_table(rules.plan_schedule, temps), "TEXT": t_ext}


def table_error(rules: Rules, status: int, info: list[int]) -> ArgumentError:
    """The error :func:`resolve` raises where :func:`default_geometry` returned
    ``status`` with ``info``."""
    if status == TableStatus.MIN_DOMAIN:
        axis, n, least = info[:3]
        return min_domain_error(rules, _AXES[axis], n, least)
    f, axis, lo, hi, o, d, n = info[:7]
    return halo_error(rules, rules.params[f].name, _AXES[axis], lo, hi, o, d, n)


# The two functions below are the table form of k_need and resolve(origin=None,
# domain=None): plain Python on int64 arrays, so that Numba compiles them as they are
# (``numba_computation_calls`` jits them; in Python only the tests run them).


def table_k_need(ka, idx, nk):
    """:func:`k_need` over a table of ``KAccess``es (rows of :func:`tables`' "KF"/"KT")."""
    below = 0
    above = 0
    for r in range(ka.shape[0]):
        if ka[r, 0] != idx:
            continue
        k0 = max(0, ka[r, 1] + (nk if ka[r, 2] else 0))
        k1 = min(nk, ka[r, 3] + (nk if ka[r, 4] else 0))
        if k1 <= k0:
            continue
        below = max(below, -(k0 + ka[r, 5]))
        above = max(above, (k1 - 1 + ka[r, 6]) - (nk - 1))
    return below, above


def default_geometry(shapes, has, own, hi, ijk, order, kf, min_domain, kt, t_ext):
    """:func:`resolve` with the default origin and domain. ``shapes``: per field, its
    array's size along I, J, K (0 where it lacks the axis). Returns the status
    (``TableStatus``), the status's values, the origins of the fields then the temporaries,
    the domain and the temporaries' shapes. (Jitted, its global ``table_k_need`` is the
    jitted twin: ``numba_computation_calls``.)"""
    nf = shapes.shape[0]
    nt = t_ext.shape[0]
    info = np.zeros(7, np.int64)
    origins = np.zeros((nf + nt, 3), np.int64)
    origins[:nf] = own
    # the origin every equally shaped field shares
    found = False
    same = True
    ref = np.zeros(3, np.int64)
    for f in range(nf):
        if ijk[f]:
            if not found:
                ref[:] = shapes[f]
                found = True
            elif shapes[f, 0] != ref[0] or shapes[f, 1] != ref[1] or shapes[f, 2] != ref[2]:
                same = False
    if found and same:
        member = np.zeros(nf, np.bool_)
        shared = np.zeros(3, np.int64)
        for f in range(nf):
            member[f] = True
            for a in range(3):
                if has[f, a] and shapes[f, a] != ref[a]:
                    member[f] = False
            if member[f]:
                for a in range(3):
                    if has[f, a]:
                        shared[a] = max(shared[a], own[f, a])
        for f in range(nf):
            if member[f]:
                origins[f] = shared
    dom = np.zeros(3, np.int64)
    for a in range(3):
        found = False
        best = 0
        for f in range(nf):
            if has[f, a]:
                size = shapes[f, a] - origins[f, a] - hi[f, a]
                best = size if not found else min(best, size)
                found = True
        dom[a] = max(0, best) if found else 0
    nk = dom[2]
    for _ in range(4):  # the K halo above may depend on nk through interval bounds
        shrink = 0
        for f in range(nf):
            if has[f, 2]:
                _, above = table_k_need(kf, f, nk)
                shrink = max(shrink, origins[f, 2] + nk + above - shapes[f, 2])
        if shrink <= 0:
            break
        nk = max(0, nk - shrink)
    dom[2] = nk
    t_shapes = np.zeros((nt, 3), np.int64)
    for a in range(2):
        if 0 < dom[a] < min_domain[a]:
            info[0], info[1], info[2] = a, dom[a], min_domain[a]
            return 1, info, origins, dom, t_shapes
    for f in range(nf):
        below, above = table_k_need(kf, f, dom[2])
        for i in range(3):
            a = order[f, i]
            if a < 0:
                break
            lo = below if a == 2 else own[f, a]
            up = above if a == 2 else hi[f, a]
            o = origins[f, a]
            if o - lo < 0 or o + dom[a] + up > shapes[f, a]:
                info[0], info[1], info[2], info[3] = f, a, lo, up
                info[4], info[5], info[6] = o, dom[a], shapes[f, a]
                return 2, info, origins, dom, t_shapes
    for t in range(nt):
        below, above = table_k_need(kt, t, dom[2])
        origins[nf + t, 0] = -t_ext[t, 0]
        origins[nf + t, 1] = -t_ext[t, 2]
        origins[nf + t, 2] = below
        t_shapes[t, 0] = dom[0] + t_ext[t, 1] - t_ext[t, 0]
        t_shapes[t, 1] = dom[1] + t_ext[t, 3] - t_ext[t, 2]
        t_shapes[t, 2] = dom[2] + below + above
    return 0, info, origins, dom, t_shapes
