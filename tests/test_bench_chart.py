"""The bench chart (issue 29): every case drawn, ours apart from the peers in colour, the
spread as error bars, the legend clear of every bar."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from stencilkit_apps import chart  # noqa: E402

RESULTS = [
    {"name": "lap3d", "size": "64^3", "bytes": 2 * 8 * 64**3,
     "seconds": {"stencilkit-c": 1e-4, "numba-prange": 1.2e-4, "numpy-slicing": 4e-4},
     "spread": {"stencilkit-c": 0.02, "numba-prange": 0.05, "numpy-slicing": 0.01}},
    {"name": "tridiag", "size": "64x64x80", "bytes": 0,  # no bandwidth figure: still drawn
     "seconds": {"stencilkit-c": 2e-3, "hand-c-kij": 1.9e-3}, "spread": {}},
    {"name": "call", "size": "16^3", "bytes": 0, "reference": "stencilkit-c",
     "seconds": {"stencilkit-c": 2e-6, "numba": 3.5e-6}, "spread": {"numba": 0.1}},
    {"name": "hdiff", "size": "64x64x80", "bytes": 10**7,
     "seconds": {"stencilkit-c": 1e-3, "hand-c-fused": 1e-3}, "spread": {}},
]


def test_every_case_has_a_panel_and_the_colours_say_whose():
    fig = chart.chart(RESULTS, {"copy": 20.0, "triad": 22.0})
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == len(RESULTS)
    for ax, r in zip(shown, RESULTS):
        assert r["name"] in ax.get_title()
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert sorted(labels) == sorted(r["seconds"])
        colours = {label: bar.get_facecolor()[:3] for label, bar in zip(labels, ax.patches)}
        ours = {c for n, c in colours.items() if n.startswith("stencilkit")}
        peers = {c for n, c in colours.items() if not n.startswith("stencilkit")}
        assert len(ours) == 1 and len(peers) == 1 and ours != peers
        # stencilkit's own bar is at 1.0: speeds are relative to it
        mine = next(b for lab, b in zip(labels, ax.patches) if lab.startswith("stencilkit"))
        assert mine.get_width() == pytest.approx(1.0)


def test_the_legend_covers_no_bar():
    fig = chart.chart(RESULTS, None)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    for ax in fig.axes:
        for bar in ax.patches:
            assert not box.overlaps(bar.get_window_extent(renderer))


def test_spread_is_drawn_as_error_bars():
    fig = chart.chart(RESULTS[:1], None)
    ax = fig.axes[0]
    assert any(c.__class__.__name__ == "LineCollection" for c in ax.collections)


def test_no_results_no_chart():
    assert chart.chart([], None) is None
