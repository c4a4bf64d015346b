"""The report's figures, drawn by matplotlib as SVG to embed inline in the page.

``histogram_svg`` draws one speed-up distribution (``report_data.Distribution``): bars per
half-octave bin on a log2 axis from 1/16x to 16x (faster than the baseline in blue, slower in
orange), a dashed line at 1x, integer counts, the summary line on top and a tooltip per bar.
The SVG is deterministic (a fixed hash salt, no date, text kept as text rather than glyph
paths) and ready to inline: no XML prolog or metadata, its element ids prefixed so that two
figures in one page never share an id, and no style sheet of its own (``report.css`` styles it).

It uses matplotlib's object API (``matplotlib.figure.Figure``) under ``matplotlib.rc_context``:
no pyplot, so no GUI backend is ever chosen or needed and no global state is changed, and it
works headless. It does not bin or summarise the data (``report_data`` does); the only texts
it writes are the axis labels and the summary (escaped by matplotlib's SVG writer) and the
tooltips (escaped here).
"""

from __future__ import annotations

import io
import re
from html import escape
from typing import Any

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from cuda_agent.bench.report_data import HIST_MAX_LOG2, HIST_MIN_LOG2, Distribution

FASTER, SLOWER, ONE_X = "#2f81f7", "#f0883e", "#cf222e"
TEXT, MUTED, GRID, PLOT_BG = "#1f2328", "#57606a", "#eaeef2", "#fbfcfd"
SIZE_IN = (560 / 96, 270 / 96)  # 560 x 270 CSS pixels, as the page's figures always were
RC: dict[Any, Any] = {  # matplotlib types its keys as a Literal of every rc name
    "svg.fonttype": "none",  # text as <text>, findable and selectable in the page
    "svg.hashsalt": "cuda-agent-report",  # stable ids for clip paths and markers
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans"],  # matplotlib's own font: measured the same everywhere
    "font.size": 8.25,  # points of a 72-unit inch: 11 CSS pixels
    "text.color": TEXT,
    "axes.edgecolor": MUTED,
    "axes.labelcolor": TEXT,
    "axes.labelweight": "bold",
    "axes.labelsize": 9,
    "axes.titlesize": 8.25,
    "xtick.color": MUTED,
    "ytick.color": MUTED,
    "xtick.labelcolor": TEXT,
    "ytick.labelcolor": TEXT,
}
_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.S)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)
_STYLE = re.compile(r"\s*<style\b[^>]*>.*?</style>", re.S)
_EMPTY_DEFS = re.compile(r"\s*<defs>\s*</defs>")
_BAR_GROUP = re.compile(r'<g id="bar_(\d+)">')
_ID = re.compile(r' id="([^"]+)"')
_REFERENCE = re.compile(r'url\(#([^)]+)\)|href="#([^"]+)"')  # href: xlink's or SVG 2's
_NO_ROTATION = re.compile(r' transform="rotate\(-0 [^"]*\)"')
_FONT_FAMILY = re.compile(r"font-family: [^;\"]*;? ?")
_PATH_DATA = re.compile(r' d="([^"]*)"')
_BETWEEN_TAGS = re.compile(r">\s+<")


def tick_label(k: int) -> str:
    """The label of 2**k on the speed-up axis: ``1/16x`` ... ``1x`` ... ``16x``."""
    return f"{2**k}x" if k >= 0 else f"1/{2**-k}x"


def histogram_svg(dist: Distribution, figure_id: str) -> str:
    """``dist`` as an inline ``<svg class="histogram">`` element (ids prefixed ``figure_id``)."""
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=SIZE_IN)
        fig.subplots_adjust(left=0.09, right=0.96, top=0.89, bottom=0.2)
        ax = fig.add_subplot()
        _draw(ax, dist)
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None})
    return _inline(out.getvalue(), dist, figure_id)


def _draw(ax: Axes, dist: Distribution) -> None:
    top_count = max((b.count for b in dist.bins), default=0)
    step = max(1, -(-top_count // 5))
    y_max = max(step * -(-top_count // step), 1)
    ax.set_facecolor(PLOT_BG)
    ax.set_axisbelow(True)
    ax.grid(axis="y", color=GRID, linewidth=1)
    for i, b in enumerate(dist.bins):
        if not b.count:
            continue  # an empty bin draws nothing (and has no tooltip to show)
        width = b.hi - b.lo
        (bar,) = ax.bar(
            b.lo + width / 2, b.count, width=width * 0.92, color=FASTER if b.faster else SLOWER
        )
        bar.set_gid(f"bar_{i}")
    ax.axvline(0, color=ONE_X, linewidth=1, linestyle=(0, (4, 3)))
    ax.set_xlim(HIST_MIN_LOG2, HIST_MAX_LOG2)
    ax.set_xticks(
        range(HIST_MIN_LOG2, HIST_MAX_LOG2 + 1),
        [tick_label(k) for k in range(HIST_MIN_LOG2, HIST_MAX_LOG2 + 1)],
    )
    ax.set_ylim(0, y_max)
    ax.set_yticks(range(0, y_max + 1, step))
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_xlabel(dist.label)
    ax.set_ylabel("Problems")
    ax.set_title(dist.summary, loc="left")


def _inline(svg: str, dist: Distribution, figure_id: str) -> str:
    """matplotlib's SVG document as a compact element for an HTML page: no prolog, metadata
    or style sheet; a tooltip per bar; only the ids that are referenced (clip paths, tick
    markers), prefixed with ``figure_id``; no identity rotations; the font family left to the
    page's style sheet; no whitespace between elements."""
    svg = _PROLOG.sub("", svg, count=1)
    svg = _METADATA.sub("", svg, count=1)
    svg = _STYLE.sub("", svg)
    svg = _EMPTY_DEFS.sub("", svg)
    tips = {str(i): b.tip for i, b in enumerate(dist.bins)}
    svg = _BAR_GROUP.sub(lambda m: f"<g><title>{escape(tips.get(m.group(1), ''))}</title>", svg)
    used = {a or b for a, b in _REFERENCE.findall(svg)}
    svg = _ID.sub(lambda m: f' id="{figure_id}-{m.group(1)}"' if m.group(1) in used else "", svg)
    svg = _REFERENCE.sub(lambda m: _prefixed(m, figure_id), svg)
    svg = _NO_ROTATION.sub("", svg)
    svg = _FONT_FAMILY.sub("", svg)
    svg = _PATH_DATA.sub(lambda m: ' d="' + " ".join(m.group(1).split()) + '"', svg)
    svg = _BETWEEN_TAGS.sub("><", svg.strip())
    attrs = f' class="histogram" role="img" aria-label="{escape(dist.label)}"'
    return svg.replace("<svg", "<svg" + attrs, 1)


def _prefixed(match: re.Match[str], prefix: str) -> str:
    name = match.group(1) or match.group(2)
    return match.group(0).replace(f"#{name}", f"#{prefix}-{name}", 1)
