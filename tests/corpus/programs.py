"""A hypothesis strategy for random gtscript computations, emitted as source text.

A program has 2-4 float64 fields ``f0 ...`` and a scalar ``s0``, and 1-3 computations
(PARALLEL, FORWARD, BACKWARD) of one or more intervals, whose statements assign fields and
temporaries from random arithmetic (``+ - *``, ``min``, ``max``, ``abs``, ``sqrt``,
conditional expressions) over reads at horizontal and vertical offsets, with ``if``/``else``,
FORWARD/BACKWARD recurrences through fields and through temporaries read at previous levels,
and optionally (``features``): swaps ``t = x; x = y; y = t``, temporaries local to an
``if`` branch, horizontal regions, deliberately invalid statements, typed 2-D temporaries
(``p1: Field[IJ, np.float64] = ...`` in FORWARD/BACKWARD computations, carrying their value
from level to level and into later computations), and a K halo (``k_halo``: the fields
have levels below and above the domain, and the first computation, FORWARD from level 0,
reads below it, as ``a = a + a[0, 0, -1]`` over ``interval(...)`` does).

Every program is valid for GT4Py and for stencilkit by construction (except the invalid
ones), and has one defined result: the generator respects the union of both rule sets --
  * the fields are split into inputs and outputs; what is read with a horizontal offset
    must not depend on an output, directly or through temporaries (GT4Py never computes a
    field it writes on an extended domain, and rejects a program whose output has a
    nonzero read extent), so temporaries are *clean* (computed from inputs, temporaries
    that are clean and constants only, readable at any offset) or not (zero horizontal
    offset only); a field written in a PARALLEL computation is not read there with a
    vertical offset;
  * temporaries are read only where they are defined: after an unconditional assignment
    in the same interval block, or (at any offset) when an earlier computation assigned
    them at every level; a *carry* temporary of a FORWARD/BACKWARD computation, assigned
    first in every interval, is read at the previous levels only;
  * vertical offsets stay inside the levels (intervals are chosen with that in mind), or
    inside the K halo of a ``k_halo`` program;
  * a 2-D temporary is written only at the top level of a FORWARD/BACKWARD block (GT4Py
    refuses it in PARALLEL), and read at zero offset after its first assignment;
  * inside ``if`` and region bodies nothing written in the body is read with an offset.
The array halo is the number of statements that read with a horizontal offset, an upper
bound of every extent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

NX, NY, NZ = 4, 3, 5
FEATURES = frozenset({"swap", "branch_temps", "regions", "invalid", "planes", "k_halo"})

# (start level, end level, interval(...) text); NZ = 5
_LAYOUTS = (
    ((0, NZ, "..."),),
    ((0, 1, "0, 1"), (1, NZ, "1, None")),
    ((0, NZ - 1, "0, -1"), (NZ - 1, NZ, "-1, None")),
    ((0, 2, "0, 2"), (2, NZ - 1, "2, -1"), (NZ - 1, NZ, "-1, None")),
    ((1, NZ - 1, "1, -1"),),
    ((2, NZ, "2, None"),),
)
_REGIONS = ("region[I[0], :]", "region[I[-1], :]", "region[:, J[0]]", "region[:, J[-1]]",
            "region[I[0] : I[0] + 2, J[-1]]", "region[I[0], J[0]]")
_CONSTANTS = ("0.5", "2.0", "-1.25", "0.75", "3.0")


@dataclass(frozen=True)
class Program:
    name: str
    source: str                       # a module, written for GT4Py
    fields: tuple[str, ...]
    halo: int
    features: frozenset[str]
    invalid: bool                     # holds a statement both frontends must reject
    k_halo: int = 0                   # levels below and above the domain

    @property
    def shape(self) -> tuple[int, int, int]:
        return (NX + 2 * self.halo, NY + 2 * self.halo, NZ + 2 * self.k_halo)

    @property
    def origin(self) -> tuple[int, int, int]:
        return (self.halo, self.halo, self.k_halo)

    @property
    def domain(self) -> tuple[int, int, int]:
        return (NX, NY, NZ)


@dataclass
class _Scope:
    """What may be read, and how, at one point of the program."""

    policy: str
    start: int                        # the interval's levels [start, end)
    end: int
    first: int                        # the levels [first, last) of the whole computation
    last: int
    written: frozenset[str]           # fields written anywhere in this computation
    clean_only: bool = False          # building a clean temporary's value
    block_temps: set[str] = field(default_factory=set)   # assigned earlier in this block
    carry: str | None = None          # readable at previous levels only
    carry_ready: bool = False         # carry assigned at this level already
    local_temps: set[str] = field(default_factory=set)   # if-branch temporaries
    forbid_offset: frozenset[str] = frozenset()          # the target of the statement


class _Builder:
    def __init__(self, draw, features: frozenset[str]) -> None:
        self.draw = draw
        self.features = features
        n = draw(st.integers(3 if "swap" in features else 2, 4))
        self.fields = tuple(f"f{i}" for i in range(n))
        n_out = draw(st.integers(2 if "swap" in features else 1, n - 1))
        self.outputs = self.fields[n - n_out:]
        self.clean: set[str] = set(self.fields[:n - n_out])   # readable at any offset
        self.global_temps: set[str] = set()   # defined at every level
        self.k_read_globals: set[str] = set()
        self.n_temps = 0
        self.offset_statements = 0
        self.uses = {"swap": False, "branch_temps": False, "regions": False,
                     "planes": False, "k_halo": False}
        self.k_halo = draw(st.integers(1, 2)) if "k_halo" in features else 0
        self.planes: set[str] = set()     # 2-D temporaries assigned so far
        self.invalid = False
        self._has_offset = False
        self.lines: list[str] = []

    # -- expressions ---------------------------------------------------------------------
    def _dk_range(self, sc: _Scope, halo: int = 0) -> tuple[int, int]:
        return max(-2, -sc.start - halo), min(2, NZ - sc.end + halo)

    def _readable(self, sc: _Scope) -> list[tuple[str, str]]:
        """(name, kind) of everything this scope may read."""
        out = [(f, "field") for f in self.fields]
        out += [(t, "block") for t in sorted(sc.block_temps)]
        out += [(t, "global") for t in sorted(self.global_temps)]
        out += [(t, "local") for t in sorted(sc.local_temps)]
        if sc.carry is not None:
            out.append((sc.carry, "carry"))
        out += [(p, "plane") for p in sorted(self.planes)]
        if sc.clean_only:
            out = [(name, kind) for name, kind in out if name in self.clean]
        return out

    def _offsets(self, sc: _Scope, name: str, kind: str) -> tuple[int, int, int] | None:
        d = self.draw
        # the K halo holds input values of fields; temporaries have none
        lo, hi = self._dk_range(sc, self.k_halo if kind == "field" else 0)
        horizontal = name not in sc.forbid_offset and name in self.clean
        if kind == "field":
            vertical = not (sc.policy == "PARALLEL" and name in sc.written)
        elif kind == "block":
            vertical = False
        elif kind == "global":
            vertical = True
        elif kind in ("local", "plane"):
            horizontal = vertical = False
        else:  # carry: previous levels only; its own level once assigned
            # only levels this computation has visited: it assigns the carry at each
            if sc.policy == "FORWARD":
                lo, hi = max(lo, sc.first - sc.start), (0 if sc.carry_ready else -1)
            else:
                lo, hi = (0 if sc.carry_ready else 1), min(hi, sc.last - sc.end)
            if lo > hi:
                return None
            dk = d(st.integers(lo, hi))
            if dk == 0 and not sc.carry_ready:
                return None
            di, dj = (d(st.integers(-1, 1)), d(st.integers(-1, 1))) if horizontal and \
                d(st.booleans()) else (0, 0)
            return di, dj, dk
        di = dj = dk = 0
        if horizontal and d(st.integers(0, 2)) == 0:
            di, dj = d(st.integers(-1, 1)), d(st.integers(-1, 1))
        if vertical and lo <= hi and d(st.integers(0, 3)) == 0:
            dk = d(st.integers(lo, hi))
        if kind == "global" and dk != 0:
            self.k_read_globals.add(name)
        return di, dj, dk

    def leaf(self, sc: _Scope) -> str:
        d = self.draw
        choice = d(st.integers(0, 9))
        if choice == 0:
            return d(st.sampled_from(_CONSTANTS))
        if choice == 1:
            return "s0"
        readable = self._readable(sc)
        if not readable:
            return d(st.sampled_from(_CONSTANTS))
        name, kind = d(st.sampled_from(readable))
        off = self._offsets(sc, name, kind)
        if off is None:
            return d(st.sampled_from(_CONSTANTS))
        if any(off[:2]):
            self._has_offset = True
        if off == (0, 0, 0):
            if kind == "plane":  # 2-D: two offsets, or none
                return name if d(st.integers(0, 3)) else f"{name}[0, 0]"
            return name if d(st.integers(0, 3)) else f"{name}[0, 0, 0]"
        return f"{name}[{off[0]}, {off[1]}, {off[2]}]"

    def expr(self, sc: _Scope, depth: int = 0) -> str:
        d = self.draw
        if depth >= 3 or d(st.integers(0, 2)) == 0:
            return self.leaf(sc)
        op = d(st.sampled_from(("+", "-", "*", "+", "min", "max", "abs", "sqrt", "half",
                                "ifexp", "div")))
        a = self.expr(sc, depth + 1)
        if op == "abs":
            return f"abs({a})"
        if op == "sqrt":
            return f"sqrt(abs({a}))"
        if op == "half":
            return f"0.5 * {a}"
        b = self.expr(sc, depth + 1)
        if op in ("min", "max"):
            return f"{op}({a}, {b})"
        if op == "div":
            return f"{a} / (1.0 + abs({b}))"
        if op == "ifexp":
            return f"({a} if {self.cond(sc)} else {b})"
        return f"({a} {op} {b})"

    def cond(self, sc: _Scope) -> str:
        d = self.draw
        c = f"{self.expr(sc, 2)} {d(st.sampled_from(('>', '<', '>=', '<=')))} {self.expr(sc, 2)}"
        if d(st.integers(0, 4)) == 0:
            c = f"({c}) {d(st.sampled_from(('and', 'or')))} ({self.leaf(sc)} > 0.0)"
        return c

    # -- statements ----------------------------------------------------------------------
    def _new_temp(self, prefix: str = "t", clean: bool = False) -> str:
        self.n_temps += 1
        name = f"{prefix}{self.n_temps}"
        if clean:
            self.clean.add(name)
        return name

    def assign(self, sc: _Scope, target: str, indent: str, annotation: str = "",
               prefix: str = "") -> None:
        self._has_offset = False
        sc.forbid_offset = frozenset({target})
        sc.clean_only = target in self.clean
        rhs = self.expr(sc)
        sc.forbid_offset = frozenset()
        sc.clean_only = False
        self.offset_statements += self._has_offset
        self.lines.append(f"{indent}{target}{annotation} = {prefix}{rhs}")

    def plane(self, sc: _Scope, indent: str) -> None:
        """A new 2-D temporary (annotated at its first assignment) or an update of one."""
        d = self.draw
        if self.planes and d(st.booleans()):
            p = d(st.sampled_from(sorted(self.planes)))
            self.assign(sc, p, indent, prefix=f"{p} + ")
        else:
            p = self._new_temp("p")
            self.assign(sc, p, indent, annotation=": Field[IJ, np.float64]")
            self.planes.add(p)
        self.uses["planes"] = True

    def below(self, sc: _Scope, indent: str) -> None:
        """``f = f[0, 0, -k] + ...`` at the first level of a FORWARD computation: reads the
        K halo there (``interval(...)`` starts at level 0)."""
        d = self.draw
        f = d(st.sampled_from(sorted(sc.written)))
        src = d(st.sampled_from((f, *self.fields)))
        self.assign(sc, f, indent, prefix=f"{src}[0, 0, {-self.k_halo}] + ")
        self.uses["k_halo"] = True

    def body(self, sc: _Scope, indent: str, allow_if: bool) -> None:
        """One to three statements inside an ``if``/``else`` or region."""
        d = self.draw
        saved_local = set(sc.local_temps)
        for _ in range(d(st.integers(1, 3))):
            kind = d(st.sampled_from(("field", "field", "local", "if")))
            if kind == "local" and "branch_temps" in self.features:
                t = self._new_temp("b")
                self.assign(sc, t, indent)
                sc.local_temps.add(t)
                self.uses["branch_temps"] = True
            elif kind == "if" and allow_if:
                self.if_statement(sc, indent, allow_if=False)
            else:
                self.assign(sc, d(st.sampled_from(sorted(sc.written))), indent)
        sc.local_temps = saved_local

    def if_statement(self, sc: _Scope, indent: str, allow_if: bool = True) -> None:
        self._has_offset = False
        self.lines.append(f"{indent}if {self.cond(sc)}:")
        self.offset_statements += self._has_offset
        self.body(sc, indent + "    ", allow_if)
        if self.draw(st.booleans()):
            self.lines.append(f"{indent}else:")
            self.body(sc, indent + "    ", allow_if)

    def region_statement(self, sc: _Scope, indent: str) -> None:
        d = self.draw
        regions = d(st.lists(st.sampled_from(_REGIONS), min_size=1, max_size=2, unique=True))
        self.lines.append(f"{indent}with horizontal({', '.join(regions)}):")
        self.body(sc, indent + "    ", allow_if=True)
        self.uses["regions"] = True

    def swap(self, sc: _Scope, indent: str) -> None:
        x, y = self.draw(st.lists(st.sampled_from(sorted(sc.written)), min_size=2,
                                  max_size=2, unique=True))
        t = self._new_temp()
        self.lines += [f"{indent}{t} = {x}", f"{indent}{x} = {y}", f"{indent}{y} = {t}"]
        sc.block_temps.add(t)
        self.uses["swap"] = True

    def invalid_statement(self, sc: _Scope, indent: str) -> None:
        """``f = f[1, 0, 0] ...``: a statement reading the field it writes at an offset."""
        f = self.draw(st.sampled_from(sorted(sc.written)))
        self.lines.append(f"{indent}{f} = {f}[1, 0, 0] + {self.leaf(sc)}")
        self.invalid = True

    def block(self, sc: _Scope, indent: str, temps_here: set[str]) -> None:
        d = self.draw
        if sc.carry is not None:
            self.assign(sc, sc.carry, indent)
            sc.carry_ready = True
            temps_here.add(sc.carry)
        kinds = ["field", "field", "temp", "temp", "if"]
        if "swap" in self.features and len(sc.written) >= 2:
            kinds.append("swap")
        if "regions" in self.features:
            kinds.append("region")
        if "invalid" in self.features and not self.invalid and d(st.integers(0, 29)) == 0:
            self.invalid_statement(sc, indent)
        if self.k_halo and not self.uses["k_halo"]:
            self.below(sc, indent)
        if "planes" in self.features and sc.policy != "PARALLEL":
            kinds += ["plane", "plane"]
            if not self.uses["planes"]:  # first, so that the block's statements read it
                self.plane(sc, indent)
        for _ in range(d(st.integers(1, 4))):
            kind = d(st.sampled_from(kinds))
            if kind == "field":
                self.assign(sc, d(st.sampled_from(sorted(sc.written))), indent)
            elif kind == "temp":
                reuse = sorted(sc.block_temps - {sc.carry})
                t = d(st.sampled_from(reuse)) if reuse and d(st.booleans()) else \
                    self._new_temp(clean=d(st.booleans()))
                self.assign(sc, t, indent)
                sc.block_temps.add(t)
                temps_here.add(t)
            elif kind == "if":
                self.if_statement(sc, indent)
            elif kind == "region":
                self.region_statement(sc, indent)
            elif kind == "plane":
                self.plane(sc, indent)
            else:
                self.swap(sc, indent)
                temps_here |= sc.block_temps
        if "swap" in self.features and not self.uses["swap"] and len(sc.written) >= 2:
            self.swap(sc, indent)  # the swap tests always hold one
            temps_here |= sc.block_temps

    def computation(self) -> None:
        d = self.draw
        policy = d(st.sampled_from(("PARALLEL", "FORWARD", "BACKWARD")))
        layout = d(st.sampled_from(_LAYOUTS))
        if self.k_halo and not self.uses["k_halo"]:  # FORWARD from level 0 reads below it
            policy, layout = "FORWARD", d(st.sampled_from(_LAYOUTS[:4]))
        if "planes" in self.features and not self.uses["planes"] and policy == "PARALLEL":
            policy = "FORWARD"  # every such program holds a 2-D temporary
        n_written = 2 if "swap" in self.features else 1
        written = frozenset(d(st.lists(st.sampled_from(self.outputs), min_size=n_written,
                                       max_size=len(self.outputs), unique=True)))
        carry = self._new_temp("c", clean=d(st.booleans())) \
            if policy != "PARALLEL" and d(st.booleans()) else None
        blocks = layout if policy != "BACKWARD" else tuple(reversed(layout))
        per_block: list[set[str]] = []
        if len(blocks) == 1 and d(st.booleans()):
            self.lines.append(f"    with computation({policy}), interval({blocks[0][2]}):")
            indents = ["        "]
        else:
            self.lines.append(f"    with computation({policy}):")
            indents = ["            "] * len(blocks)
        for (start, end, text), indent in zip(blocks, indents):
            if indent != "        ":
                self.lines.append(f"        with interval({text}):")
            sc = _Scope(policy, start, end, layout[0][0], layout[-1][1], written, carry=carry)
            temps_here: set[str] = set()
            self.block(sc, indent, temps_here)
            per_block.append(temps_here)
        covers_all = sum(end - start for start, end, _ in layout) == NZ
        if covers_all:
            defined = set.intersection(*per_block) - self.k_read_globals
            self.global_temps |= defined

    def program(self) -> Program:
        for _ in range(self.draw(st.integers(1, 3))):
            self.computation()
        used = frozenset(k for k, v in self.uses.items() if v) | \
            (frozenset({"invalid"}) if self.invalid else frozenset())
        params = ", ".join(f"{f}: Field[np.float64]" for f in self.fields) + ", s0: float"
        name = "random_program"
        imports = ("BACKWARD, FORWARD, PARALLEL, Field, computation, interval, sqrt"
                   + (", I, J, horizontal, region" if self.uses["regions"] else "")
                   + (", IJ" if self.uses["planes"] else ""))
        source = "\n".join([
            "import numpy as np",
            "",
            f"from gt4py.cartesian.gtscript import {imports}",
            "",
            "",
            f"def {name}({params}):",
            *self.lines,
            "",
        ])
        return Program(name, source, self.fields, self.offset_statements, used, self.invalid,
                       self.k_halo)


@st.composite
def programs(draw, features: frozenset[str] = frozenset()) -> Program:
    """A random computation using the given ``features`` (a subset of ``FEATURES``)."""
    assert features <= FEATURES
    return _Builder(draw, features).program()
