"""The text of ``stencilkit bench``'s results: the table of one run and the ratio table of
two ``--json`` results."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def table(results: list[dict], bw: dict[str, float] | None) -> str:
    lines = [f"STREAM: copy {bw['copy']:.1f} GB/s, triad {bw['triad']:.1f} GB/s" if bw else
             "STREAM: not measured", ""]
    header = f"{'case':<14} {'implementation':<26} {'median':>12} {'spread':>7} {'GB/s':>8} " \
             f"{'/STREAM':>8} {'vs ours':>8}"
    lines += [header, "-" * len(header)]
    for r in results:
        ours = r["seconds"].get(r.get("reference", "stencilkit-c"))
        for impl, t in r["seconds"].items():
            gbs = r["bytes"] / t / 1e9 if r["bytes"] else None
            rate = f"{gbs:8.1f}" if gbs else " " * 8
            frac = f"{gbs / bw['copy']:8.2f}" if gbs and bw else " " * 8
            ratio = f"{t / ours:8.2f}" if ours else " " * 8
            half = r.get("spread", {}).get(impl)
            sp = f"{100 * half:6.1f}%" if half is not None else " " * 7
            shown = f"{t * 1e6:9.2f} us" if t < 1e-3 else f"{t * 1e3:9.2f} ms"
            lines.append(f"{r['name']:<14} {impl:<26} {shown:>12} {sp} {rate} {frac} {ratio}")
        if "coloring_seconds" in r:
            lines.append(f"{r['name']:<14} {'(block colouring, once)':<22} "
                         f"{r['coloring_seconds'] * 1e3:9.2f} ms")
    return "\n".join(lines)


def compare(path_a: str, path_b: str) -> int:
    """The ratio table of two ``--json`` results: each implementation's median in A and B,
    B/A, and its ratio to stencilkit in each run (those should agree between two runs on one
    machine; their quotient is how far they do not)."""
    try:
        runs = [json.loads(Path(p).read_text()) for p in (path_a, path_b)]
        cases = [{r["name"]: r for r in run["cases"]} for run in runs]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"stencilkit bench --compare: not two results of 'stencilkit bench --json' "
              f"({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    header = (f"{'case':<14} {'implementation':<26} {'A':>11} {'B':>11} {'B/A':>6} "
              f"{'vs ours A':>9} {'vs ours B':>9} {'drift':>6}")
    bw = [(run.get("stream_gbs") or {}).get("copy") for run in runs]
    lines = [f"A: {path_a} (STREAM copy {bw[0] or 0:.1f} GB/s)",
             f"B: {path_b} (STREAM copy {bw[1] or 0:.1f} GB/s)", "", header, "-" * len(header)]

    def shown(t: float) -> str:
        return f"{t * 1e6:8.2f} us" if t < 1e-3 else f"{t * 1e3:8.2f} ms"

    for name, ra in cases[0].items():
        rb = cases[1].get(name)
        if rb is None:
            continue
        refs = [r["seconds"].get(r.get("reference", "stencilkit-c")) for r in (ra, rb)]
        for impl, ta in ra["seconds"].items():
            tb = rb["seconds"].get(impl)
            if tb is None:
                continue
            va, vb = (t / ref if ref else None for t, ref in ((ta, refs[0]), (tb, refs[1])))
            rel = (f"{va:9.2f} {vb:9.2f} {vb / va:6.2f}" if va and vb else " " * 26)
            lines.append(f"{name:<14} {impl:<26} {shown(ta):>11} {shown(tb):>11} "
                         f"{tb / ta:6.2f} {rel}")
    lines += ["", "drift: (vs ours in B) / (vs ours in A); 1.00 means the ratio held between runs"]
    print("\n".join(lines))
    return 0


