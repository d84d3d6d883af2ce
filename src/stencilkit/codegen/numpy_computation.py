"""NumPy code for computations: vectorized over IJ (and over K where the policy allows).

Each statement becomes array operations on views of the fields over the statement's extended
region, which implements "each statement acts on the whole plane before the next" directly.
PARALLEL intervals are processed as 3-D blocks; FORWARD/BACKWARD loop over K levels in Python,
one IJ plane per statement.
"""

from __future__ import annotations

from ..analysis.schedule import Schedule, data_index, offsets, variable_k
from ..ir import computation as c
from ..ir import definition as d
from .numpy import NumpyPrinter


class ComputationNumpyPrinter(NumpyPrinter):
    def __init__(self, defn: c.ComputationDef, sched: Schedule) -> None:
        dummy = d.PointKernel(defn.name, defn.params, ())
        super().__init__(dummy, ())
        self.defn = defn
        self.sched = sched
        self.region = "_R"
        self.k_reads: list[d.Access] = []  # reads at run-time K offsets, numbered for errors

    def expr(self, e: d.Expr) -> str:
        match e:
            case d.Access(field=f) if (lev := variable_k(e)) is not None:
                di, dj, _ = offsets(e)
                self.k_reads.append(e)
                return (f"_rt.view_k({self.array(e)}, A_{f}, O_{f}, {self.region}, "
                        f"({di}, {dj}), {self.expr(lev)}, _err, "
                        f"{len(self.k_reads) - 1})")
            case d.Access(field=f):
                di, dj, dk = offsets(e)
                return f"_rt.view({self.array(e)}, A_{f}, O_{f}, {self.region}, ({di}, {dj}, {dk}))"
            case d.Name(id=n):
                return f"p_{n}"
        return super().expr(e)

    @staticmethod
    def array(e: d.Access | d.Assign) -> str:
        """The array accessed: a field, or one element's view of a field with data
        dimensions (``F_f[..., 3]``: only the spatial axes remain)."""
        index = data_index(e) if isinstance(e, d.Access) else getattr(e, "data_index", ())
        name = e.field if isinstance(e, d.Access) else e.target
        return f"F_{name}[..., {', '.join(map(str, index))}]" if index else f"F_{name}"

    def stmts(self, body: tuple[d.Stmt, ...], indent: str, mask: str | None) -> None:
        for s in body:
            if s.loc is not None:
                self.emit(indent, f"# line {s.loc.line}")
            if isinstance(s, d.Assign):
                target = f"_rt.view({self.array(s)}, A_{s.target}, O_{s.target}, " \
                         f"{self.region}, (0, 0, {c.write_offset(s)}))"
                self.emit(indent, f"_rt.assign({target}, {self.expr(s.value)}, {mask})")
            elif (region := c.region_of(s)) is not None and mask is None:
                # Only the region's points are computed, so reads stay inside the halo the
                # extents give (a read at an offset from outside the region might not).
                assert isinstance(s, d.If)  # region_of: a ``with horizontal`` unit
                outer, self.region = self.region, self.fresh("R")
                bounds = tuple(None if b is None else (b.offset, b.from_end)
                               for b in (*region.i, *region.j))
                self.emit(indent, f"{self.region} = _rt.in_region({outer}, ni, nj, {bounds!r})")
                self.emit(indent, f"if {self.region} is not None:")
                self.stmts(s.body, indent + "    ", None)
                self.emit(indent + "    ", "pass")
                self.region = outer
            elif isinstance(s, d.For):
                raise TypeError("for loops are not part of the computation language")
            else:
                super().stmts((s,), indent, mask)

    def function(self, name: str) -> str:
        defn = self.defn
        fields = [f.name for f in defn.fields] + [t for t, _ in defn.temporaries]
        params = [f"F_{f}" for f in fields] + [f"p_{s.name}" for s in defn.scalars]
        self.emit("", f"def {name}({', '.join(params)}, _origins, _domain):")
        ind = "    "
        self.emit(ind, f'"""computation {defn.name}"""')
        self.emit(ind, "ni, nj, nk = _domain")
        for f in defn.fields:
            self.emit(ind, f"A_{f.name} = {f.axes!r}")
        for temp, _ in defn.temporaries:
            self.emit(ind, f"A_{temp} = 'IJK'")
        for field_name in fields:
            self.emit(ind, f"O_{field_name} = _origins[{field_name!r}]")
        self.emit(ind, "_err = []  # reads at run-time K offsets that left their field")
        self.emit(ind, "with np.errstate(all='ignore'):")
        ind += "    "
        for m_i, ms in enumerate(self.sched.multistages):
            self.emit(ind, f"# multistage {m_i}: {ms.policy} ({ms.mode})")
            for isched in ms.intervals:
                iv = isched.interval
                self.emit(ind, f"k0, k1 = _rt.bounds({iv.start.offset}, {iv.start.from_end}, "
                               f"{iv.end.offset}, {iv.end.from_end}, nk)")
                inner = ind
                if ms.policy != "PARALLEL":
                    rng = "range(k0, k1)" if ms.policy == "FORWARD" else "range(k1 - 1, k0 - 1, -1)"
                    self.emit(ind, f"for k in {rng}:")
                    inner = ind + "    "
                for s_i, stage in enumerate(isched.stages):
                    i_lo, i_hi, j_lo, j_hi = stage.extent
                    krange = "(k0, k1)" if ms.policy == "PARALLEL" else "(k, k + 1)"
                    self.emit(inner, f"# stage {s_i}")
                    self.emit(inner, f"_R = ({i_lo}, ni + {i_hi}, {j_lo}, nj + {j_hi}, *{krange})")
                    self.stmts(stage.units, inner, None)
                if ms.policy != "PARALLEL":
                    self.emit(inner, "pass")
        self.emit("    ", "return _err")
        return "\n".join(self.lines) + "\n"


def computation_source(defn: c.ComputationDef, sched: Schedule, name: str) -> str:
    return computation_printer(defn, sched, name)[0]


def computation_printer(defn: c.ComputationDef, sched: Schedule, name: str
                        ) -> tuple[str, ComputationNumpyPrinter]:
    """The generated module and its printer (which lists the reads at run-time K offsets,
    by the number the generated code reports)."""
    header = (f"# Generated by stencilkit from computation '{defn.name}'.\n"
              "import numpy as np\nfrom stencilkit.runtime import numpy_support as _rt\n\n\n")
    printer = ComputationNumpyPrinter(defn, sched)
    return header + printer.function(name), printer
