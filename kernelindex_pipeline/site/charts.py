"""The site's charts, drawn here as inline SVG: no scripts, fonts or files to fetch, so a page shows them
offline from file://. A comparison group's page plots each ranked run's median with its p20-p80 spread; a
kernel's page plots how the kernel scales and how it moved across Liger releases.

Scaling charts follow Liger-Kernel's benchmark dashboard: the comparison groups of one GPU, timed pass,
metric and comparison family whose workloads differ only in the parameter the source swept (its CSV's
``x_name``, kept per workload in ``run_keys``), each implementation's ranked median against that parameter.
History charts: one workload, GPU, pass and metric; each implementation's median per Liger release (the
median of its runs under that release, withdrawn ones included, as they were published) where it was
measured under two releases or more.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field

import kernels
from kernelindex_pipeline.core.catalog import (
    MODES,
    PROTOCOL_NAMES,
    RERUN_FAMILY,
    SOURCE_FAMILY,
    SOURCE_REPLICA_FAMILY,
    gpu_label,
    gpu_label_sql,
)
from kernelindex_pipeline.site.chart_styles import BASELINE_BLUE, LIGER_ORANGE, LineStyle, marker, provider_styles, swatch
from kernelindex_pipeline.site.chart_ticks import TICK_FONT, legible
from kernelindex_pipeline.site.display import params_display, plain, quantity, scale
from kernelindex_pipeline.site.frame import escape as _e
from kernelindex_pipeline.warehouse.sql import records

# Kernel pages stay small: at most this many charts of each kind, the rest counted in a line.
MAX_SCALING_CHARTS = 24
MAX_HISTORY_CHARTS = 16

FAMILY_ORDER = (SOURCE_FAMILY, RERUN_FAMILY, SOURCE_REPLICA_FAMILY)
METRIC_WORDS = {"latency": "latency", "peak_memory": "peak memory"}
RANKED_SQL = """
SELECT r.run_id, r.kernel, r.gpu, coalesce(r.form_factor, '') AS form_factor, r.environment_digest,
    coalesce(p.family, r.evidence_level) AS family, r.operation_mode, r.metric, r.unit, r.provider, r.implementation,
    r.median_value, r.workload_digest
FROM runs r
JOIN ranks USING (run_id)
LEFT JOIN (SELECT protocol_digest, any_value(json_extract_string(manifest, '$.spec.comparability.family')) AS family
           FROM protocols GROUP BY ALL) p USING (protocol_digest)
ORDER BY r.run_id
"""

WORKLOADS_SQL = "SELECT workload_digest, any_value(definition) FROM workloads GROUP BY ALL"
# The parameter(s) the source swept to reach each workload; a workload where two sweeps cross has both.
SWEPT_SQL = "SELECT workload_digest, list_sort(list_distinct(list(x_name))) FROM run_keys GROUP BY ALL"

HISTORY_SQL = f"""
SELECT kernel, {gpu_label_sql()} AS gpu, operation_mode, metric, any_value(unit) AS unit, workload_digest,
    any_value(workload_slug) AS workload_slug, provider, any_value(implementation) AS implementation, liger_version,
    median(median_value) AS median_value, count(*) AS runs, arg_max(run_id, observed_at) AS newest_run
FROM runs
WHERE liger_version IS NOT NULL
GROUP BY kernel, gpu, form_factor, operation_mode, metric, workload_digest, provider, liger_version
QUALIFY count(*) OVER (PARTITION BY kernel, gpu, form_factor, operation_mode, metric, workload_digest, provider) >= 2
"""


@dataclass
class Line:
    provider: str
    label: str
    points: list[tuple] = field(default_factory=list)  # (x, median, run_id, note) in x order


@dataclass
class Chart:
    kind: str  # "scaling" or "history"
    title: str
    subtitle: str
    x_label: str
    unit: str
    metric: str
    lines: list[Line]
    attrs: dict
    priority: tuple  # which charts a capped page draws first
    order: tuple  # where a drawn chart stands on the page


def version_key(version: str) -> tuple:
    """'0.5.10' after '0.5.9': numeric parts compare as numbers."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.+-]", version))


def _mode_order(mode: str) -> int:
    return MODES.index(mode) if mode in MODES else len(MODES)


def scaling_charts(con, definitions: dict[str, dict]) -> dict[str, list[Chart]]:
    """Every kernel's scaling series with two swept values or more, from one query over the ranked runs."""
    swept = dict(con.execute(SWEPT_SQL).fetchall())
    series: dict[tuple, dict] = defaultdict(lambda: {"lines": defaultdict(dict), "unit": None})
    for run in records(con, RANKED_SQL):
        definition, x_names = definitions.get(run["workload_digest"]), swept.get(run["workload_digest"], ())
        if definition is None:
            continue
        spec = kernels.lookup(run["kernel"])
        params = definition.get("parameters", {})
        for x_name in x_names:
            name = spec.canonical(x_name)
            if name not in params:
                continue
            fixed = {k: v for k, v in params.items() if k != name}
            key = (run["kernel"], run["family"], run["gpu"], run["form_factor"], run["environment_digest"],
                   run["metric"], run["operation_mode"], name,
                   params_display(fixed, definition.get("dtype")),
                   json.dumps(definition.get("implied") or {}, sort_keys=True))
            entry = series[key]
            entry["unit"] = run["unit"]
            entry["lines"][run["provider"]][params[name]] = run
    out: dict[str, list[Chart]] = defaultdict(list)
    for key, entry in series.items():
        kernel, family, gpu, form_factor, _, metric, mode, name, fixed, _ = key
        xs = {x for points in entry["lines"].values() for x in points}
        if len(xs) < 2:
            continue
        lines = []
        for provider, points in entry["lines"].items():
            ordered = sorted(points.items(), key=lambda p: _x_key(p[0]))
            lines.append(Line(provider, ordered[0][1]["implementation"],
                              [(x, r["median_value"], r["run_id"], f"{name} {plain(x)}") for x, r in ordered]))
        family_rank = FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER)
        groups = len(xs)
        out[kernel].append(Chart(
            "scaling", f"{mode} · {METRIC_WORDS.get(metric, metric)} · {gpu_label(gpu, form_factor)}",
            f"{name} swept · {fixed or 'no other parameters'} · protocol {PROTOCOL_NAMES.get(family, family)}",
            name, entry["unit"], metric, lines,
            {"gpu": gpu, "mode": mode, "metric": metric, "swept": name, "family": family},
            # the published benchmarks first, then the longest sweeps
            priority=(family_rank, -groups, gpu, form_factor, metric, _mode_order(mode), mode, name, fixed),
            order=(family_rank, gpu, form_factor, metric, _mode_order(mode), mode, name, fixed)))
    return out


def history_charts(con, definitions: dict[str, dict]) -> dict[str, list[Chart]]:
    """Every kernel's release histories: (workload, GPU, pass, metric) with the implementations measured under
    two Liger releases or more, from one grouped query."""
    charts: dict[tuple, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in records(con, HISTORY_SQL):
        charts[(row["kernel"], row["gpu"], row["metric"], row["operation_mode"], row["workload_slug"],
                row["workload_digest"])][row["provider"]].append(row)
    out: dict[str, list[Chart]] = defaultdict(list)
    for (kernel, gpu, metric, mode, slug, digest), by_provider in charts.items():
        lines = []
        for provider, rows in by_provider.items():
            rows.sort(key=lambda r: version_key(r["liger_version"]))
            lines.append(Line(provider, rows[0]["implementation"], [
                (r["liger_version"], r["median_value"], r["newest_run"],
                 f"Liger {r['liger_version']} ({r['runs']} run{'s' if r['runs'] > 1 else ''})") for r in rows]))
        first = next(iter(by_provider.values()))[0]
        definition = definitions.get(digest)
        workload = params_display(definition.get("parameters", {}), definition.get("dtype")) if definition else slug
        order = (gpu, metric, _mode_order(mode), mode, slug)
        out[kernel].append(Chart(
            "history", f"{mode} · {METRIC_WORDS.get(metric, metric)} · {gpu}", workload, "Liger release",
            first["unit"], metric, lines, {"gpu": gpu, "mode": mode, "metric": metric, "workload": slug},
            priority=order, order=order))
    return out


def _x_key(x) -> tuple:
    return (0, x, "") if isinstance(x, (int, float)) else (1, 0, str(x))


# -- drawing ---------------------------------------------------------------------------------------

CHART_ROW = 28
CHART_LABEL = 200
CHART_WIDTH = 760


def chart_svg(runs: list[dict]) -> str:
    """Median (dot) with p20-p80 bar for each run. The axis spans the runs' values, padded; it starts at
    zero only when the values come near it, so narrow spreads stay visible (the caption says which)."""
    if not runs:
        return "<p>No ranked runs in this group.</p>"
    unit = runs[0]["unit"]
    lows = [r["p20_value"] if r["p20_value"] is not None else r["median_value"] for r in runs]
    highs = [r["p80_value"] if r["p80_value"] is not None else r["median_value"] for r in runs]
    lo, hi = min(lows + [r["median_value"] for r in runs]), max(highs + [r["median_value"] for r in runs])
    pad = max((hi - lo) * 0.08, hi * 0.02, 1)
    lo, hi = (0 if lo - pad < (hi - lo) * 0.5 else lo - pad), hi + pad
    plot = CHART_WIDTH - CHART_LABEL - 90
    height = CHART_ROW * len(runs) + 40

    def x(v):
        return CHART_LABEL + plot * ((v - lo) / (hi - lo))

    parts = [f"<svg id=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{CHART_WIDTH}\" height=\"{height}\" "
             f"viewBox=\"0 0 {CHART_WIDTH} {height}\" role=\"img\" aria-label=\"median with p20-p80 per run\">",
             f"<rect x=\"{CHART_LABEL}\" y=\"4\" width=\"{plot}\" height=\"{CHART_ROW * len(runs)}\" fill=\"#f3f6fa\"/>"]
    for i, (r, p20, p80) in enumerate(zip(runs, lows, highs)):
        y = 4 + CHART_ROW * i + CHART_ROW / 2
        med = r["median_value"]
        colour = LIGER_ORANGE if r["project"] == "Liger-Kernel" else BASELINE_BLUE
        parts.append(f"<text x=\"{CHART_LABEL - 8}\" y=\"{y + 4:.1f}\" text-anchor=\"end\" font-size=\"13\">"
                     f"#{r['rank']} {_e(r['implementation'])}</text>")
        parts.append(f"<rect class=\"spread\" x=\"{x(p20):.1f}\" y=\"{y - 7:.1f}\" "
                     f"width=\"{max(x(p80) - x(p20), 3):.1f}\" height=\"14\" fill=\"{colour}\" fill-opacity=\"0.45\">"
                     f"<title>p20 {quantity(p20, unit)} – p80 {quantity(p80, unit)}</title></rect>")
        parts.append(f"<circle class=\"median\" cx=\"{x(med):.1f}\" cy=\"{y:.1f}\" r=\"6\" fill=\"{colour}\"/>")
        parts.append(f"<text x=\"{x(max(p80, med)) + 10:.1f}\" y=\"{y + 4:.1f}\" font-size=\"12\">"
                     f"{quantity(med, unit)}</text>")
    axis_y = 4 + CHART_ROW * len(runs)
    parts.append(f"<line x1=\"{CHART_LABEL}\" y1=\"{axis_y}\" x2=\"{CHART_LABEL + plot}\" y2=\"{axis_y}\" stroke=\"#444\"/>")
    for frac in (0, 0.25, 0.5, 0.75, 1):
        parts.append(f"<text x=\"{CHART_LABEL + plot * frac:.1f}\" y=\"{axis_y + 16}\" text-anchor=\"middle\" "
                     f"font-size=\"11\" fill=\"#444\">{quantity(lo + (hi - lo) * frac, unit)}</text>")
    parts.append("</svg>")
    caption = ("Dot: median; bar: p20–p80. " + ("Axis starts at zero." if lo == 0 else
               f"Axis starts at {quantity(lo, unit)}, not zero."))
    return "".join(parts) + f"<p class=\"muted\">{caption}</p>"


WIDTH, PLOT_HEIGHT = 480, 224
LEFT, RIGHT, TOP, BOTTOM = 58, 16, 14, 52


def _nice_step(span: float, ticks: int = 4) -> float:
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)


def _x_positions(xs: list, ordinal: bool) -> dict:
    """Pixel x of each value: numbers on a linear or (when they span 4× or more) log axis, anything else,
    and release names, evenly spaced in order."""
    plot = WIDTH - LEFT - RIGHT
    numeric = not ordinal and all(isinstance(x, (int, float)) for x in xs)
    if not numeric:
        step = plot / len(xs)
        return {x: LEFT + step * (i + 0.5) for i, x in enumerate(xs)}
    lo, hi = min(xs), max(xs)
    log = lo > 0 and hi / lo >= 4
    f = (lambda v: math.log(v)) if log else (lambda v: v)
    pad = 0.04 * plot
    return {x: LEFT + pad + (plot - 2 * pad) * (f(x) - f(lo)) / ((f(hi) - f(lo)) or 1) for x in xs}


def line_chart(chart: Chart, styles: dict[str, LineStyle], number: int) -> str:
    """A figure: title, the SVG (scales to its container through its viewBox), and the legend."""
    xs = sorted({p[0] for line in chart.lines for p in line.points},
                key=version_key if chart.kind == "history" else _x_key)
    at = _x_positions(xs, ordinal=chart.kind == "history")
    top_value = max(p[1] for line in chart.lines for p in line.points)
    divisor, unit_name = scale(top_value, chart.unit)
    step = _nice_step(top_value / divisor) * divisor if top_value > 0 else 1
    y_max = step * math.ceil(top_value * 1.04 / step)
    keep = math.ceil(len(xs) / 8)  # at most eight tick labels; every point still has its tooltip
    labels = [(x, plain(x)) for i, x in enumerate(xs) if i % keep == 0 or i == len(xs) - 1]
    # labels too wide to sit side by side (model names) stand upright below the axis
    upright = max(len(text) for _, text in labels) * len(labels) > 56
    labels = legible(labels, at, upright)
    bottom = BOTTOM + (6.5 * max(len(text) for _, text in labels) if upright else 0)
    plot_h, height = PLOT_HEIGHT, TOP + PLOT_HEIGHT + bottom

    def y(v):
        return TOP + plot_h * (1 - v / y_max)

    y_label = f"median {METRIC_WORDS.get(chart.metric, chart.metric)} ({unit_name})"
    parts = [f"<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {height:.0f}\" "
             f"role=\"img\" aria-label=\"{_e(chart.title)}: {_e(y_label)} against {_e(chart.x_label)}\">",
             f"<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{WIDTH - LEFT - RIGHT}\" height=\"{plot_h}\" fill=\"#f6f8fa\"/>"]
    for i in range(round(y_max / step) + 1):
        ty = y(i * step)
        parts.append(f"<line x1=\"{LEFT}\" y1=\"{ty:.1f}\" x2=\"{WIDTH - RIGHT}\" y2=\"{ty:.1f}\" stroke=\"#d8dee4\"/>"
                     f"<text x=\"{LEFT - 6}\" y=\"{ty + 4:.1f}\" text-anchor=\"end\" font-size=\"13\" fill=\"#444\">"
                     f"{i * step / divisor:.4g}</text>")
    for x, text in labels:
        tx, ty = at[x], TOP + plot_h + 16
        place = (f"x=\"{tx + 4:.1f}\" y=\"{ty - 8}\" text-anchor=\"end\" transform=\"rotate(-90 {tx + 4:.1f} {ty - 8})\""
                 if upright else f"x=\"{tx:.1f}\" y=\"{ty}\" text-anchor=\"middle\"")
        parts.append(f"<text class=\"x-tick\" {place} font-size=\"{TICK_FONT}\" fill=\"#444\">{_e(text)}</text>")
    parts.append(f"<text x=\"{LEFT + (WIDTH - LEFT - RIGHT) / 2:.1f}\" y=\"{height - 6:.0f}\" text-anchor=\"middle\" "
                 f"font-size=\"14\">{_e(chart.x_label)}</text>"
                 f"<text transform=\"translate(14 {TOP + plot_h / 2:.1f}) rotate(-90)\" text-anchor=\"middle\" "
                 f"font-size=\"14\">{_e(y_label)}</text>")
    # Lines drawn later are thinner, with smaller markers: a line lying exactly on an earlier one shows inside it.
    for order, line in enumerate(chart.lines):
        style = styles[line.provider]
        width, size = max(1.5, 4 - 1.25 * order), max(2.5, 6 - 1.5 * order)
        dash = f" stroke-dasharray=\"{style.dash}\"" if style.dash else ""
        coords = [(at[x], y(v)) for x, v, _, _ in line.points]
        parts.append(f"<g class=\"line\" data-provider=\"{_e(line.provider)}\"><polyline fill=\"none\" "
                     f"stroke=\"{style.colour}\" stroke-width=\"{width}\"{dash} points=\""
                     + " ".join(f"{px:.1f},{py:.1f}" for px, py in coords) + "\"/>")
        for (px, py), (_, value, run_id, note) in zip(coords, line.points):
            title = f"<title>{_e(line.label)} · {_e(note)} · {quantity(value, chart.unit)}</title>"
            parts.append(f"<a href=\"../runs/{_e(run_id)}.html\">{title}"
                         f"{marker(style.marker, px, py, size, style.colour)}</a>")
        parts.append("</g>")
    parts.append("</svg>")
    legend = "".join(f"<li>{swatch(styles[line.provider])}{_e(line.label)}</li>" for line in chart.lines)
    attrs = "".join(f" data-{k}=\"{_e(v)}\"" for k, v in chart.attrs.items())
    return (f"<figure class=\"chart\" id=\"{chart.kind}-{number}\"{attrs}><figcaption><strong>{_e(chart.title)}"
            f"</strong><br><span class=\"muted\">{_e(chart.subtitle)}</span></figcaption>{''.join(parts)}"
            f"<ul class=\"legend\">{legend}</ul></figure>")


def charts_section(kind: str, charts: list[Chart], styles: dict[str, LineStyle]) -> str:
    """A kernel page's charts of one kind, the first of them by priority, drawn in reading order."""
    if not charts:
        return ""
    limit = MAX_SCALING_CHARTS if kind == "scaling" else MAX_HISTORY_CHARTS
    drawn = sorted(sorted(charts, key=lambda c: c.priority)[:limit], key=lambda c: c.order)
    for chart in drawn:
        chart.lines.sort(key=lambda line: (line.provider != "liger", line.provider))
    if kind == "scaling":
        heading = "Scaling"
        lead = ("Each implementation's median in the comparison groups that differ only in the swept parameter; "
                "a point opens its run.")
    else:
        heading = "Across Liger releases"
        lead = ("Each implementation's median per Liger release, for one workload, GPU and pass; a point opens "
                "the release's newest run.")
    left_out = len(charts) - len(drawn)
    if left_out:
        lead += f" {len(drawn)} of {len(charts)} charts drawn; {left_out} left out (their groups are listed below)."
    figures = "".join(line_chart(c, styles, i) for i, c in enumerate(drawn, 1))
    return (f"<section id=\"{kind}\"><h2>{heading}</h2><p class=\"muted\">{lead}</p>"
            f"<div class=\"charts\">{figures}</div></section>")


def kernel_charts(con) -> dict[str, str]:
    """The scaling and history sections of every kernel's page (HTML), by kernel."""
    definitions = {digest: json.loads(text)["spec"] for digest, text in con.execute(WORKLOADS_SQL).fetchall()}
    scaling, history = scaling_charts(con, definitions), history_charts(con, definitions)
    styles = provider_styles(line.provider for charts in (*scaling.values(), *history.values())
                             for c in charts for line in c.lines)
    out = {}
    for kernel in scaling.keys() | history.keys():
        out[kernel] = (charts_section("scaling", scaling.get(kernel, []), styles)
                       + charts_section("history", history.get(kernel, []), styles))
    return out
