"""Computations (``with computation(...)``) on DistributedArrays.

The call's ``origin``/``domain`` are global: the geometry is worked out exactly as the
one-process call on the gathered arrays would (``analysis.geometry.resolve`` on
zero-stride stand-ins of the global shapes), so defaults and errors are the same. Each rank
then runs the computation on the part of the global domain its blocks own, on its arrays'
data (block + halo), after exchanging, per field, what the stages' extended compute domains
read beyond the block: the footprint of every read, corners only where a stage computed on
a box reaches diagonally. K is never split.

Along a periodic axis the global fields behave as if padded with their wrapped-around data
(``np.pad(..., mode="wrap")`` by the halo): origin and domain there default to 0 and the
whole axis, and reads beyond the ends wrap.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass

import numpy as np

from .. import registry
from ..analysis import geometry
from ..analysis import schedule as sch
from ..distributed import halo
from ..distributed.array import DistributedArray
from ..distributed.decomposition import Decomposition
from ..errors import ArgumentError, StencilError
from ..ir import computation as c
from ..ir.core import walk

_AXES = "IJK"


@dataclass(frozen=True)
class Footprint:
    """Per field: the halo (i_lo, i_hi, j_lo, j_hi, as in extents) its reads reach, whether
    a read reaches a corner, and the extent on which it is written."""

    reads: dict[str, c.Extent]
    corners: frozenset[str]
    writes: dict[str, c.Extent]


def footprint(defn: c.ComputationDef) -> Footprint:
    unit_ext = sch.compute_extents(defn)
    units = [s for b in defn.blocks for iv in b.intervals for s in iv.body]
    fields = {f.name for f in defn.fields}
    reads: dict[str, c.Extent] = {}
    writes: dict[str, c.Extent] = {}
    corners = set()
    for pos, unit in enumerate(units):
        ext = unit_ext[pos]
        for w in sch.writes(unit):
            if w in fields:
                writes[w] = sch.union(writes.get(w, sch.ZERO), ext)
        for acc, reach, _ in sch.unit_reads(unit, ext):
            if acc.field not in fields:
                continue
            reads[acc.field] = sch.union(reads.get(acc.field, sch.ZERO), reach)
            if (reach[0] < 0 or reach[1] > 0) and (reach[2] < 0 or reach[3] > 0):
                corners.add(acc.field)
    return Footprint(reads, frozenset(corners), writes)


@dataclass(frozen=True)
class Local:
    """One rank's share of a call with one geometry (cached; the arrays come per call)."""

    origins: dict[str, tuple[int, int, int]]
    domain: tuple[int, int, int]
    # per decomposition: the fields to exchange and what each needs
    exchanges: tuple[tuple[Decomposition, tuple[str, ...], tuple[halo.Need, ...]], ...]
    # fields written beyond the domain: what to send back to the owners after the run
    write_backs: tuple[tuple[Decomposition, str, halo.Need,
                             dict[tuple[int, ...], np.ndarray]], ...]


# per stencil: plans by (field decompositions by identity, dtypes, origin, domain, backend);
# a plan keeps its decompositions alive, so their ids are not reused while it is cached
_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MAX_PLANS = 64


def call(st, args: tuple, kwargs: dict, origin: object, domain: object,
         validate_args: bool, exec_info: dict | None) -> None:
    dec = next(a.decomposition for a in (*args, *kwargs.values())
               if type(a) is DistributedArray)
    local = values = None
    try:
        values, local = _prepare(st, args, kwargs, origin, domain, validate_args)
        error = None
    except StencilError as exc:
        error = exc
    halo.agree(dec, error)  # every call: a rank whose arguments differ is not left alone
    assert local is not None and values is not None
    start = time.perf_counter()
    for d, names, needs in local.exchanges:
        d.exchanger.run([values[n] for n in names], list(needs))
    exchanged = time.perf_counter() - start
    if min(local.domain) > 0:
        defn = st.definition
        run_values = dict(values)
        run_values.update({f.name: _local_data(values[f.name], f) for f in defn.fields})
        st(**run_values, origin=local.origins, domain=local.domain,
           validate_args=validate_args, exec_info=exec_info)
    elif exec_info is not None:  # nothing of the domain here: no run
        exec_info.update(call_start_time=start, run_start_time=start, run_end_time=start,
                         call_end_time=start, domain=local.domain, origin=local.origins)
    start = time.perf_counter()
    for d, name, need, masks in local.write_backs:
        d.exchanger.run_back([values[name]], [need], [masks])
    if exec_info is not None:
        exec_info["halo_exchange_time"] = exchanged + time.perf_counter() - start


def _error(st, message: str, hint: str) -> ArgumentError:
    return ArgumentError(message, stencil=st.__name__, loc=st.definition.loc, hint=hint)


def _prepare(st, args: tuple, kwargs: dict, origin: object, domain: object,
             validate: bool) -> tuple[dict[str, object], Local]:
    """The bound arguments (checked every call) and the plan (cached per geometry)."""
    st.refuse_planes("a call on distributed arrays")
    values = st._arguments.bind(args, kwargs)
    defn = st.definition
    fields = {f.name: values[f.name] for f in defn.fields}
    local_arrays = {n: _local_data(a, defn.field(n)) for n, a in fields.items()}
    chosen = registry.resolve(st.backend, st.__name__)
    try:
        key = (chosen.name, tuple((id(a.decomposition), a.dtype) if type(a) is DistributedArray
                             else (type(a), getattr(a, "shape", None))
                             for a in fields.values()),
               _hashable(origin), _hashable(domain))
        hash(key)
    except (TypeError, ValueError):
        key = None  # a malformed origin/domain: the plan says what is wrong
    plans = _plans.setdefault(st, {})
    local = plans.get(key) if key is not None else None
    if local is None:
        local = _plan(st, chosen, fields, local_arrays, origin, domain)
        if key is not None:
            if len(plans) >= _MAX_PLANS:
                plans.clear()
            plans[key] = local
    if validate:
        st._arguments.check_fields(local_arrays)
    else:
        st._arguments.check_arrays(local_arrays)
    return values, local


def _hashable(value: object) -> object:
    if isinstance(value, dict):
        return tuple(sorted((k, tuple(v)) for k, v in value.items()))
    return None if value is None else tuple(value)  # type: ignore[arg-type]


def _plan(st, chosen: registry.Backend, fields: dict[str, object], local_arrays: dict[str, object],
          origin: object, domain: object) -> Local:
    defn = st.definition
    plan = st._plan(chosen)
    axes = _axis_layout(st, defn, fields)
    split = {x for x, (n, p, per, _) in axes.items() if p > 1}
    if split and any(isinstance(n, c.InRegion) for n in walk(plan.definition)):
        raise _error(st, "horizontal regions are relative to the compute domain, which a "
                         f"split along {'/'.join(sorted(split))} cuts into pieces",
                     "run computations with horizontal regions on a decomposition that "
                     "splits neither I nor J (dims=(1, 1, 1)), or gather first")
    st._arguments.check_arrays(local_arrays)
    fp = footprint(plan.definition)
    exchanges: dict[int, tuple[Decomposition, list, list]] = {}
    for f in defn.fields:
        a = fields[f.name]
        if type(a) is not DistributedArray:
            continue
        ext = fp.reads.get(f.name, sch.ZERO)
        need = halo.from_box(a.decomposition, _widths(f, ext), f.name in fp.corners)
        written = halo.from_box(a.decomposition, _widths(f, fp.writes.get(f.name, sch.ZERO)),
                                True)
        halo.check_blocks(a.decomposition, [(f.name, need), (f.name, written)], st.__name__)
        split = a.decomposition.as_split()
        if split is not a.decomposition:  # a job with more ranks would split more axes
            halo.check_blocks(split, [(f.name, halo.from_box(split, _widths(f, ext),
                                                             f.name in fp.corners))],
                              st.__name__)
        if not need.empty:
            group = exchanges.setdefault(id(a.decomposition), (a.decomposition, [], []))
            group[1].append(f.name)
            group[2].append(need)
    origins, dom = _global_geometry(st, plan, fields, axes, origin, domain)
    _check_extended_writes(st, defn, fp, fields, axes, origins, dom)
    write_backs = _write_backs(st, defn, fp, fields, axes, origins, dom)
    local_origins, local_dom = _local_geometry(defn, fields, axes, origins, dom)
    return Local(local_origins, local_dom,
                 tuple((d, tuple(n), tuple(x)) for d, n, x in exchanges.values()),
                 tuple(write_backs))


def _axis_layout(st, defn: c.ComputationDef, fields: dict[str, object]
                 ) -> dict[str, tuple[int, int, bool, tuple[int, int]]]:
    """Per axis letter: (global size, ranks along it, periodic, this rank's [start, stop)),
    the same for every field that has the axis; K is never split nor periodic."""
    axes: dict[str, tuple[int, int, bool, tuple[int, int]]] = {}
    ref = None
    for f in defn.fields:
        a = fields[f.name]
        if type(a) is not DistributedArray:
            if f.axes == "K" and isinstance(a, np.ndarray):
                continue  # a column: K is never split, so every rank holds all of it
            raise _error(st, f"field '{f.name}' is a plain {type(a).__name__} but other "
                             "fields are DistributedArrays",
                         "pass every field as a DistributedArray (Field[K] columns may be "
                         "plain NumPy arrays: K is never split)")
        dec = a.decomposition
        if ref is None:
            ref = dec
        if dec.size != ref.size:
            raise _error(st, f"field '{f.name}' is decomposed over {dec.size} ranks, field "
                             f"'{defn.fields[0].name}' over {ref.size}",
                         "create every decomposition on the same communicator")
        if dec.ndim != f.ndim:
            raise _error(st, f"field '{f.name}' is Field[{f.axes}] ({f.ndim}-D) but its "
                             f"decomposition is {dec.ndim}-D",
                         f"decompose it with a {f.ndim}-D shape")
        for i in range(len(f.axes), f.ndim):
            if dec.dims[i] > 1 or dec.periodic[i]:
                raise _error(st, f"field '{f.name}' has its data dimension {i} split or "
                                 "periodic", f"use dims=... with 1 for axis {i}, periodic "
                                             "False")
        for i, x in enumerate(f.axes):
            entry = (dec.shape[i], dec.dims[i], dec.periodic[i], dec.bounds[i])
            if x == "K" and (dec.dims[i] > 1 or dec.periodic[i]):
                raise _error(st, f"field '{f.name}' is split or periodic along K, which "
                                 "computations never split (their columns run whole)",
                             "decompose 3-D fields with dims=(pi, pj, 1) and periodic False "
                             "along K (the default dims do not split K)")
            if axes.setdefault(x, entry) != entry:
                raise _error(st, f"field '{f.name}' is decomposed differently from the other "
                                 f"fields along {x}: (size, ranks, periodic, block) "
                                 f"{entry} vs {axes[x]}",
                             "allocate the fields from decompositions that split their "
                             "common axes alike (one Decomposition for the 3-D fields)")
    return axes


def _local_data(a: object, f: c.FieldDecl | None) -> object:
    """The array the rank's call gets: data (block + halo), without halo on data dimensions."""
    if type(a) is not DistributedArray:
        return a
    dec = a.decomposition
    n = len(f.axes) if f is not None else a.ndim
    strip = tuple(slice(None) for _ in range(n)) + tuple(
        slice(h, h + m) for h, m in zip(dec.halo[n:], dec.local_shape[n:]))
    return a.data[strip]


def _virtual(a: object, f: c.FieldDecl) -> np.ndarray:
    """A zero-stride stand-in of the global field (periodic axes padded by the halo)."""
    if type(a) is not DistributedArray:
        return a  # type: ignore[return-value]
    dec = a.decomposition
    shape = tuple(n + (2 * h if per else 0)
                  for n, h, per in zip(dec.shape, dec.halo, dec.periodic))
    return np.broadcast_to(np.zeros((), a.dtype), shape)


def _pad(a: object, f: c.FieldDecl, axis: int) -> int:
    """The padding of field ``f`` along axis ``axis`` (0, 1, 2 = I, J, K) in the virtual
    global arrays: its halo along periodic axes, else 0."""
    x = _AXES[axis]
    if type(a) is not DistributedArray or x not in f.axes:
        return 0
    i = f.axes.index(x)
    dec = a.decomposition
    return dec.halo[i] if dec.periodic[i] else 0


def _global_geometry(st, plan, fields, axes, origin, domain):
    """Global origins (unpadded coordinates) and domain, checked as the one-process call."""
    defn = st.definition
    shapes = {f.name: np.shape(_virtual(fields[f.name], f)) for f in defn.fields}
    rules = st.geometry_rules(plan)  # the one-process call's geometry, on the global shapes
    periodic = [a for a, x in enumerate(_AXES) if axes.get(x, (0, 0, False))[2]]
    if periodic:
        given = None
        if origin is not None:  # to padded coordinates
            given = geometry.resolve(rules, shapes, origin, (0, 0, 0), False).origins
        base = geometry.resolve(rules, shapes, given, domain, False)
        origins = {}
        for f in defn.fields:
            o = list(base.origins[f.name])
            for a in range(3):
                pad = _pad(fields[f.name], f, a)
                if given is not None:
                    o[a] += pad
                elif a in periodic:
                    o[a] = pad  # the whole axis by default
            origins[f.name] = tuple(o)
        dom = list(base.domain)
        if domain is None:
            for a in periodic:
                dom[a] = min(axes[_AXES[a]][0] - (origins[f.name][a] - _pad(fields[f.name], f, a))
                             for f in defn.fields if _AXES[a] in f.axes)
        origin, domain = origins, tuple(dom)
    geo = geometry.resolve(rules, shapes, origin, domain, True)
    origins = {f.name: tuple(o - _pad(fields[f.name], f, a) for a, o in
                             enumerate(geo.origins[f.name])) for f in defn.fields}
    for x, (_, ranks, per, _) in axes.items():
        a = _AXES.index(x)
        if ranks > 1 or per:
            seen = {origins[f.name][a] for f in defn.fields if x in f.axes}
            if len(seen) > 1:
                raise _error(st, f"the fields' origins differ along {x} ({sorted(seen)}), "
                                 "which is split over ranks",
                             f"give every field the same origin along {x}")
    return origins, geo.domain


def _check_extended_writes(st, defn, fp: Footprint, fields, axes, origins, dom) -> None:
    """Along a periodic axis, a field written on an extended domain (read at an offset later
    in the call) may hold owned points that only a rank across the periodic boundary
    computed; that is refused (non-periodic axes send such points back: _write_backs)."""
    for name, ext in fp.writes.items():
        f = defn.field(name)
        for x, lo, hi in (("I", -ext[0], ext[1]), ("J", -ext[2], ext[3])):
            if (lo == 0 and hi == 0) or x not in f.axes or axes[x][1] == 1 \
                    or not axes[x][2]:
                continue
            n, ranks = axes[x][0], axes[x][1]
            o, size = origins[name]["IJK".index(x)], dom["IJK".index(x)]
            w0, w1 = o - lo, o + size + hi
            from ..distributed.decomposition import split
            for r in range(ranks):
                s, e = split(n, ranks, r)
                l0, l1 = max(o, s), min(o + size, e)
                c0, c1 = (l0 - lo, l1 + hi) if l1 > l0 else (0, 0)
                m0, m1 = max(s, w0), min(e, w1)
                if m1 > m0 and (m0 < c0 or m1 > c1):
                    raise _error(st, f"field '{name}' is written {lo} point(s) before and "
                                     f"{hi} after the domain along {x} (it is read at an "
                                     "offset later in the call); the block owning global "
                                     f"points [{s}, {e}) holds such points but none of the "
                                     "domain, so no rank would compute them as one process "
                                     "does", "move the domain's edge off the block boundary, "
                                             f"or compute '{name}''s offset reads from a "
                                             "temporary")


def _local_geometry(defn, fields, axes, origins, dom):
    ranges = []
    for a, x in enumerate(_AXES):
        if x not in axes or x == "K":
            ranges.append((0, dom[a]))
            continue
        s, e = axes[x][3]
        o = next(origins[f.name][a] for f in defn.fields if x in f.axes
                 and type(fields[f.name]) is DistributedArray)
        ranges.append((max(0, s - o), min(dom[a], e - o)))
    local_origins = {}
    for f in defn.fields:
        a_ = fields[f.name]
        o = list(origins[f.name])
        if type(a_) is DistributedArray:
            dec = a_.decomposition
            for i, x in enumerate(f.axes):
                a = _AXES.index(x)
                o[a] = dec.halo[i] + o[a] + ranges[a][0] - dec.bounds[i][0]
        local_origins[f.name] = tuple(o)
    return local_origins, tuple(max(0, p1 - p0) for p0, p1 in ranges)


def _widths(f: c.FieldDecl, ext: c.Extent) -> list[tuple[int, int]]:
    """Per axis of the field's array, the (before, after) widths of an extent."""
    box = {"I": (-ext[0], ext[1]), "J": (-ext[2], ext[3])}
    return [box.get(x, (0, 0)) for x in f.axes] + [(0, 0)] * len(f.data_dims)


def _computed(axes, o: tuple[int, ...], dom, ext: c.Extent, coords: dict[str, int]
              ) -> dict[str, tuple[int, int]] | None:
    """The global [start, stop) per split axis that the block at ``coords`` writes a field
    written on ``ext`` (None: it computes nothing)."""
    from ..distributed.decomposition import split

    out = {}
    for a, x in enumerate("IJ"):
        if x not in axes:
            continue
        n, ranks = axes[x][0], axes[x][1]
        s, e = split(n, ranks, coords[x])
        l0, l1 = max(o[a], s), min(o[a] + dom[a], e)
        if l1 <= l0:
            return None
        out[x] = (l0 + ext[2 * a], l1 + ext[2 * a + 1])
    return out


def _write_backs(st, defn, fp: Footprint, fields, axes, origins, dom) -> list:
    """For each field written beyond the domain along a non-periodic split axis: the points
    this rank owns there but did not compute come back from the neighbour that did (the one
    owning the domain's edge: blocks are at least as thick as the extension)."""
    out = []
    for name, ext in fp.writes.items():
        a, f = fields[name], defn.field(name)
        if type(a) is not DistributedArray:
            continue
        dec = a.decomposition
        widths = [(lo, hi) if x in "IJ" and dec.dims[i] > 1 and not dec.periodic[i] else (0, 0)
                  for i, (x, (lo, hi)) in enumerate(zip(f.axes, _widths(f, ext)))]
        widths += [(0, 0)] * len(f.data_dims)
        if not any(lo or hi for lo, hi in widths):
            continue
        need = halo.from_box(dec, widths, True)
        o = origins[name]
        coords = {x: dec.coords[i] for i, x in enumerate(f.axes) if x in "IJ"}
        mine = _computed(axes, o, dom, ext, coords)
        masks = {}
        for d in need.directions:
            src = {x: coords[x] - d[i] for i, x in enumerate(f.axes) if x in "IJ"}
            if any(not 0 <= src[x] < axes[x][1] for x in src):
                continue
            theirs = _computed(axes, o, dom, ext, src)
            if theirs is None:
                continue
            parts = []
            for i, x in enumerate(f.axes):
                s0, e0 = dec.bounds[i]
                lo, hi = widths[i]
                g = np.arange(*((s0, e0) if d[i] == 0 else (e0 - lo, e0) if d[i] < 0
                                else (s0, s0 + hi)))
                a_ = "IJK".index(x)
                w0, w1 = o[a_] + (ext[2 * a_] if x != "K" else 0), \
                    o[a_] + dom[a_] + (ext[2 * a_ + 1] if x != "K" else 0)
                in_w = (g >= w0) & (g < w1)
                if x == "K":
                    parts.append((in_w, in_w, in_w))
                    continue
                m0, m1 = mine[x] if mine is not None else (0, 0)
                t0, t1 = theirs[x]
                parts.append((in_w, (g >= m0) & (g < m1), (g >= t0) & (g < t1)))
            shape = [len(p[0]) for p in parts]
            def outer(k, parts=parts, shape=shape):
                m = np.ones(shape, bool)
                for i, p in enumerate(parts):
                    m &= p[k].reshape([-1 if j == i else 1 for j in range(len(parts))])
                return m
            mask = outer(0) & ~(outer(1) if mine is not None else np.zeros(shape, bool)) \
                & outer(2)
            if f.data_dims:
                mask = mask.reshape(mask.shape + (1,) * len(f.data_dims))
            if mask.any():
                masks[d] = mask
        out.append((dec, name, need, masks))
    return out
