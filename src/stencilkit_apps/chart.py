"""The chart of ``stencilkit bench --plot`` (needs matplotlib: ``pip install
'stencilkit[apps]'``)."""

from __future__ import annotations

OURS_COLOUR, PEER_COLOUR = "tab:orange", "tab:blue"


def save(results: list[dict], bw: dict[str, float] | None, path: str) -> None:
    fig = chart(results, bw)
    if fig is not None:
        fig.savefig(path, dpi=100)


def chart(results: list[dict], bw: dict[str, float] | None):
    """The benchmark chart (a matplotlib Figure; None without results). Every case in a
    panel of its own: each implementation's speed relative to stencilkit's
    (its median over the implementation's, so higher is faster and stencilkit is at 1), ours
    in one colour and the peers in another, the spread as error bars; the legend above the
    panels, never over a bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = [r for r in results if r["seconds"]]
    if not rows:
        return None
    ncols = min(3, len(rows))
    nrows = -(-len(rows) // ncols)
    tallest = max(len(r["seconds"]) for r in rows)
    fig, axes = plt.subplots(nrows, ncols, squeeze=False,
                             figsize=(5.6 * ncols, (0.9 + 0.32 * tallest) * nrows + 0.6))
    for ax, r in zip(axes.flat, rows):
        times = r["seconds"]
        ours = times.get(r.get("reference", "stencilkit-c")) or next(
            (t for n, t in times.items() if n.startswith("stencilkit")), None)
        names = sorted(times, key=lambda n: times[n], reverse=True)  # fastest on top
        base = ours or min(times.values())
        speed = [base / times[n] for n in names]
        spread = r.get("spread", {})
        ax.barh(names, speed, xerr=[v * spread.get(n, 0.0) for v, n in zip(speed, names)],
                color=[OURS_COLOUR if n.startswith("stencilkit") else PEER_COLOUR
                       for n in names], ecolor="black", capsize=2)
        ax.axvline(1.0, color="gray", lw=0.8, ls=":")
        title = f"{r['name']} ({r['size']})"
        if r.get("bytes") and ours:
            title += f"\nstencilkit {r['bytes'] / ours / 1e9:.1f} GB/s" + (
                f", STREAM copy {bw['copy']:.1f}" if bw else "")
        ax.set_title(title, fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xlabel("speed relative to stencilkit (higher is faster)" if ours else
                      "speed relative to the fastest", fontsize=8)
    for ax in list(axes.flat)[len(rows):]:
        ax.set_visible(False)
    fig.legend(handles=[Patch(color=OURS_COLOUR, label="stencilkit"),
                        Patch(color=PEER_COLOUR, label="peers"),
                        Patch(facecolor="white", edgecolor="black",
                              label="error bar: half the interquartile range")],
               loc="upper center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.5 / fig.get_figheight()))
    return fig


