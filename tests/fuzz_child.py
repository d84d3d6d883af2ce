"""Child process of tests/test_fuzz_bad_input.py: runs a batch of fuzz cases and classifies
each outcome. Run as ``python tests/fuzz_child.py BACKEND < cases.json``; prints one JSON
object per case: {"outcome": "ok" | "stencil_error" | "wrong" | "raw" | "unnamed", ...}.

A case is plain data (so that hypothesis can draw it in the parent and a crash here fails
only this batch): which target to call and how to build each argument. The expected result
is computed here from clean copies of the same inputs (native byte order, aligned,
contiguous) on the "numpy" backend, or from a direct NumPy formula. On "cuda" a good call
follows every case ("dead" when it fails: the case killed the CUDA context); with
``STENCILKIT_CUDA_EMULATOR=1`` "cuda" runs on the emulator, as in the parent.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval

BACKEND = "numpy"


# ---------------------------------------------------------------- targets


def fz_blur(a):
    return 0.5 * (a[-1, 0] + a[1, 0]) + a[0, 1]


def fz_plus(a, s):
    return a[0, 0] + s


def fz_gather(a, t):
    return a[0, 0] + t[int(a[0, 0])]


def fz_reloff(a, b):
    return a[int(b[0, 0]), 0]


def fz_loop(a, s):
    acc = a[0, 0]
    for _i in range(4, -4, s):
        acc += 1.0
    return acc


def fz_comp(a: Field[float], b: Field[float], s: float, n: int):
    with computation(PARALLEL), interval(...):
        tmp = a[1, 0, 0] * s
        b = tmp + a[0, -1, 0] + n  # noqa: F841 (a field write)


# ---------------------------------------------------------------- building arguments


class Hostile(Exception):
    """What an argument's own code raises."""


class _ArrayRaises:
    def __array__(self, *args, **kwargs):
        raise Hostile("__array__")


class _GetattrRaises:
    def __getattr__(self, name):
        raise Hostile(name)


class _DtypeRaises(np.ndarray):
    @property
    def dtype(self):
        raise Hostile("dtype")


class _FunctionRaises(np.ndarray):
    def __array_function__(self, *args, **kwargs):
        raise Hostile("__array_function__")


def hostile(which: str, shape: list[int]) -> object:
    """An argument whose methods raise (issue 25): the error must name it, not be Hostile."""
    base = np.ones(shape)
    return {"array": _ArrayRaises, "getattr": _GetattrRaises,
            "dtype": lambda: base.view(_DtypeRaises),
            "function": lambda: base.view(_FunctionRaises)}[which]()


def make_array(spec: dict) -> object:
    """An array (or a non-array) from its description: values, dtype, shape, layout."""
    kind = spec.get("kind", "array")
    if kind == "hostile":
        return hostile(spec["which"], spec["shape"])
    if kind == "value":
        return decode(spec["value"])
    if kind == "list":
        return spec["value"]
    rng = np.random.default_rng(spec.get("seed", 0))
    shape = tuple(spec["shape"])
    dtype = np.dtype(spec.get("dtype", "float64"))
    fill = spec.get("fill")
    if fill is not None:
        base = np.full(shape, decode(fill), dtype=np.float64)
    else:
        base = rng.random(shape) * 4 - 2
    if "values" in spec:
        vals = np.array([decode(v) for v in spec["values"]], dtype=np.float64)
        base = vals[rng.integers(0, len(vals), shape)] if base.size else base
    with np.errstate(all="ignore"):
        if dtype.kind in "US":
            clean = base.astype(dtype)
        elif dtype.kind == "O":
            clean = base.astype(object)
        elif dtype.kind == "b":
            clean = base > 0
        elif dtype.kind in "iu":
            clean = np.nan_to_num(base).astype(np.int64).astype(dtype)
        else:
            clean = base.astype(dtype.newbyteorder("="))
    return layout(np.ascontiguousarray(clean).astype(dtype), spec.get("layout", "C"),
                  spec.get("writeable", True))


def layout(a: np.ndarray, how: str, writeable: bool) -> np.ndarray:
    """The same values in another memory layout."""
    if how == "F":
        a = np.asfortranarray(a)
    elif how == "reversed" and a.ndim:
        a = a[::-1].copy()[::-1]
    elif how == "strided" and a.ndim:
        big = np.zeros((a.shape[0] * 2,) + a.shape[1:], a.dtype)
        big[::2] = a
        a = big[::2]
    elif how == "broadcast" and a.ndim and a.size:
        a = np.broadcast_to(a[:1], a.shape)
    elif how in ("misaligned", "odd_strides") and a.dtype.kind not in "OUS":
        item = a.itemsize
        if how == "misaligned":
            buf = np.frombuffer(bytearray(a.nbytes + 1), np.uint8)[1:]
            out = buf.view(a.dtype).reshape(a.shape) if a.size else np.empty(a.shape, a.dtype)
        else:
            strides, step = [], item + (3 if item > 1 else 1)
            for n in reversed(a.shape):
                strides.insert(0, step)
                step *= max(n, 1)
            out = np.ndarray(a.shape, a.dtype, bytearray(max(step, 1)), 0, tuple(strides))
        out[...] = a
        a = out
    if not writeable and isinstance(a, np.ndarray) and a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def clean(x: object) -> object:
    """A plain copy of an array argument (native order, aligned, contiguous, writable)."""
    if isinstance(x, np.ndarray) and type(x) is not np.ndarray:  # a hostile subclass
        x = np.ndarray.view(x, np.ndarray)
    if isinstance(x, np.ndarray) and x.dtype.kind not in "OUS":
        return np.array(x, dtype=x.dtype.newbyteorder("="), order="C")
    return x


def decode(v: object) -> object:
    """JSON has no NaN, inf, complex or big-int tags of its own: {"t": ..., "v": ...}."""
    if isinstance(v, list):
        return [decode(x) for x in v]
    if isinstance(v, dict) and "t" in v:
        t, val = v["t"], v.get("v")
        if t == "float":
            return float(val)
        if t == "complex":
            return complex(*val)
        if t == "int":
            return int(val)
        if t == "np":
            return np.dtype(val[0]).type(decode(val[1]))
        if t == "none":
            return None
        if t == "str":
            return str(val)
        if t == "bool":
            return bool(val)
        if t == "ndarray0":
            return np.array(decode(val))
    return v


# ---------------------------------------------------------------- running


def outcome(call, expected, name: str) -> dict:
    """Classify what ``call()`` does against ``expected()`` (a value or an exception)."""
    try:
        got = call()
    except sk.StencilError as exc:
        named = name in str(exc)
        return {"outcome": "stencil_error" if named else "unnamed", "error": type(exc).__name__,
                "message": str(exc)[:300]}
    except Exception as exc:  # noqa: BLE001 - what the fuzz test exists to catch
        return {"outcome": "raw", "error": type(exc).__name__, "message": str(exc)[:300]}
    try:
        want = expected()
    except Exception as exc:  # noqa: BLE001 - the clean reference refused: must we?
        return {"outcome": "wrong", "message": f"ran, but the clean inputs raise {exc!r}"[:300]}
    if want is None:  # nothing to compare with (the reference itself is not defined)
        return {"outcome": "ok"}
    got_arr, want_arr = np.asarray(got), np.asarray(want)
    if got_arr.shape != want_arr.shape or not np.array_equal(got_arr, want_arr, equal_nan=True):
        return {"outcome": "wrong", "message": f"got {got_arr!r}, want {want_arr!r}"[:600]}
    return {"outcome": "ok"}


def run_point(case: dict) -> dict:
    target = globals()[case["target"]]
    options = {k: decode(v) for k, v in case.get("options", {}).items()}
    if isinstance(options.get("neighborhood"), list):
        options["neighborhood"] = tuple(tuple(p) if isinstance(p, list) else p
                                        for p in options["neighborhood"])
    name = target.__name__
    try:
        st = sk.stencil(target, backend=BACKEND, **options)
    except sk.StencilError as exc:
        return {"outcome": "stencil_error" if name in str(exc) else "unnamed",
                "error": type(exc).__name__, "message": str(exc)[:300]}
    except Exception as exc:  # noqa: BLE001
        return {"outcome": "raw", "error": type(exc).__name__, "message": str(exc)[:300]}
    args = [make_array(s) for s in case["args"]]
    out_spec = case.get("out")
    kwargs = {k: decode(v) for k, v in case.get("kwargs", {}).items()}
    out = None
    if out_spec == "alias":
        out = args[0]
    elif out_spec is not None:
        out = make_array(out_spec)
    keep_border = out is not None and "cval" not in options

    ref_args = [clean(a) for a in args]  # before the call: out= may alias an input
    ref_out = None if not isinstance(out, np.ndarray) else np.array(
        out, dtype=out.dtype.newbyteorder("=") if out.dtype.kind not in "OUS" else out.dtype)

    def call():
        res = st(*args, out=out, **kwargs) if out is not None else st(*args, **kwargs)
        return res[1:-1, 1:-1] if keep_border else res

    def expected():
        if any(isinstance(a, np.ndarray) and a.dtype.kind in "OUS" for a in ref_args):
            raise TypeError("not a numeric array")
        ref = sk.stencil(target, backend="numpy", **options)
        if out is not None:
            o = ref_out if ref_out is not None else out
            res = ref(*ref_args, out=o, **kwargs)
            return res[1:-1, 1:-1] if keep_border else res
        return ref(*ref_args, **kwargs)

    return outcome(call, expected, name)


def run_computation(case: dict) -> dict:
    st = sk.stencil(fz_comp, backend=BACKEND)
    args = [make_array(s) for s in case["args"]]
    kwargs = {k: decode(v) for k, v in case.get("kwargs", {}).items()}
    if "origin" in kwargs and isinstance(kwargs["origin"], list):
        kwargs["origin"] = tuple(kwargs["origin"])
    written = args[1]

    def call():
        st(*args, **kwargs)
        return written

    def expected():
        ref_args = [clean(a) for a in args]
        if isinstance(args[1], np.ndarray):  # b starts as what the call saw
            ref_args[1] = np.array(args[1], copy=True)
            ref_args[1][...] = 0.0
        sk.stencil(fz_comp, backend="numpy")(*ref_args, **kwargs)
        return ref_args[1]

    if isinstance(written, np.ndarray) and written.flags.writeable:
        written[...] = 0.0
    return outcome(call, expected, "fz_comp")


def after_good_call(result: dict) -> dict:
    """On "cuda": a good call after the case, in this process (``cuda_aftercare``); the
    outcome is "dead" when it fails (the case left the CUDA context unusable)."""
    from cuda_aftercare import good_call

    try:
        good_call()
    except Exception as exc:  # noqa: BLE001 - what this check exists to catch
        return {**result, "outcome": "dead",
                "message": f"a good call after this case failed: {exc!r}"[:300]}
    return result


def main() -> None:
    global BACKEND
    BACKEND = sys.argv[1]
    if BACKEND == "cuda" and os.environ.get("STENCILKIT_CUDA_EMULATOR") == "1":
        from cuda_emulator import install  # "cuda" on the CPU, as conftest.py installs it

        install()
    cases = json.load(sys.stdin)
    for case in cases:
        runner = run_computation if case["target"] == "fz_comp" else run_point
        result = runner(case)
        if BACKEND == "cuda":
            result = after_good_call(result)
        result["case"] = case.get("label", "")
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
