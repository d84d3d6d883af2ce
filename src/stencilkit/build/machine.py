"""The machine the generated C runs on: cache sizes, the vector ISA the compiler targets, and
whether the compiler knows the processor by name, in one frozen ``MachineProfile``.

The C backend's size-dependent constants (the streaming-store threshold, the streamed row
buffer, the short vector of small calls) are derived from it instead of being one
processor's numbers (issue 30), and its ``key`` is part of every front key
(``compile.keys.target``), so code derived for one machine is never reused on another.

Where the numbers come from: sysfs (``/sys/devices/system/cpu/cpu0/cache/index*``), else
``os.sysconf`` (glibc), else ``REFERENCE``'s; the ISA from the compiler's predefined macros
under ``-march=native`` (what the code is compiled for, not what /proc/cpuinfo lists), and
the names ``-march=native`` resolves to from ``gcc -Q --help=target``
(``build.toolchain.native_target``).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import platform
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

KIB, MIB = 1 << 10, 1 << 20

# The streaming threshold is half the last-level cache, but never above this: in a VM and on
# a many-core socket the L3 that sysfs reports is the whole socket's, shared by every core
# (this machine: 300 MiB for 2 vCPUs), and an output much larger than one process's share
# gains from streaming stores (lap3d 256^3, 128 MiB: 11.1 ms streamed, 12.5 ms plain here).
# 16 MiB is what half of a 32 MiB L3 (Zen 4/5, the issue 17 machines) gave before.
STREAM_MIN_CAP = 16 * MIB
STREAM_MIN_FLOOR = 1 * MIB
# The streamed row buffer takes this fraction of L1d (the rows it is computed from need the
# rest); 48 KiB gives 512 float64 elements, less one line group for 4K aliasing: 448.
ROW_BUFFER_L1_SHARE = 12


@dataclass(frozen=True)
class MachineProfile:
    """What the generated C's constants depend on. Sizes in bytes."""

    arch: str  # platform.machine(): x86_64, aarch64, ...
    vendor: str  # GenuineIntel, AuthenticAMD, "" where unknown
    model: str  # the processor's name (/proc/cpuinfo), for the log
    l1d: int
    l2: int
    l3: int  # the last-level cache (L2 where there is no L3)
    cpus: int  # the CPUs this process may run on
    isa: tuple[str, ...]  # vector extensions the compiler targets: "avx2", "avx512f", ...
    march: str  # what -march=native resolves to ("" where the compiler does not say)
    mtune: str  # what -mtune resolves to under -march=native ("generic": unknown CPU)
    #: -mtune= of the nearest processor the compiler knows, where it does not know this
    #: one (``toolchain.nearest_tune``); "" where it does, or knows no neighbour
    nearest_tune: str = ""
    #: -mtune= of Intel's processor with the same vector ISA, where the compiler tunes for
    #: an AMD model (``toolchain.other_model_tune``); "" elsewhere
    other_model_tune: str = ""

    @property
    def key(self) -> str:
        """The profile as a cache-key part (everything that changes derived code)."""
        return (f"{self.arch}|{self.vendor}|{self.l1d}|{self.l2}|{self.l3}|{self.cpus}|"
                f"{','.join(self.isa)}|{self.march}|{self.mtune}|{self.nearest_tune}|"
                f"{self.other_model_tune}")

    @property
    def vector_bytes(self) -> int:
        """The widest vector register the compiled code may use."""
        if "avx512f" in self.isa:
            return 64
        if "avx" in self.isa or "avx2" in self.isa:
            return 32
        return 16

    @property
    def compiler_knows_cpu(self) -> bool:
        """False where -march=native resolves to the generic tuning: GCC without a model
        for this processor (GCC 12 on Zen 5 or on this Emerald Rapids: ISA flags right,
        scheduling and vector-width choices generic)."""
        return self.mtune not in ("generic", "")

    def stream_min_bytes(self) -> int:
        """Outputs of at least this many bytes are written with streaming stores."""
        return max(STREAM_MIN_FLOOR, min(self.l3 // 2, STREAM_MIN_CAP))

    def stream_chunk(self) -> int:
        """Elements per streamed row chunk (``k.StreamedRow.chunk``): a multiple of 64
        elements (whole 64-byte lines for every item size), its float64 bytes about
        1/ROW_BUFFER_L1_SHARE of L1d, and not a multiple of 512 elements (4 KiB of float64:
        the chunk's stores would alias the loads of power-of-two rows, docs/performance.md)."""
        n = max(64, self.l1d // ROW_BUFFER_L1_SHARE // 8 // 64 * 64)
        return n - 64 if n % 512 == 0 else n

    def short_vector_bytes(self) -> int:
        """The vector of a small call's serial row loops: AVX2's where the CPU has it."""
        return min(32, self.vector_bytes)

    def describe(self) -> str:
        return (f"{self.model or self.arch}: L1d {self.l1d // KIB} KiB, L2 {self.l2 // KIB} "
                f"KiB, L3 {self.l3 // MIB} MiB, {self.cpus} CPUs, {'/'.join(self.isa) or 'no'}"
                f" vectors, -march=native is {self.march or '?'} (tune "
                f"{self.mtune or '?'})")


#: The machine today's constants were measured on (issue 17: 2 vCPUs of an AMD EPYC Zen 5):
#: the fallback where nothing can be read, and what the golden sources are rendered for.
REFERENCE = MachineProfile("x86_64", "AuthenticAMD", "AMD EPYC (Zen 5)", 48 * KIB, MIB,
                           32 * MIB, 2, ("avx", "avx2", "avx512f", "fma"), "", "generic")

_assumed: contextvars.ContextVar[MachineProfile | None] = contextvars.ContextVar(
    "stencilkit_machine", default=None)


def current() -> MachineProfile:
    """The profile code is generated for: ``assumed``'s inside it, else this machine's with
    the configured compiler."""
    assumed = _assumed.get()
    if assumed is not None:
        return assumed
    from ..config import current as config

    return detect(config().cc)


@contextlib.contextmanager
def assumed(profile: MachineProfile) -> Iterator[None]:
    """Generate code for ``profile`` instead of this machine (golden sources, tests)."""
    token = _assumed.set(profile)
    try:
        yield
    finally:
        _assumed.reset(token)


@functools.lru_cache(maxsize=4)
def detect(cc: str | None = None) -> MachineProfile:
    """This machine's profile with compiler ``cc`` (default: the toolchain's): once per
    process and compiler."""
    from . import toolchain

    l1d, l2, l3 = cache_sizes()
    target = toolchain.native_target(cc)
    vendor, model = _cpu_names()
    return MachineProfile(platform.machine(), vendor, model, l1d, l2, l3 or l2, _cpus(),
                          target.isa, target.march, target.mtune,
                          toolchain.nearest_tune(vendor, target) or "",
                          toolchain.other_model_tune(target) or "")


def tune_candidates(profile: MachineProfile, cflags: tuple[str, ...]) -> tuple[str, ...]:
    """``-mtune=`` values worth measuring against the compiler's own on ``profile``: the
    nearest known processor's where the compiler does not know this one; Intel's model of
    the same vector ISA where it tunes for an AMD one (``toolchain.other_model_tune``);
    none where the configured flags choose a tuning or an architecture themselves.

    Not the default: on an Emerald Rapids GCC 12's generic tuning vectorizes with 512-bit
    registers and "sapphirerapids" with 256-bit ones, 1.2-1.3x slower on the bandwidth-bound
    kernels (the tuner's candidate asks for 512-bit vectors where the ISA has them:
    ``registry.c_autotune.tune_knobs``); on a Zen 4, "icelake-server" made hdiff 1.05-1.12x
    faster and moved the point kernels by under 3% (docs/performance.md). Which is better
    depends on the kernel and the CPU, so the tuner decides where it measures, and
    -march=native alone is the default."""
    if any(f.startswith(("-mtune=", "-march=")) for f in cflags):
        return ()
    candidate = profile.nearest_tune or profile.other_model_tune
    return (candidate,) if candidate else ()


def team_candidates(profile: MachineProfile) -> tuple[int, ...]:
    """Team sizes worth measuring against the whole team (the default: every CPU this
    process may run on, ``profile.cpus``, as OpenMP's own default): half of it, where
    there is more than one. A bandwidth-bound loop saturates memory before it runs out of
    cores, and where SMT siblings or another process share the cores, fewer threads can
    finish sooner than a team waiting for its slowest member."""
    return (profile.cpus // 2,) if profile.cpus >= 2 else ()


#: outer iterations (rows, planes) per chunk of the chunked schedule candidate: enough that
#: the rows shared by neighbouring iterations (a stencil's halo) are mostly read by the
#: thread that already has them (2 of every 16 + 2 rows read twice at a 3-row halo)
SCHEDULE_CHUNK = 16


def schedule_candidates(profile: MachineProfile) -> tuple[int, ...]:
    """Chunks of ``schedule(static, chunk)`` worth measuring against ``schedule(static)``
    (the default: one contiguous block per thread): dealt round-robin, a thread slowed by
    another process (or an SMT sibling) holds up fewer iterations at the end. Nothing with
    one CPU."""
    return (SCHEDULE_CHUNK,) if profile.cpus >= 2 else ()


def cache_sizes() -> tuple[int, int, int]:
    """(L1d, L2, L3) bytes of CPU 0 (0 where there is no such level); ``REFERENCE``'s where
    neither sysfs nor sysconf says."""
    sizes = _sysfs_caches() or _sysconf_caches()
    if not sizes or not sizes.get(1):
        return REFERENCE.l1d, REFERENCE.l2, REFERENCE.l3
    return sizes.get(1, 0), sizes.get(2, 0), sizes.get(3, 0)


def _sysfs_caches() -> dict[int, int]:
    sizes: dict[int, int] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _parse_size((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size:
            sizes[level] = max(sizes.get(level, 0), size)
    return sizes


def _parse_size(text: str) -> int:
    units = {"K": KIB, "M": MIB, "G": 1 << 30}
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def _sysconf_caches() -> dict[int, int]:
    sizes = {}
    for level, name in ((1, "SC_LEVEL1_DCACHE_SIZE"), (2, "SC_LEVEL2_CACHE_SIZE"),
                        (3, "SC_LEVEL3_CACHE_SIZE")):
        with contextlib.suppress(ValueError, OSError, AttributeError):
            value = os.sysconf(name)
            if value > 0:
                sizes[level] = value
    return sizes


def _cpu_names() -> tuple[str, str]:
    vendor = model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = line.partition(":")
            name = name.strip()
            if name == "vendor_id" and not vendor:
                vendor = value.strip()
            elif name == "model name" and not model:
                model = value.strip()
            if vendor and model:
                break
    return vendor, model or platform.processor()


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
