"""The HTML report's parts: its data (plain, unescaped), its matplotlib figures (deterministic,
inline-ready SVG), its templates (shipped with the package) and its escaping (as
``html.escape``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import html
import re
import xml.etree.ElementTree as ET
from importlib.resources import files
from pathlib import Path
from typing import Any

import matplotlib

from cuda_agent.bench.records import AttemptRecord, append_record
from cuda_agent.bench.report import render_html, render_page
from cuda_agent.bench.report_data import Distribution, distribution, log2_bins, report_data
from cuda_agent.bench.report_plots import histogram_svg
from cuda_agent.core.types import EvalResult
from tests.helpers import verdict

REPO = Path(__file__).resolve().parents[2]
ODD_ID = "odd\"id'<i>"


def _result(correct: bool, **fields: Any) -> EvalResult:
    return verdict("p", correct=correct, compiled=True, **fields)


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    records = [
        AttemptRecord("L1_a", 1, 1, "solutions", _result(True, speedup_eager=1.3, reward=1.0)),
        AttemptRecord("L1_b", 1, 1, "solutions", _result(True, speedup_eager=1.2, reward=1.0)),
        AttemptRecord("L1_c", 1, 1, "solutions", _result(True, speedup_eager=0.3, reward=0.1)),
        AttemptRecord(
            ODD_ID,
            2,
            1,
            "solutions",
            _result(False, error={"stage": "build", "message": "error: <b>bad</b>"}),
        ),
    ]
    for record in records:
        append_record(run, record)
    return run


def _strings(value: Any) -> list[str]:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [s for f in dataclasses.fields(value) for s in _strings(getattr(value, f.name))]
    if isinstance(value, list | tuple):
        return [s for item in value for s in _strings(item)]
    return [value] if isinstance(value, str) else []


def test_report_data_is_plain_unescaped_data(tmp_path: Path) -> None:
    data = report_data(_run(tmp_path), [("other", {})], now=dt.datetime(2025, 1, 2, 3, 4))
    assert data.title == "Benchmark report: run"
    assert [s.name for s in data.metrics.subsets] == ["Overall", "Level 1", "Level 2"]
    assert data.metrics.rows[0].groups[0][0] == "75.0%"  # 3 of 4 correct
    assert data.metrics.rows[-1].label == "other" and not data.metrics.rows[-1].this_run
    assert data.fast_p.rows[0].rates[0] == "75.0%"
    eager = data.distributions[0]
    assert eager.label == "Speed-up vs eager (log2 scale)"
    assert sum(b.count for b in eager.bins) == 3 and eager.summary.startswith("n=3, geomean")
    odd = next(r for r in data.problems if r.problem_id == ODD_ID)
    assert odd.verdict == "failed at build" and odd.error == "error: <b>bad</b>"
    assert data.trajectories == [] and data.kernelbench == []
    strings = _strings(data)
    assert ODD_ID in strings  # raw: the templates escape, not the data
    assert not any("&lt;" in s or "&quot;" in s or "<td" in s or "class=" in s for s in strings)


def test_values_beyond_the_axis_go_to_the_end_bins() -> None:
    bins = log2_bins([1 / 100, 100.0, 1.0, 1.4])
    assert len(bins) == 16 and (bins[0].lo, bins[-1].hi) == (-4, 4)
    assert [b.count for b in bins if b.count] == [1, 2, 1]
    assert bins[0].count == 1 and bins[-1].count == 1 and bins[8].count == 2
    assert bins[8].tip == "1x to 1.41x: 2 problem(s)" and bins[8].faster and not bins[7].faster


def test_histogram_svg_is_deterministic_and_ready_to_inline() -> None:
    values = [0.3, 1.2, 1.3, 2.5, 40.0]
    dist = Distribution(
        "speedup_eager", "Speed-up vs eager (log2 scale)", values, log2_bins(values), "n=5"
    )
    rc_before = dict(matplotlib.rcParams)
    svg = histogram_svg(dist, "fig-a")
    assert svg == histogram_svg(dist, "fig-a")  # same data, same bytes
    assert dict(matplotlib.rcParams) == rc_before  # no global matplotlib state changed
    assert svg.startswith('<svg class="histogram" role="img"')
    for absent in ("<?xml", "<!DOCTYPE", "<metadata", "<style", "<script", "font-family"):
        assert absent not in svg
    root = ET.fromstring(svg)  # well-formed
    texts = {"".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert {"Speed-up vs eager (log2 scale)", "Problems", "n=5", "1/16x", "1x", "16x"} <= texts
    assert "<title>1x to 1.41x: 2 problem(s)</title>" in svg
    ids = set(re.findall(r'\bid="([^"]+)"', svg))
    refs = set(re.findall(r'url\(#([^)]+)\)|xlink:href="#([^"]+)"', svg))
    assert ids and all(i.startswith("fig-a-") for i in ids)
    assert {r for pair in refs for r in pair if r} <= ids  # every reference resolves
    other = set(re.findall(r'\bid="([^"]+)"', histogram_svg(dist, "fig-b")))
    assert not ids & other  # two figures in one page share no id


def test_an_empty_distribution_still_draws_its_axes() -> None:
    dist = distribution([], "speedup_compile", "torch.compile")
    svg = histogram_svg(dist, "fig")
    assert "Speed-up vs torch.compile (log2 scale)" in svg
    assert "no correct attempts with this speed-up" in svg and "<title>" not in svg


def test_page_is_stable_and_escapes_as_html_escape(tmp_path: Path) -> None:
    run = _run(tmp_path)
    when = dt.datetime(2025, 1, 2, 3, 4, tzinfo=dt.timezone.utc)
    page = render_page(report_data(run, now=when))
    assert page == render_page(report_data(run, now=when))
    assert html.escape(ODD_ID, quote=True) in page  # odd&quot;id&#x27;&lt;i&gt;
    assert "&#34;" not in page and "&#39;" not in page  # not markupsafe's spelling
    assert "<i>" not in page and "<b>bad</b>" not in page
    assert page.count("<svg") == 2 and page.count("<script") == 1
    assert render_html(run).startswith('<!DOCTYPE html>\n<html lang="en">')


def test_templates_ship_with_the_package() -> None:
    folder = files("cuda_agent.bench").joinpath("templates")
    for name in ("report.html.j2", "_macros.html.j2", "report.css", "report.js"):
        assert folder.joinpath(name).is_file(), name
    pyproject = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    assert '"bench/templates/*"' in pyproject


def test_the_header_reads_as_text_and_names_each_item_once(tmp_path: Path) -> None:
    import json

    from cuda_agent.cluster.ledger import describe

    run = _run(tmp_path)
    figures = {
        "devices": 1,
        "wall_s": 12.0,
        "device_held_fraction": 0.5,
        "device_work_fraction": 0.25,
        "queue_wait_s": {"total": 1.0, "mean": 0.5, "max": 1.0, "jobs": 2},
        "longest_hold_s": 3.0,
        "phases_s": {"build": 2.0, "worker": 4.0},
        "worker_start_s": 1.0,
    }
    info = {
        "mode": "solutions",
        "backend": "cpu",
        "problems": 4,
        "devices": ["cpu0", "cpu1"],
        "requeued_last": [],
        "utilization": figures,
        "fingerprint": {"policy": "strict", "problems": "4 problems, sha256 0123456789ab"},
    }
    (run / "run.json").write_text(json.dumps(info))
    header = dict(report_data(run, [], now=dt.datetime(2025, 1, 2, 3, 4)).header)
    labels = [label for label, _ in report_data(run, []).header]
    assert len(labels) == len(set(labels)), labels
    assert header["Utilization"] == describe(figures)
    assert header["Devices"] == "cpu0, cpu1" and header["Requeued last"] == "none"
    assert header["Judged under"] == "policy strict; problems 4 problems, sha256 0123456789ab"
    assert header["Problems in the set"] == "4" and header["Problems judged"] == "4 (3 solved)"
    assert not any(value.startswith(("{", "[")) for value in header.values()), header
