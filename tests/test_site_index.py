"""The site as readers use it, in a real headless Chromium: the index's search box and filters (and their state
in the URL), tables that fit a phone's width without cutting a column off, one line style per implementation
across a kernel's charts, verdicts linked to the glossary, and a failed run's status at the top of its page."""

from __future__ import annotations

import html
import json
import re
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote, urlencode

import pytest
from test_ui import CHROMIUM, needs_chromium, seed

from kernelindex_pipeline.site.charts import LIGER_ORANGE
from kernelindex_pipeline.site.glossary import ANCHORS, VERDICTS
from kernelindex_pipeline.site.pages import kernel_slug
from kernelindex_pipeline.warehouse.store import Warehouse

PHONE_WIDTH = 390


def chromium(url: str, *flags: str) -> str:
    """The DOM Chromium renders at `url`, once the page's scripts (and the shards they load) are done."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               "--virtual-time-budget=10000", f"--user-data-dir={profile}", *flags, "--dump-dom", url],
                              check=True, capture_output=True, timeout=120, text=True)
    return done.stdout


def index_url(export: Path, query: str = "") -> str:
    return (export / "index.html").resolve().as_uri() + query


def results(dom: str) -> list[tuple[str, str]]:
    """(href, text) of each search result."""
    listing = re.search(r'<ul id="search-results">(.*?)</ul>', dom, re.S).group(1)
    return re.findall(r'<a href="([^"]+)">([^<]+)</a>', listing)


def shown_rows(dom: str) -> list[str]:
    return [r for r in re.findall(r"<tr ([^>]*)>", dom) if "data-kernel" in r and "hidden" not in r]


def test_the_index_has_a_row_per_kernel_and_stays_small(analyst_home, html_export):
    """The way in lists kernels, not every group: each kernel's row counts its ranked groups and runs and
    leads to its page, which lists the groups; the page stays under 300 KB."""
    page = (html_export / "index.html").read_text(encoding="utf-8")
    assert len(page.encode()) <= 300_000
    listed = dict(re.findall(r'<tr data-kernel="([^"]+)"[^>]*><td><a href="kernels/[^"]+">[^<]+</a>.*?'
                             r'<td class="n">(\d+)</td><td class="n">\d+</td>', page))
    with Warehouse(analyst_home).reader() as con:
        groups = dict(con.execute("SELECT r.kernel, count(DISTINCT k.comparison_key)::VARCHAR FROM runs r "
                                  "LEFT JOIN ranks k USING (run_id) GROUP BY 1").fetchall())
    assert listed == groups
    for href in re.findall(r'<td><a href="(kernels/[^"]+)">', page):
        assert (html_export / href).is_file()


@needs_chromium
def test_the_search_box_finds_a_run_by_external_id_run_id_and_published_identifier(analyst_home, html_export):
    with Warehouse(analyst_home).reader() as con:
        external_id, run_id, digest = con.execute(
            "SELECT r.external_id, r.run_id, m.run_digest FROM runs r JOIN run_manifests m USING (run_id) "
            "WHERE r.run_id = ?", [seed(analyst_home)["run_id"]]).fetchone()
    found = results(chromium(index_url(html_export, "?q=" + quote(external_id))))
    assert found == [(f"runs/{run_id}.html", html.escape(external_id))]
    for query in (run_id[:8].upper(), digest, "01a0202b", "sha256:80cfc402d26261a5d632668…"):
        assert (f"runs/{run_id}.html" in {href for href, _ in results(chromium(index_url(html_export, "?q=" + quote(query))))}), query
    dom = chromium(index_url(html_export, "?q=" + quote(external_id + "-nothing")))
    assert not results(dom) and "Nothing matches" in dom
    # the page's search results lead to pages that exist
    assert (html_export / "runs" / f"{run_id}.html").is_file()


@needs_chromium
def test_the_search_box_finds_kernels_by_name_provider_and_card(analyst_home, html_export):
    with Warehouse(analyst_home).reader() as con:
        with_compile = {k for (k,) in con.execute("SELECT DISTINCT kernel FROM leaderboard WHERE provider = 'torch_compile'").fetchall()}
        on_pcie = {k for (k,) in con.execute("SELECT DISTINCT kernel FROM leaderboard WHERE gpu = 'NVIDIA H100 PCIe'").fetchall()}
    assert with_compile and on_pcie
    assert results(chromium(index_url(html_export, "?q=llama4_rope"))) == [("kernels/llama4_rope.html", "llama4_rope")]
    for query, kernels in (("TORCH_COMPILE", with_compile), ("h100 pcie", on_pcie)):
        found = results(chromium(index_url(html_export, "?q=" + quote(query))))
        assert [text for _, text in found] == sorted(kernels)[:20], query  # the first 20, and a note of the rest
        assert all((html_export / href).is_file() for href, _ in found)


@needs_chromium
def test_filters_ignore_case_say_when_nothing_matches_and_follow_the_url(html_export):
    everything = chromium(index_url(html_export))
    total = len(shown_rows(everything))
    rope = shown_rows(chromium(index_url(html_export, "?kernel=LLAMA4_Rope")))
    assert rope and all('data-kernel="llama4_rope"' in r for r in rope)
    h100 = shown_rows(chromium(index_url(html_export, "?gpu=h100")))
    cards = [re.search(r'data-gpu="([^"]+)"', r).group(1).split("|") for r in h100]
    assert 0 < len(h100) <= total and all(any(c.startswith("NVIDIA H100 ") for c in listed) for listed in cards)
    assert len({c for listed in cards for c in listed if c.startswith("NVIDIA H100 ")}) >= 2
    # a card some kernels lack narrows the list to exactly the kernels that list it
    every = [re.search(r'data-gpu="([^"]+)"', r).group(1).split("|") for r in shown_rows(everything)]
    some = next(c for c in sorted({c for listed in every for c in listed}) if 0 < sum(c in l for l in every) < total)
    narrowed = shown_rows(chromium(index_url(html_export, f"?gpu={quote(some)}")))
    assert len(narrowed) == sum(any(some.lower() in c.lower() for c in listed) for listed in every) < total
    nothing = chromium(index_url(html_export, "?gpu=quantum"))
    assert not shown_rows(nothing) and f"0 of {total} kernels" in nothing
    assert "no gpu matches \u201cquantum\u201d" in nothing
    # typing a filter writes it into the page's URL
    harness = FILTER_HARNESS.format(url=html.escape(index_url(html_export)))
    with tempfile.TemporaryDirectory() as scratch:
        page = Path(scratch) / "filter.html"
        page.write_text(harness, encoding="utf-8")
        dom = chromium(page.as_uri(), "--allow-file-access-from-files")
    state = json.loads(html.unescape(re.search(r'<output id="state">(.*?)</output>', dom, re.S).group(1)))
    assert state["search"] == "?kernel=geglu&protocol=liger" and 0 < state["shown"] < total


FILTER_HARNESS = """<!doctype html><html><body>
<iframe id="page" src="{url}" style="width:1000px;height:600px;border:0"></iframe>
<script>
document.getElementById('page').addEventListener('load', event => {{
  const win = event.target.contentWindow, doc = win.document;
  for (const [name, value] of [['kernel', 'geglu'], ['protocol', 'liger']]) {{
    const input = doc.getElementById('f-' + name);
    input.value = value;
    input.dispatchEvent(new win.Event('input'));
  }}
  const out = document.createElement('output');
  out.id = 'state';
  out.textContent = JSON.stringify({{search: win.location.search,
    shown: doc.querySelectorAll('tr[data-kernel]:not([hidden])').length}});
  document.body.append(out);
}});
</script></body></html>"""

# Loads a page into a frame WIDTH px wide and writes into its own DOM the words of table cells that the layout
# split across lines (a word: letters, digits and underscores; "batch4-seq2048" may wrap at its hyphen), and
# how wide the page itself is (a wide table scrolls in place).
WORDS_HARNESS = """<!doctype html><html><body style="margin:0">
<iframe id="page" src="{url}" style="width:{width}px;height:900px;border:0"></iframe>
<script>
document.getElementById('page').addEventListener('load', event => {{
  const win = event.target.contentWindow, doc = win.document, width = win.innerWidth;
  const cells = [...doc.querySelectorAll('th, td')].filter(c => c.getClientRects().length);
  const broken = [];
  for (const cell of cells) {{
    const walker = doc.createTreeWalker(cell, win.NodeFilter.SHOW_TEXT);
    for (let node; (node = walker.nextNode());) {{
      for (const m of node.data.matchAll(/\\w+/g)) {{
        const range = doc.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        if (new Set([...range.getClientRects()].map(r => Math.round(r.top))).size > 1) broken.push(m[0]);
      }}
    }}
  }}
  const out = document.createElement('output');
  out.id = 'words';
  out.textContent = JSON.stringify({{width, cells: cells.length, broken: broken.slice(0, 5),
                                     scrollWidth: doc.documentElement.scrollWidth}});
  document.body.append(out);
}});
</script></body></html>"""


def table_words(page: Path, width: int) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        harness = Path(scratch) / "words.html"
        harness.write_text(WORDS_HARNESS.format(url=html.escape(page.resolve().as_uri()), width=width),
                           encoding="utf-8")
        dom = chromium(harness.as_uri(), "--allow-file-access-from-files", "--window-size=1400,1000")
    return json.loads(html.unescape(re.search(r'<output id="words">(.*?)</output>', dom, re.S).group(1)))


def _run_with_claims(home: Path) -> str:
    with Warehouse(home).reader() as con:
        (run_id,) = con.execute("SELECT a_run_id FROM claim_checks WHERE verdict <> 'not re-checked' "
                                "ORDER BY length(a_implementation || b_implementation) DESC, a_run_id LIMIT 1").fetchone()
    return run_id


@needs_chromium
@pytest.mark.parametrize("width", [PHONE_WIDTH, 1280])
@pytest.mark.parametrize("page", ["index", "run with claims", "kernel"])
def test_table_cells_never_split_a_word_and_wide_tables_scroll_in_place(analyst_home, html_export, page, width):
    path = {"index": lambda: html_export / "index.html",
            "run with claims": lambda: html_export / "runs" / f"{_run_with_claims(analyst_home)}.html",
            "kernel": lambda: html_export / "kernels" / "geglu.html"}[page]()
    laid_out = table_words(path, width)
    assert laid_out["width"] == width and laid_out["cells"] > 20
    assert not laid_out["broken"] and laid_out["scrollWidth"] <= width, laid_out


@needs_chromium
def test_a_kernel_page_lists_its_decided_claims_filtered_by_verdict_card_and_protocol(analyst_home, html_export):
    with Warehouse(analyst_home).reader() as con:
        (kernel, card, protocol), = con.execute(
            "SELECT kernel, source_gpu, protocol FROM claim_checks WHERE verdict = 'reversed' AND claim_type = 'ordered' "
            "GROUP BY ALL ORDER BY count(*) DESC, 1, 2, 3 LIMIT 1").fetchall()
        [(decided, wanted)] = con.execute(
            "SELECT count(*) FILTER (WHERE verdict <> 'not re-checked'), count(*) FILTER (WHERE verdict = 'reversed' "
            "AND claim_type = 'ordered' AND source_gpu = ? AND protocol = ?) FROM claim_checks WHERE kernel = ?",
            [card, protocol, kernel]).fetchall()
    query = "?" + urlencode({"verdict": "reversed", "card": card, "protocol": protocol})
    dom = chromium((html_export / "kernels" / f"{kernel_slug(kernel)}.html").resolve().as_uri() + query)
    rows = re.findall(r'<tr (data-verdict="[^"]*" data-card="[^"]*" data-protocol="[^"]*")( hidden="")?>', dom)
    shown = [attributes for attributes, hidden in rows if not hidden]
    assert len(rows) == decided and len(shown) == wanted > 0
    assert set(shown) == {f'data-verdict="reversed" data-card="{html.escape(card)}" data-protocol="{protocol}"'}
    assert f"{wanted} of {decided} claims" in dom


def _line_styles(dom: str) -> list[dict[str, tuple]]:
    """Per chart, each implementation's (stroke colour, dash pattern, marker element)."""
    charts = []
    for body in re.findall(r'<svg class="chart".*?</svg>', dom, re.S):
        lines = {}
        for provider, line in re.findall(r'<g class="line" data-provider="([^"]+)">(.*?)</g>', body, re.S):
            polyline = re.search(r"<polyline([^>]*)>", line).group(1)
            stroke = re.search(r'stroke="(#\w{6})"', polyline).group(1)
            dash = re.search(r'stroke-dasharray="([^"]*)"', polyline)
            dash = dash.group(1) if dash else ""
            shape = re.search(r"</title><(\w+)", line).group(1)
            lines[provider] = (stroke, dash, shape)
        charts.append(lines)
    return charts


@needs_chromium
def test_an_implementation_is_drawn_alike_in_every_chart_and_unlike_the_others_in_one(analyst_home, html_export):
    with Warehouse(analyst_home).reader() as con:
        (kernel,) = con.execute("SELECT kernel FROM runs WHERE liger_version IS NOT NULL GROUP BY kernel "
                                "ORDER BY count(DISTINCT provider) DESC, kernel LIMIT 1").fetchone()
    pages = [chromium((html_export / "kernels" / f"{kernel_slug(kernel)}.html").resolve().as_uri()),
             chromium((html_export / "kernels" / "geglu.html").resolve().as_uri())]
    charts = [chart for dom in pages for chart in _line_styles(dom)]
    assert len(charts) >= 4
    seen: dict[str, set] = {}
    for chart in charts:
        assert len(set(chart.values())) == len(chart), chart  # no two lines of one chart look alike
        for provider, style in chart.items():
            seen.setdefault(provider, set()).add(style)
    assert all(len(styles) == 1 for styles in seen.values()), seen
    assert seen["liger"] == {(LIGER_ORANGE, "", "circle")}


@needs_chromium
def test_verdicts_link_to_the_glossary_and_groups_count_them(analyst_home, html_export):
    run_id = _run_with_claims(analyst_home)
    dom = chromium((html_export / "runs" / f"{run_id}.html").resolve().as_uri())
    section = re.search(r'<section id="claim-checks">(.*?)</section>', dom, re.S).group(1)
    linked = set(re.findall(r'<a class="term" href="\.\./glossary\.html#([\w-]+)">', section))
    assert {"kernelindex-device-time", "source-replica"} <= linked and linked & {"ordered", "parity"}
    assert linked & {ANCHORS[v] for v in VERDICTS}
    glossary = (html_export / "glossary.html").read_text(encoding="utf-8")
    assert all(f'<dt id="{ANCHORS[term]}">' in glossary for term in (*VERDICTS, "host-bound", "ordered", "parity"))
    with Warehouse(analyst_home).reader() as con:
        key, counts = con.execute(
            "SELECT comparison_key, list((protocol, verdict)) FROM claim_checks WHERE a_run_id = ? GROUP BY 1",
            [run_id]).fetchone()
        [(claims,)] = con.execute("SELECT count(*) FROM claim_checks WHERE comparison_key = ?", [key]).fetchall()
    group = (html_export / "groups" / f"{key.removeprefix('sha256:')[:16]}.html").read_text(encoding="utf-8")
    table = re.search(r'<section id="verdicts">.*?<tbody>(.*?)</tbody>', group, re.S).group(1)
    assert sum(int(n) for n in re.findall(r"<td>(\d+)</td>", table)) == claims


@needs_chromium
def test_a_failed_runs_page_says_so_at_the_top(analyst_home, html_export):
    with Warehouse(analyst_home).reader() as con:
        (run_id, reason) = con.execute("SELECT run_id, status_reason FROM controlled_runs WHERE status = 'failed' "
                                       "ORDER BY run_id LIMIT 1").fetchone()
    dom = chromium((html_export / "runs" / f"{run_id}.html").resolve().as_uri())
    main = dom[dom.index("<main>"):]
    status = re.search(r'<p id="status" class="status">(.*?)</p>', main, re.S)
    assert status and main.index('id="status"') < main.index('id="primary"')
    assert "failed" in status.group(1) and reason in html.unescape(status.group(1))
    assert "— median" not in main
