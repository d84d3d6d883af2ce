#!/usr/bin/env bash
# The GPU tier: every backend-parametrized test on "cuda" plus the CUDA test files
# (tests/test_cuda_*.py), from this checkout (PYTHONPATH=src, nothing installed), on a
# machine with an NVIDIA GPU, CuPy, NVRTC (cuda-bindings), NumPy, Numba and pytest. CI has
# no GPU and does not run it.
#
#   tools/gpu-tier.sh                          # the tier, one process
#   tools/gpu-tier.sh -x tests/test_cuda_safety.py   # extra pytest arguments and files
#   STENCILKIT_CUDA_EMULATOR=1 tools/gpu-tier.sh   # the same tests on the CPU emulator
#
# Without a usable GPU (and without the emulator) it stops with status 3 instead of
# "passing" with every test skipped. A test file importing a package that is not installed
# (hypothesis, gt4py, dask, ...) is left out, and named, instead of failing the collection.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
export STENCILKIT_TEST_BACKENDS=cuda
export STENCILKIT_CACHE_DIR="${STENCILKIT_CACHE_DIR:-$PWD/.gpu-tier-cache}"
ignores="$(mktemp)"
trap 'rm -f "$ignores"' EXIT
if ! python - "$ignores" <<'PY'
import ast
import importlib.util
import os
import sys
from pathlib import Path

if os.environ.get("STENCILKIT_CUDA_EMULATOR") != "1":
    from stencilkit.registry.cuda import probe

    reason = probe()
    if reason is not None:
        sys.exit(f"gpu-tier: 'cuda' cannot run here ({reason}); on a machine without a GPU, "
                 "STENCILKIT_CUDA_EMULATOR=1 runs the tier on the CPU emulator")
    import cupy

    print("gpu-tier: 'cuda' on", cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
else:
    print("gpu-tier: 'cuda' on the CPU emulator (tests/cuda_emulator.py)")


def roots(path: Path, seen: set[Path]) -> set[str]:
    """The top-level packages a test module imports when loaded, through tests/ modules."""
    seen.add(path)
    out: set[str] = set()
    for n in ast.parse(path.read_text()).body:
        if isinstance(n, ast.Import):
            out |= {a.name.split(".")[0] for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.level == 0 and n.module:
            out.add(n.module.split(".")[0])
        elif isinstance(n, ast.ImportFrom):  # from . import x / from .x import y
            names = [n.module] if n.module else [a.name for a in n.names]
            for m in names:
                sibling = path.parent / (m.split(".")[0] + ".py")
                if sibling.exists() and sibling not in seen:
                    out |= roots(sibling, seen)
    return out


left_out = []
for path in sorted(Path("tests").glob("test_*.py")):
    missing = sorted(r for r in roots(path, set()) if importlib.util.find_spec(r) is None)
    if missing:
        left_out.append(f"--ignore={path}")
        print(f"gpu-tier: not run: {path} (needs {', '.join(missing)})")
Path(sys.argv[1]).write_text("\n".join(left_out))
PY
then
    exit 3
fi
mapfile -t ignore_args < "$ignores"
# -k cuda: the [cuda] cases of the parametrized tests and every test of tests/test_cuda_*.py;
# no path given: all of tests/ (pyproject.toml testpaths), else the files given
python -m pytest -q -p no:cacheprovider -n 0 -rfE -k cuda "${ignore_args[@]}" "$@"
