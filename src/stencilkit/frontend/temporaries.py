"""Typed temporaries: ``tmp: Field[IJ, float] = ...``, ``tmp: Field[np.int32] = ...`` and
``tmp: float = ...`` in a definition or a helper.

GT4Py honours a temporary's annotation, and so must we (dropping it changes results
silently): a ``Field[IJ, dtype]`` temporary is ONE horizontal plane, written and read at
whatever level the computation is at, so in a FORWARD/BACKWARD computation it carries its
value from level to level (a vertically integrated quantity); it becomes a 2-D field of the
definition that the stencil allocates (``ComputationDef.planes``), never a parameter. A 3-D
or plain annotation fixes the temporary's dtype: every value assigned to it is cast to it.

Annotations are read before the statements are translated, wherever they stand in the
body, so that every use of the name means the same temporary.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes
from ..errors import StencilTypeError
from ..ir import computation as c
from .dsl import Axis, FieldType
from .static import NotStatic, holds_runtime, static_value

if TYPE_CHECKING:
    from .computation_translate import ComputationTranslator


def field_type(t: object) -> FieldType | None:
    """Our ``Field[...]``, or GT4Py's field descriptor (recognised by its attributes)."""
    if isinstance(t, FieldType):
        return t
    if type(t).__name__ == "_FieldDescriptor" and hasattr(t, "axes"):
        axes = tuple(Axis(getattr(a, "name", str(a))) for a in t.axes)  # type: ignore[attr-defined]
        dims = tuple(int(n) for n in getattr(t, "data_dims", ()))
        return FieldType(axes, t.dtype, dims)  # type: ignore[attr-defined]
    return None


def resolve_dtype(value: object, mapping: dict[str, object], what: str) -> np.dtype:
    """``value`` as a supported dtype: anything NumPy turns into a dtype, or a name (a
    symbolic dtype) given in ``mapping`` (``dtypes=``, then the externals)."""
    if isinstance(value, str) and value in mapping:
        value = mapping[value]
    try:
        return dtypes.as_dtype(value)
    except StencilTypeError as exc:
        if isinstance(value, str):
            raise StencilTypeError(
                f"{what}: {value!r} is neither a NumPy dtype nor a name given through "
                "dtypes= or externals=",
                hint=f"pass dtypes={{{value!r}: np.float64}} (or an external of that "
                     "name), or write a dtype such as float or np.float32") from None
        raise StencilTypeError(f"{what}: {exc.bare_message}", hint=exc.hint) from None


def declare(tr: ComputationTranslator, body: list[ast.stmt]) -> None:
    """Register the annotations of ``tr``'s locals found anywhere in ``body``."""
    for s in body:
        for node in ast.walk(s):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) \
                    and node.target.id in tr.aliases \
                    and _is_temporary(tr, tr.aliases[node.target.id]):
                _declare(tr, node, tr.aliases[node.target.id])


def _is_temporary(tr: ComputationTranslator, target: str) -> bool:
    return target not in tr.ctx.fields or target in tr.ctx.planes


def _evaluate(tr: ComputationTranslator, node: ast.expr) -> object:
    """An annotation's value: ``Field[...]`` subscripts, tuples, names and attributes with
    compile-time values (the scope's globals, the externals, the gtscript names)."""
    if isinstance(node, ast.Subscript):
        return _evaluate(tr, node.value)[_evaluate(tr, node.slice)]  # type: ignore[index]
    if isinstance(node, ast.Tuple):
        return tuple(_evaluate(tr, e) for e in node.elts)
    if isinstance(node, ast.Name) and not tr._is_runtime(node.id):
        found, value = tr.lookup(node.id)  # axes too (a run-time value in expressions)
        if found:
            return value
        if node.id in tr.ctx.dtype_map:
            return tr.ctx.dtype_map[node.id]  # a dtype named in dtypes=
    return static_value(node, tr.static_lookup)


def _declare(tr: ComputationTranslator, node: ast.AnnAssign, target: str) -> None:
    name = node.target.id  # type: ignore[attr-defined]
    spelled = ast.unparse(node.annotation)
    hint = "annotate as Field[IJ, float] (a 2-D temporary), Field[float] or float"
    annotation = node.annotation
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:  # a quoted annotation: the expression it spells (else a symbolic dtype)
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            pass
    try:
        t = _evaluate(tr, annotation)
        if holds_runtime(t):
            raise NotStatic
    except NotStatic:
        raise tr.error(node, f"the annotation of temporary '{name}' ({spelled}) is not known "
                             "at compile time", hint) from None
    except StencilTypeError as exc:
        raise tr.error(node, f"temporary '{name}': {exc.bare_message}", exc.hint) from None
    except Exception as exc:  # Field[...] refusing its arguments, a failing lookup
        raise tr.error(node, f"cannot evaluate the annotation of temporary '{name}' "
                             f"({spelled}): {exc}", hint) from None
    mapping = {**tr.ctx.externals, **tr.ctx.dtype_map}
    what = f"temporary '{name}'"
    try:
        ft = field_type(t)
        axes = "IJK" if ft is None else "".join(a.name for a in ft.axes)
        dtype = resolve_dtype(t if ft is None else ft.dtype, mapping, what)
    except StencilTypeError as exc:
        raise tr.error(node, exc.bare_message, exc.hint) from None
    if ft is not None and ft.data_dims:
        raise tr.error(node, f"temporary '{name}' is annotated with data dimensions "
                             f"({spelled}), which temporaries do not have here",
                       "pass a field with data dimensions as a parameter instead")
    if axes not in ("IJK", "IJ"):
        raise tr.error(node, f"temporary '{name}' is annotated Field[{axes}, ...]: a "
                             "temporary is 3-D (Field[float]) or one horizontal plane "
                             "(Field[IJ, float])", hint)
    ctx = tr.ctx
    before = ctx.planes.get(target)
    declared = ("IJ", before.dtype) if before is not None else (
        ("IJK", ctx.declared[target]) if target in ctx.declared else None)
    if declared is not None and declared != (axes, dtype):
        raise tr.error(node, f"temporary '{name}' is annotated twice, differently "
                             f"(Field[{declared[0]}, {declared[1]}] and Field[{axes}, "
                             f"{dtype}])", "annotate it once (or alike)")
    if axes == "IJ":
        ctx.planes[target] = c.FieldDecl(target, "IJ", dtype)
        ctx.fields[target] = ctx.planes[target]
        if target in ctx.temporaries:
            ctx.temporaries.remove(target)
    else:
        ctx.declared[target] = dtype
