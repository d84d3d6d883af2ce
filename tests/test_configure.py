"""``sk.configure`` (API.md section 9): a change for good, or for a ``with`` block only;
an unknown option or a bad value is refused before anything changes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import config


def test_a_plain_call_changes_the_configuration_for_good():
    change = sk.configure(backend="numpy", race="atomic")
    assert config.current().backend == "numpy" and config.current().race == "atomic"
    assert change.backend == "numpy"      # the returned object reads as the new configuration
    assert change.config is config.current()


def test_a_with_block_applies_the_change_inside_and_restores_on_exit():
    before = config.current()
    with sk.configure(backend="numpy", cflags="-O1 -g", dump=()) as cfg:
        assert cfg is config.current()
        assert (cfg.backend, cfg.cflags) == ("numpy", ("-O1", "-g"))
    assert config.current() is before


def test_a_with_block_restores_also_when_it_raises():
    before = config.current()
    with pytest.raises(KeyError, match="inside"):  # the block's own exception goes on
        with sk.configure(race="color", openmp=False):
            assert config.current().race == "color"
            raise KeyError("inside")
    assert config.current() is before


def test_nested_blocks_restore_in_order():
    outer_before = config.current()
    with sk.configure(race="atomic"):
        inner_before = config.current()
        with sk.configure(race="color", backend="numpy"):
            assert (config.current().race, config.current().backend) == ("color", "numpy")
        assert config.current() is inner_before
    assert config.current() is outer_before


@pytest.mark.parametrize("changes, words", [
    ({"no_such_option": 1}, "unknown configuration option"),
    ({"backend": "no-such-backend"}, "backend='no-such-backend'"),
    ({"lazy": "yes"}, "lazy='yes'"),
    ({"openmp": 1}, "openmp=1"),
    ({"race": "colour"}, "race='colour'"),
    ({"dump": "ir,bogus"}, "dump='ir,bogus'"),
    ({"cache_dir": None}, "cache_dir=None"),
    ({"cache_dir": 3}, "cache_dir=3"),
    ({"cflags": ["-O2", 3]}, "cflags="),
    ({"opencl_device": 0}, "opencl_device=0"),
    # a valid change next to a bad one: neither is applied
    ({"backend": "numpy", "lazy": "yes"}, "lazy='yes'"),
    ({"race": "atomic", "no_such_option": 1}, "unknown configuration option"),
])
def test_bad_changes_raise_and_change_nothing(changes, words):
    before = config.current()
    with pytest.raises(sk.StencilError, match=words.replace("(", r"\(")):
        sk.configure(**changes)
    assert config.current() is before
    with pytest.raises(sk.StencilError):  # the same refusal as a with statement
        with sk.configure(**changes):
            pytest.fail("the block ran")
    assert config.current() is before


def test_every_option_takes_its_own_value_back():
    """Each field, today's and one added later, is checked by its annotation: the value in
    force is always accepted (a new field of a plain type needs no code in config.py)."""
    now = config.current()
    with sk.configure(**{f.name: getattr(now, f.name) for f in dataclasses.fields(now)}) as cfg:
        assert cfg == now


def test_values_are_normalized():
    with sk.configure(dump="IR, kernel", cache_dir="~/x", opencl_options="-a -b",
                      backend="gt:cpu_ifirst") as cfg:   # a GT4Py name, section 9
        assert cfg.dump == frozenset({"ir", "kernel"})
        assert cfg.cache_dir.is_absolute() and cfg.cache_dir.name == "x"
        assert cfg.opencl_options == ("-a", "-b")
        assert cfg.backend == "c"
    with sk.configure(dump="all") as cfg:
        assert cfg.dump == frozenset({"ir", "typed", "kernel", "plan", "code", "tune", "abi"})


def test_leaving_a_lazy_block_runs_what_it_queued():
    cells = sk.Set(4)
    d = sk.Dat(cells, data=np.zeros(4))

    @sk.kernel
    def plus_one(a):
        a[0] += 1.0

    with sk.configure(lazy=True):
        sk.par_loop(plus_one, cells, d(sk.RW), backend="numpy")
        assert sk.runtime.lazy.pending() == 1
    assert sk.runtime.lazy.pending() == 0
    assert not config.current().lazy
    np.testing.assert_array_equal(d.data, np.ones(4))
