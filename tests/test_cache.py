"""The disk cache under attack and under faults: every entry is verified before it is
loaded, a cache directory that cannot be used falls back to a private one, concurrent
processes and killed builds leave it consistent.

Anything that could crash the interpreter (loading a damaged library) runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import stencilkit as sk
from stencilkit.build import cache, toolchain
from stencilkit.errors import BackendError

pytestmark = pytest.mark.skipif(sk.registry.REGISTRY["c"].probe() is not None,
                                reason="the disk cache holds C builds; no C compiler here")

SRC = str(Path(__file__).resolve().parents[1] / "src")

WORKER = textwrap.dedent("""
    import json, sys, warnings
    import numpy as np
    import stencilkit as sk

    def k(a):
        return a[-1] + SCALE * a[1]

    r = sk.stencil(k, backend="c")(np.arange(50.0))
    assert r[1] == 0.0 + SCALE * 2.0, r[:3]
    info = sk.cache.info()
    print(json.dumps({"builds": info["builds"], "disk_hits": info["disk_hits"],
                      "directory": info["directory"]}))
""")


def worker(tmp_path: Path, scale: float = 3.0, name: str = "worker.py") -> Path:
    script = tmp_path / name
    script.write_text(WORKER.replace("SCALE", repr(scale)))
    return script


def run(script: Path, cache_dir: Path | None, timeout: float = 120, **env_changes: str | None):
    env = dict(os.environ, PYTHONPATH=SRC)
    env.pop("STENCILKIT_CACHE_DIR", None)
    if cache_dir is not None:
        env["STENCILKIT_CACHE_DIR"] = str(cache_dir)
    for name, value in env_changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=timeout)


def result(proc) -> dict:
    assert proc.returncode == 0, f"exit status {proc.returncode}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def entries(cache_dir: Path) -> list[Path]:
    return sorted(p for p in (cache_dir / f"v{cache.FORMAT}").glob("??/*")
                  if p.is_dir() and not p.name.startswith("."))


def library(entry: Path) -> Path:
    meta = json.loads((entry / cache.META).read_text())
    return entry / meta["artifact"]


def built_entry(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A cache with one entry, built by a subprocess: (script, cache dir, entry)."""
    script, cache_dir = worker(tmp_path), tmp_path / "cache"
    assert result(run(script, cache_dir))["builds"] == 1
    (entry,) = entries(cache_dir)
    return script, cache_dir, entry


def assert_rebuilt(proc, why: str | None = None) -> None:
    out = result(proc)
    assert out["builds"] == 1 and out["disk_hits"] == 0, out
    assert proc.stderr.count("CacheWarning") == 1, proc.stderr
    if why:
        assert why in proc.stderr, proc.stderr


# ----------------------------------------------------------------- layout and keys

def test_entries_are_private_and_carry_verified_metadata(tmp_path):
    _, cache_dir, entry = built_entry(tmp_path)
    root = cache_dir / f"v{cache.FORMAT}"
    for d in (root, entry.parent, entry, root / "locks", root / "staging"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    meta = json.loads((entry / cache.META).read_text())
    assert meta["format"] == cache.FORMAT and meta["key"] == entry.name
    assert meta["python"] == cache.python_abi()
    lib = library(entry)
    assert meta["size"] == lib.stat().st_size and not lib.stat().st_mode & 0o022
    assert list((root / "staging").iterdir()) == []


def test_warm_load_is_a_disk_hit(tmp_path):
    script, cache_dir, _ = built_entry(tmp_path)
    out = result(run(script, cache_dir))
    assert (out["builds"], out["disk_hits"]) == (0, 1)
    assert out["directory"] == str((cache_dir / f"v{cache.FORMAT}").resolve())


def test_key_holds_the_python_abi(monkeypatch):
    k = cache.key("c-point", "int f(void) { return 0; }")
    monkeypatch.setattr(cache, "python_abi", lambda: "cpython-399 another-interpreter")
    assert cache.key("c-point", "int f(void) { return 0; }") != k


def test_key_ignores_line_numbers_in_comments_only():
    a = '/* k.py:12  x = a[1] */\nx = 1; /* kernel \'k\' (k.py:10), 1-D */\nputs("k.py:3");'
    b = '/* k.py:40  x = a[1] */\nx = 1; /* kernel \'k\' (k.py:38), 1-D */\nputs("k.py:3");'
    c = '/* k.py:40  x = a[1] */\nx = 1; /* kernel \'k\' (k.py:38), 1-D */\nputs("k.py:4");'
    assert cache.key(a) == cache.key(b)
    assert cache.key(b) != cache.key(c)  # string literals are code, not comments
    assert cache.key(a) != cache.key(a.replace("x = a[1] */", "x = a[2] */"))


def test_moving_a_kernel_to_another_line_does_not_rebuild(tmp_path):
    cache_dir = tmp_path / "cache"
    first = worker(tmp_path, name="kern.py")
    assert result(run(first, cache_dir))["builds"] == 1
    text = first.read_text()
    first.write_text("\n\n# a comment moves the kernel down\n\n" + text)
    out = result(run(first, cache_dir))
    assert (out["builds"], out["disk_hits"]) == (0, 1)
    # the generated code still names the line (in comments)
    show = tmp_path / "show.py"
    show.write_text(text.split("r = sk.stencil")[0] + textwrap.dedent("""
        print(sk.stencil(k, backend="c").generate(np.arange(50.0)))
    """))
    assert "show.py:7" in run(show, cache_dir).stdout


# ----------------------------------------------------------------- damaged entries

@pytest.mark.parametrize("damage", ["truncated", "empty", "garbage", "foreign"])
def test_damaged_library_is_rebuilt_not_loaded(tmp_path, damage):
    script, cache_dir, entry = built_entry(tmp_path)
    lib = library(entry)
    data = lib.read_bytes()
    if damage == "truncated":  # loading this used to be a SIGBUS on every later run
        lib.write_bytes(data[: len(data) // 2])
    elif damage == "empty":
        lib.write_bytes(b"")
    elif damage == "garbage":
        lib.write_bytes(os.urandom(len(data)))
    else:  # a valid library of another entry, under this entry's name
        other = worker(tmp_path, scale=5.0, name="other.py")
        result(run(other, cache_dir))
        (foreign,) = [e for e in entries(cache_dir) if e != entry]
        shutil.copyfile(library(foreign), lib)
    proc = run(script, cache_dir)
    assert_rebuilt(proc, "rebuilt")
    out = result(run(script, cache_dir))  # and the rebuilt entry is good
    assert (out["builds"], out["disk_hits"]) == (0, 1)


@pytest.mark.parametrize("damage", ["missing", "not json", "other format", "other key",
                                    "other python", "wrong digest"])
def test_bad_metadata_means_rebuild(tmp_path, damage):
    script, cache_dir, entry = built_entry(tmp_path)
    path = entry / cache.META
    meta = json.loads(path.read_text())
    if damage == "missing":
        path.unlink()
    elif damage == "not json":
        path.write_text("{not json")
    else:
        field, value = {"other format": ("format", 1), "other key": ("key", "0" * 64),
                        "other python": ("python", "cpython-399 built by another interpreter"),
                        "wrong digest": ("sha256", "0" * 64)}[damage]
        meta[field] = value
        path.write_text(json.dumps(meta))
    proc = run(script, cache_dir)
    if damage == "missing":  # an entry without metadata is never loaded
        out = result(proc)
        assert out["builds"] == 1
    else:
        assert_rebuilt(proc)


def test_library_writable_by_others_is_rebuilt(tmp_path):
    script, cache_dir, entry = built_entry(tmp_path)
    library(entry).chmod(0o666)
    assert_rebuilt(run(script, cache_dir), "writable by other users")
    assert not library(entry).stat().st_mode & 0o022


def test_entry_directory_writable_by_others_is_rebuilt(tmp_path):
    script, cache_dir, entry = built_entry(tmp_path)
    entry.chmod(0o777)
    assert_rebuilt(run(script, cache_dir), "writable by other users")


PLANTED = textwrap.dedent("""
    #include <stdio.h>
    __attribute__((constructor)) static void planted(void) {
        FILE *f = fopen("MARKER", "w");
        if (f) { fputs("planted code ran", f); fclose(f); }
    }
""")


def _nobody() -> tuple[int, int]:
    import pwd

    try:
        pw = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' on this system")
    return pw.pw_uid, pw.pw_gid


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="planting a file owned by another user needs root (chown)")
def test_library_planted_by_another_user_is_not_loaded(tmp_path):
    uid, gid = _nobody()
    script, cache_dir, entry = built_entry(tmp_path)
    marker = tmp_path / "planted-code-ran"
    src = tmp_path / "planted.c"
    src.write_text(PLANTED.replace("MARKER", str(marker)))
    lib = library(entry)
    subprocess.run([toolchain.find_compiler() or "cc", "-shared", "-fPIC", str(src), "-o",
                    str(lib)], check=True)
    # the planter also writes metadata that matches its library: only ownership gives it away
    meta = json.loads((entry / cache.META).read_text())
    data = lib.read_bytes()
    import hashlib

    meta.update(size=len(data), sha256=hashlib.sha256(data).hexdigest())
    (entry / cache.META).write_text(json.dumps(meta))
    for p in (lib, entry / cache.META):
        os.chown(p, uid, gid)
        p.chmod(0o644)
    proc = run(script, cache_dir)
    assert_rebuilt(proc, "belongs to another user")
    assert not marker.exists(), "a library planted by another user was loaded"
    assert library(entry).stat().st_uid == os.geteuid()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="a directory owned by another user needs root (chown)")
def test_shard_directory_of_another_user_is_not_trusted(tmp_path):
    uid, gid = _nobody()
    script, cache_dir, entry = built_entry(tmp_path)
    os.chown(entry.parent, uid, gid)
    assert_rebuilt(run(script, cache_dir), "belongs to another user")
    assert entry.parent.stat().st_uid == os.geteuid()


def test_symlinked_library_is_not_followed(tmp_path):
    script, cache_dir, entry = built_entry(tmp_path)
    lib = library(entry)
    real = tmp_path / "elsewhere.so"
    shutil.move(lib, real)
    lib.symlink_to(real)
    assert_rebuilt(run(script, cache_dir))
    assert not library(entry).is_symlink()


# ----------------------------------------------------------------- unusable cache directories

def _assert_fallback(proc, why: str) -> None:
    out = result(proc)
    assert out["builds"] == 1
    assert proc.stderr.count("CacheWarning") == 1, proc.stderr
    assert "private temporary directory" in proc.stderr and why in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_cache_path_that_is_a_file_falls_back(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a directory")
    _assert_fallback(run(worker(tmp_path), path), str(path))
    assert path.read_text() == "not a directory"


def test_read_only_cache_falls_back(tmp_path):
    # /proc refuses new directories even to root: a read-only location for every user
    _assert_fallback(run(worker(tmp_path), Path("/proc/self/stencilkit-cache")),
                     "/proc/self/stencilkit-cache")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into read-only directories")
def test_read_only_directory_falls_back(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        _assert_fallback(run(worker(tmp_path), ro), str(ro))
    finally:
        ro.chmod(0o700)


def test_unwritable_home_falls_back(tmp_path):
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    proc = run(worker(tmp_path), None, HOME=str(home), XDG_CACHE_HOME=None)
    _assert_fallback(proc, str(home))


def test_cache_directory_writable_by_others_falls_back(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit: anyone could swap our entries
    _assert_fallback(run(worker(tmp_path), shared / "cache"), "writable by other users")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="a lock file owned by another user needs root (chown)")
def test_foreign_unreadable_lock_file_falls_back(tmp_path):
    uid, gid = _nobody()
    script, cache_dir, entry = built_entry(tmp_path)
    shutil.rmtree(entry)
    lock = cache_dir / f"v{cache.FORMAT}" / "locks" / f"{entry.name}.lock"
    assert lock.exists()
    os.chown(lock, uid, gid)
    lock.chmod(0)
    _assert_fallback(run(script, cache_dir), "lock file")


def test_fallback_in_process_warns_once(tmp_path, monkeypatch):
    path = tmp_path / "a-file"
    path.write_text("")
    monkeypatch.setattr(cache, "_warned", set())
    monkeypatch.setattr(cache, "_memory", {})  # the same kernels may be in memory already
    sk.configure(cache_dir=path)
    with pytest.warns(cache.CacheWarning) as record:
        def k2(a):
            return a[-1] * 2.0 + a[1]

        def k7(a):
            return a[-1] * 7.0 + a[1]

        for k in (k2, k7):
            sk.stencil(k, backend="c")(np.arange(10.0))
        assert str(path) not in cache.info()["directory"]
    assert len([w for w in record if issubclass(w.category, cache.CacheWarning)]) == 1


def test_cache_directory_removed_under_a_running_process_is_made_again(tmp_path, monkeypatch):
    import warnings

    monkeypatch.setattr(cache, "_warned", set())
    monkeypatch.setattr(cache, "_memory", {})  # the same kernels may be in memory already
    sk.configure(cache_dir=tmp_path / "cache")

    def k2(a):
        return a[-1] * 2.0 + a[1]

    def k7(a):
        return a[-1] * 7.0 + a[1]

    with warnings.catch_warnings():
        warnings.simplefilter("error", cache.CacheWarning)
        sk.stencil(k2, backend="c")(np.arange(10.0))
        shutil.rmtree(tmp_path / "cache")
        np.testing.assert_array_equal(sk.stencil(k7, backend="c")(np.arange(10.0))[1:3], [2, 10])
    assert len(entries(tmp_path / "cache")) == 1


# ----------------------------------------------------------------- concurrency and kills

CLEARER = textwrap.dedent("""
    import os, time, stencilkit as sk
    end = time.time() + 120
    n = 0
    while time.time() < end and not os.path.exists("STOP"):
        sk.cache.clear()
        n += 1
    print(n)
""")

def test_clear_in_another_process_does_not_break_builds(tmp_path):
    clearer = tmp_path / "clearer.py"
    clearer.write_text(CLEARER.replace("STOP", str(tmp_path / "stop")))
    cache_dir = tmp_path / "cache"
    scripts = []
    for p in range(2):
        body = ["import json, numpy as np, stencilkit as sk", "a = np.arange(40.0)"]
        for i in range(6):
            body += [f"def k{i}(a):", f"    return a[-1] + {p}.{i + 1} * a[1]",
                     f"r = sk.stencil(k{i}, backend='c')(a)",
                     f"assert r[1] == a[0] + {p}.{i + 1} * a[2], r[:3]",
                     "sk.cache.clear(disk=False)"]
        body.append("print(json.dumps(sk.cache.info()['builds']))")
        s = tmp_path / f"builder{p}.py"
        s.write_text("\n".join(body) + "\n")
        scripts.append(s)
    env = dict(os.environ, PYTHONPATH=SRC, STENCILKIT_CACHE_DIR=str(cache_dir))
    procs = [subprocess.Popen([sys.executable, str(clearer)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)]
    time.sleep(1.0)
    procs += [subprocess.Popen([sys.executable, str(s)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True) for s in scripts]
    try:
        outs = [p.communicate(timeout=180) for p in procs[1:]]
        (tmp_path / "stop").touch()
        outs.insert(0, procs[0].communicate(timeout=60))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert "Traceback" not in err and "CacheWarning" not in err, err
    assert int(outs[0][0]) > 10  # the clearer really ran while the others built


def test_staging_directory_of_a_killed_build_is_removed(tmp_path):
    cc = toolchain.find_compiler()
    slow = tmp_path / "slow-cc"
    slow.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        for a in "$@"; do
            case "$a" in */staging/*.c) touch "{tmp_path}/compiling"; sleep 60;; esac
        done
        exec {cc} "$@"
    """))
    slow.chmod(0o755)
    script, cache_dir = worker(tmp_path), tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=SRC, STENCILKIT_CACHE_DIR=str(cache_dir), CC=str(slow))
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.time() + 60
        while not (tmp_path / "compiling").exists():
            assert time.time() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    staging = cache_dir / f"v{cache.FORMAT}" / "staging"
    assert len(list(staging.iterdir())) == 1  # the killed build's leftover
    out = result(run(script, cache_dir))  # another process (same key) cleans it and builds
    assert out["builds"] == 1
    assert list(staging.iterdir()) == []
    # a leftover of a key nobody builds again goes too, with the first build of a process
    (staging / ("f" * 64 + "-killed")).mkdir()
    result(run(worker(tmp_path, scale=9.0, name="w9.py"), cache_dir))
    assert list(staging.iterdir()) == []


def test_staging_directory_of_a_build_under_way_is_kept(tmp_path, monkeypatch):
    from filelock import FileLock

    monkeypatch.setattr(cache, "_swept", set())
    sk.configure(cache_dir=tmp_path / "cache")
    root = cache.root()
    busy = root / "staging" / ("a" * 64 + "-busy")
    idle = root / "staging" / ("b" * 64 + "-idle")
    busy.mkdir()
    idle.mkdir()
    with FileLock(str(root / "locks" / ("a" * 64 + ".lock"))):
        sk.cache.clear()
    assert busy.exists() and not idle.exists()


# ----------------------------------------------------------------- C-string ParLoop kernels

@pytest.mark.parametrize("code", [
    "void incr(double *x) { x[0] += 1.0; }",                    # another function
    "void inc(double *x);\nvoid incr(double *x) { x[0] += 1.0; }",  # declared, never defined
], ids=["other-name", "declared-only"])
def test_c_string_kernel_whose_function_is_missing(tmp_path, code):
    sk.configure(cache_dir=tmp_path / "cache")
    cells = sk.Set(10)
    d = sk.Dat(cells, np.zeros(10))
    with pytest.raises(BackendError, match=r"stencil 'inc'.*C function 'inc'") as info:
        sk.par_loop(sk.Kernel(code, "inc"), cells, d(sk.INC), backend="c")
    assert "C-string sk.Kernel(code, name)" in str(info.value)
    root = cache.root()
    assert entries(root.parent) == [] and list((root / "staging").iterdir()) == []
    with pytest.raises(BackendError, match="C function 'inc'"):  # again: still an error
        sk.par_loop(sk.Kernel(code, "inc"), cells, d(sk.INC), backend="c")
    sk.par_loop(sk.Kernel(code, "incr"), cells, d(sk.INC), backend="c")  # the right name
    np.testing.assert_array_equal(d.data, np.ones(10))
