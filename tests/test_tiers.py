"""The fast tier (tests/tiers.py) keeps every module and backend, fewer cases; the fast
tier and ``--rest`` together run everything."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from . import tiers


class FakeItem:
    def __init__(self, nodeid: str, backend: str | None = None, full: bool = False,
                 hypothesis: bool = False) -> None:
        self.nodeid = nodeid
        if backend is not None:
            self.callspec = SimpleNamespace(params={"backend": backend})
        self._full = full
        self.obj = SimpleNamespace(is_hypothesis_test=hypothesis)

    def get_closest_marker(self, name):
        return object() if name == "full" and self._full else None


BACKENDS = ["numpy", "c", "numba", "opencl", "cuda"]


def suite() -> list[FakeItem]:
    items = []
    for module in ("a", "b"):
        for t in range(12):
            items += [FakeItem(f"tests/test_{module}.py::test_{t}[{b}]", b) for b in BACKENDS]
    # a large family: 5 modes x 4 dims x 5 backends
    items += [FakeItem(f"tests/test_c.py::test_big[{b}-{m}-{n}]", b)
              for b in BACKENDS for m in "vwxyz" for n in range(4)]
    items += [FakeItem("tests/test_c.py::test_plain"),
              FakeItem("tests/test_c.py::test_slow", full=True),
              FakeItem("tests/test_c.py::test_property", hypothesis=True)]
    return items


def test_every_module_and_backend_runs_in_the_fast_tier():
    items = suite()
    fast = tiers.fast_selection(items)
    chosen = [it for it in items if id(it) in fast]
    groups = {(it.nodeid.split("::")[0], tiers._backend(it)) for it in items
              if not it._full and "test_big" not in it.nodeid}
    assert groups <= {(it.nodeid.split("::")[0], tiers._backend(it)) for it in chosen}
    for it in items:  # numpy and c in full, outside the large family
        if tiers._backend(it) in ("numpy", "c") and "test_big" not in it.nodeid:
            assert id(it) in fast
    assert len(chosen) < len(items) * 0.6
    assert not any(it._full for it in chosen)


def test_a_large_family_is_capped_with_every_backend():
    items = suite()
    fast = tiers.fast_selection(items)
    big = [it for it in items if "test_big" in it.nodeid and id(it) in fast]
    assert 0 < len(big) <= tiers.FAMILY_CAP
    assert {tiers._backend(it) for it in big} == set(BACKENDS)


@pytest.mark.parametrize("option", ["fast", "rest"])
def test_the_fast_tier_and_the_rest_run_everything(option):
    items = suite()
    seen: list = []
    config = SimpleNamespace(
        getoption=lambda name: option == "rest" and name == "--rest",
        hook=SimpleNamespace(pytest_deselected=lambda items: seen.extend(items)))
    chosen = list(items)
    tiers.select(config, chosen)
    assert len(chosen) + len(seen) == len(items)
    if option == "rest":
        assert any(it.obj.is_hypothesis_test for it in chosen)  # again, with full counts
        assert any(it._full for it in chosen)


def test_the_selection_is_the_same_in_every_worker():
    """xdist workers collect separately and must choose the same items."""
    one, two = suite(), suite()
    a = sorted(it.nodeid for it in one if id(it) in tiers.fast_selection(one))
    b = sorted(it.nodeid for it in two if id(it) in tiers.fast_selection(two))
    assert a == b


@pytest.mark.parametrize("option", ["fast", "rest"])
def test_long_tests_are_collected_first_and_the_rest_keeps_its_order(option):
    """Property-based tests and ``LONG_FIRST`` come first (pytest-xdist deals the first
    items out first), each part in collection order."""
    items = suite() + [FakeItem(tiers.LONG_FIRST[0] + "_x[c]", "c")]
    config = SimpleNamespace(
        getoption=lambda name: option == "rest" and name == "--rest",
        hook=SimpleNamespace(pytest_deselected=lambda items: None))
    chosen = list(items)
    tiers.select(config, chosen)
    long = [it for it in chosen if it.obj.is_hypothesis_test
            or it.nodeid.startswith(tiers.LONG_FIRST)]
    assert long and chosen[:len(long)] == long
    assert long == sorted(long, key=items.index)
    rest = chosen[len(long):]
    assert rest == sorted(rest, key=items.index)
    if option == "fast":  # a backend that runs in full: this long test is in the fast tier
        assert long[-1].nodeid.startswith(tiers.LONG_FIRST)
