"""The text form of kernel IR (``STENCILKIT_DUMP=kernel``): parameters with their
properties, buffers with their shapes and strides, then the body in C-like syntax, with the
abstract nodes spelled out (``parallel for``, ``atomic``, ``set_error``, ``streamed``, ``sqrt<float32>``)
instead of what one platform makes of them."""

from __future__ import annotations

from ..ir import kernel as k
from .cfamily import CFamilyPrinter


class KernelTextPrinter(CFamilyPrinter):
    def expr(self, e: k.Expr, parent: int = 0) -> str:
        if isinstance(e, k.MathCall):
            args = ", ".join(self.expr(a) for a in e.args)
            return f"{e.func}<{e.args[0].dtype}>({args})"
        return super().expr(e, parent)

    def stmt(self, s: k.Stmt, indent: str) -> list[str]:
        inner = indent + "    "
        match s:
            case k.ParallelRegion(body=body, only_if=only_if):
                when = "" if only_if is None else f" if({self.expr(only_if)})"
                return [f"{indent}parallel region{when} {{", *self.stmts(body, inner),
                        f"{indent}}}"]
            case k.AtomicUpdate(buffer=b, indices=idx, op=op, value=v):
                assign = "=" if op is None else f"{op}="
                return [f"{indent}atomic {b.base.name}[{self.offset(b, idx)}] {assign} "
                        f"{self.expr(v)};"]
            case k.SetError(code=code):
                return [f"{indent}set_error {code};"]
            case k.StreamedRow(loop=loop, buffer=b, chunk=n, when=w):
                return [f"{indent}streamed {b.base.name} chunk({n}) if({self.expr(w)}) {{",
                        *self.stmt(loop, inner), f"{indent}}}"]
            case k.StoreFence():
                return [f"{indent}store_fence;"]
        return super().stmt(s, indent)

    def loop(self, s: k.Loop, indent: str) -> list[str]:
        plain = k.Loop(s.counter, s.start, s.stop, s.step, s.body)
        lines = super().loop(plain, indent)
        par = s.parallel
        if par is not None:
            what = ["shared" if par.shared else "parallel", f"schedule({par.schedule})"]
            if par.collapse > 1:
                what.append(f"collapse({par.collapse})")
            what += [f"reduction({r.op}: {r.buffer.base.name}[:{r.size}])"
                     for r in par.reductions]
            if par.only_if is not None:
                what.append(f"if({self.expr(par.only_if)})")
            lines[0] = f"{indent}{' '.join(what)} {lines[0].lstrip()}"
        elif s.vectorize:
            lines[0] = f"{indent}vector {lines[0].lstrip()}"
        return lines


def kernel_ir_text(kernel: k.KernelFunction) -> str:
    printer = KernelTextPrinter()
    lines = [f"kernel {kernel.name}  # {kernel.doc.splitlines()[0] if kernel.doc else ''}"]
    for p in kernel.params:
        props = ", ".join(sorted(_property(q) for q in p.properties))
        star = "*" if p.pointer else ""
        lines.append(f"  param {p.name}: {p.dtype}{star}  [{props}]")
    for b in kernel.buffers:
        shape = ", ".join(printer.expr(x) for x in b.shape)
        strides = ", ".join(printer.expr(x) for x in b.strides)
        lines.append(f"  buffer {b.name}: {b.element_type}, shape ({shape}), strides ({strides})")
    if kernel.status is not None:
        lines.append(f"  status {kernel.status.name}")
    lines += printer.stmts(kernel.body, "  ")
    return "\n".join(lines)


def _property(q: object) -> str:
    slots = getattr(q, "__slots__", ())
    args = f"({', '.join(repr(getattr(q, s)) for s in slots)})" if slots else ""
    return type(q).__name__ + args
