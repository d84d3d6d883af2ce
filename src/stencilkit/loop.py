"""``ParLoop``: generation separate from execution, cached; race-free parallel execution.

``generate()`` builds the source from the kernel and the arguments' *structure* (kind, mode,
dtype, local shape) only, so one generated loop serves every mesh. ``compute()`` generates
on first use, then runs. Shared targets written through maps are protected by colouring or
atomics (``sk.configure(race="color" | "atomic")``, or ``race=`` on the loop). Colouring is
PyOP2's block colouring: contiguous blocks of elements, coloured so that blocks of one
colour share no target entry; each block runs its elements in order, without atomics. "auto"
picks colouring: on the 1,000,000-cell INC benchmark it ran in 1.0 ms against 8.1 ms with
atomics (x86 has no atomic floating-point add, so each update is a compare-and-swap loop).
RW, MIN and MAX through a map, and complex values, always use colouring.
"""

from __future__ import annotations

import numpy as np

from . import registry
from .analysis.typing import ArgType, type_point_kernel
from .build import cache
from .build.extension import build_extension, current_toolchain, exec_generated, module_name
from .codegen import c_parloop as cpl
from .codegen import numpy_parloop
from .config import current
from .errors import ArgumentError, StencilError, StencilTypeError
from .ir import definition as d
from .ir.core import walk
from .parloop import INC, MAX, MIN, READ, RW, WRITE, Arg, Kernel, Set, check_args
from .passes.pipeline import dump
from .runtime import lazy


def _specs(args: tuple[Arg, ...]) -> tuple[cpl.ArgSpec, ...]:
    out = []
    for a in args:
        arity = 0
        entry = 0
        if a.kind == "indirect":
            arity = a.path.arity  # type: ignore[union-attr]
        elif a.kind == "entry":
            arity, entry = a.path.map.arity, a.path.index  # type: ignore[union-attr]
        index = a.map.values.dtype if a.map is not None else np.dtype(np.int32)
        out.append(cpl.ArgSpec(a.kind, a.mode.value, a.obj.dtype, a.obj.dim, a.local_shape,
                               arity, entry, index))
    return tuple(out)


def _stores(node: object) -> list[d.Store]:
    return [n for n in walk(node) if isinstance(n, d.Store)]


def _truncates(store: d.Store, explicit: set[int], target: np.dtype) -> bool:
    """A float value stored into an integer argument by an implicit conversion (one the
    kernel did not write as int(...), np.int32(...), ...)."""
    v = store.value
    return (target.kind in "iub" and isinstance(v, d.Cast) and id(store) not in explicit
            and v.value.dtype is not None and v.value.dtype.kind in "fc")


RACE_MODES = ("auto", "color", "atomic")


class ParLoop:
    """A parallel loop of ``kernel`` over ``iterset`` with ``args`` (PyOP2's backend API)."""

    def __init__(self, kernel: Kernel, iterset: Set, *args: Arg, backend: str | None = None,
                 race: str | None = None) -> None:
        if not isinstance(kernel, Kernel):
            if callable(kernel):
                kernel = Kernel(kernel)  # type: ignore[arg-type]
            else:
                raise StencilError(f"{kernel!r} is not a kernel", hint="use @sk.kernel")
        if not isinstance(iterset, Set):
            raise StencilError(f"{iterset!r} is not an sk.Set", stencil=kernel.name)
        if not args:
            raise ArgumentError("a ParLoop needs at least one argument", stencil=kernel.name,
                                hint="pass the Dats and Globals the kernel works on")
        if race not in (None, *RACE_MODES):
            raise ArgumentError(f"race={race!r} is not one of {RACE_MODES}",
                                stencil=kernel.name, hint="race='color' or race='atomic'")
        check_args(kernel, iterset, args)
        self.kernel, self.iterset, self.args = kernel, iterset, tuple(args)
        self.backend = backend or kernel.backend
        self.race = race
        self.specs = _specs(self.args)
        self._loc = None
        self._typed = self._analyse() if kernel.func is not None else None

    # ------------------------------------------------------------ analysis

    def _analyse(self) -> d.PointKernel:
        from .frontend.parloop_kernel import parse_kernel
        from .passes.single_exit import RESULT

        parsed, self._src = parse_kernel(self.kernel.func)
        name = parsed.name
        self._loc = parsed.loc
        if len(parsed.params) != len(self.args):
            raise ArgumentError(f"the kernel takes {len(parsed.params)} arguments, the loop "
                                f"passes {len(self.args)}", stencil=name, loc=parsed.loc,
                                hint="pass one argument per kernel parameter")
        # a dummy result lets the point-kernel typer run unchanged
        body = parsed.body + (d.Assign(RESULT, d.Const(0, dtype=np.dtype(np.int64))),)
        import dataclasses

        types = tuple(ArgType(a.obj.dtype, len(a.local_shape)) for a in self.args)
        typed = type_point_kernel(dataclasses.replace(parsed, body=body), types)
        typed = dataclasses.replace(typed, body=typed.body[:-1], local_types=tuple(
            (n, t) for n, t in typed.local_types if n != RESULT))
        shapes = dict(zip(typed.params, (a.local_shape for a in self.args)))
        modes = dict(zip(typed.params, (a.mode for a in self.args)))
        typed_of = dict(zip(typed.params, (a.obj.dtype for a in self.args)))
        # typing keeps statements in order, so the n-th store is the n-th store as written
        explicit = {id(t) for t, p in zip(_stores(typed), _stores(parsed))
                    if isinstance(p.value, d.Cast)}
        for n in walk(typed):
            if isinstance(n, (d.Index, d.Store)):
                arr = n.array
                if isinstance(n, d.Store) and modes[arr] is READ:
                    raise StencilTypeError(f"argument '{arr}' is passed READ but the kernel "
                                           "writes it", stencil=name, loc=n.loc,
                                           hint="pass it as WRITE, RW or INC")
                if isinstance(n, d.Store) and _truncates(n, explicit, typed_of[arr]):
                    # e.g. `count[0] += 0.5` into an int Dat would silently add 0
                    raise StencilTypeError(
                        f"the kernel stores a {n.value.value.dtype} value into '{arr}', whose Dat "
                        f"holds {typed_of[arr]}: the fraction would be dropped silently",
                        stencil=name, loc=n.loc,
                        hint="give the Dat a float dtype, or convert explicitly with int(...)")
                for x, size in zip(n.index, shapes[arr]):
                    if isinstance(x, d.Const) and not -size <= int(x.value) < size:
                        raise StencilTypeError(
                            f"index {int(x.value)} is out of range for '{arr}', which has "
                            f"shape {shapes[arr]} here", stencil=name, loc=n.loc,
                            hint="check the map arity and the Dat's dim against the kernel")
        return typed

    # ------------------------------------------------------------ code

    def _race_mode(self) -> str:
        race = self.race or current().race
        if race not in RACE_MODES:
            raise ArgumentError(f"race mode {race!r} (sk.configure or STENCILKIT_RACE) is not "
                                f"one of {RACE_MODES}", stencil=self.kernel.name,
                                hint="race='color' or race='atomic'")
        shared = [s for s in self.specs if s.writes_shared]
        if not shared:
            return "none"
        if any(s.mode in ("RW", "MIN", "MAX") and s.kind != "mat" for s in shared) or any(
                s.dtype.kind == "c" for s in shared):
            return "color"
        return "atomic" if race == "atomic" else "color"

    def _key(self, backend: str) -> tuple:
        return (backend, self.kernel.name, self.kernel.code or self.kernel.func,
                self.specs, self._race_mode())

    def generate(self, backend: str | None = None) -> str:
        """The generated source; cached in memory and on disk, independent of sizes."""
        return self._built(backend)[0]

    def _built(self, backend: str | None):
        chosen = registry.resolve(backend or self.backend, self.kernel.name)
        key = self._key(chosen)
        built = _GENERATED.get(key)
        if built is None:
            built = self._generate(chosen)
            _GENERATED[key] = built
        return built

    def _generate(self, backend: str):
        name = self.kernel.name
        if backend == "numpy":
            if self._typed is None:
                raise StencilError("C-string kernels need the 'c' backend", stencil=name,
                                   hint="use backend='c' or write the kernel in Python")
            fname = f"sk_parloop_{name}"
            src = numpy_parloop.kernel_source(self._typed, fname)
            dump("code", f"{name} [numpy]", src)
            return src, exec_generated("numpy-parloop", src, fname, f"parloop {name}")
        atomic = self._race_mode() == "atomic"
        loop_name = cpl.loop_function_name(name)
        if self._typed is not None:
            kf = cpl.KernelLowering(self._typed, self.specs, self._src.line_text,
                                    self._src.filename.rsplit("/", 1)[-1]).lower_kernel()
            text, printer = cpl.kernel_function(kf)
            helpers, status, call = printer.helpers, kf.uses_error_flag, kf.name
        else:
            text, helpers, status, call = self.kernel.code, set(), False, self.kernel.name
        source = cpl.source(loop_name, name, self.specs, atomic, text, call, helpers, status)
        dump("code", f"{name} [c]", source)
        k = cache.key("c-parloop", source, current_toolchain().identity)
        full = source + cpl.python_entry(loop_name, self.specs, module_name(k))
        fn = build_extension(k, full, name)
        return source, fn

    # ------------------------------------------------------------ execution

    def compute(self) -> None:
        """Run the loop now (after anything queued before it)."""
        lazy.flush()
        chosen = registry.resolve(self.backend, self.kernel.name)
        _, fn = self._built(chosen)
        self._check_objects()
        if chosen == "numpy":
            self._run_numpy(fn)
        else:
            self._run_c(fn)

    def _run_c(self, fn) -> None:
        call: list[object] = []
        for a in self.args:
            call.append(a.obj._data)
            if a.kind in ("indirect", "entry"):
                call.append(a.map.values)  # type: ignore[union-attr]
            elif a.kind == "mat":
                call.append(a.obj.sparsity.lmap)  # type: ignore[union-attr]
        if self._race_mode() == "color":
            for blocks in self._coloring():
                self._check(fn(blocks, *call))
        else:
            self._check(fn(even_blocks(self.iterset.size), *call))

    def _check(self, status: int) -> None:
        if status:
            raise ArgumentError("the kernel indexed a local array out of range at run time "
                                "(nothing outside the data was touched)",
                                stencil=self.kernel.name, loc=self._loc,
                                hint="check the indices against the map arity and dim")

    def _check_objects(self) -> None:
        """Before each run, what the generated code trusts: every array still has the
        shape, dtype and layout the loop was built for, and is writable where written.
        O(arguments), whatever the sizes; Map values and Set sizes cannot change (see
        parloop.Map), so their contents need no check here."""
        name, n = self.kernel.name, self.iterset.size
        for i, (a, spec) in enumerate(zip(self.args, self.specs)):
            obj, m = a.obj, a.map
            what = f"argument {i + 1} ({type(obj).__name__} {obj.name})"
            if a.kind == "mat":
                sp = obj.sparsity  # type: ignore[union-attr]
                if sp.versions != (sp.rowmap.version, sp.colmap.version):
                    raise ArgumentError(f"{what}: a map of its Sparsity was given new values "
                                        "after the Sparsity was built", stencil=name,
                                        loc=self._loc,
                                        hint="build a new sk.Sparsity and sk.Mat on the maps")
                expected: tuple[int, ...] = (sp.nnz,)
            elif a.kind == "global":
                expected = (spec.dim,)
            else:
                rows = n if m is None else m.to_set.size
                expected = (rows,) if spec.dim == 1 else (rows, spec.dim)
            data = obj._data
            if (not isinstance(data, np.ndarray) or obj.dim != spec.dim
                    or data.shape != expected or data.dtype != spec.dtype
                    or not data.flags.c_contiguous):
                got = (f"shape {data.shape}, dtype {data.dtype}" if isinstance(data, np.ndarray)
                       else type(data).__name__)
                raise ArgumentError(f"{what} now holds {got} (dim {obj.dim}); the loop was "
                                    f"built for shape {expected}, dtype {spec.dtype}",
                                    stencil=name, loc=self._loc,
                                    hint="shape, dtype and dim of a Dat are fixed: assign "
                                         "values with x.data[...] = v, or build a new Dat "
                                         "and ParLoop")
            if a.mode is not READ and not data.flags.writeable:
                raise ArgumentError(f"{what} is read-only (its .data was made read-only) but "
                                    f"the loop writes it ({a.mode.value})", stencil=name,
                                    loc=self._loc,
                                    hint="pass it READ, or make it writeable again: "
                                         "x.data.flags.writeable = True")
            if m is not None and (m.values.shape != (n, spec.arity)
                                  or m.values.dtype != spec.index):
                raise ArgumentError(f"{what}: map {m.name} no longer has {n} rows of "
                                    f"{spec.arity} {spec.index} entries", stencil=name,
                                    loc=self._loc, hint="build a new Map and ParLoop")

    def _coloring(self) -> list[np.ndarray]:
        """Blocks of elements grouped by colour; cached on the first written map, keyed by
        the maps' versions (never reused, unlike id(): a new map cannot inherit a stale
        colouring)."""
        written = []
        for a in self.args:
            if a.kind in ("indirect", "entry") and a.mode is not READ:
                written.append((a.map, a.path.index if a.kind == "entry" else None))  # type: ignore
            elif a.kind == "mat":
                written.append((a.path[0], None))  # type: ignore[index]
        holder = written[0][0]._colorings  # type: ignore[union-attr]
        key = tuple((m.version, entry) for m, entry in written)  # type: ignore[union-attr]
        if key not in holder:
            cols = [m.values if e is None else m.values[:, [e]]  # type: ignore[union-attr]
                    for m, e in written]
            holder[key] = block_coloring(self.iterset.size, cols,
                                         [m.to_set.size for m, _ in written])  # type: ignore
        return holder[key]

    def _run_numpy(self, fn) -> None:
        """One vectorized call over all elements; but RW through a map gathers and
        scatters, so elements that share a target run in separate rounds: each sees the
        others' updates, as in C's serial blocks (an increment by RW counts every time)."""
        n = self.iterset.size
        if not n:
            return
        shared_rw = [(a.map, a.path.index if a.kind == "entry" else None)  # type: ignore
                     for a in self.args if a.kind in ("indirect", "entry") and a.mode is RW]
        if not shared_rw:
            self._run_numpy_part(fn, n, None)
            return
        holder = shared_rw[0][0]._colorings  # type: ignore[union-attr]
        key = ("rounds",) + tuple((m.version, e) for m, e in shared_rw)  # type: ignore
        if key not in holder:
            holder[key] = element_rounds(n, [m.values if e is None else m.values[:, [e]]
                                             for m, e in shared_rw])  # type: ignore
        rounds = holder[key]
        if len(rounds) == 1:
            self._run_numpy_part(fn, n, None)
            return
        for sel in rounds:
            self._run_numpy_part(fn, n, sel)

    def _run_numpy_part(self, fn, n: int, sel: np.ndarray | None) -> None:
        """Run the elements ``sel`` (all when None)."""
        count = n if sel is None else len(sel)
        pick = (lambda x: x) if sel is None else (lambda x: x[sel])
        locals_: list[np.ndarray] = []
        finish = []
        for a in self.args:
            data = a.obj._data
            shape = (count, *a.local_shape)
            if a.kind == "direct" and a.mode in (MIN, MAX):
                rows = data.reshape((n, *a.local_shape))
                loc = pick(rows).copy()
                red = np.minimum if a.mode is MIN else np.maximum
                finish.append(lambda d_=rows, l_=loc, r=red: d_.__setitem__(
                    slice(None) if sel is None else sel, r(pick(d_), l_)))
            elif a.kind == "direct":
                rows = data.reshape((n, *a.local_shape))
                loc = pick(rows)
                if sel is not None and a.mode is not READ:
                    finish.append(lambda d_=rows, l_=loc: d_.__setitem__(sel, l_))
            elif a.kind in ("indirect", "entry"):
                idx = pick(a.map.values if a.kind == "indirect"  # type: ignore[union-attr]
                           else a.map.values[:, a.path.index])  # type: ignore[union-attr]
                view = data.reshape(data.shape[0], a.obj.dim)  # type: ignore[union-attr]
                loc = view[idx].reshape(shape) if a.mode in (READ, RW, MIN, MAX) \
                    else np.zeros(shape, data.dtype)
                if a.mode in (MIN, MAX):
                    red = np.minimum if a.mode is MIN else np.maximum
                    finish.append(lambda v=view, i=idx, l_=loc, r=red: r.at(
                        v, i, l_.reshape(v[i].shape)))
                elif a.mode is INC:
                    finish.append(lambda v=view, i=idx, l_=loc: scatter_add(v, i, l_))
                elif a.mode in (WRITE, RW):
                    finish.append(lambda v=view, i=idx, l_=loc: v.__setitem__(
                        i, l_.reshape(v[i].shape)))
            elif a.kind == "global":
                if a.mode is READ:
                    loc = np.broadcast_to(data, shape)
                elif a.mode is INC:
                    loc = np.zeros(shape, data.dtype)
                    finish.append(lambda g=data, l_=loc: g.__iadd__(l_.sum(axis=0)))
                else:
                    loc = np.broadcast_to(data, shape).copy()
                    red = np.minimum if a.mode is MIN else np.maximum
                    finish.append(lambda g=data, l_=loc, r=red: g.__setitem__(
                        slice(None), r(g, r.reduce(l_, axis=0)) if len(l_) else g))
            else:
                loc = np.zeros(shape, data.dtype)
                lmap = pick(a.obj.sparsity.lmap)  # type: ignore[union-attr]
                if a.mode is INC:
                    finish.append(lambda v=data, i=lmap, l_=loc: np.add.at(v, i, l_))
                else:
                    finish.append(lambda v=data, i=lmap, l_=loc: v.__setitem__(i, l_))
            locals_.append(loc)
        try:
            fn(*locals_)
        except IndexError:
            # a run-time index past a local block (NumPy checks it; C clamps, flags 2)
            self._check(2)
        for f in finish:
            f()


def element_rounds(n: int, maps: list[np.ndarray], max_rounds: int = 64) -> list[np.ndarray]:
    """Elements in rounds such that no two elements of a round share a target entry (of
    any of ``maps``, which index one target set each). Luby's rule: each element gets a
    random priority, and a round takes every remaining element whose priority is the
    lowest on all its targets (with priorities in element order, a chain of neighbours
    would give one element per round). Past ``max_rounds`` (a target shared by very many
    elements) the rest run one element per round."""
    offsets = np.cumsum([0] + [int(m.max()) + 1 if m.size else 0 for m in maps])
    rows = np.concatenate([m.astype(np.int64) + o for m, o in zip(maps, offsets)], axis=1)
    priority = np.random.default_rng(0).permutation(n)
    remaining = np.arange(n)
    rounds: list[np.ndarray] = []
    while remaining.size and len(rounds) < max_rounds:
        r, p = rows[remaining], priority[remaining]
        lowest = np.full(offsets[-1], n, np.int64)
        np.minimum.at(lowest, r.reshape(-1), np.repeat(p, r.shape[1]))
        wins = (lowest[r] == p[:, None]).all(axis=1)
        rounds.append(remaining[wins])
        remaining = remaining[~wins]
    rounds += [remaining[i:i + 1] for i in range(remaining.size)]
    return rounds


_GENERATED: dict[tuple, tuple[str, object]] = {}


BLOCK = 2048


def scatter_add(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``target[index] += values`` with repeated indices accumulated (np.bincount for reals,
    several times faster than np.add.at)."""
    flat_index = index.reshape(-1)
    vals = values.reshape(flat_index.size, target.shape[1])
    if target.dtype.kind == "f":
        rows, length = flat_index, target.shape[0]
        if length > 4 * flat_index.size + 4096:
            # few entries of a huge target: bincount over the distinct ones only
            rows, flat_index = np.unique(flat_index, return_inverse=True)
            flat_index, length = flat_index.reshape(-1), len(rows)
        for col in range(target.shape[1]):
            sums = np.bincount(flat_index, weights=vals[:, col], minlength=length)
            if length == target.shape[0]:
                target[:, col] += sums.astype(target.dtype)
            else:
                target[rows, col] += sums.astype(target.dtype)
    else:
        np.add.at(target, flat_index, vals)


def even_blocks(n: int, block: int = BLOCK) -> np.ndarray:
    starts = np.arange(0, n, block, dtype=np.int64)
    return np.ascontiguousarray(np.stack([starts, np.minimum(starts + block, n)], axis=1))


def block_coloring(n: int, maps: list[np.ndarray], sizes: list[int],
                   block: int = BLOCK) -> list[np.ndarray]:
    """Greedy colouring of contiguous blocks of elements: two blocks of one colour share no
    target entry, so a colour's blocks run in parallel without atomics while each block
    keeps the elements' order (and their locality). Returns, per colour, its blocks as an
    int64 (count, 2) array of [start, end) pairs. Colours come in palettes of 64 (one bit
    each per target entry); a block that finds a palette full tries the next, so any
    number of colours is possible (a target shared by every element gives one per block)."""
    blocks = even_blocks(n, block)
    targets = []
    for m, size in zip(maps, sizes):
        m = np.asarray(m)
        if size > 8 * m.size + 4096:
            # a few entries of a huge target set: colour their distinct values only
            uniq, inverse = np.unique(m, return_inverse=True)
            m, size = inverse.reshape(m.shape), len(uniq)
        targets.append((m, size))
    palettes: list[list[np.ndarray]] = []
    colour_of = np.empty(len(blocks), np.int64)
    for b, (start, end) in enumerate(blocks):
        rows = [m[start:end].reshape(-1) for m, _ in targets]
        p = 0
        while True:
            if p == len(palettes):
                palettes.append([np.zeros(size, np.uint64) for _, size in targets])
            used = palettes[p]
            taken = 0
            for u, r in zip(used, rows):
                if r.size:
                    taken |= int(np.bitwise_or.reduce(u[r]))
            free = ~taken & ((1 << 64) - 1)
            if free:
                break
            p += 1
        c = (free & -free).bit_length() - 1
        for u, r in zip(used, rows):
            u[r] |= np.uint64(1 << c)
        colour_of[b] = 64 * p + c
    return [np.ascontiguousarray(blocks[colour_of == c]) for c in np.unique(colour_of)]


def par_loop(kernel: Kernel, iterset: Set, *args: Arg, backend: str | None = None,
             race: str | None = None) -> ParLoop:
    """Generate if needed and run (or queue, with ``sk.configure(lazy=True)``)."""
    loop = ParLoop(kernel, iterset, *args, backend=backend, race=race)
    if current().lazy:
        lazy.enqueue(loop.compute)
    else:
        loop.compute()
    return loop


def flush() -> None:
    """Run every queued loop (lazy mode)."""
    lazy.flush()

