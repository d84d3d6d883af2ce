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

from . import backends
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
        out.append(cpl.ArgSpec(a.kind, a.mode.value, a.obj.dtype, a.obj.dim, a.local_shape,
                               arity, entry))
    return tuple(out)


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
        check_args(kernel, iterset, args)
        self.kernel, self.iterset, self.args = kernel, iterset, tuple(args)
        self.backend = backend or kernel.backend
        self.race = race
        self.specs = _specs(self.args)
        self._typed = self._analyse() if kernel.func is not None else None

    # ------------------------------------------------------------ analysis

    def _analyse(self) -> d.PointKernel:
        from .frontend.parloop_kernel import parse_kernel
        from .passes.single_exit import RESULT

        parsed, self._src = parse_kernel(self.kernel.func)
        name = parsed.name
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
        for n in walk(typed):
            if isinstance(n, (d.Index, d.Store)):
                arr = n.array
                if isinstance(n, d.Store) and modes[arr] is READ:
                    raise StencilTypeError(f"argument '{arr}' is passed READ but the kernel "
                                           "writes it", stencil=name, loc=n.loc,
                                           hint="pass it as WRITE, RW or INC")
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
        chosen = backends.resolve(backend or self.backend, self.kernel.name)
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
        loop_name = f"sk_parloop_{name}"
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
        chosen = backends.resolve(self.backend, self.kernel.name)
        _, fn = self._built(chosen)
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
            raise ArgumentError("the kernel indexed a local array out of range",
                                stencil=self.kernel.name,
                                hint="check the indices against the map arity and dim")

    def _coloring(self) -> list[np.ndarray]:
        """Blocks of elements grouped by colour; cached on the map."""
        targets = []
        for a in self.args:
            if a.kind in ("indirect", "entry") and a.mode in (INC, WRITE, RW, MIN, MAX):
                vals = a.map.values  # type: ignore[union-attr]
                cols = vals if a.kind == "indirect" else vals[:, [a.path.index]]  # type: ignore
                targets.append((a.map.to_set.size, cols))  # type: ignore[union-attr]
            elif a.kind == "mat":
                rm, _ = a.path  # type: ignore[misc]
                targets.append((rm.to_set.size, rm.values))
        holder = next(a.map for a in self.args if a.map is not None)._colorings \
            if any(a.map is not None for a in self.args) else {}
        key = tuple((size, vals.shape, id(vals)) for size, vals in targets)
        if key not in holder:
            holder[key] = block_coloring(self.iterset.size, [t[1] for t in targets],
                                         [t[0] for t in targets])
        return holder[key]

    def _run_numpy(self, fn) -> None:
        n = self.iterset.size
        locals_: list[np.ndarray] = []
        finish = []
        for a in self.args:
            data = a.obj._data
            shape = (n, *a.local_shape)
            if a.kind == "direct" and a.mode in (MIN, MAX):
                loc = data.reshape(shape).copy()
                red = np.minimum if a.mode is MIN else np.maximum
                finish.append(lambda d_=data, l_=loc, r=red: r(d_, l_.reshape(d_.shape), out=d_))
            elif a.kind == "direct":
                loc = data.reshape(shape)
            elif a.kind in ("indirect", "entry"):
                idx = a.map.values if a.kind == "indirect" else a.map.values[:, a.path.index]  # type: ignore
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
                lmap = a.obj.sparsity.lmap  # type: ignore[union-attr]
                if a.mode is INC:
                    finish.append(lambda v=data, i=lmap, l_=loc: np.add.at(v, i, l_))
                else:
                    finish.append(lambda v=data, i=lmap, l_=loc: v.__setitem__(i, l_))
            locals_.append(loc)
        if n:
            fn(*locals_)
            for f in finish:
                f()


_GENERATED: dict[tuple, tuple[str, object]] = {}


BLOCK = 2048


def scatter_add(target: np.ndarray, index: np.ndarray, values: np.ndarray) -> None:
    """``target[index] += values`` with repeated indices accumulated (np.bincount for reals,
    several times faster than np.add.at)."""
    flat_index = index.reshape(-1)
    vals = values.reshape(flat_index.size, target.shape[1])
    if target.dtype.kind == "f":
        for col in range(target.shape[1]):
            target[:, col] += np.bincount(flat_index, weights=vals[:, col],
                                          minlength=target.shape[0]).astype(target.dtype)
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
    int64 (count, 2) array of [start, end) pairs."""
    blocks = even_blocks(n, block)
    used = [np.zeros(size, np.uint64) for size in sizes]
    colour_of = np.empty(len(blocks), np.int64)
    for b, (start, end) in enumerate(blocks):
        rows = [m[start:end].reshape(-1) for m in maps]
        taken = np.uint64(0)
        for u, r in zip(used, rows):
            if r.size:
                taken |= np.bitwise_or.reduce(u[r])
        free = ~int(taken) & ((1 << 64) - 1)
        if free == 0:
            raise StencilError("more than 64 colours needed", hint="use race='atomic'")
        c = (free & -free).bit_length() - 1
        for u, r in zip(used, rows):
            u[r] |= np.uint64(1 << c)
        colour_of[b] = c
    return [np.ascontiguousarray(blocks[colour_of == c]) for c in range(int(colour_of.max()) + 1)
            ] if len(blocks) else []


def par_loop(kernel: Kernel, iterset: Set, *args: Arg, backend: str | None = None) -> ParLoop:
    """Generate if needed and run (or queue, with ``sk.configure(lazy=True)``)."""
    loop = ParLoop(kernel, iterset, *args, backend=backend)
    if current().lazy:
        lazy.enqueue(loop.compute)
    else:
        loop.compute()
    return loop


def flush() -> None:
    """Run every queued loop (lazy mode)."""
    lazy.flush()

