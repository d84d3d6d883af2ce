"""``stencilkit demo | bench | show``."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np


def _heat_step():
    import stencilkit as sk

    @sk.stencil
    def heat(u, alpha):
        return u[0, 0] + alpha * (u[-1, 0] + u[1, 0] + u[0, -1] + u[0, 1] - 4.0 * u[0, 0])

    return heat


def demo(args: argparse.Namespace) -> int:
    """A 2-D heat equation: a hot square diffusing on a cold plate, written out as a PNG."""
    from tqdm import tqdm

    from . import backends

    n, steps = args.size, args.steps
    heat = _heat_step()
    y, x = np.mgrid[0:n, 0:n] / n
    u = np.where((x - 0.35) ** 2 + (y - 0.4) ** 2 < 0.05**2, 100.0, 0.0)
    u[(x - 0.7) ** 2 + (y - 0.65) ** 2 < 0.03**2] = 60.0
    v = np.zeros_like(u)
    alpha = 0.24  # explicit scheme stable for alpha <= 0.25
    start = time.perf_counter()
    heat(u, alpha, out=v)  # build (or load from the disk cache) outside the timed loop
    built = time.perf_counter() - start
    initial_heat = u.sum()
    start = time.perf_counter()
    for _ in tqdm(range(steps), desc=f"heat {n}x{n}", unit="step", disable=args.quiet):
        heat(u, alpha, out=v)
        u, v = v, u
    elapsed = time.perf_counter() - start
    backend = backends.resolve(None)
    print(f"backend: {backend}; build or cache load: {built * 1e3:.1f} ms")
    print(f"{steps} steps of {n}x{n}: {elapsed / steps * 1e6:.1f} us per step "
          f"({n * n * steps / elapsed / 1e6:.0f} Mpoints/s)")
    print(f"peak temperature {u.max():.2f} (from 100); total heat kept: "
          f"{100 * u.sum() / initial_heat:.2f}%")
    out = Path(args.output)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    im = ax.imshow(u, cmap="inferno", origin="lower")
    fig.colorbar(im, ax=ax, label="temperature")
    ax.set_title(f"2-D heat equation after {steps} steps ({backend} backend)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")
    return 0


def show(args: argparse.Namespace) -> int:
    """Print the generated code of ``FILE.py:NAME`` (called once on example arrays)."""
    path, _, name = args.target.rpartition(":")
    if not path or not name:
        print("usage: stencilkit show FILE.py:NAME", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("_stencilkit_show", path)
    if spec is None or spec.loader is None:
        print(f"cannot load {path}", file=sys.stderr)
        return 2
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(Path(path).resolve().parent))
    spec.loader.exec_module(module)
    obj = getattr(module, name)
    example = getattr(module, f"{name}_example", None)
    if example is not None:
        print(obj.generate(*example(), backend=args.backend))
        return 0
    try:
        print(obj.generate(backend=args.backend))
    except Exception as exc:  # a point kernel needs argument types first
        print(f"{exc}\n(define {name}_example() returning example arguments in {path})",
              file=sys.stderr)
        return 1
    return 0


def bench(args: argparse.Namespace) -> int:
    from .bench import run

    return run(quick=args.quick, json_path=args.json, plot_path=args.plot, only=args.only)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stencilkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="run a 2-D heat simulation and write a picture")
    p.add_argument("--size", type=int, default=512)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--output", default="stencilkit-demo.png")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(run=demo)
    p = sub.add_parser("bench", help="run the benchmark suite")
    p.add_argument("--quick", action="store_true", help="small sizes, seconds")
    p.add_argument("--json", help="write results as JSON to this file")
    p.add_argument("--plot", help="write a PNG bar chart to this file")
    p.add_argument("--only", nargs="*", help="run only these cases")
    p.set_defaults(run=bench)
    p = sub.add_parser("show", help="print the generated code of FILE.py:NAME")
    p.add_argument("target")
    p.add_argument("--backend", default=None)
    p.set_defaults(run=show)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
