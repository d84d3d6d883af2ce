"""Kernels whose every name is one the generated code, C, OpenMP, its headers or NumPy use.

``main(kind, backend, directory)`` writes point kernels, computations and ParLoop kernels
whose arguments, locals, fields and temporaries carry hostile names into a module in
``directory``, runs them on ``backend`` and compares each with a reference that runs the
same kernel with harmless names (``numba.stencil`` for point kernels, a NumPy evaluation
for computations, a Python loop for ParLoops). It prints one line per mismatch and exits
with status 1 if there is any; ``test_names.py`` runs it in a subprocess, so that a crash
fails the test instead of the run.
"""

from __future__ import annotations

import importlib.util
import keyword
import re
import sys
from pathlib import Path

import numpy as np

from stencilkit import BACKWARD, FORWARD, PARALLEL, Field, computation, interval

C_KEYWORDS = """auto break case char const continue default do double else enum extern float
for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while _Bool _Complex _Imaginary _Alignas
_Alignof _Atomic _Generic _Noreturn _Static_assert _Thread_local asm typeof __restrict
__attribute__ __inline __asm__ __builtin_inf __func__""".split()
C_MACROS_AND_LIBRARY = """NAN INFINITY I EOF NULL HUGE_VAL M_PI CMPLX CMPLXF complex imaginary
bool true false errno assert offsetof size_t ptrdiff_t int64_t int32_t uint64_t uint8_t
intptr_t uintptr_t INT64_MIN INT64_MAX INT32_MAX SIZE_MAX FLT_MAX DBL_MAX DBL_EPSILON
stdin stdout stderr printf malloc free memcpy memset exit abort main sqrt sqrtf exp log
log10 pow fabs fabsf floor ceil trunc round fmod copysign sin cos tan asin acos atan atan2
sinh cosh tanh hypot cbrt erf erfc tgamma lgamma fmin fmax isnan isinf isfinite signbit
creal cimag cabs conj cexp csqrt abs labs div omp omp_get_thread_num
omp_get_num_threads omp_in_parallel omp_get_num_procs getenv strtol sk_team_size
sk_team_threads _OPENMP __STDC__ __LINE__ __FILE__ __GNUC__ __STDC_VERSION__
unix linux""".split()
PYTHON_H = """PyObject Py_ssize_t Py_buffer PyLong_FromLong PyFloat_AsDouble PyErr_Occurred
PyErr_SetString PyExc_ValueError PyExc_TypeError PyBuffer_Release PyObject_GetBuffer
PyModuleDef PyMethodDef PyModule_Create PyMODINIT_FUNC PyModuleDef_HEAD_INIT Py_INCREF
Py_DECREF Py_None Py_BEGIN_ALLOW_THREADS Py_END_ALLOW_THREADS METH_FASTCALL PyCFunction
PyBUF_STRIDES PyBUF_WRITABLE PyBUF_C_CONTIGUOUS Py_complex PY_SSIZE_T_CLEAN self args
nargs""".split()
PY_AND_NUMPY = """np numpy math int float bool complex range len min max abs sum print
object type list dict tuple str id input open iter next zip map filter all any slice
isinstance None_ True_ nan inf pi e out _rt _lo _hi _shape _R _origins _domain sk stencil
where cast shifted gather store fill_border cval result done k0 k1 ni nj nk i j k jb b0 i0
i1 b1 v0 s0 z0 a0 l0 m0 r0 q e b p0 status views nviews d v sk_error sk_work sk_call
sk_fail sk_extent sk_lo sk_hi sk_methods sk_module sk_result sk_done SK_SIGNED
sk_checked_offset sk_wrap_index sk_floordiv_f64 sk_mod_i64 sk_min_f64 blocks nblocks res
origin_a_I origin_a_J origin_a_K origin_out_I a_shape_0 a_stride_0 out_shape_0
out_stride_0 x_column""".split()

# gtscript's own names resolve inside a computation even when not imported (as in GT4Py),
# so a computation cannot use them as field or parameter names.
GTSCRIPT = set("""Field IJ IK JK IJK I J K PARALLEL FORWARD BACKWARD computation interval
horizontal region externals function""".split())
# ... nor the keywords of a call (as in GT4Py)
CALL_KEYWORDS = {"origin", "domain", "validate_args", "exec_info"}

_WORD = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*\b")


def identifiers_of(source: str) -> set[str]:
    """Every identifier in a piece of generated code (C or Python), comments included."""
    return set(_WORD.findall(source))


def usable(name: str) -> bool:
    """A name a Python function can take as a parameter or local."""
    return name.isidentifier() and not keyword.iskeyword(name) and name not in (
        "__class__", "__debug__")


def hostile_names(generated: str = "") -> list[str]:
    names = {*C_KEYWORDS, *C_MACROS_AND_LIBRARY, *PYTHON_H, *PY_AND_NUMPY,
             *identifiers_of(generated)}
    return sorted(n for n in names if usable(n))


def chunks(names: list[str], size: int) -> list[list[str]]:
    """Groups of ``size`` names, the last one padded with harmless names (so that every
    group of a kind has one reference, compiled once)."""
    out = [names[i:i + size] for i in range(0, len(names), size)]
    out[-1] += [f"pad{i}" for i in range(size - len(out[-1]))]
    return out


def _load(directory: Path, name: str, text: str):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ point kernels


def point_kernels(names: list[str]) -> tuple[str, list[tuple[str, str, list[str]]]]:
    """Module text and (kernel, role, names) per kernel: scalars, locals, arrays."""
    lines = ["import numpy as np", ""]
    cases = []
    # 'a' is the template's array; 'out' is reserved for the output (as in Numba)
    for c_i, group in enumerate(chunks([n for n in names if n not in ("a", "out")], 50)):
        scalars = " + ".join(f"{n} * {i + 1}.0" for i, n in enumerate(group))
        lines += [f"def scalars_{c_i}(a, {', '.join(group)}):",
                  f"    return a[-1, 0] * 0.5 + a[0, 1] + {scalars}", ""]
        cases.append((f"scalars_{c_i}", "scalars", group))
        body = [f"    {group[0]} = a[0, 0] * 1.0"]
        body += [f"    {n} = {group[i]} * 0.5 + a[-1, {i % 2}] * {i + 2}.0"
                 for i, n in enumerate(group[1:])]
        lines += [f"def locals_{c_i}(a):", *body, f"    return {group[-1]} - a[0, 1]", ""]
        cases.append((f"locals_{c_i}", "locals", group))
        arrays = " + ".join(f"{n}[{i % 3 - 1}, 0] * {i + 1}.0" for i, n in enumerate(group))
        lines += [f"def arrays_{c_i}({', '.join(group)}):", f"    return {arrays}", ""]
        cases.append((f"arrays_{c_i}", "arrays", group))
    # the kernel's own name against the names of the generated functions
    for n in ("call", "fail", "main", "module", "checked_offset"):
        lines += [f"def {n}(a):", "    return a[-1, 0] + a[1, 1]", ""]
        cases.append((n, "name", []))
    return "\n".join(lines), cases


def _safe_point(role: str, size: int) -> str:
    group = [f"p{i}" for i in range(size)]
    if role == "scalars":
        terms = " + ".join(f"{n} * {i + 1}.0" for i, n in enumerate(group))
        return (f"def ref(a, {', '.join(group)}):\n"
                f"    return a[-1, 0] * 0.5 + a[0, 1] + {terms}\n")
    if role == "locals":
        body = [f"    {group[0]} = a[0, 0] * 1.0"]
        body += [f"    {n} = {group[i]} * 0.5 + a[-1, {i % 2}] * {i + 2}.0"
                 for i, n in enumerate(group[1:])]
        return "def ref(a):\n" + "\n".join(body) + f"\n    return {group[-1]} - a[0, 1]\n"
    if role == "arrays":
        terms = " + ".join(f"{n}[{i % 3 - 1}, 0] * {i + 1}.0" for i, n in enumerate(group))
        return f"def ref({', '.join(group)}):\n    return {terms}\n"
    return "def ref(a):\n    return a[-1, 0] + a[1, 1]\n"


_POINT_REFERENCES: dict[tuple[str, int], tuple[list, np.ndarray]] = {}


def run_points(backend: str, directory: Path, names: list[str]) -> list[str]:
    import numba

    import stencilkit as sk

    text, cases = point_kernels(names)
    mod = _load(directory, "hostile_points", text)
    refs = _POINT_REFERENCES
    errors = []
    for fname, role, group in cases:
        key = (role, len(group))
        if key not in refs:  # numba.stencil compiles on every call: once per kind of kernel
            rng = np.random.default_rng(len(group))
            if role == "scalars":
                args = [rng.random((6, 5))] + [1.0 / (i + 3) for i in range(len(group))]
            elif role == "arrays":
                args = [rng.random((6, 5)) for _ in group]
            else:
                args = [rng.random((6, 5))]
            ref_mod = _load(directory, f"safe_{role}_{len(group)}", _safe_point(role, len(group)))
            refs[key] = (args, numba.stencil(ref_mod.ref, cval=-7.0)(*args))
        args, want = refs[key]
        try:
            got = sk.stencil(getattr(mod, fname), cval=-7.0, backend=backend)(*args)
            out = np.full((6, 5), 3.0)
            sk.stencil(getattr(mod, fname), backend=backend)(*args, out=out)
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            errors.append(f"{fname} ({role}: {', '.join(group)}): {type(exc).__name__}: "
                          f"{str(exc)[:2000]}")
            continue
        if got.dtype != want.dtype or not np.array_equal(got, want):
            errors.append(f"{fname} ({role}: {', '.join(group)}): got {got} want {want}")
        interior = want[1:-1, :-1]
        if not np.array_equal(out[1:-1, :-1], interior) or out[0, 0] != 3.0:
            errors.append(f"{fname} with out= ({role}: {', '.join(group)}): got {out}")
    return errors


# ------------------------------------------------------------------ computations


def split(group: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Half the names are fields, a quarter scalars, a quarter temporaries."""
    nf = len(group) // 2
    ns = (len(group) - nf) // 2
    return group[:nf], group[nf:nf + ns], group[nf + ns:]


# The names of the domain and origin arguments, with fields whose origins they would name.
DOMAIN_AND_ORIGINS = (["a", "out", "self"],
                      ["ni", "nj", "nk", "origin_a_I", "origin_a_J", "origin_out_K", "origin_self_I"],
                      ["origin_out_I", "origin_a_K"])


def computation_text(fname: str, fields: list[str], scalars: list[str], temps: list[str]
                     ) -> str:
    """The last field is written; temporaries are read at offsets and at zero offset."""
    nf = len(fields)
    params = [f"{f}: Field[np.float64]" for f in fields] + [f"{s}: float" for s in scalars]
    body = [f"def {fname}({', '.join(params)}):",
            "    with computation(PARALLEL), interval(...):"]
    prev = f"{fields[0]}[1, 0, 0]"
    for i, t in enumerate(temps):
        body.append(f"        {t} = {prev} * {i + 1}.0 + {fields[i % nf]}[0, -1, 0]")
        prev = t
    total = " + ".join([f"{t} * {i + 2}.0" for i, t in enumerate(temps)]
                       + [f"{s} * {i + 3}.0" for i, s in enumerate(scalars)]
                       + [f"{f}[-1, 0, 0]" for f in fields[:-1]])
    body.append(f"        {fields[-1]} = {total} + {temps[0]}[0, 1, 0]")
    body += ["    with computation(FORWARD), interval(1, None):",
             f"        {fields[-1]} = {fields[-1]} + {fields[-1]}[0, 0, -1] * 0.5", ""]
    return "\n".join(body)


_COMPUTATION_HEADER = ("import numpy as np\n"
                       "from stencilkit import Field, computation, interval, PARALLEL, FORWARD\n\n")


def run_computations(backend: str, directory: Path, names: list[str]) -> list[str]:
    import stencilkit as sk

    names = [n for n in names if n not in GTSCRIPT | CALL_KEYWORDS]
    groups = [split(g) for g in chunks(names, 64) if len(g) >= 4] + [DOMAIN_AND_ORIGINS]
    text = _COMPUTATION_HEADER + "\n".join(computation_text(f"comp_{i}", *g)
                                            for i, g in enumerate(groups))
    mod = _load(directory, "hostile_computations", text)
    errors = []
    rng = np.random.default_rng(1)
    shape = (7, 6, 5)
    for c_i, (fields, scalars, temps) in enumerate(groups):
        fname = f"comp_{c_i}"
        group = fields + scalars + temps
        safe = {n: f"p{i}" for i, n in enumerate(group)}
        ref_mod = _load(directory, f"safe_{fname}", _COMPUTATION_HEADER + computation_text(
            "ref", *([safe[n] for n in part] for part in (fields, scalars, temps))))
        values = {f: rng.random(shape) for f in fields}
        scal = {s: 1.0 / (i + 3) for i, s in enumerate(scalars)}
        want = {safe[f]: v.copy() for f, v in values.items()}
        kw = {"origin": (1, 1, 0), "domain": (5, 4, 5)}
        sk.stencil(ref_mod.ref, backend="numpy")(**want, **{safe[s]: v for s, v in scal.items()},
                                                 **kw)
        got = {f: v.copy() for f, v in values.items()}
        try:
            sk.stencil(getattr(mod, fname), backend=backend)(**got, **scal, **kw)
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            errors.append(f"{fname} ({', '.join(group)}): {type(exc).__name__}: "
                          f"{str(exc)[:2000]}")
            continue
        for f in fields:
            if not np.array_equal(got[f], want[safe[f]]):
                errors.append(f"{fname}: field {f} differs")
    return errors


# ------------------------------------------------------------------ ParLoops


def parloop_kernels(names: list[str]) -> tuple[str, list[tuple[str, list[str], list[str]]]]:
    lines = ["import numpy as np", ""]
    cases = []
    for c_i, group in enumerate(chunks(names, 80)):
        if len(group) < 4:
            continue
        half = len(group) // 2
        params, locals_ = group[:half], group[half:]
        body = [f"    {locals_[0]} = {params[0]}[0] * 1.0"]
        for i, n in enumerate(locals_[1:]):
            body.append(f"    {n} = {locals_[i]} * 0.5 + {params[i % (half - 1)]}[0] * {i + 2}.0")
        body.append(f"    {params[-1]}[0] = {locals_[-1]}")
        lines += [f"def loop_{c_i}({', '.join(params)}):", *body, ""]
        cases.append((f"loop_{c_i}", params, locals_))
    return "\n".join(lines), cases


def run_parloops(backend: str, directory: Path, names: list[str]) -> list[str]:
    import stencilkit as sk

    text, cases = parloop_kernels(names)
    mod = _load(directory, "hostile_parloops", text)
    errors = []
    rng = np.random.default_rng(2)
    n = 50
    cells = sk.Set(n)
    for fname, params, locals_ in cases:
        data = [rng.random(n) for _ in params[:-1]]
        dats = [sk.Dat(cells, data=d.copy()) for d in data]
        result = sk.Dat(cells)
        func = getattr(mod, fname).__wrapped__ if hasattr(getattr(mod, fname), "__wrapped__") \
            else getattr(mod, fname)
        want = np.empty(n)
        for e in range(n):  # the Python loop: the kernel itself, on one element's values
            views = [d[e:e + 1].copy() for d in data] + [np.zeros(1)]
            func(*views)
            want[e] = views[-1][0]
        try:
            sk.par_loop(sk.kernel(func), cells, *[d(sk.READ) for d in dats],
                        result(sk.WRITE), backend=backend)
            got = result.data
        except Exception as exc:  # noqa: BLE001 - reported, not raised
            errors.append(f"{fname} ({', '.join(params + locals_)}): {type(exc).__name__}: "
                          f"{str(exc)[:2000]}")
            continue
        if not np.array_equal(got, want):
            errors.append(f"{fname} ({', '.join(params + locals_)}): got {got} want {want}")
    return errors


def generated_identifiers() -> str:
    """The generated code of sample kernels of every kind on every backend: their names
    join the hostile list, so a new internal name is tested as soon as a printer uses it."""
    import stencilkit as sk

    parts = []
    for backend in ("c", "numpy", "cuda"):  # "cuda" generates without a device
        st = sk.stencil(_sample_point, backend=backend, cval=1.5, neighborhood=((-1, 1),),
                        standard_indexing=("w",))
        parts.append(st.generate(np.arange(6.0), np.arange(6, dtype=np.int64), 2,
                                 backend=backend))
        parts.append(sk.stencil(_sample_computation, backend=backend).generate(backend=backend))
        cells = sk.Set(3)
        loop = sk.ParLoop(sk.kernel(_sample_kernel), cells, sk.Dat(cells)(sk.RW),
                          sk.Global(1, 0.0)(sk.INC))
        parts.append(loop.generate(backend=backend))
    return "\n".join(parts)


def _sample_point(a, w, n):
    s = 0.0
    for t in range(-1, 2):
        s += a[t] * w[n % 3]
    return s // 2 + abs(s) ** 2 + min(s, 1.0) + (s % 3)


def _sample_computation(u: Field[np.float64], v: Field[np.float64], c: float):
    with computation(PARALLEL), interval(...):
        t = u[1, 0, 0] - u[-1, 0, 0]
        v = t[0, 1, 0] + c
    with computation(FORWARD), interval(1, None):
        v = v + v[0, 0, -1] // 2.0
    with computation(BACKWARD), interval(0, -1):
        w = v[0, 0, 1] % 3.0
        v = v - w


def _sample_kernel(x, g):
    for i in range(2):
        x[0] = x[0] * 2.0 + i
    g[0] += x[0] // 3.0


RUNNERS = {"point": run_points, "computation": run_computations, "parloop": run_parloops}


def main(kind: str, backends: str, directory: str) -> None:
    """Run ``kind`` on each of the comma-separated ``backends``."""
    names = hostile_names(generated_identifiers())
    failed = False
    for backend in backends.split(","):
        errors = RUNNERS[kind](backend, Path(directory) / backend, names)
        print(f"{kind} on {backend}: {len(names)} names, {len(errors)} failures")
        for e in errors:
            print(e)
        failed = failed or bool(errors)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main(*sys.argv[1:])
