"""A run folder as one self-contained HTML page: metrics, distributions, problems, trajectories.

``render_html`` reads a run folder (``run.json``, ``results.jsonl`` and the agent attempts'
``trajectory.jsonl`` files) and returns a single HTML page with inline CSS, inline SVG and a
little inline JavaScript, so it opens from ``file://`` with no network. The page holds:

1. a header with the run's information (problem set, backend, model or solutions, date, counts);
2. the paper-style table (Table 1: pass rate, faster rates and geomean speed-ups per subset) of
   this run, of this run over the problems with no task-lint flag, next to comparison rows
   (other runs' metrics or ``paper.paper_metrics``), the list of flagged (degenerate)
   problems, and a fast_p table of this run;
3. histograms of the speed-ups vs eager and vs torch.compile of the correct chosen attempts
   (log2 bins);
4. the per-problem table of the chosen attempts (verdict, reward, times, speed-ups, flags, the
   problem's lint flags, the error message of a failure), sortable by clicking a header;
   degenerate problems are marked, linking to
5. (with KernelBench results) KernelBench's verdicts beside ours;
6. the trajectory viewer: one collapsible section per agent attempt with a trajectory, turn by
   turn (assistant messages, tool calls with their arguments, tool results, evaluations, exit).

This module only puts the pieces together: the data comes from ``report_data`` (with
``report_kb`` and ``report_trajectory``), the figures from ``report_plots`` (matplotlib), and
the HTML from the Jinja2 templates in ``templates/`` (``report.html.j2`` and its partials; the
style sheet ``report.css`` and script ``report.js`` are inlined as they are). Autoescaping is
on for every template, and every value is escaped as ``html.escape`` does (quotes included), so
every piece of data from the run is escaped; trajectories are embedded as escaped HTML, never
as executable JSON, and the script only sorts tables, opens linked sections and marks the page
ready. Nothing here evaluates anything, computes metrics (``metrics.compute_metrics`` does),
fetches anything, or modifies the run folder (``write_html`` writes only ``out_file``).
"""

from __future__ import annotations

import functools
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from cuda_agent.bench.agreement import KernelBenchComparison
from cuda_agent.bench.report_data import PROBLEM_COLUMNS, ReportData, report_data
from cuda_agent.bench.report_kb import COLUMNS as KB_COLUMNS
from cuda_agent.bench.report_plots import histogram_svg
from cuda_agent.bench.report_trajectory import trajectory_anchor

__all__ = ["render_html", "render_page", "trajectory_anchor", "write_html"]

PAGE_TEMPLATE = "report.html.j2"


def render_html(
    run_dir: Path,
    comparisons: Sequence[tuple[str, dict[str, Any]]] = (),
    kernelbench: Sequence[KernelBenchComparison] = (),
) -> str:
    """The report page of ``run_dir`` (with comparison rows ``(label, metrics)`` and
    KernelBench's verdicts beside ours, problem by problem) as a string."""
    return render_page(report_data(Path(run_dir), comparisons, kernelbench))


def write_html(
    run_dir: Path,
    out_file: Path,
    comparisons: Sequence[tuple[str, dict[str, Any]]] = (),
    kernelbench: Sequence[KernelBenchComparison] = (),
) -> Path:
    """Render ``run_dir``'s report and write it to ``out_file`` (UTF-8); returns ``out_file``."""
    out_file = Path(out_file)
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(render_html(Path(run_dir), comparisons, kernelbench), encoding="utf-8")
    return out_file


def render_page(report: ReportData) -> str:
    """The page of already-gathered ``report`` data (figures drawn here)."""
    figures = [Markup(histogram_svg(d, f"hist-{d.field}")) for d in report.distributions]
    page = (
        environment()
        .get_template(PAGE_TEMPLATE)
        .render(report=report, figures=figures, columns=PROBLEM_COLUMNS, kb_columns=KB_COLUMNS)
    )
    return page.rstrip("\n") + "\n"


@functools.cache
def environment() -> Environment:
    """The report's Jinja2 environment: the package's templates, everything autoescaped."""
    env = Environment(
        loader=PackageLoader("cuda_agent.bench", "templates"),
        autoescape=True,
        finalize=_escaped,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals["inline"] = functools.partial(_inline, env)
    return env


def _escaped(value: Any) -> Any:
    """A value as ``html.escape(str(value), quote=True)`` writes it (``&quot;``, ``&#x27;``),
    as the page always escaped its data; markup (macros, the figures) passes as it is."""
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape(str(value), quote=True))


def _inline(env: Environment, name: str) -> Markup:
    """A static file of the templates folder (``report.css``, ``report.js``), as it is."""
    assert env.loader is not None
    source, _, _ = env.loader.get_source(env, name)
    return Markup(source.rstrip("\n"))
