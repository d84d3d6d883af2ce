"""The host side of a "cuda" call, without a GPU: µs per call, before and after.

The backend's real call path runs (the launcher's checks, the entry, the binding, the
launches' argument tuples) with CuPy replaced by a stand-in whose kernel launches do nothing:
device arrays are NumPy arrays that carry ``__cuda_array_interface__``, a "launch" returns
at once. What it measures is therefore the Python a call costs on top of the launches
themselves; on a GPU each launch adds CuPy's and the driver's own cost (a bare
``RawKernel`` launch: 14-17 µs per call in issue 27's H200 run, its synchronization
included) and each transfer or allocation counted here adds its own. Next to the timings it
counts, per call, what the stand-in was asked to do: launches, allocations (``zeros``/
``empty``/pinned memory, a status word or scratch array), host<->device copies
(``asarray``/``asnumpy``: a status word read through the device is one), and the event
records, queries (``done``) and waits of the status word's event.

Cases: lap3d 16³ called with ``out=`` (a point kernel), hdiff 16×16×8 (a computation),
an INC ParLoop of 512 triangles onto 300 nodes (race="atomic"), all on device arrays;
and the same calls on the "c" backend with NumPy arrays (kernel time included: 16³ points
is a few µs of it; one thread, so that OpenMP's start-up and spinning are not counted).
Each tree (``--before`` REV, default ``main``, extracted with ``git archive``; and this
checkout) runs in its own interpreter; the table gives medians over batches of calls of the
CPU time per call (``time.process_time``: the stand-in's launches return at once and the C
calls run one thread, so it is the host's time; less sensitive than wall time to a loaded
machine, but the medians still move by some 30% between runs: compare columns of one run).

    PYTHONPATH=src python benchmarks/cuda_host.py [--before main] [--calls 2000] [--batches 15]
    PYTHONPATH=src python benchmarks/cuda_host.py --status   # the status word's read alone
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- the stand-in for CuPy


class DeviceArray(np.ndarray):
    """Host memory that says it is on a GPU (what CuPy's arrays are to the backend), with
    CuPy's ``data.ptr`` (a device pointer read without building the interface's dict; kept
    per array, as CuPy keeps its ``MemoryPointer``, so that reading it costs what CuPy's
    attribute read does, not the stand-in's ``ctypes``)."""

    @property
    def data(self) -> types.SimpleNamespace:  # type: ignore[override]
        memory = self.__dict__.get("_memory")
        if memory is None:
            memory = self.__dict__["_memory"] = types.SimpleNamespace(ptr=self.ctypes.data)
        return memory

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "strides": self.strides,
                "data": (self.ctypes.data, False), "version": 3}


COUNTS = {"launches": 0, "allocations": 0, "copies": 0, "event records": 0,
          "event queries": 0, "event waits": 0}
KINDS = tuple(COUNTS)


def _count(what: str, fn):
    def counted(*a, **kw):
        COUNTS[what] += 1
        return fn(*a, **kw)
    return counted


class Event:
    """CuPy's event: a record, a query (``done``: the launches return at once, so it is
    complete) and a wait, counted."""

    def __init__(self, block: bool = False, disable_timing: bool = False) -> None:
        pass

    def record(self, stream=None) -> None:
        COUNTS["event records"] += 1

    @property
    def done(self) -> bool:
        COUNTS["event queries"] += 1
        return True

    def synchronize(self) -> None:
        COUNTS["event waits"] += 1


class Stream:
    """CuPy's current stream, never capturing."""

    def is_capturing(self) -> bool:
        return False

    def synchronize(self) -> None:
        pass


def _pinned(size: int) -> bytearray:
    """Pinned host memory: a buffer with its address as ``ptr``."""

    class Pinned(bytearray):
        ptr = 0

    memory = Pinned(size)
    memory.ptr = np.frombuffer(memory, np.uint8).ctypes.data
    return memory


def stand_in() -> types.ModuleType:
    """A CuPy whose arrays are ``DeviceArray``s and which counts what it is asked to do."""
    stream = Stream()
    fake = types.ModuleType("cupy")
    fake.__dict__.update(
        ndarray=DeviceArray,
        asarray=_count("copies", lambda a, dtype=None: np.array(a, dtype=dtype)
                       .view(DeviceArray)),
        asnumpy=_count("copies", lambda a: np.array(a).view(np.ndarray)),
        zeros=_count("allocations", lambda shape, dtype=float: np.zeros(shape, dtype)
                     .view(DeviceArray)),
        empty=_count("allocations", lambda shape, dtype=float: np.empty(shape, dtype)
                     .view(DeviceArray)),
        int32=np.int32,
        cuda=types.SimpleNamespace(
            Device=lambda: types.SimpleNamespace(compute_capability="90"),
            Event=Event, get_current_stream=lambda: stream,
            alloc_pinned_memory=_count("allocations", _pinned)),
    )
    return fake


def install() -> types.ModuleType:
    import dataclasses

    from stencilkit import registry, storage
    from stencilkit.runtime import cuda as runtime

    fake = stand_in()
    launch = _count("launches", lambda grid, block, args: None)

    def functions(self):
        return {lc.name: launch for lc in self.plan.launches()}

    runtime._cupy = lambda: fake
    storage.array_module = lambda backend: fake
    runtime.CudaEntry.functions = functions
    registry.REGISTRY["cuda"] = dataclasses.replace(registry.REGISTRY["cuda"],
                                                    probe=lambda: None)
    return fake


# ---------------------------------------------------------------- the cases


def lap3d(a):
    return (a[-1, 0, 0] + a[1, 0, 0] + a[0, -1, 0] + a[0, 1, 0] + a[0, 0, -1] + a[0, 0, 1]
            - 6.0 * a[0, 0, 0])


def cases(backend: str, wrap):
    """(name, a call with no arguments) per case, on ``backend`` with arrays made by
    ``wrap`` (a device array or the NumPy array itself); each call run once already."""
    import stencilkit as sk

    sys.path.insert(0, str(ROOT))
    from tests import computations as C

    rng = np.random.default_rng(0)
    a, out = wrap(rng.random((16, 16, 16))), wrap(np.zeros((16, 16, 16)))
    st = sk.stencil(lap3d, backend=backend)

    inp, coeff, res = (wrap(rng.random((16, 16, 8))) for _ in range(3))
    hdiff = sk.stencil(C.hdiff, backend=backend)

    cells, nodes = sk.Set(512), sk.Set(300)
    tri = sk.Map(cells, nodes, 3, rng.integers(0, 300, (512, 3)))
    x = sk.Dat(cells, data=wrap(rng.random(512)))
    acc = sk.Dat(nodes, data=wrap(np.zeros(300)))

    @sk.kernel
    def spread(v, total):
        for i in range(3):
            total[i, 0] += v[0]

    loop = sk.ParLoop(spread, cells, x(sk.READ), acc(sk.INC, tri), backend=backend,
                      race="atomic")
    calls = {"lap3d 16³, out= (point)": lambda: st(a, out=out),
             "hdiff 16×16×8 (computation)": lambda: hdiff(inp, res, coeff),
             "ParLoop INC, 512 cells (atomic)": loop.compute}
    for call in calls.values():
        call()
    return calls


def measure(calls: int, batches: int) -> dict:
    """Per case and backend: median µs per call, and per-call counts (cuda)."""
    import stencilkit as sk

    install()
    sk.set_num_threads(1)
    device = {"cuda": lambda h: np.array(h).view(DeviceArray), "c": lambda h: h}
    results: dict = {}
    for backend, wrap in device.items():
        for name, call in cases(backend, wrap).items():
            times = []
            for _ in range(batches):
                before = dict(COUNTS)
                t0 = time.process_time()
                for _ in range(calls):
                    call()
                times.append((time.process_time() - t0) / calls * 1e6)
                counts = {k: (COUNTS[k] - before[k]) / calls for k in COUNTS}
            sk.synchronize()
            results[f"{backend}|{name}"] = {"us": statistics.median(times),
                                            "counts": counts if backend == "cuda" else None}
    return results


def status_read_costs(calls: int, batches: int) -> dict:
    """µs of CPU per call of the two ways to read an entry's status word on the stand-in,
    interleaved batch by batch: the 4-byte device-to-host copy of a device word (what the
    next call did before: ``cp.asnumpy``), and the pinned word read after its event
    (``runtime.cuda_status``: a query, a host load, and the next call's record)."""
    from stencilkit.runtime.cuda_status import StatusWord

    fake = install()
    device_word = fake.zeros(1, dtype=np.int32)
    pinned = StatusWord(fake)
    pinned.launched()

    def copy() -> int:
        return int(fake.asnumpy(device_word)[0])

    def event() -> int:
        code = pinned.take()
        pinned.launched()
        return code

    times: dict = {"copy": [], "event": []}
    for _ in range(batches):
        for name, read in (("copy", copy), ("event", event)):
            t0 = time.process_time()
            for _ in range(calls):
                read()
            times[name].append((time.process_time() - t0) / calls * 1e6)
    return {name: statistics.median(t) for name, t in times.items()}


# ---------------------------------------------------------------- before and after


def run_tree(src: Path, calls: int, batches: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), STENCILKIT_CUDA_EMULATOR="0")
    env.setdefault("STENCILKIT_CACHE_DIR", tempfile.mkdtemp(prefix="sk-cuda-host-"))
    done = subprocess.run([sys.executable, __file__, "--measure", "--calls", str(calls),
                           "--batches", str(batches)], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the run on {src} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def extract(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src"],
                             capture_output=True, check=True).stdout
    tar = into / "src.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    return into / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="the revision to compare with")
    parser.add_argument("--calls", type=int, default=2000, help="calls per batch")
    parser.add_argument("--batches", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=1,
                        help="before/after runs, interleaved (the table gives their spread)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--status", action="store_true",
                        help="compare the two ways to read a status word instead")
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.calls, args.batches)))
        return
    if args.status:
        costs = status_read_costs(args.calls, args.batches)
        print(f"status word read, µs of CPU per call on the stand-in (median of "
              f"{args.batches} batches of {args.calls}): device word copied back "
              f"{costs['copy']:.2f}, pinned word after its event {costs['event']:.2f}")
        return
    befores, afters = [], []
    with tempfile.TemporaryDirectory() as tmp:
        old = extract(args.before, Path(tmp))
        for _ in range(args.rounds):  # interleaved: a loaded machine's drift hits both
            befores.append(run_tree(old, args.calls, args.batches))
            afters.append(run_tree(ROOT / "src", args.calls, args.batches))
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    print(f"µs per call (median of {args.batches} batches of {args.calls}; over "
          f"{args.rounds} interleaved rounds: least-most (median)); before: {args.before}, "
          f"after: {head} (+ working tree)\n")
    print("| case | before: cuda | after: cuda | c | per call after (before): launches, "
          "allocations, copies, event records, queries, waits |")
    print("|---|---:|---:|---:|---|")

    def spread(runs: list, key: str) -> str:
        us = sorted(r[key]["us"] for r in runs)
        if len(us) == 1:
            return f"{us[0]:.1f}"
        return f"{us[0]:.1f}-{us[-1]:.1f} ({statistics.median(us):.1f})"

    for key in afters[0]:
        backend, name = key.split("|")
        if backend != "cuda":
            continue
        b, a = befores[0][key], afters[0][key]
        counts = ", ".join(f"{a['counts'][k]:g} ({b['counts'][k]:g})" for k in KINDS)
        print(f"| {name} | {spread(befores, key)} | {spread(afters, key)} | "
              f"{spread(afters, f'c|{name}')} | {counts} |")

if __name__ == "__main__":
    main()
