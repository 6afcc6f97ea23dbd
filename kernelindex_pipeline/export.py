"""`kernelindex export`: canonical manifests as JSON files, or static HTML record and group pages.

Long because the page templates live beside the one query they render; the site around them (permalinks,
citation, report link, kernel pages) is `kernelindex_pipeline.site`.

JSON layout (DIR):
    index.json              one entry per run: ids, title, group, digest, file
    runs/<run_id>.json      the run's canonical manifest, byte for byte as stored (its digests recompute)

HTML layout (DIR): the JSON layout, plus
    index.html              every comparison group, by kernel
    runs/<run_id>.html      one record page per run (the sections of the published seed records)
    groups/<key>.html       one page per comparison group with ranked runs, an SVG chart (median, p20-p80 bars)
    kernels/<kernel>.html   one page per kernel: scaling and release-history charts, its groups by GPU and pass
    style.css
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import json
import multiprocessing
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from kernelindex_pipeline.charts import chart_svg, kernel_charts
from kernelindex_pipeline.display import ordered_params, plain, quantity, workload_display
from kernelindex_pipeline.site import (
    Site,
    cite_section,
    correctness_section,
    escape as _e,
    kernel_page,
    kernel_slug,
    replications_section,
)
from kernelindex_pipeline.statements import (
    DECIDED,
    PREDICATE_TYPE,
    STATEMENTS_SQL,
    envelope,
    statement_bytes,
    statement_name,
)
from kernelindex_pipeline.verdict_pages import VERDICT_HISTORY_SQL, verdict_history_section
from kernelindex_pipeline.warehouse import Warehouse, records

SOURCE_TITLES = {"liger-kernel-bench": "Liger-Kernel benchmarks"}
SOURCE_LICENSES = {"liger-kernel-bench": "BSD-2-Clause"}

EXPORT_SQL = """
SELECT r.run_id, r.external_id, r.title, r.kernel, r.operation_mode, r.provider, r.implementation, r.project,
    r.metric, r.unit, r.median_value, r.p20_value, r.p80_value, r.gpu, r.architecture, r.workload_slug,
    r.observed_at, r.evidence_level, r.source, r.status, r.withdrawn_upstream, r.liger_version, r.comparison_key,
    r.source_unit, r.source_p20, r.source_p50, r.source_p80,
    m.manifest, m.run_digest, w.definition AS workload, i.manifest AS implementation_manifest,
    k.rank, k.group_size, {published_at} AS published_at, {listing_rank}
FROM runs r
JOIN manifests m USING (run_id)
LEFT JOIN (SELECT * FROM workloads QUALIFY row_number() OVER (PARTITION BY workload_digest) = 1) w USING (workload_digest)
LEFT JOIN implementations i USING (implementation_digest)
LEFT JOIN ranks k USING (run_id)
{publications}
{listing_ranks}
{where}
ORDER BY {order}
"""


def _has_table(con, name: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchone()[0])


def group_slug(comparison_key: str) -> str:
    return comparison_key.removeprefix("sha256:")[:16]


def _short(digest: str | None, n: int) -> str:
    return f"{digest[:7 + n]}…" if digest else "—"


# -- pages -----------------------------------------------------------------------------------------

def _page(title: str, body: str, depth: int) -> str:
    up = "../" * depth
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{_e(title)}</title>"
        f"<link rel=\"stylesheet\" href=\"{up}style.css\"></head>\n<body>\n"
        f"<header><a href=\"{up}index.html\">KernelIndex</a></header>\n<main>\n{body}\n</main>\n</body></html>\n"
    )


def _dl(rows: list[tuple[str, str]]) -> str:
    """rows of (term, already-escaped description)."""
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def claim_checks_section(checks: list[dict], site: Site = Site()) -> str:
    """What KernelIndex's reruns found about the source claims this run takes part in: its current claims,
    or, for a run a newer one has replaced in its group, those it made when it was listed (`listed_at`)."""
    if not checks:
        return ""
    rows = []
    for c in checks:
        rerun = (f"{c['rerun_ratio']:.3f} [{c['ci_low']:.3f}, {c['ci_high']:.3f}]" if c["rerun_ratio"] is not None
                 and c["ci_low"] is not None else "—")
        rows.append(f"<tr><td>{_e(c['source_order'])} ({_e(c['source_gpu'])}, ratio {c['source_ratio']:.3f})</td>"
                    f"<td>{_e(c['protocol'])}</td><td>{_e(c['rerun_gpu'] or '—')}</td><td>{_e(rerun)}</td>"
                    f"<td><strong>{_e(c['verdict'])}</strong>{' · host-bound' if c['host_bound'] else ''}"
                    f"<br><span class=\"muted\">{_e(c['reason'])}</span>{_statement_link(c, site)}</td></tr>")
    listed = checks[0].get("listed_at")
    claims = (f"Each ordered pair of implementations in this run's comparison group as upstream listed it "
              f"({_listed_date(listed)}: this run and each implementation's newest run then) is a claim this run "
              "made when it was published" if listed else
              "Each ordered pair of implementations in this run's comparison group is a source claim")
    return ("<section id=\"claim-checks\"><h2>What the reruns found</h2>"
            f"<p>{claims}, re-checked on KernelIndex's GPU under two "
            "protocols (device time; the source's own harness replayed). Ratios are b / a medians; verdicts "
            "compare orders and ratios, never absolute times across GPUs.</p><table><thead><tr><th>source claim"
            "</th><th>protocol</th><th>rerun GPU</th><th>rerun ratio [95% CI]</th><th>verdict</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def _statement_link(check: dict, site: Site) -> str:
    """A decided verdict's in-toto statement, at its permalink."""
    if check["verdict"] not in DECIDED:
        return ""
    return f" <a class=\"statement\" href=\"{_e(site.statement_link(statement_name(check)))}\">statement</a>"


def _listed_date(listed) -> str:
    return listed.strftime("%Y-%m-%d") if hasattr(listed, "strftime") else str(listed)[:10]


def run_records_sql(con, where: str = "", order: str = "r.run_id") -> str:
    """The query of what the record pages show of each run, `where` (a clause on ``r``, the runs) ordered by `order`."""
    # A home last written before these tables existed has them from its next ingest on.
    stamped, listed = _has_table(con, "publications"), _has_table(con, "listing_ranks")
    return EXPORT_SQL.format(
        published_at="p.published_at" if stamped else "NULL",
        publications="LEFT JOIN publications p USING (run_id)" if stamped else "",
        listing_rank=("lr.rank AS listing_rank, lr.group_size AS listing_group_size, "
                      "lr.leader_run_id AS listing_leader_run_id, lr.listed_at" if listed else
                      "NULL AS listing_rank, NULL AS listing_group_size, NULL AS listing_leader_run_id, "
                      "NULL AS listed_at"),
        listing_ranks="LEFT JOIN listing_ranks lr USING (run_id)" if listed else "",
        where=where, order=order)


def run_records(con, run_ids: list[str]) -> list[dict]:
    """What the record pages show of each of `run_ids`, by run id."""
    return records(con, run_records_sql(con, "WHERE list_contains(?, r.run_id)"), [run_ids])


def _pretty_manifest(manifest: dict) -> str:
    """The manifest's run, protocol and environment as ``json.dumps(..., indent=2)`` writes them, HTML-escaped,
    built member by member so that a protocol or environment, shared by thousands of runs, is indented once."""
    members = []
    for name in ("run", "protocol", "environment"):
        if name in manifest:
            text = (_indented(manifest[name]) if name == "run"
                    else _indented_shared(json.dumps(manifest[name], ensure_ascii=False)))
            members.append(f"  &quot;{name}&quot;: {text}")
    return "{\n" + ",\n".join(members) + "\n}" if members else "{}"


def _indented(value) -> str:
    # JSON text holds no raw newline but the ones indent=2 puts between members, so nesting a value one
    # level deeper is indenting each of its lines two more spaces.
    return _e(json.dumps(value, indent=2, ensure_ascii=False)).replace("\n", "\n  ")


@functools.lru_cache(maxsize=1024)
def _indented_shared(compact: str) -> str:
    return _indented(json.loads(compact))


def record_page(run: dict, leader: dict | None, groups_with_pages: set[str], checks: list[dict] = (),
                site: Site = Site(), attestations: list[dict] = (), listing_leader: dict | None = None) -> str:
    """A run's record page. ``leader`` is its group's #1 now; ``listing_leader`` the #1 when upstream first
    listed the run, cited where a newer run of the same implementation has since taken its place."""
    manifest = json.loads(run["manifest"])
    spec = manifest["run"]["spec"]
    protocol = manifest["protocol"]["spec"]
    hardware = manifest["environment"]["spec"].get("hardware", {})
    software = manifest["environment"]["spec"].get("software", {})
    workload = json.loads(run["workload"]) if run["workload"] else None
    implementation = json.loads(run["implementation_manifest"])["spec"] if run["implementation_manifest"] else {}
    unit = run["unit"]
    source_title = SOURCE_TITLES.get(run["source"], run["source"])
    observed = run["observed_at"].strftime("%Y-%m-%d")
    group = group_slug(run["comparison_key"])
    level = run["evidence_level"]

    superseded = ""
    if run["rank"] is not None:
        rank_line = f"Rank {run['rank']} in its comparison group · {_e(level)} comparison · observed {observed}"
    elif run["withdrawn_upstream"]:
        rank_line = f"Not ranked: withdrawn upstream · {_e(level)} comparison · observed {observed}"
    elif run.get("listing_rank") is not None:
        rank_line = f"Rank {run['listing_rank']} in its comparison group · {_e(level)} comparison · observed {observed}"
        current = (f"<a href=\"../groups/{group}.html\">the group's current ranking</a>" if group in groups_with_pages
                   else "the group's current ranking")
        superseded = (f"<p class=\"superseded muted\">Its rank among the {run['listing_group_size']} implementations "
                      f"listed when {_e(source_title)} first published it ({run['listed_at']:%Y-%m-%d}); a newer "
                      f"{_e(run['implementation'])} run represents {_e(run['implementation'])} in {current}.</p>")
        leader = listing_leader
    else:
        rank_line = (f"Not ranked: a newer run of this implementation represents it · {_e(level)} comparison · "
                     f"observed {observed}")
    compare = ""
    if leader and leader["run_id"] != run["run_id"]:
        compare = (f"<p class=\"compare\"><a id=\"compare-with-1\" href=\"{_e(leader['run_id'])}.html\">"
                   f"Compare with #1 →</a> <span class=\"muted\">{_e(leader['implementation'])} · "
                   f"{quantity(leader['median_value'], unit)}</span></p>")
    elif leader:
        compare = (f"<p class=\"compare\">This run {'was' if superseded else 'is'} #1 in its comparison group"
                   f"{' when listed' if superseded else ''}.</p>")
    native = spec.get("sourceNative", {}).get("metrics", {})
    native_line = " · ".join(f"{_e(k.replace('_', ' '))} {_e(v)}" for k, v in native.items())

    sections = [f"<h1>Run {_e(run['run_id'][:8])} <span class=\"muted\">· {_e(run['title'])}</span></h1>"]
    sections.append(
        "<section id=\"primary\"><h2>Primary measurement</h2>"
        f"<p class=\"primary\"><span class=\"value\">{quantity(run['median_value'], unit, '')}</span>"
        f"<span class=\"stat\">median</span></p><p class=\"rank\">{rank_line}</p>{superseded}{compare}"
        + (f"<p class=\"native\">{native_line}</p>" if native_line else "") + "</section>")

    identity = [
        ("implementation", _e(run["implementation"])), ("project", _e(run["project"])),
        ("revision", _e(implementation.get("revision", "unknown"))),
        ("workload", _e(workload_display(workload, run["workload_slug"]))),
        ("comparison key", f"<code title=\"{_e(run['comparison_key'])}\">{_e(_short(run['comparison_key'], 16))}</code>"),
        ("source", _e(source_title)),
    ]
    if run["external_id"]:
        identity.append(("external id", f"<code>{_e(run['external_id'])}</code>"))
    identity.append(("run digest", f"<code title=\"{_e(run['run_digest'])}\">{_e(_short(run['run_digest'], 23))}</code>"))
    if run["liger_version"]:
        identity.append(("liger version", _e(run["liger_version"])))
    sections.append("<section id=\"identity\"><h2>Identity</h2>" + _dl(identity) + "</section>")

    correctness = spec.get("correctness")
    if isinstance(correctness, dict):
        sections.append(correctness_section(correctness))
    else:
        sections.append("<section id=\"correctness\"><h2>Correctness</h2><p>Marked "
                        f"{_e(run['status'])} by the source; the correctness policy was not published.</p></section>")

    rows = []
    if workload:
        wspec = workload["spec"]
        rows += [(n, _e(plain(v))) for n, v in ordered_params(wspec.get("parameters", {}))]
        inputs = wspec.get("inputs")
        if isinstance(inputs, list):
            rows += [(t["name"], f"{_e(t.get('dtype'))} <code>{_e(t.get('shape'))}</code>") for t in inputs]
        else:
            rows.append(("inputs", "tensor shapes not known for this kernel"))
        rows.append(("definition comparator", _e(wspec.get("comparator"))))
    else:
        rows.append(("workload", _e(run["workload_slug"])))
    sections.append("<section id=\"workload\"><h2>Workload</h2>" + _dl(rows) + "</section>")

    measurements = [(f"{run['metric']} · median", quantity(run["median_value"], unit))]
    measurements += [(f"{m['metric']} · {m['statistic']}", quantity(m["value"], m["unit"]))
                     for m in spec.get("measurements", [])]
    sections.append("<section id=\"measurements\"><h2>Measurements</h2>" + _dl(measurements) + "</section>")

    prot = [("harness", _e(protocol.get("harness", {}).get("name"))),
            ("timer", _e(protocol.get("measurement", {}).get("timer"))),
            ("primaryStatistic", _e(protocol.get("measurement", {}).get("primaryStatistic"))),
            ("comparabilityFamily", _e(protocol.get("comparability", {}).get("family")))]
    notes = protocol.get("comparability", {}).get("notes")
    sections.append("<section id=\"protocol\"><h2>Protocol</h2>" + _dl(prot)
                    + (f"<p class=\"muted\">{_e(notes)}</p>" if notes else "") + "</section>")

    env = [("gpu", _e(f"{hardware.get('product', run['gpu'])} ({hardware.get('architecture', run['architecture'])})"))]
    env += [(k, _e(v)) for k, v in sorted(software.items())]
    sections.append("<section id=\"environment\"><h2>Environment</h2>" + _dl(env) + "</section>")
    sections.append("<section id=\"artifacts\"><h2>Artifacts</h2><p>No artifacts published with this run.</p></section>")
    sections.append(claim_checks_section(list(checks), site))
    sections.append(replications_section(site, run, attestations, quantity))
    sections.append("<section id=\"manifest\"><h2>Canonical manifest</h2><details><summary>Show manifest</summary>"
                    f"<pre>{_pretty_manifest(manifest)}</pre></details><p><a href=\"{_e(run['run_id'])}.json\">JSON</a> "
                    "(canonical JSON; the run digest is the sha256 of its <code>run</code> object)</p></section>")
    sections.append(cite_section(site, run, source_title, observed))
    published = f"{run['published_at']:%Y-%m-%d}" if run.get("published_at") else "not yet"
    group_link = (f"<a href=\"../groups/{group}.html\">All results in this comparison group →</a> · "
                  if group in groups_with_pages else "")
    kernel_title = run["title"].split(" · ")[0]
    sections.append(f"<footer>Published {published} · {_e(source_title)} · "
                    f"{_e(SOURCE_LICENSES.get(run['source'], 'licence not stated'))} · {group_link}"
                    f"<a id=\"kernel-link\" href=\"../kernels/{_e(kernel_slug(run['kernel']))}.html\">All results for "
                    f"{_e(kernel_title)} →</a> · <a href=\"{_e(run['run_id'])}.json\">JSON</a></footer>")
    return _page(f"Run {run['run_id'][:8]} · KernelIndex", "\n".join(sections), 1)


def group_page(key: str, ranked: list[dict], others: list[dict], workload: str, history: list[dict] = ()) -> str:
    first = (ranked or others)[0]
    title = f"{first['title'].split(' · ')[0]} · {first['operation_mode']} · {first['metric']}"
    best = ranked[0]["median_value"] if ranked else None
    table = ["<table><thead><tr><th>rank</th><th>implementation</th><th>median</th><th>p20</th><th>p80</th>"
             "<th>× #1</th><th>liger</th><th>observed</th><th>run</th></tr></thead><tbody>"]
    for r in ranked:
        ratio = f"{r['median_value'] / best:.3f}" if best else "—"
        table.append(f"<tr><td>{r['rank']}</td><td>{_e(r['implementation'])}</td>"
                     f"<td>{quantity(r['median_value'], r['unit'])}</td><td>{quantity(r['p20_value'], r['unit'])}</td>"
                     f"<td>{quantity(r['p80_value'], r['unit'])}</td><td>{ratio}</td><td>{_e(r['liger_version'])}</td>"
                     f"<td>{r['observed_at']:%Y-%m-%d}</td>"
                     f"<td><a href=\"../runs/{_e(r['run_id'])}.html\">{_e(r['run_id'][:8])}</a></td></tr>")
    table.append("</tbody></table>")
    earlier = ""
    if others:
        items = "".join(f"<li><a href=\"../runs/{_e(r['run_id'])}.html\">{_e(r['run_id'][:8])}</a> "
                        f"{_e(r['implementation'])} · {quantity(r['median_value'], r['unit'])} · "
                        f"{_e(r['liger_version'])} · {r['observed_at']:%Y-%m-%d}"
                        f"{' · withdrawn upstream' if r['withdrawn_upstream'] else ''}</li>" for r in others)
        earlier = f"<section id=\"earlier\"><h2>Earlier and withdrawn runs</h2><ul>{items}</ul></section>"
    body = (f"<h1>{_e(title)}</h1><p class=\"workload\">{_e(workload)} · {_e(first['gpu'])}</p>"
            f"<p class=\"muted\">comparison key <code>{_e(key)}</code></p>"
            f"<section id=\"chart-section\"><h2>Median with p20–p80</h2>{chart_svg(ranked)}</section>"
            f"<section id=\"runs\"><h2>Ranked runs</h2>{''.join(table)}</section>{earlier}")
    return _page(f"{title} · {workload} · KernelIndex", body + verdict_history_section(list(history)), 1)


def index_page(groups: list[tuple[str, dict, int]], providers: dict[str, list[str]]) -> str:
    """Every comparison group with ranked runs, by kernel, with filters by kernel, GPU and provider that
    run in the page itself (no network)."""
    by_kernel: dict[str, list] = defaultdict(list)
    for slug, leader, size in groups:
        by_kernel[leader["kernel"]].append((slug, leader, size))
    parts = ["<h1>KernelIndex</h1><p>Comparison groups of the Liger-Kernel benchmark runs, with the current #1.</p>",
             INDEX_FILTERS]
    for kernel in sorted(by_kernel):
        rows = "".join(
            f"<tr data-kernel=\"{_e(kernel)}\" data-gpu=\"{_e(l['gpu'])}\" "
            f"data-providers=\"{_e(' '.join(providers.get(slug, [])))}\">"
            f"<td><a href=\"groups/{slug}.html\">{_e(l['operation_mode'])} · {_e(l['metric'])}</a></td>"
            f"<td>{_e(l['workload_slug'])}</td><td>{_e(l['gpu'])}</td><td>{_e(l['implementation'])}</td>"
            f"<td>{quantity(l['median_value'], l['unit'])}</td><td>{size}</td></tr>"
            for slug, l, size in sorted(by_kernel[kernel], key=lambda g: (g[1]["operation_mode"], g[1]["metric"],
                                                                          g[1]["workload_slug"], g[1]["gpu"])))
        parts.append(f"<section class=\"kernel\"><h2 id=\"{_e(kernel)}\"><a href=\"kernels/{_e(kernel_slug(kernel))}.html\">"
                     f"{_e(kernel)}</a></h2><table><thead><tr><th>group</th>"
                     "<th>workload</th><th>gpu</th><th>#1</th><th>median</th><th>runs</th></tr></thead>"
                     f"<tbody>{rows}</tbody></table></section>")
    parts.append(INDEX_SCRIPT)
    return _page("KernelIndex · comparison groups", "\n".join(parts), 0)


INDEX_FILTERS = ("<form id=\"filters\"><label>kernel <select id=\"f-kernel\"><option value=\"\">all</option></select>"
                 "</label> <label>GPU <select id=\"f-gpu\"><option value=\"\">all</option></select></label> "
                 "<label>provider <select id=\"f-provider\"><option value=\"\">all</option></select></label> "
                 "<span id=\"f-count\" class=\"muted\"></span></form>")
# Options come from the rows themselves; a filter hides the rows (and kernel sections) that do not match.
# The choice is kept in the URL's query (?kernel=...&gpu=...&provider=...) so a filtered index can be linked.
INDEX_SCRIPT = """<script>
const rows = [...document.querySelectorAll('tr[data-kernel]')];
const filters = {kernel: r => [r.dataset.kernel], gpu: r => [r.dataset.gpu], provider: r => r.dataset.providers.split(' ')};
const params = new URLSearchParams(location.search);
for (const [name, values] of Object.entries(filters)) {
  const select = document.getElementById('f-' + name);
  for (const v of [...new Set(rows.flatMap(values))].filter(Boolean).sort()) select.add(new Option(v, v));
  select.value = params.get(name) || '';
  select.addEventListener('change', apply);
}
function apply() {
  let shown = 0;
  for (const r of rows) {
    const keep = Object.entries(filters).every(([name, values]) => {
      const want = document.getElementById('f-' + name).value;
      return !want || values(r).includes(want);
    });
    r.hidden = !keep; shown += keep;
  }
  for (const s of document.querySelectorAll('section.kernel')) s.hidden = !s.querySelector('tr[data-kernel]:not([hidden])');
  document.getElementById('f-count').textContent = shown + ' of ' + rows.length + ' groups';
}
apply();
</script>"""


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1b1f24; background: #fff; }
header { padding: 10px 24px; border-bottom: 1px solid #d8dee4; font-weight: 600; }
header a { color: #1b1f24; text-decoration: none; }
main { max-width: 900px; padding: 8px 24px 40px; overflow-wrap: break-word; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.1rem; margin-top: 1.6rem; border-bottom: 1px solid #eaeef2; }
.muted { color: #57606a; font-weight: normal; }
.primary .value { font-size: 2.6rem; font-weight: 700; } .primary .stat { margin-left: .4rem; color: #57606a; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0; }
dt { color: #57606a; } dd { margin: 0; overflow-wrap: anywhere; }
pre { background: #f6f8fa; padding: 10px; overflow-x: auto; font-size: 12px; }
.cite { background: #f6f8fa; padding: 10px; font-size: 13px; overflow-wrap: anywhere; }
table { border-collapse: collapse; font-size: 14px; display: block; overflow-x: auto; max-width: 100%; } td, th { padding: 3px 10px 3px 0; text-align: left; }
footer { margin-top: 2rem; color: #57606a; font-size: 14px; }
svg { max-width: 100%; height: auto; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 400px), 1fr)); gap: 20px; }
figure.chart { margin: 0; min-width: 0; } figcaption { font-size: 14px; }
.legend { list-style: none; display: flex; flex-wrap: wrap; gap: 2px 14px; padding: 0; margin: 2px 0; font-size: 13px; }
.swatch { display: inline-block; width: 16px; height: 4px; margin-right: 5px; vertical-align: middle; }
"""


# -- export ----------------------------------------------------------------------------------------

# Runs are exported in shards of their comparison groups, each rendered in a worker process (one per CPU, up
# to EXPORT_WORKERS_MAX): an export's time divides by the CPUs. A shard holds about SHARD_TEXT_BYTES of runs'
# canonical text (a controlled run's is twice a source-native one's), read in one sorted query within
# SHARD_MEMORY (which sorts about twice that text), so a worker's memory follows a shard, not the
# warehouse. Small warehouses stay in one process, which starts sooner than a pool.
EXPORT_WORKERS_MAX = 4
SHARD_TEXT_BYTES = 6 * 2**20
SHARD_MEMORY = "128MB"
PARALLEL_FROM_RUNS = 20_000
FETCH_ROWS = 1_000

# The leader's fields the index and kernel pages show.
SUMMARY_FIELDS = ("kernel", "gpu", "operation_mode", "metric", "workload_slug", "implementation",
                  "median_value", "unit")

INDEX_SQL = """
SELECT r.run_id, r.external_id, r.title, r.kernel, r.operation_mode, r.provider, r.metric, r.gpu, r.workload_slug,
    r.observed_at, r.evidence_level, r.comparison_key, k.rank, k.group_size, r.withdrawn_upstream, m.run_digest
FROM runs r JOIN manifests m USING (run_id) LEFT JOIN ranks k USING (run_id)
ORDER BY r.run_id
"""


class _Writer:
    """Writes an export's files, leaving a file whose bytes would not change untouched (so a re-export
    rewrites only what changed, and a synced site uploads only that); each file appears whole (written
    beside it, then renamed)."""

    def __init__(self, directory: str):
        self.directory = directory
        self.produced: list[str] = []
        self.rewritten = 0
        self.unchanged = 0
        self._folders: set[str] = set()

    def __call__(self, relative: str, text: str) -> None:
        data = text.encode("utf-8")
        path = os.path.join(self.directory, relative)
        self.produced.append(relative)
        try:
            if os.stat(path).st_size == len(data):
                with open(path, "rb") as existing:
                    if existing.read() == data:
                        self.unchanged += 1
                        return
        except FileNotFoundError:
            pass
        folder = os.path.dirname(path)
        if folder not in self._folders:
            os.makedirs(folder, exist_ok=True)
            self._folders.add(folder)
        tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
        with open(tmp, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
        self.rewritten += 1


def _prune(directory: Path, produced: set[str], fmt: str) -> int:
    """Remove, from the folders the export owns, the pages and manifests it no longer produces (a JSON
    export owns the manifests only)."""
    removed = 0
    suffixes = (".html", ".json") if fmt == "html" else (".json",)
    for folder in ("runs", "groups", "kernels") if fmt == "html" else ("runs",):
        if not (directory / folder).is_dir():
            continue
        for entry in os.scandir(directory / folder):
            name = f"{folder}/{entry.name}"
            if entry.name.endswith(suffixes) and entry.is_file() and name not in produced:
                os.unlink(entry.path)
                removed += 1
    return removed


@dataclasses.dataclass(frozen=True)
class _Shard:
    """One worker's share of an export: the comparison groups whose key hashes to ``index`` of ``count``."""

    home: str
    generation: str
    index: int
    count: int
    fmt: str
    directory: str
    site: Site


def _shard_records(con, shard: _Shard, sql: str) -> list[dict]:
    return records(con, sql.format(shard=f"hash(comparison_key) % {shard.count} = {shard.index}"))


def _groups_of(con, shard: _Shard) -> Iterator[list[dict]]:
    """The shard's runs, a comparison group at a time, read FETCH_ROWS at a time."""
    cursor = con.execute(run_records_sql(
        con, f"WHERE hash(r.comparison_key) % {shard.count} = {shard.index}", "r.comparison_key, r.run_id"))
    names = [d[0] for d in cursor.description]
    group: list[dict] = []
    while rows := cursor.fetchmany(FETCH_ROWS):
        for row in rows:
            run = dict(zip(names, row))
            if group and group[0]["comparison_key"] != run["comparison_key"]:
                yield group
                group = []
            group.append(run)
    if group:
        yield group


def _export_shard(shard: _Shard) -> dict:
    """Write the shard's manifests and (html) its record and group pages; returns what the index, the
    kernel pages and the prune need."""
    write = _Writer(shard.directory)
    summaries, providers, runs = [], {}, 0
    with Warehouse(shard.home).reader(generation=Path(shard.generation)) as con:
        con.execute(f"SET memory_limit = '{SHARD_MEMORY}'; SET threads = 1; SET enable_progress_bar = false")
        in_shard = "IN (SELECT run_id FROM runs WHERE {shard})"
        checks_by_run: dict[str, list[dict]] = defaultdict(list)
        attestations_by_run: dict[str, list[dict]] = defaultdict(list)
        history_by_group: dict[str, list[dict]] = defaultdict(list)
        if shard.fmt == "html":
            for table in ("claim_checks", "listing_claim_checks") if _has_table(con, "listing_claim_checks") \
                    else ("claim_checks",):
                for check in _shard_records(con, shard, f"SELECT * FROM {table} WHERE a_run_id {in_shard} OR "
                                            f"b_run_id {in_shard} ORDER BY protocol, a_provider, b_provider"):
                    checks_by_run[check["a_run_id"]].append(check)
                    checks_by_run[check["b_run_id"]].append(check)
            if _has_table(con, "verdict_history"):
                for change in _shard_records(con, shard, f"SELECT * FROM ({VERDICT_HISTORY_SQL}) WHERE {{shard}}"):
                    history_by_group[change["comparison_key"]].append(change)
            if _has_table(con, "attestations"):
                for attestation in _shard_records(con, shard, f"SELECT * FROM attestations WHERE run_id {in_shard}"):
                    attestations_by_run[attestation["run_id"]].append(attestation)
        for members in _groups_of(con, shard):
            runs += len(members)
            for run in members:
                write(f"runs/{run['run_id']}.json", run["manifest"])
            if shard.fmt != "html":
                continue
            key = members[0]["comparison_key"]
            ranked = sorted((r for r in members if r["rank"] is not None),
                            key=lambda r: (r["rank"], r["median_value"], r["run_id"]))
            leader = ranked[0] if ranked else None
            if ranked:  # a group without a ranked run has no page: its runs' pages say why they are not ranked
                slug = group_slug(key)
                others = sorted((r for r in members if r["rank"] is None), key=lambda r: r["observed_at"],
                                reverse=True)
                workload = workload_display(json.loads(members[0]["workload"]) if members[0]["workload"] else None,
                                            members[0]["workload_slug"])
                write(f"groups/{slug}.html", group_page(key, ranked, others, workload, history_by_group.get(key, [])))
                summaries.append((slug, {f: leader[f] for f in SUMMARY_FIELDS}, len(ranked)))
                providers[slug] = sorted({r["provider"] for r in ranked})
            with_page = {group_slug(key)} if ranked else set()
            by_id = {r["run_id"]: r for r in members}  # a listing leader is of the same group
            for run in members:
                write(f"runs/{run['run_id']}.html",
                      record_page(run, leader, with_page, checks_by_run.get(run["run_id"], []), shard.site,
                                  attestations_by_run.get(run["run_id"], []),
                                  by_id.get(run["listing_leader_run_id"])))
    return {"runs": runs, "produced": write.produced, "rewritten": write.rewritten, "unchanged": write.unchanged,
            "summaries": summaries, "providers": providers}


def _run_shards(shards: list[_Shard], workers: int, progress: Callable[[int, int, str], None],
                total: int, what: str) -> Iterator[dict]:
    done = 0
    if workers == 1:
        results = map(_export_shard, shards)
        pool = None
    else:
        # spawn, not fork: the parent holds DuckDB's threads
        pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        results = (f.result() for f in concurrent.futures.as_completed([pool.submit(_export_shard, s) for s in shards]))
    try:
        for result in results:
            done += result["runs"]
            progress(done, total, what)
            yield result
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def _default_progress(done: int, total: int, what: str) -> None:
    if sys.stderr.isatty():
        end = "\n" if done == total else ""
        print(f"\r{what}: {done}/{total}", end=end, file=sys.stderr, flush=True)


def _index_json(con) -> str:
    """index.json: one entry per run, a line each, by run id."""
    cursor = con.execute(INDEX_SQL)
    names = [d[0] for d in cursor.description]
    lines = []
    while rows := cursor.fetchmany(FETCH_ROWS):
        for row in rows:
            entry = dict(zip(names, row))
            entry["observed_at"] = entry["observed_at"].isoformat()
            entry["manifest"] = f"runs/{entry['run_id']}.json"
            lines.append(json.dumps(entry, ensure_ascii=False))
    return ('{"apiVersion": "kernelindex.dev/v1alpha1", "kind": "RunIndex", "runs": [\n'
            + ",\n".join(lines) + "\n]}\n")


def export(fmt: str, directory: Path, progress: Callable[[int, int, str], None] = _default_progress,
           site: Site | None = None, workers: int | None = None, signer=None) -> str:
    """Write the export; ``site`` (default: from the environment, `Site.from_env`) builds permalinks and the
    report link; ``workers`` (default: one per CPU, up to EXPORT_WORKERS_MAX) render it; ``signer`` signs
    the statements of an ``intoto`` export."""
    directory = Path(directory)
    if fmt == "intoto":
        return export_statements(directory, signer)
    site = Site.from_env() if site is None else site
    warehouse = Warehouse()
    with warehouse.reader() as con:
        generation = warehouse.db_path.resolve()
        [(total, text)] = con.execute("SELECT (SELECT count(*) FROM runs), "
                                      "(SELECT coalesce(sum(length(run)), 0) FROM run_manifests)").fetchall()
    if workers is None:
        workers = 1 if total < PARALLEL_FROM_RUNS else min(EXPORT_WORKERS_MAX, len(os.sched_getaffinity(0)))
    count = max(workers, -(-text // SHARD_TEXT_BYTES))
    shards = [_Shard(str(warehouse.home), str(generation), i, count, fmt, str(directory), site) for i in range(count)]
    produced: set[str] = set()
    rewritten = unchanged = 0
    summaries, providers = [], {}
    for result in _run_shards(shards, workers, progress, total, "manifests" if fmt == "json" else "pages"):
        produced.update(result["produced"])
        rewritten += result["rewritten"]
        unchanged += result["unchanged"]
        summaries += result["summaries"]
        providers.update(result["providers"])
    write = _Writer(str(directory))
    with warehouse.reader(bounded=True, generation=generation) as con:
        write("index.json", _index_json(con))
        if fmt == "html":
            charts = kernel_charts(con)
            # every kernel gets a page, one whose runs are all unranked too, so every "All results for" resolves
            titles = dict(con.execute("SELECT kernel, split_part(arg_min(title, run_id), ' · ', 1) FROM runs "
                                      "GROUP BY kernel ORDER BY kernel").fetchall())
    if fmt == "html":
        summaries.sort(key=lambda s: s[0])
        by_kernel: dict[str, list] = defaultdict(list)
        for slug, leader, size in summaries:
            by_kernel[leader["kernel"]].append((slug, dict(leader, median_display=quantity(leader["median_value"],
                                                                                            leader["unit"])), size))
        for kernel, title in titles.items():
            write(f"kernels/{kernel_slug(kernel)}.html",
                  kernel_page(kernel, title, by_kernel.get(kernel, []), _page, charts.get(kernel, "")))
        write("index.html", index_page(summaries, providers))
        write("style.css", STYLE.lstrip())
    produced.update(write.produced)
    removed = _prune(directory, produced, fmt)
    written = (f"{rewritten + write.rewritten} files written, {unchanged + write.unchanged} unchanged, "
               f"{removed} stale removed")
    if fmt == "json":
        return f"exported {total} manifests and index.json to {directory} ({written})"
    return (f"exported {total} record pages, {len(summaries)} group pages, {len(titles)} kernel pages and "
            f"manifests to {directory} ({written})")


def export_statements(directory: Path, signer=None) -> str:
    """One in-toto statement per decided claim and protocol (`statements.py`), current and listing-time,
    with its DSSE envelope when ``signer`` is given, and ``index.json``: each statement's claim, file and
    sha256. Files whose bytes would not change are left untouched; statements no longer produced are removed."""
    write, index = _Writer(str(directory)), []
    suffix = ".dsse.json"
    with Warehouse().reader(bounded=True) as con:
        tables = ["claim_checks"] + (["listing_claim_checks"] if _has_table(con, "listing_claim_checks") else [])
        for table in tables:
            cursor = con.execute(STATEMENTS_SQL.format(table=table))
            names = [d[0] for d in cursor.description]
            while rows := cursor.fetchmany(FETCH_ROWS):
                for row in rows:
                    check = dict(zip(names, row))
                    name, payload = statement_name(check), statement_bytes(check)
                    write(name, payload.decode("utf-8"))
                    if signer is not None:
                        write(name.removesuffix(".intoto.json") + suffix, envelope(payload, signer).decode("utf-8"))
                    index.append({"statement": name, "sha256": hashlib.sha256(payload).hexdigest(),
                                  "claim": check["source_order"], "protocol": check["protocol"],
                                  "verdict": check["verdict"], "comparisonKey": check["comparison_key"],
                                  "runs": [check["a_run_id"], check["b_run_id"]]})
    write("index.json", json.dumps({"predicateType": PREDICATE_TYPE, "statements": index}, ensure_ascii=False,
                                   indent=1) + "\n")
    produced = set(write.produced)
    removed = 0
    for entry in os.scandir(directory):
        if entry.name.endswith((".intoto.json", suffix)) and entry.is_file() and entry.name not in produced:
            os.unlink(entry.path)
            removed += 1
    return (f"exported {len(index)} verdict statements{' and their signed envelopes' if signer else ''} to "
            f"{directory} ({write.rewritten} files written, {write.unchanged} unchanged, {removed} stale removed)")
