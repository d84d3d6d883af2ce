"""The corpus of model-style gtscript code (tests/corpus/), run unchanged on GT4Py and on us.

Every corpus module is loaded twice: as written (``from gt4py.cartesian import gtscript``),
and with ``gt4py.cartesian`` replaced by ``stencilkit`` -- the drop-in promise of contract.md
section 2. Each definition runs on GT4Py's "numpy" backend (the reference) and on each of
our backends, on the same random inputs with an explicit origin and domain, and every field
must come out the same. The rewritten module is imported per test, so a module whose
imports fail today fails its own definitions only.

``XFAIL`` lists what does not work yet, with the missing feature; the marks are strict, so
an entry whose definition starts passing fails the run until it is removed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from .corpus import MODULES, loader

gt = pytest.importorskip("gt4py.cartesian.gtscript",
                         reason="gt4py is not installed (pip install '.[gt4py]')")

# definition -> why it does not match GT4Py; (definition, backend) for one backend only.
# The marks are strict: an entry that starts passing fails the run, to be removed here.
XFAIL: dict[str | tuple[str, str], str] = {
    "wet_bulb_temperature": "GT4Py's numpy backend re-evaluates a while loop's condition as a "
                            "mask before every statement of its body (oir_to_npir.visit_While); "
                            "we evaluate it once per iteration, as its C backends do: 2 of 210 "
                            "points differ by 7e-10",
}


def _collect() -> list[tuple[str, object]]:
    cases = []
    for module in MODULES:
        for case in loader.load(module, "gt4py").CASES:
            cases.append((module, case))
    names = [case.name for _, case in cases]
    assert len(names) == len(set(names)), "corpus definition names must be unique"
    return cases


CASES = _collect()
_modules: dict[tuple[str, str], object] = {}
_references: dict[str, tuple[dict, dict]] = {}


def _module(module: str, flavour: str):
    """The loaded module, once per process; a module that fails to load fails every time."""
    key = (module, flavour)
    if key not in _modules:
        try:
            _modules[key] = loader.load(module, flavour)
        except Exception as exc:  # noqa: BLE001 -- re-raised in each test that needs it
            _modules[key] = exc
    found = _modules[key]
    if isinstance(found, Exception):
        raise found
    return found


def _case(mod, name: str):
    return next(c for c in mod.CASES if c.name == name)


def _reference(module: str, name: str) -> tuple[dict, dict]:
    """(inputs, outputs) of GT4Py's numpy backend, computed once per definition."""
    if name not in _references:
        mod = _module(module, "gt4py")
        case = _case(mod, name)
        stencil = gt.stencil(backend="numpy", definition=getattr(mod, name),
                             externals=case.externals)
        inputs = case.make_args(np.random.default_rng(2024))
        args = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # GT4Py's advice on storage layouts
            stencil(**args, origin=case.origin, domain=case.domain)
        _references[name] = (inputs, args)
    return _references[name]


def build_ours(module: str, name: str, backend: str):
    """Our stencil from the rewritten module, and the case as that module built it."""
    mod = _module(module, "stencilkit")
    case = _case(mod, name)
    return loader.our_stencil(getattr(mod, name), backend, case.externals), case


def run_ours(stencil, case, inputs: dict) -> dict:
    args = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    stencil(**args, origin=case.origin, domain=case.domain)
    return args


def _params():
    out = []
    for module, case in CASES:
        out.append(pytest.param(module, case.name, id=f"{module}.{case.name}"))
    return out


def assert_same_fields(ours: dict, ref: dict, name: str) -> None:
    for arg, expected in ref.items():
        if not isinstance(expected, np.ndarray):
            continue
        scale = float(np.max(np.abs(expected))) if expected.size else 0.0
        np.testing.assert_allclose(ours[arg], expected, rtol=1e-12, atol=1e-12 * scale,
                                   err_msg=f"{name}: field '{arg}' differs from GT4Py's")


@pytest.mark.parametrize("module, name", _params())
def test_corpus_definition(module, name, backend, request):
    reason = XFAIL.get((name, backend), XFAIL.get(name))
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    stencil, case = build_ours(module, name, backend)  # first: what fails here needs no GT4Py
    inputs, expected = _reference(module, name)
    ours = run_ours(stencil, case, inputs)
    assert_same_fields(ours, expected, name)


def test_corpus_is_large_enough():
    assert len(CASES) >= 40


def test_rewrite_keeps_lines():
    for module in MODULES:
        gt_text, our_text = (loader.source(module, f) for f in loader.FLAVOURS)
        assert gt_text.count("\n") == our_text.count("\n")
        assert "gt4py" not in our_text


NESTED = """\
import numpy as np

from gt4py.cartesian import gtscript
from gt4py.cartesian.gtscript import PARALLEL, Field, computation, interval


@gtscript.function
def inner(t):
    return 2.0 * t


@gtscript.function
def outer(t):
    return inner(t) + 1.0


def nested(t: Field[np.float64], x: Field[np.float64], out: Field[np.float64]):
    with computation(PARALLEL), interval(...):
        out = outer(x)
"""


def test_nested_helper_scope(backend):
    """Reduced from the corpus's wet_bulb_temperature: a helper's parameter, handed on to a
    nested helper, must not be captured by a stencil field of the same name."""
    mod = loader.exec_module(NESTED.replace("gt4py.cartesian", "stencilkit"),
                             "<nested-helper>.py", "corpus_nested_helper")
    t, x, out = np.full((2, 2, 2), 100.0), np.ones((2, 2, 2)), np.zeros((2, 2, 2))
    loader.our_stencil(mod.nested, backend)(t, x, out, origin=(0, 0, 0), domain=(2, 2, 2))
    np.testing.assert_array_equal(out, 3.0)
