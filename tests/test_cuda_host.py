"""The host side of a "cuda" call (issue 27): a plan bound once per argument signature and
replayed, no allocation per call, ParLoop maps and block lists on the device once, calls
inside a CUDA graph capture that neither wait nor allocate nor copy, and what
``race="auto"`` runs. On the CPU emulator,
with its CuPy counting what it is asked to do; the graph replay itself on a real device
only."""

from __future__ import annotations

import collections
import shutil
import types

import numpy as np
import pytest

import stencilkit as sk
from stencilkit import PARALLEL, Field, computation, interval, registry
from stencilkit.ir.abi import RaceMode
from stencilkit.registry import cuda as cuda_registry
from stencilkit.runtime import cuda as rt
from stencilkit.runtime import cuda_bound
from stencilkit.runtime.cuda_parloop import COLOUR_BLOCK
from stencilkit.runtime.parloop_blocks import block_layout

from . import computations as C
from . import kernels as K

needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


class FakeStream:
    """CuPy's current stream as the runtime sees it: capturing or not; its waits counted."""

    def __init__(self) -> None:
        self.capturing = False
        self.waits = 0

    def is_capturing(self) -> bool:
        return self.capturing

    def synchronize(self) -> None:
        self.waits += 1


@pytest.fixture
def counted(monkeypatch):
    """The emulator's CuPy with its allocations, host<->device copies and event calls
    ("record", "query", "synchronize") counted, and a current stream."""
    from . import cuda_emulator

    cuda_emulator.install(monkeypatch)
    fake = rt._cupy()
    counts: collections.Counter = collections.Counter()
    def counting(name, original):
        def call(*a, **kw):
            counts[name] += 1
            return original(*a, **kw)
        return call

    for name in ("asarray", "asnumpy", "zeros", "empty"):
        monkeypatch.setattr(fake, name, counting(name, getattr(fake, name)))
    monkeypatch.setattr(cuda_emulator, "EVENT_CALLS", counts)
    stream = FakeStream()
    cuda = {**vars(fake.cuda), "get_current_stream": lambda: stream,
            "alloc_pinned_memory": counting("alloc_pinned_memory",
                                            fake.cuda.alloc_pinned_memory)}
    monkeypatch.setattr(fake, "cuda", types.SimpleNamespace(**cuda))
    yield types.SimpleNamespace(counts=counts, stream=stream)
    rt._PENDING.clear()  # nothing of this test's leaks into the next
    rt._CAPTURED.clear()


def _device(a):
    from .cuda_emulator import DeviceArray

    return np.array(a, copy=True).view(DeviceArray)


def _refuse(*a, **kw):
    raise AssertionError("a bound call evaluated the plan again")


def _entry(st):
    (call,) = [c for c in st._specs.values()]
    return call.entry


@needs_gxx
def test_a_second_call_binds_nothing_and_allocates_nothing(counted, monkeypatch):
    rng = np.random.default_rng(1)
    host = rng.random((6, 7, 8))
    a, out = _device(host), _device(np.zeros((6, 7, 8)))
    st = sk.stencil(K.lap3d, backend="cuda")
    st(a, out=out)
    for module, name in ((cuda_bound, "host_launches"), (rt, "bind"), (rt, "choose"),
                         (rt, "launch_config")):
        monkeypatch.setattr(module, name, _refuse)
    counted.counts.clear()
    a[...] = _device(2.0 * host)
    assert st(a, out=out) is out
    inner = (slice(1, -1),) * 3
    np.testing.assert_array_equal(np.asarray(out)[inner],
                                  sk.stencil(K.lap3d, backend="numpy")(2.0 * host)[inner])
    # the earlier call's status word read (the next call of a stencil raises its error):
    # its event queried (found complete: no wait) and the pinned word loaded, no copy;
    # this call's event recorded; nothing allocated, nothing copied
    assert counted.counts == {"query": 1, "record": 1}


@needs_gxx
def test_each_signature_runs_its_own_plan(counted):
    """Shapes and strides decide the bound plan: calls alternating between them each get
    the numpy backend's values."""
    rng = np.random.default_rng(5)
    st, ref = sk.stencil(K.lap3d, backend="cuda"), sk.stencil(K.lap3d, backend="numpy")
    hosts = [rng.random((6, 7, 8)), rng.random((9, 5, 4)), rng.random((8, 7, 6))]
    hosts.append(np.asfortranarray(hosts[0]))
    for _ in range(2):
        for host in hosts:
            a = _device(host)
            a = a if host.flags.c_contiguous else _device(host.T).T  # Fortran on the device
            np.testing.assert_array_equal(np.asarray(st(a)), ref(host))
            out = _device(np.zeros(host.shape))
            st(a, out=out)
            inner = (slice(1, -1),) * 3
            np.testing.assert_array_equal(np.asarray(out)[inner], ref(host)[inner])


@needs_gxx
def test_an_input_overlapping_out_is_copied_on_every_call(counted, monkeypatch):
    """The overlap of out= with an input depends on the addresses: checked per call, also
    once the geometry's checks are settled (the input is read as it was before the call)."""
    from . import cuda_emulator

    monkeypatch.setattr(cuda_emulator, "READ_ONLY_LOADS", "live")  # no snapshot to hide it
    rng = np.random.default_rng(6)
    st, ref = sk.stencil(K.lap3d, backend="cuda"), sk.stencil(K.lap3d, backend="numpy")
    inner = (slice(1, -1),) * 3
    for _ in range(3):
        host = rng.random((6, 7, 8))
        a = _device(host)
        st(a, out=a)
        np.testing.assert_array_equal(np.asarray(a)[inner], ref(host)[inner])
        b, out = _device(host), _device(np.zeros(host.shape))
        st(b, out=out)  # the same geometry, apart: nothing copied
        np.testing.assert_array_equal(np.asarray(out)[inner], ref(host)[inner])
    assert st._device.calls  # the later calls took the bound path


@needs_gxx
def test_a_computation_rebinds_for_new_bounds_only(counted, monkeypatch):
    """origin= and domain= are scalars the launch bounds read: part of the signature."""
    rng = np.random.default_rng(2)
    inp, coeff = rng.random((10, 11, 5)), rng.random((10, 11, 5))
    hdiff = sk.stencil(C.hdiff, backend="cuda")
    d_in, d_coeff, d_out = _device(inp), _device(coeff), _device(np.zeros(inp.shape))
    domains = (((2, 2, 0), (5, 6, 4)), ((2, 2, 0), (6, 7, 5)), (None, None))
    for _ in range(2):  # the second round runs on the plans bound by the first
        for origin, domain in domains:
            d_out[...] = -1.0
            out = np.full(inp.shape, -1.0)
            sk.stencil(C.hdiff, backend="numpy")(inp, out, coeff, origin=origin,
                                                 domain=domain)
            hdiff(d_in, d_out, d_coeff, origin=origin, domain=domain)
            np.testing.assert_allclose(np.asarray(d_out), out, rtol=1e-13, atol=0)
        monkeypatch.setattr(cuda_bound, "host_launches", _refuse)
        counted.counts.clear()
    assert not counted.counts["zeros"] and not counted.counts["empty"]


@needs_gxx
def test_an_error_is_raised_once_and_its_word_reused(counted):
    st = sk.stencil(K.dynamic_offset, neighborhood=((-1, 2), (0, 0)), backend="cuda")
    a, out = _device(np.ones((6, 4))), _device(np.zeros((6, 4)))
    st(a, 1, out=out)
    word = _entry(st)._status
    counted.counts.clear()
    st(a, 5, out=out)  # reports later: nothing waits
    with pytest.raises(sk.ArgumentError, match="left the declared neighborhood"):
        st(a, 1, out=out)
    st(a, 1, out=out)  # the error was raised once: its word is 0 again
    sk.synchronize()
    assert _entry(st)._status is word and not counted.counts["zeros"]


@needs_gxx
def test_the_status_word_is_loaded_after_the_entrys_event_only(counted, monkeypatch):
    """An error a kernel stores is raised by the next call of the stencil, which waits on
    the event its previous call recorded (not on the stream) and only when that event has
    not completed, then loads the pinned word (no copy); and by sk.synchronize(). After
    the error a good call runs and reports nothing."""
    from . import cuda_emulator

    monkeypatch.setattr(cuda_emulator, "EVENTS_COMPLETE", False)  # the kernels still run
    st = sk.stencil(K.dynamic_offset, neighborhood=((-1, 2), (0, 0)), backend="cuda")
    ref = sk.stencil(K.dynamic_offset, neighborhood=((-1, 2), (0, 0)), backend="numpy")
    host = np.arange(24.0).reshape(6, 4)
    a, out = _device(host), _device(np.zeros((6, 4)))
    st(a, 1, out=out)
    for report in ("the next call", "sk.synchronize()"):
        st(a, 5, out=out)  # stores STATUS_OFFSET; nothing waits
        counted.counts.clear()
        with pytest.raises(sk.ArgumentError, match="left the declared neighborhood"):
            if report == "the next call":
                st(a, 1, out=out)
            else:
                sk.synchronize()
        if report == "the next call":  # one query (unfinished), one wait on the event
            assert counted.counts == {"query": 1, "synchronize": 1}, counted.counts
            assert not counted.stream.waits
        counted.counts.clear()
        st(a, 1, out=out)  # the word was reset: this call runs
        st(a, 1, out=out)  # and reports nothing at the next
        sk.synchronize()
        np.testing.assert_array_equal(np.asarray(out), ref(host, 1))
        assert counted.counts["record"] == 2 and not counted.counts["asnumpy"]


def _refuse_general_paths(monkeypatch):
    """After the first call of a signature: the general paths (the device adapter's
    stand-ins and checks, the entry's own call) refused, so that a call that runs took the
    bound path."""
    from stencilkit import adapters
    from stencilkit.adapters import device
    from stencilkit.api.multistage import ComputationStencil

    monkeypatch.setattr(adapters, "for_call", _refuse)  # the stencil dispatches first
    monkeypatch.setattr(device, "_point_call", _refuse)
    monkeypatch.setattr(device, "computation_fields", _refuse)
    monkeypatch.setattr(ComputationStencil, "run_bound", _refuse)
    monkeypatch.setattr(rt.CudaEntry, "__call__", _refuse)


@needs_gxx
def test_a_point_call_with_a_bound_signature_only_launches(counted, monkeypatch):
    """The second call of a signature takes the bound path: no stand-in, no check but the
    overlap of out with an input, the entry's launches with the new pointers; 1 event record
    and 1 query, nothing allocated or copied. Without out=, one allocation (the result)."""
    rng = np.random.default_rng(7)
    st, ref = sk.stencil(K.scalar_arg, backend="cuda"), sk.stencil(K.scalar_arg,
                                                                 backend="numpy")
    hosts = [rng.random((5, 6)) for _ in range(3)]
    expected = [ref(host, 0.5 * i) for i, host in enumerate(hosts)]
    out = _device(np.zeros((5, 6)))
    st(_device(hosts[0]), 2.0, out=out)
    st(_device(hosts[0]), 2.0)
    with monkeypatch.context() as m:
        _refuse_general_paths(m)
        for i, host in enumerate(hosts):  # new pointers and scalars, one signature
            counted.counts.clear()
            st(_device(host), 0.5 * i, out=out)
            assert counted.counts == {"query": 1, "record": 1}, counted.counts
            np.testing.assert_array_equal(np.asarray(out), expected[i])
            counted.counts.clear()
            got = st(_device(host), 0.5 * i)
            assert counted.counts == {"empty": 1, "query": 1, "record": 1}, counted.counts
            np.testing.assert_array_equal(np.asarray(got), expected[i])
    assert len(st._device.calls) == 2


@needs_gxx
def test_a_point_call_with_another_signature_rebinds_or_raises_as_before(counted):
    """A changed shape, stride or dtype is another signature: it takes the general path,
    which binds it (the right values) or raises what a stencil never called before raises."""
    rng = np.random.default_rng(8)
    st = sk.stencil(K.lap3d, backend="cuda")
    ref = sk.stencil(K.lap3d, backend="numpy")
    host = rng.random((6, 7, 8))
    st(_device(host), out=_device(np.zeros(host.shape)))
    inner = (slice(1, -1),) * 3
    for other in (rng.random((7, 7, 8)), np.asfortranarray(host),
                  host.astype(np.float32)):
        a = _device(other) if other.flags.c_contiguous else _device(other.T).T
        out = _device(np.zeros(other.shape, other.dtype))
        st(a, out=out)
        np.testing.assert_allclose(np.asarray(out)[inner], ref(other)[inner], rtol=1e-6)
    bad = [((_device(host), _device(np.zeros((6, 7, 9)))), "shape"),
           ((_device(host), _device(np.zeros((6, 7)))), "shape"),
           ((_device(host), host.copy()), "on the GPU and some on the host")]
    for (a, out), match in bad:
        with pytest.raises(sk.ArgumentError, match=match) as bound:
            st(a, out=out)
        with pytest.raises(sk.ArgumentError) as fresh:
            sk.stencil(K.lap3d, backend="cuda")(a, out=out)
        assert str(bound.value).split("called at")[0] == \
            str(fresh.value).split("called at")[0]
    sk.synchronize()


@needs_gxx
def test_a_computation_with_another_layout_is_another_signature(counted):
    """Strides are part of a computation's signature (its bound plan holds them): fields of
    the same shape in another order take the general path and get the numpy values."""
    rng = np.random.default_rng(11)
    hdiff = sk.stencil(C.hdiff, backend="cuda")
    for _ in range(2):
        for order in ("C", "F", "C"):
            inp, coeff = rng.random((9, 10, 5)), rng.random((9, 10, 5))
            expect = np.full(inp.shape, -1.0)
            sk.stencil(C.hdiff, backend="numpy")(inp, expect, coeff)

            def dev(a, order=order):
                return _device(np.asarray(a, order=order))  # the copy keeps the order

            out = dev(np.full(inp.shape, -1.0))
            hdiff(dev(inp), out, dev(coeff))
            np.testing.assert_allclose(np.asarray(out), expect, rtol=1e-13, atol=0)
    assert len(hdiff._device.calls()) == 2
    assert {k[1][0][3] for k in hdiff._device.calls()} == {(400, 40, 8), (8, 72, 720)}


def _shift(f: Field[float], out: Field[float], n: int):
    with computation(PARALLEL), interval(...):
        out = f + n  # noqa: F841 (a gtscript assignment to a field)


@needs_gxx
def test_a_computation_with_a_bound_signature_only_launches(counted, monkeypatch):
    """A computation's bound path gives the general path's values, with new pointers and
    scalars per call (a FORWARD/BACKWARD solve with a scalar, hdiff with temporaries), and
    checks the addresses and the scalars as the general path does."""
    rng = np.random.default_rng(9)
    solve = sk.stencil(C.implicit_diffusion, backend="cuda")
    hdiff = sk.stencil(C.hdiff, backend="cuda")
    q0, inp0, coeff0 = rng.random((4, 5, 6)), rng.random((9, 10, 5)), rng.random((9, 10, 5))
    solve(_device(q0), nu=0.1)
    hdiff(_device(inp0), _device(np.zeros(inp0.shape)), _device(coeff0))
    cases = []
    for nu in (0.2, 0.3, 0.7):
        q, inp, coeff = rng.random((4, 5, 6)), rng.random((9, 10, 5)), rng.random((9, 10, 5))
        expect = np.full(inp.shape, -1.0)
        sk.stencil(C.hdiff, backend="numpy")(inp, expect, coeff)
        cases.append((nu, q, inp, coeff, expect))
    with monkeypatch.context() as m:
        _refuse_general_paths(m)
        for nu, q, inp, coeff, expect in cases:
            d_q = _device(q)
            counted.counts.clear()
            solve(d_q, nu=nu)
            assert counted.counts == {"query": 1, "record": 1}, counted.counts
            np.testing.assert_allclose(np.asarray(d_q), C.ref_implicit(q, nu), rtol=1e-12)
            out = _device(np.full(inp.shape, -1.0))
            hdiff(_device(inp), out, _device(coeff))
            np.testing.assert_allclose(np.asarray(out), expect, rtol=1e-13, atol=0)
    # what depends on the values is checked on the bound path too, with the same messages
    for nu in (1j, "0.1"):
        with pytest.raises(sk.ArgumentError, match="'nu'") as bound:
            solve(_device(q0), nu=nu)
        with pytest.raises(sk.ArgumentError) as fresh:
            sk.stencil(C.implicit_diffusion, backend="cuda")(_device(q0), nu=nu)
        assert str(bound.value).split("called at")[0] == \
            str(fresh.value).split("called at")[0]
    shift = sk.stencil(backend="cuda")(_shift)
    f, out = _device(np.ones((3, 4, 5))), _device(np.zeros((3, 4, 5)))
    shift(f, out, n=2)
    for n in (2**70, -2**64):  # out of the int parameter's range: refused, not wrapped
        with pytest.raises(sk.ArgumentError, match="'n'") as bound:
            shift(f, out, n=n)
        with pytest.raises(sk.ArgumentError) as fresh:
            sk.stencil(backend="cuda")(_shift)(f, out, n=n)
        assert str(bound.value).split("called at")[0] == \
            str(fresh.value).split("called at")[0]
    shift(f, out, n=3)
    sk.synchronize()
    np.testing.assert_array_equal(np.asarray(out), 4.0)
    big = _device(np.zeros((18, 10, 5)))
    with pytest.raises(sk.ArgumentError, match="'out_field' is written and shares memory"):
        hdiff(big[:9], big[4:13], _device(coeff0))  # the bound signature, overlapping
    raw = np.zeros(9 * 10 * 5 * 8 + 1, np.uint8)[1:].view(np.float64).reshape(9, 10, 5)
    with pytest.raises(sk.ArgumentError, match="not aligned"):
        hdiff(_device(inp0), raw.view(type(big)), _device(coeff0))
    sk.synchronize()


@needs_gxx
def test_parloop_maps_and_blocks_are_copied_once(counted):
    rng = np.random.default_rng(3)
    cells, nodes = sk.Set(300), sk.Set(40)
    m = sk.Map(cells, nodes, 3, rng.integers(0, 40, (300, 3)))
    x = rng.random(300)

    @sk.kernel
    def spread(v, acc):
        for i in range(3):
            acc[i, 0] += v[0]

    coloured = sk.ParLoop(spread, cells, sk.Dat(cells)(sk.READ), sk.Dat(nodes)(sk.INC, m),
                          race="color")
    assert len(block_layout(coloured.bind(), COLOUR_BLOCK).colours) > 1
    for race in ("atomic", "color"):
        acc = sk.Dat(nodes, data=_device(np.zeros(40)))
        loop = sk.ParLoop(spread, cells, sk.Dat(cells, data=_device(x))(sk.READ),
                          acc(sk.INC, m), backend="cuda", race=race)
        counted.counts.clear()
        loop.compute()
        assert counted.counts["asarray"] >= 1, race  # the map and the blocks
        counted.counts.clear()
        loop.compute()
        assert not counted.counts["asarray"], race  # on the device already
        # the earlier run's status word, read once, not once per colour, with no copy
        assert counted.counts["query"] == 1 and not counted.counts["asnumpy"], race
        expect = np.zeros(40)
        np.add.at(expect, m.values.reshape(-1), np.repeat(x, 3))
        np.testing.assert_allclose(np.asarray(acc.data), 2 * expect, rtol=1e-13)
    m.values = rng.integers(0, 40, (300, 3))  # new values: copied again
    acc = sk.Dat(nodes, data=_device(np.zeros(40)))
    counted.counts.clear()
    sk.par_loop(spread, cells, sk.Dat(cells, data=_device(x))(sk.READ), acc(sk.INC, m),
                backend="cuda", race="atomic")
    assert counted.counts["asarray"] == 1
    expect = np.zeros(40)
    np.add.at(expect, m.values.reshape(-1), np.repeat(x, 3))
    np.testing.assert_allclose(np.asarray(acc.data), expect, rtol=1e-13)


@needs_gxx
def test_a_parloop_run_on_the_same_device_data_only_launches(counted, monkeypatch):
    """A ParLoop run whose Dats hold the arrays of its previous run takes the bound run: no
    check, no binding, the resident maps and blocks; 1 event record and 1 query; the values
    of the general path. New map values, a Dat whose array changed shape, another race
    mode: the general path again (which raises what it raises)."""
    from stencilkit.api import loop as loop_module

    rng = np.random.default_rng(10)
    cells, nodes = sk.Set(200), sk.Set(30)
    m = sk.Map(cells, nodes, 3, rng.integers(0, 30, (200, 3)))

    @sk.kernel
    def spread(v, acc):
        for i in range(3):
            acc[i, 0] += v[0]

    def expected(x, runs):
        total = np.zeros(30)
        np.add.at(total, m.values.reshape(-1), np.repeat(x, 3))
        return runs * total

    for race in ("atomic", "color"):
        x = rng.random(200)
        acc = sk.Dat(nodes, data=_device(np.zeros(30)))
        v = sk.Dat(cells, data=_device(x))
        loop = sk.ParLoop(spread, cells, v(sk.READ), acc(sk.INC, m), backend="cuda",
                          race=race)
        loop.compute()
        with monkeypatch.context() as patched:
            patched.setattr(loop_module, "check_objects", _refuse)
            patched.setattr(loop_module.ParLoop, "bind", _refuse)
            for _ in range(2):
                counted.counts.clear()
                loop.compute()
                assert counted.counts == {"query": 1, "record": 1}, (race, counted.counts)
        sk.synchronize()
        np.testing.assert_allclose(np.asarray(acc.data), expected(x, 3), rtol=1e-13)
        m.values = rng.integers(0, 30, (200, 3))  # a new version: bound again, the new map
        acc.data[...] = 0.0
        loop.compute()
        np.testing.assert_allclose(np.asarray(acc.data), expected(x, 1), rtol=1e-13)
    acc._data.shape = (3, 10)  # the same array, another shape: checked again
    with pytest.raises(sk.ArgumentError, match="now holds shape"):
        loop.compute()
    sk.synchronize()


@needs_gxx
def test_a_captured_call_waits_allocates_and_copies_nothing(counted):
    """Inside a CUDA graph capture a bound call only launches; its status word is read by
    every later sk.synchronize() (each replay of the graph may write it)."""
    st = sk.stencil(K.dynamic_offset, neighborhood=((-1, 2), (0, 0)), backend="cuda")
    a, out = _device(np.ones((6, 4))), _device(np.zeros((6, 4)))
    st(a, 1, out=out)  # the warm-up a capture needs: compiled, bound, status word made
    counted.counts.clear()
    counted.stream.capturing = True
    for _ in range(3):
        st(a, 1, out=out)
    counted.stream.capturing = False
    assert not counted.counts and not counted.stream.waits
    sk.synchronize()
    word = _entry(st)._status
    for _ in range(2):  # a replay that reported an error, twice
        word.host[0] = 1  # STATUS_OFFSET, as a kernel of the graph would store it
        with pytest.raises(sk.ArgumentError, match="left the declared neighborhood"):
            sk.synchronize()


def test_auto_race_is_atomic_where_cuda_adds_natively():
    cells, nodes = sk.Set(10), sk.Set(5)
    m = sk.Map(cells, nodes, 2, np.zeros((10, 2), np.int64))

    @sk.kernel
    def spread(v, acc):
        acc[0, 0] += v[0]
        acc[1, 0] += v[0]

    cuda, c = registry.REGISTRY["cuda"], registry.REGISTRY["c"]
    for dtype, on_cuda in ((np.float64, RaceMode.ATOMIC), (np.float32, RaceMode.ATOMIC),
                           (np.int32, RaceMode.ATOMIC), (np.int64, RaceMode.ATOMIC),
                           (np.int16, RaceMode.COLOUR), (np.uint8, RaceMode.COLOUR)):
        loop = sk.ParLoop(spread, cells, sk.Dat(cells, dtype=dtype)(sk.READ),
                          sk.Dat(nodes, dtype=dtype)(sk.INC, m), race="auto")
        assert loop.race_mode(cuda) is on_cuda, dtype
        assert loop.race_mode(c) is RaceMode.COLOUR  # the CPU's choice is unchanged
        assert loop.race_mode() is RaceMode.COLOUR
        assert cuda_registry.auto_race(loop.specs) is on_cuda
    source = sk.ParLoop(spread, cells, sk.Dat(cells)(sk.READ), sk.Dat(nodes)(sk.INC, m),
                        race="auto").generate("cuda")
    assert "sk_atomic_add_f64(" in source.split("sk_atomic_add_f64(double")[1]


def _smooth(a):
    return 0.1 * (a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1]
                  + a[0, 0, 1]) + 0.4 * a[0, 0, 0]


needs_device = pytest.mark.skipif(cuda_registry.probe() is not None,
                                  reason=f"no CUDA device: {cuda_registry.probe()}")


@needs_device
def test_a_captured_time_loop_replays_as_the_plain_loop():
    """A time loop of stencil calls captured by CuPy's stream capture and replayed as a
    CUDA graph gives the plain loop's result (on a GPU only)."""
    import cupy as cp

    host = np.random.default_rng(4).random((32, 33, 34))
    st = sk.stencil(_smooth, backend="cuda")

    def steps(a, b, n):
        for _ in range(n):
            st(a, out=b)
            st(b, out=a)

    plain_a, plain_b = cp.asarray(host), cp.asarray(host)
    steps(plain_a, plain_b, 10)
    sk.synchronize()
    a, b = cp.asarray(host), cp.asarray(host)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        steps(a, b, 1)  # warm-up: compiled, bound, status words made
        a[...], b[...] = cp.asarray(host), cp.asarray(host)
        stream.begin_capture()
        steps(a, b, 1)
        graph = stream.end_capture()
        for _ in range(10):
            graph.launch(stream)
        stream.synchronize()
    sk.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(a), cp.asnumpy(plain_a))
