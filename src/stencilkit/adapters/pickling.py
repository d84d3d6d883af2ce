"""The pickling adapter: stencil objects pickle by definition. The kernel's source text and
options travel, and the stencil is rebuilt (and compiled, through the usual caches) on the
other side.

``dask.distributed`` and ``multiprocessing`` send stencils to other processes, perhaps on
machines where the defining file does not exist (a notebook, a script). A function pickles as
its definition's own lines (placed at their original line numbers, so error messages and the
generated code's comments point where they did), its name, defaults and annotations, and the
values of the free names its body uses: modules by name, everything else by pickle. A value
that does not pickle raises a ``StencilError`` naming it, when pickling, not on the worker.

On unpickling, the source is registered with ``linecache`` under a name of its own (never the
original file's, whose lines other code may read), so the frontend parses it as it parses any
kernel. A process that receives the same definition twice (one task after another) rebuilds
it once: rebuilt functions and stencils are kept by a digest of what was sent.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import importlib
import linecache
import pickle
import threading
import weakref
from collections import OrderedDict
from types import CodeType, FunctionType, ModuleType

from ..errors import Location, StencilError
from ..frontend.dsl import GTFunction
from . import Adapter, register

_PROTOCOL = 5
_LOCK = threading.Lock()


class _ModuleRef:
    """A module a kernel names (``np``, ``math``): re-imported on the other side."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self):
        return (_ModuleRef, (self.name,))


class _Bounded(OrderedDict):
    """The latest ``limit`` rebuilt objects, by digest."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def remember(self, key: str, value: object) -> object:
        with _LOCK:
            self[key] = value
            self.move_to_end(key)
            while len(self) > self.limit:
                self.popitem(last=False)
        return value

    def recall(self, key: str) -> object | None:
        with _LOCK:
            value = self.get(key)
            if value is not None:
                self.move_to_end(key)
            return value


_FUNCTIONS = _Bounded(256)
_OBJECTS = _Bounded(256)
_PAYLOADS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# ---------------------------------------------------------------- functions


def function_payload(func: FunctionType, stencil: str | None = None, *,
                     owner: object = None, visible: dict | None = None) -> tuple[str, bytes]:
    """(digest, pickled state) of ``func``'s definition, cached per ``owner`` (the stencil;
    default ``func``). ``visible``: the names as the owner resolved them when it parsed the
    kernel (so the values that travel are those it compiled with); default ``func``'s
    globals and closure now."""
    key = func if owner is None else owner
    cached = _PAYLOADS.get(key)
    if cached is not None:
        return cached
    from ..frontend.source import closure_namespace, parse_function

    src = parse_function(func)  # a fresh tree: the frontend rewrites its own in place
    name = stencil or func.__name__
    text, line = _definition_text(src)
    namespace = {}
    if visible is None:
        visible = closure_namespace(func)
    for free in sorted(_free_names(src.tree)):
        if free in visible:  # the rest are builtins (or DSL names), found where rebuilt
            namespace[free] = _shippable(visible[free], free, name,
                                         Location(src.filename, line))
    state = {
        "text": text, "line": line, "filename": src.filename, "name": func.__name__,
        "qualname": func.__qualname__, "module": func.__module__, "namespace": namespace,
        "defaults": func.__defaults__, "kwdefaults": func.__kwdefaults__,
        "annotations": dict(getattr(func, "__annotations__", {}) or {}),
    }
    try:
        data = pickle.dumps(state, protocol=_PROTOCOL)
    except Exception as exc:  # defaults or annotations that do not pickle
        raise StencilError(f"cannot pickle the definition of '{func.__name__}': {exc}",
                           stencil=name, loc=Location(src.filename, line),
                           hint="give it defaults and annotations that pickle") from None
    payload = (hashlib.sha256(data).hexdigest(), data)
    _PAYLOADS[key] = payload
    return payload


def rebuild_function(digest: str, data: bytes) -> FunctionType:
    func = _FUNCTIONS.recall(digest)
    if func is not None:
        return func  # type: ignore[return-value]
    state = pickle.loads(data)
    key = f"<{state['filename']}:{state['line']} pickled {digest[:12]}>"
    text = state["text"]
    lines = text.splitlines(keepends=True)
    with _LOCK:
        linecache.cache[key] = (len(text), None, lines, key)  # mtime None: never checked
    code = compile(text, key, "exec")
    body = [c for c in code.co_consts if isinstance(c, CodeType)]
    namespace = {k: (importlib.import_module(v.name) if isinstance(v, _ModuleRef) else v)
                 for k, v in state["namespace"].items()}
    scope = {"__builtins__": builtins, "__name__": state["module"], **namespace}
    func = FunctionType(body[0], scope, state["name"], state["defaults"])
    func.__kwdefaults__ = state["kwdefaults"]
    func.__annotations__ = state["annotations"]
    func.__qualname__ = state["qualname"]
    func.__module__ = state["module"]
    return _FUNCTIONS.remember(digest, func)  # type: ignore[return-value]


def _definition_text(src) -> tuple[str, int]:
    """The definition alone, as source whose line numbers are the original ones: blank lines
    before it, an ``if 1:`` line above an indented ``def``, a lambda in parentheses."""
    tree = src.tree
    lines = src.text.splitlines()
    first = tree.lineno
    last = tree.end_lineno or first
    seg = [ln.rstrip("\r\n") for ln in lines[first - 1:last]]
    line = src.first_line + first - 1  # the definition's line in its file
    if isinstance(tree, ast.Lambda):
        # columns are UTF-8 byte offsets
        end = tree.end_col_offset if tree.end_col_offset is not None else len(seg[-1])
        seg[-1] = seg[-1].encode()[:end].decode(errors="ignore")
        seg[0] = "(" + seg[0].encode()[tree.col_offset:].decode(errors="ignore")
        seg[-1] += ")"
        lead = []
    else:
        lead = ["if 1:"] if seg[0][:1].isspace() else []
    if lead and line < 2:  # no room above for `if 1:`
        lead, seg = [], _dedented(seg)
    pad = [""] * (line - 1 - len(lead))
    return "\n".join(pad + lead + seg) + "\n", line


def _dedented(seg: list[str]) -> list[str]:
    import textwrap

    return textwrap.dedent("\n".join(seg)).splitlines()


def _free_names(tree: ast.AST) -> set[str]:
    """Names the definition reads that it does not bind (parameters, assignments, loop
    variables), and every name in its annotations."""
    loads, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loads if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    # annotations name objects (Field, IJ, ...) even when a parameter has the same name
    return (loads - bound) | _annotation_names(tree)


def _annotation_names(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            out |= {n.id for n in ast.walk(node.annotation) if isinstance(n, ast.Name)}
    return out


def _shippable(value: object, free: str, stencil: str, loc: Location) -> object:
    if isinstance(value, ModuleType):
        return _ModuleRef(value.__name__)
    try:
        pickle.dumps(value, protocol=_PROTOCOL)
    except Exception as exc:
        raise StencilError(
            f"cannot pickle the stencil: its kernel uses '{free}', a "
            f"{type(value).__name__} that does not pickle ({exc})", stencil=stencil, loc=loc,
            hint=f"make '{free}' a value that pickles (a number, an array, a module-level "
                 "function), or pass it to the kernel as an argument") from None
    return value


# ---------------------------------------------------------------- stencil objects


def reduce_point(st) -> tuple:
    """``PointStencil.__reduce__``: its function by source and its options."""
    from .dask import border_mode

    options = {"neighborhood": st.explicit_neighborhood, "cval": st.cval,
               "standard_indexing": st.standard_indexing, "backend": st.backend,
               "fast_math": st.fast_math}
    mode = border_mode(st)
    if mode != "constant":
        options["func_or_mode"] = mode
    if st.dims is not None:
        options["dims"] = st.dims
    if st.autotune is not None:
        options["autotune"] = st.autotune
    return _reduced(rebuild_point, st, st._parse()[1].namespace, options)


def rebuild_point(key: str, func: FunctionType, options: dict, name: str):
    st = _OBJECTS.recall(key)
    if st is not None:
        return st
    from ..api.stencil import stencil

    mode = options.pop("func_or_mode", None)
    st = stencil(mode, **options)(func) if mode else stencil(func, **options)
    st.__name__ = name
    st._parse()  # now, while the source registered for it is certainly in linecache
    return _OBJECTS.remember(key, st)


def reduce_computation(comp) -> tuple:
    """``ComputationStencil.__reduce__``: its definition by source, backend, externals and
    dtypes (externals that are helpers pickle by source too)."""
    options = {"backend": comp.backend, "externals": comp.externals, "dtypes": comp.dtypes,
               "fast_math": comp.fast_math}
    if comp.autotune is not None:
        options["autotune"] = comp.autotune
    return _reduced(rebuild_computation, comp, comp.source.namespace, options)


def rebuild_computation(key: str, func: FunctionType, options: dict, name: str):
    comp = _OBJECTS.recall(key)
    if comp is not None:
        return comp
    import functools

    from ..api.multistage import ComputationStencil

    comp = ComputationStencil(func, **options)
    functools.update_wrapper(comp, func, updated=())
    return _OBJECTS.remember(key, comp)


def reduce_gtfunction(helper: GTFunction) -> tuple:
    """How a ``gtscript.function`` helper pickles: by source, as the stencils that call it."""
    return (GTFunction, (_Rebuilt(*function_payload(helper.func)),))


def reduce_kernel(kern) -> tuple:
    """``Kernel.__reduce__``: C source as it is, a Python kernel by source."""
    from ..api.parloop import Kernel

    if kern.func is None:
        return (Kernel, (kern.code, kern.name, kern.backend, kern.fast_math))
    return (Kernel, (_Rebuilt(*function_payload(kern.func, kern.name)), kern.name,
                     kern.backend, kern.fast_math))


class _Rebuilt:
    """Unpickles as the rebuilt function of a payload."""

    __slots__ = ("digest", "data")

    def __init__(self, digest: str, data: bytes) -> None:
        self.digest, self.data = digest, data

    def __reduce__(self):
        return (rebuild_function, (self.digest, self.data))


def _reduced(rebuild, obj, visible: dict, options: dict) -> tuple:
    """The ``__reduce__`` value of a stencil object: ``rebuild(key, function, options,
    name)``, the key naming the definition and options (one object per key per process)."""
    digest, data = function_payload(obj.func, obj.__name__, owner=obj, visible=visible)
    key = _options_digest(digest, options, obj.__name__)
    return (rebuild, (key, _Rebuilt(digest, data), options, obj.__name__))


def _options_digest(digest: str, options: dict, name: str) -> str:
    try:
        data = pickle.dumps((digest, sorted(options.items()), name), protocol=_PROTOCOL)
    except Exception as exc:
        raise StencilError(f"cannot pickle the stencil's options: {exc}", stencil=name,
                           hint="use options (cval, externals, ...) whose values pickle"
                           ) from None
    return hashlib.sha256(data).hexdigest()


class PicklingAdapter(Adapter):
    name = "pickling"
    priority = 1000  # the default: an adapter registered by an application may pickle first

    def reduce(self, obj: object) -> tuple | None:
        from ..api.multistage import ComputationStencil
        from ..api.parloop import Kernel
        from ..api.stencil import PointStencil

        if isinstance(obj, PointStencil):
            return reduce_point(obj)
        if isinstance(obj, ComputationStencil):
            return reduce_computation(obj)
        if isinstance(obj, Kernel):
            return reduce_kernel(obj)
        if isinstance(obj, GTFunction):
            return reduce_gtfunction(obj)
        return None


register(PicklingAdapter())
