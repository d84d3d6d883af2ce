"""The two tiers of the test suite (issue 25): the README's command runs a fast,
representative part; ``.ci/run`` adds the rest (``--rest``), or ``--full`` runs everything.

The fast tier runs every test module and every backend, with fewer cases:

- backend-parametrized tests run in full on "numpy" and "c"; on the other backends
  (each case compiles a program with Numba, PoCL or the CUDA emulator's compiler) one case
  in ``BACKEND_SAMPLE`` of each module, chosen by a stable hash of the test's id, and at
  least one per module;
- a test function with more than ``FAMILY_CAP`` cases (parametrizations over modes, dtypes,
  corpus kernels...) runs ``FAMILY_CAP`` of them, chosen the same way;
- property-based tests draw at most ``FAST_EXAMPLES`` examples each (the modules' own
  counts, up to 150, run in the full tier);
- the tests named in ``FULL_ONLY`` run in the full tier only.

Selection works on test ids, so tests added later fall into the tiers by the same rules.

Beside the two tiers, in both: the render-only *golden* tier (``tests/test_golden_sources.py``)
compares the generated sources of a small corpus (``tests/golden/corpus.py``) on every
backend with ``tests/golden/<backend>/``, without a GPU; ``--update-golden`` rewrites them.
Every tier verifies the kernel IR of every kernel it builds (``STENCILKIT_VERIFY=1``, set by
``conftest.py``: ``stencilkit/ir/verify.py``).
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict

import pytest

#: Backends whose cases run in full in the fast tier: the reference and the default one
FULL_BACKENDS = frozenset({"numpy", "c"})
BACKEND_SAMPLE = 8
FAMILY_CAP = 12
FAST_EXAMPLES = 5
#: ``file::function`` prefixes that run in the full tier only
FULL_ONLY: tuple[str, ...] = (
    # 35 s of CPU on "c" alone (chains of 1000 terms); shorter chains run in other tests
    "tests/test_hostile_input.py::test_long_and_or_and_comparison_chains",
    # Numba's computations with ~500 hostile names: the slowest backend and kind
    "tests/test_names.py::test_hostile_names_on_numba_computations",
)
#: ``file::function`` prefixes that take 40 s or more in the rest tier (``--durations`` on
#: the 2-core machine): started first, with the property-based tests, so that under
#: ``pytest -n 2`` no worker is left running one of them alone at the end (the rest tier
#: ended with 16 minutes of such a tail, 2026-11-27)
LONG_FIRST: tuple[str, ...] = (
    "tests/test_names.py::test_hostile_names_on",
    "tests/test_hostile_input.py::test_long_and_or_and_comparison_chains",
    "tests/test_dask.py::test_dask_equals_numpy",
)
#: What the modules' own example counts read (they run before collection)
FAST_ENV = {"STENCILKIT_HYPOTHESIS_EXAMPLES": "6",
            "STENCILKIT_HYPOTHESIS_EXAMPLES_CLUSTER": "2",
            "STENCILKIT_HYPOTHESIS_EXAMPLES_DASK": "4",
            "STENCILKIT_FUZZ_PARLOOP_EXAMPLES": "10"}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("stencilkit tiers")
    group.addoption("--full", action="store_true",
                    help="run every test with every case (also STENCILKIT_FULL_TESTS=1)")
    group.addoption("--rest", action="store_true",
                    help="run what the default (fast) run leaves out, and the property-based "
                         "tests with their full example counts: the README command then "
                         "this run make the full matrix (.ci/run)")


def tier(config: pytest.Config) -> str:
    if config.getoption("--full") or os.environ.get("STENCILKIT_FULL_TESTS") == "1":
        return "full"
    return "rest" if config.getoption("--rest") else "fast"


def configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "full: runs in the full tier only (--full, --rest)")
    from hypothesis import settings

    settings.register_profile("fast", max_examples=FAST_EXAMPLES)
    settings.register_profile("full", max_examples=100)
    if tier(config) == "fast":
        settings.load_profile("fast")
        for k, v in FAST_ENV.items():
            os.environ.setdefault(k, v)
    else:
        settings.load_profile("full")


def _stable(text: str) -> int:
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:4], "little")


def _backend(item: pytest.Item) -> str | None:
    spec = getattr(item, "callspec", None)
    value = spec.params.get("backend") if spec is not None else None
    return value if isinstance(value, str) else None


def _function(item: pytest.Item) -> str:
    return item.nodeid.split("[", 1)[0]


def _without_backend(item: pytest.Item) -> str:
    b = _backend(item)
    return item.nodeid.replace(f"[{b}-", "[").replace(f"-{b}]", "]").replace(f"-{b}-", "-") \
        .replace(f"[{b}]", "") if b else item.nodeid


def fast_selection(items: list[pytest.Item]) -> set[int]:
    """The ids (``id(item)``) of the fast tier's items."""
    keep: list[pytest.Item] = []
    first_of_group: dict[tuple[str, str], pytest.Item] = {}
    kept_groups: set[tuple[str, str]] = set()
    for item in items:
        if item.get_closest_marker("full") or item.nodeid.startswith(FULL_ONLY):
            continue
        b = _backend(item)
        if b is None or b in FULL_BACKENDS:
            keep.append(item)
            continue
        group = (item.nodeid.split("::", 1)[0], b)
        first_of_group.setdefault(group, item)
        if _stable(_without_backend(item)) % BACKEND_SAMPLE == 0:
            keep.append(item)
            kept_groups.add(group)
    keep += [it for g, it in first_of_group.items() if g not in kept_groups]
    families: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in keep:
        families[_function(item)].append(item)
    out: set[int] = set()
    for members in families.values():
        if len(members) > FAMILY_CAP:
            # the cap's share of each backend, the cases of a backend by their hash
            by_backend: dict[str | None, list[pytest.Item]] = defaultdict(list)
            for m in members:
                by_backend[_backend(m)].append(m)
            share = max(1, FAMILY_CAP // len(by_backend))
            members = [m for group in by_backend.values()
                       for m in sorted(group, key=lambda m: _stable(m.nodeid))[:share]]
        out.update(id(m) for m in members)
    return out


def _cap_examples(item: pytest.Item) -> None:
    """At most FAST_EXAMPLES examples for a property-based test (its settings otherwise)."""
    fn = getattr(item, "obj", None)
    current = getattr(fn, "_hypothesis_internal_use_settings", None)
    if current is None or current.max_examples <= FAST_EXAMPLES:
        return
    from hypothesis import settings

    fn._hypothesis_internal_use_settings = settings(current, max_examples=FAST_EXAMPLES)


def _long(item: pytest.Item) -> bool:
    return item.nodeid.startswith(LONG_FIRST) or \
        getattr(getattr(item, "obj", None), "is_hypothesis_test", False)


def long_first(items: list[pytest.Item]) -> None:
    """``items`` with the long ones (``LONG_FIRST``, property-based tests) first, each part
    in its order: pytest-xdist deals the first items out to its workers first."""
    items[:] = [it for it in items if _long(it)] + [it for it in items if not _long(it)]


def select(config: pytest.Config, items: list[pytest.Item]) -> None:
    which = tier(config)
    if which == "full":
        long_first(items)
        return
    fast = fast_selection(items)
    if which == "fast":
        chosen = [it for it in items if id(it) in fast]
        for it in chosen:
            _cap_examples(it)
    else:  # the rest, and property-based tests again with their own counts
        chosen = [it for it in items if id(it) not in fast
                  or getattr(getattr(it, "obj", None), "is_hypothesis_test", False)]
    kept = {id(it) for it in chosen}
    dropped = [it for it in items if id(it) not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = chosen
    long_first(items)
