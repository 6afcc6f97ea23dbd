"""The exported pages as a reader's browser shows them (a real headless Chromium): every kind of page fits a
phone-width screen, and a kernel's page charts how it scales and how it moved across Liger releases, as the
warehouse says it should."""

from __future__ import annotations

import html
import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest
from test_ui import CHROMIUM, near, needs_chromium, rendered_dom, screenshot, seed

from kernelindex_pipeline.site.charts import MAX_HISTORY_CHARTS
from kernelindex_pipeline.site.pages import kernel_slug
from kernelindex_pipeline.warehouse.store import Warehouse

PHONE = (390, 844)
WHITE = (255, 255, 255)
HEADER_RULE = (0xD8, 0xDE, 0xE4)

# Loads a page into a phone-wide frame and writes, into its own DOM, how wide the page's content is, which
# elements stick out past the frame's right edge (outside any scrolling box) and where the first chart sits.
FIT_HARNESS = """<!doctype html><html><body style="margin:0">
<iframe id="page" src="{url}" style="width:{width}px;height:{height}px;border:0"></iframe>
<script>
document.getElementById('page').addEventListener('load', event => {{
  const win = event.target.contentWindow, doc = win.document, width = win.innerWidth;
  const scrolls = e => {{
    for (let p = e.parentElement; p; p = p.parentElement) if (win.getComputedStyle(p).overflowX !== 'visible') return true;
    return false;
  }};
  const wide = [...doc.body.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > width + 0.5 && !scrolls(e))
    .slice(0, 5).map(e => e.tagName + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : ''));
  const chart = doc.querySelector('svg.chart');
  const box = chart && chart.getBoundingClientRect();
  const out = document.createElement('output');
  out.id = 'fit';
  out.textContent = JSON.stringify({{width, scrollWidth: doc.documentElement.scrollWidth, wide,
    chart: box && {{left: box.left, top: box.top, right: box.right, bottom: box.bottom}},
    viewport: (doc.querySelector('meta[name=viewport]') || {{}}).content || null}});
  document.body.append(out);
}});
</script></body></html>"""


def phone_fit(page: Path) -> dict:
    """How the page lays out in a frame a phone's width (390 CSS px), measured by the page's browser."""
    return measured(FIT_HARNESS.format(url=html.escape(page.resolve().as_uri()), width=PHONE[0], height=PHONE[1]),
                    "fit", page)


def measured(harness: str, output: str, page: Path):
    """What a harness page (which loads `page` in a frame) writes as JSON into its `<output id=...>`, once
    headless Chromium has laid the page out."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "harness.html"
        path.write_text(harness, encoding="utf-8")
        done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               "--allow-file-access-from-files", f"--user-data-dir={scratch}/profile",
                               "--window-size=1400,1000", "--dump-dom", path.as_uri()],
                              check=True, capture_output=True, timeout=90, text=True)
    found = re.search(rf'<output id="{output}">(.*?)</output>', done.stdout, re.S)
    assert found, f"the harness wrote no measurement for {page}"
    return json.loads(html.unescape(found.group(1)))


def _controlled_run(home: Path) -> str:
    with Warehouse(home).reader() as con:
        # the longest workload name: the widest identity rows
        (run_id,) = con.execute("SELECT run_id FROM runs WHERE evidence_level = 'kernelindex-controlled' "
                                "ORDER BY length(workload_slug) DESC, run_id LIMIT 1").fetchone()
    return run_id


def _seed_kernel(home: Path) -> str:
    with Warehouse(home).reader() as con:
        (kernel,) = con.execute("SELECT kernel FROM runs WHERE run_id = ?", [seed(home)["run_id"]]).fetchone()
    return kernel


PAGES = {
    "seed record": lambda home, out: out / "runs" / f"{seed(home)['run_id']}.html",
    "controlled record": lambda home, out: out / "runs" / f"{_controlled_run(home)}.html",
    "group": lambda home, out: out / "groups" / f"{seed(home)['group']}.html",
    "kernel": lambda home, out: out / "kernels" / f"{kernel_slug(_seed_kernel(home))}.html",
    "index": lambda home, out: out / "index.html",
}


@needs_chromium
@pytest.mark.parametrize("kind", list(PAGES))
def test_every_kind_of_page_fits_a_phone_screen(analyst_home, html_export, tmp_path, kind):
    page = PAGES[kind](analyst_home, html_export)
    fit = phone_fit(page)
    assert fit["viewport"] == "width=device-width, initial-scale=1"
    assert fit["width"] == PHONE[0]
    assert fit["scrollWidth"] <= fit["width"] and not fit["wide"], fit
    # What the reader sees at that size: the page's right edge is background below the header's rule
    # (content running off the screen would be cut there).
    width, height, rows = screenshot(page, tmp_path / "phone.png", size=PHONE)
    assert (width, height) == PHONE
    edge = {tuple(row[3 * x:3 * x + 3]) for row in rows for x in range(width - 4, width)}
    assert edge <= {WHITE, HEADER_RULE}, sorted(edge)[:5]


@needs_chromium
def test_kernel_page_charts_are_drawn_in_their_colours_on_a_phone(analyst_home, html_export, tmp_path):
    page = PAGES["kernel"](analyst_home, html_export)
    fit = phone_fit(page)
    box = fit["chart"]
    assert box and box["right"] <= PHONE[0] and box["bottom"] <= PHONE[1], fit
    dom = rendered_dom(page)
    first = re.search(r'<svg class="chart".*?</svg>', dom, re.S).group(0)
    colours = {tuple(int(c[i:i + 2], 16) for i in (0, 2, 4)) for c in re.findall(r'<polyline[^>]*stroke="#(\w{6})"', first)}
    assert colours
    _, _, rows = screenshot(page, tmp_path / "kernel.png", size=PHONE)
    inside = [(r[3 * x], r[3 * x + 1], r[3 * x + 2]) for r in rows[int(box["top"]):int(box["bottom"])]
              for x in range(int(box["left"]), int(box["right"]))]
    for colour in colours:
        assert sum(near(p, colour, 30) for p in inside) > 30, colour


def _figures(dom: str) -> list[dict]:
    """Each chart figure of a rendered kernel page: its data attributes and, per line, the runs its points open
    and the points' x positions."""
    figures = []
    for attrs, body in re.findall(r'<figure class="chart"([^>]*)>(.*?)</figure>', dom, re.S):
        lines = {}
        for provider, line in re.findall(r'<g class="line" data-provider="([^"]+)">(.*?)</g>', body, re.S):
            xs = [float(p.split(",")[0]) for p in re.search(r'points="([^"]*)"', line).group(1).split()]
            lines[html.unescape(provider)] = {"runs": re.findall(r'href="\.\./runs/(\w+)\.html"', line), "xs": xs}
        figures.append({"attrs": {k: html.unescape(v) for k, v in re.findall(r'data-(\w+)="([^"]*)"', attrs)},
                        "id": re.search(r'id="([^"]+)"', attrs).group(1), "lines": lines,
                        "legend": len(re.findall(r'class="swatch"', body))})
    return figures


# The source's own sweeps: a (swept column, fixed config) pair of its CSV and the workloads it reached.
SWEEP_SQL = """
WITH sweeps AS (SELECT DISTINCT x_name, extra_benchmark_config_str, workload_digest FROM run_keys WHERE kernel_name = ?)
SELECT s.x_name, s.extra_benchmark_config_str, r.gpu, r.environment_digest, r.operation_mode, r.metric,
    count(DISTINCT r.workload_digest) AS groups, list(r.provider ORDER BY r.run_id) AS providers,
    list(r.run_id ORDER BY r.run_id) AS run_ids
FROM runs r JOIN ranks USING (run_id) JOIN sweeps s USING (workload_digest)
WHERE r.evidence_level = 'source-native'
GROUP BY ALL HAVING count(DISTINCT r.workload_digest) >= 2
ORDER BY count(*) DESC, groups DESC, s.x_name, s.extra_benchmark_config_str, r.gpu, r.environment_digest,
    r.operation_mode, r.metric
LIMIT 1
"""


@needs_chromium
@pytest.mark.parametrize("kernel", ["geglu", "llama4_rope"])
def test_scaling_chart_has_one_line_per_implementation(analyst_home, html_export, kernel):
    with Warehouse(analyst_home).reader() as con:
        cursor = con.execute(SWEEP_SQL, [kernel])
        row, names = cursor.fetchone(), [d[0] for d in cursor.description]
    assert row, f"no sweep of {kernel} in the warehouse"
    sweep = dict(zip(names, row))
    expected: dict[str, set] = {}
    for provider, run_id in zip(sweep["providers"], sweep["run_ids"]):
        expected.setdefault(provider, set()).add(run_id)
    figures = [f for f in _figures(rendered_dom(html_export / "kernels" / f"{kernel_slug(kernel)}.html"))
               if f["id"].startswith("scaling-")]
    drawn = [f for f in figures if {r for line in f["lines"].values() for r in line["runs"]} == set(sweep["run_ids"])]
    assert len(drawn) == 1, f"the sweep {sweep['x_name']} of {sweep['extra_benchmark_config_str']} is not charted once"
    chart = drawn[0]
    assert [chart["attrs"][k] for k in ("gpu", "mode", "metric")] == [sweep["gpu"], sweep["operation_mode"],
                                                                     sweep["metric"]]
    # one line per implementation, through each of its ranked runs in the sweep, left to right
    assert set(chart["lines"]) == set(expected) and chart["legend"] == len(expected)
    for provider, line in chart["lines"].items():
        assert sorted(line["runs"]) == sorted(expected[provider])
        assert line["xs"] == sorted(line["xs"]) and len(set(line["xs"])) == len(line["xs"])


def _version(text: str) -> tuple:
    return tuple(int(part) for part in text.split("."))


HISTORY_SQL = """
SELECT kernel, gpu || coalesce(' ' || form_factor, '') AS gpu, operation_mode, metric, workload_slug, provider,
    list(DISTINCT liger_version) AS versions
FROM runs WHERE liger_version IS NOT NULL
GROUP BY kernel, gpu, form_factor, operation_mode, metric, workload_digest, workload_slug, provider
HAVING count(DISTINCT liger_version) >= 2
"""


@needs_chromium
def test_history_charts_follow_the_series_that_span_releases(analyst_home, html_export):
    with Warehouse(analyst_home).reader() as con:
        series = con.execute(HISTORY_SQL).fetchall()
        run_versions = dict(con.execute("SELECT run_id, liger_version FROM runs").fetchall())
        kernels = [k for (k,) in con.execute("SELECT DISTINCT kernel FROM runs").fetchall()]
    assert series, "no implementation measured under two Liger releases in the shipped data"
    charts: dict[str, dict[tuple, dict]] = {}
    for kernel, gpu, mode, metric, slug, provider, versions in series:
        charts.setdefault(kernel, {}).setdefault((gpu, mode, metric, slug), {})[provider] = sorted(versions, key=_version)
    for kernel in kernels:
        page = (html_export / "kernels" / f"{kernel_slug(kernel)}.html").read_text(encoding="utf-8")
        assert page.count('id="history-') == min(len(charts.get(kernel, {})), MAX_HISTORY_CHARTS), kernel
    # the kernel with the fewest histories has every one drawn: one line per implementation, a point per release
    kernel = min(charts, key=lambda k: (len(charts[k]), k))
    figures = [f for f in _figures(rendered_dom(html_export / "kernels" / f"{kernel_slug(kernel)}.html"))
               if f["id"].startswith("history-")]
    assert len(figures) == len(charts[kernel])
    for figure in figures:
        a = figure["attrs"]
        wanted = charts[kernel][(a["gpu"], a["mode"], a["metric"], a["workload"])]
        assert set(figure["lines"]) == set(wanted) and figure["legend"] == len(wanted)
        for provider, line in figure["lines"].items():
            assert [run_versions[r] for r in line["runs"]] == wanted[provider]
            assert line["xs"] == sorted(line["xs"])
