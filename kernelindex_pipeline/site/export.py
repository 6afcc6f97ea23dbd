"""`kernelindex export`: canonical manifests as JSON files, or static HTML record and group pages.

Long because the page templates live beside the one query they render; the site around them (permalinks,
citation, report link, kernel pages) is `kernelindex_pipeline.site.pages`.

JSON layout (DIR):
    index.json              the run index's contents: each kernel, its runs, its file
    index/<kernel>.json     one entry per run of the kernel: ids, title, group, digest, file
    runs/<run_id>.json      the run's canonical manifest, byte for byte as stored (its digests recompute)

HTML layout (DIR): the JSON layout, plus
    index.html              every comparison group, by kernel, with the search box (site/index.py)
    glossary.html           what verdicts, claims, protocols and statuses mean (glossary.py)
    runs/<run_id>.html      one record page per run (the sections of the published seed records), and one per
                            run id published before (published_identifiers), leading to its record
    groups/<key>.html       one page per comparison group with ranked runs, an SVG chart (median, p20-p80 bars)
    kernels/<kernel>.html   one page per kernel: scaling and release-history charts, its groups by GPU and pass
    search/                 the search box's shards (site/index.py)
    style.css
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import functools
import hashlib
import itertools
import json
import multiprocessing
import os
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

from kernelindex_pipeline.site.charts import chart_svg, kernel_charts
from kernelindex_pipeline.core.catalog import PROTOCOL_NAMES, RERUN_FAMILY, SOURCE_NATIVE, SOURCE_REPLICA_FAMILY, gpu_label
from kernelindex_pipeline.site.display import ordered_params, plain, quantity, ratio_interval, workload_display
from kernelindex_pipeline.site.frame import STYLE, escape as _e, page
from kernelindex_pipeline.site.glossary import (GLOSSARY_PAGE, claim_text, claim_type, glossary_page, outcome, term_link,
                                                verdict_counts)
from kernelindex_pipeline.site.pages import (
    Site,
    cite_section,
    correctness_section,
    kernel_page,
    kernel_slug,
    published_as,
    published_permalink_page,
    replications_section,
)
from kernelindex_pipeline.site.kernel_claims import kernel_claims_sections
from kernelindex_pipeline.site.index import index_page, kernel_rows, run_index_files, search_files
from kernelindex_pipeline.site.statements import (
    BUNDLE_SUFFIX,
    DECIDED,
    PREDICATE_TYPE,
    STATEMENTS_SQL,
    bundle_name,
    envelope,
    statement_bytes,
    statement_id,
    statement_positions,
)
from kernelindex_pipeline.site.verdict_pages import VERDICT_HISTORY_SQL, verdict_history_section
from kernelindex_pipeline.warehouse.schema import manifests_sql, rows_of_runs
from kernelindex_pipeline.warehouse.store import Warehouse
from kernelindex_pipeline.warehouse.sql import records, table_exists

SOURCE_TITLES = {"liger-kernel-bench": "Liger-Kernel benchmarks"}
SOURCE_LICENSES = {"liger-kernel-bench": "BSD-2-Clause"}

EXPORT_SQL = """
SELECT r.run_id, r.external_id, r.title, r.kernel, r.operation_mode, r.provider, r.implementation, r.project,
    r.metric, r.unit, r.median_value, r.p20_value, r.p80_value, r.gpu, r.architecture, r.workload_slug,
    r.observed_at, r.evidence_level, r.source, r.status, r.withdrawn_upstream, r.liger_version, r.comparison_key,
    r.source_unit, r.source_p20, r.source_p50, r.source_p80, r.form_factor,
    m.manifest, m.run_digest, w.definition AS workload, i.manifest AS implementation_manifest,
    k.rank, k.group_size, {published_at} AS published_at, {listing_rank}, {source_artifact} AS source_artifact
FROM runs r
JOIN {manifests} m USING (run_id)
LEFT JOIN (SELECT * FROM workloads QUALIFY row_number() OVER (PARTITION BY workload_digest) = 1) w USING (workload_digest)
LEFT JOIN implementations i USING (implementation_digest)
LEFT JOIN ranks k USING (run_id)
{publications}
{listing_ranks}
{source_artifacts}
{where}
ORDER BY {order}
"""




def _has_view(con, name: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_views() WHERE view_name = ?", [name]).fetchone()[0])


def group_slug(comparison_key: str) -> str:
    return comparison_key.removeprefix("sha256:")[:16]


def _short(digest: str | None, n: int) -> str:
    return f"{digest[:7 + n]}…" if digest else "—"


# -- pages -----------------------------------------------------------------------------------------

def _dl(rows: list[tuple[str, str]]) -> str:
    """rows of (term, already-escaped description)."""
    return "<dl>" + "".join(f"<dt>{_e(k)}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _measured_medians(check: dict) -> str:
    """Both reruns' medians with their p20-p80 spread, and the ratio said in words."""
    if check.get("rerun_a_median") is None or check.get("rerun_b_median") is None:
        return ""
    unit = check["rerun_unit"]

    def side(name: str, which: str) -> str:
        return (f"{name} {quantity(check[f'rerun_{which}_median'], unit)} (p20-p80 "
                f"{quantity(check[f'rerun_{which}_p20'], unit)}-{quantity(check[f'rerun_{which}_p80'], unit)})")

    a, b = check["a_implementation"], check["b_implementation"]
    words = ""
    if check["rerun_ratio"] is not None:
        verb, what = ("used", "memory") if check["metric"] == "peak_memory" else ("took", "time")
        words = f"{b} {verb} {check['rerun_ratio']:.3f}× {a}'s {what}"
    return (f"<br><span class=\"measured\">{_e(side(a, 'a'))}; {_e(side(b, 'b'))}</span>"
            + (f"<br><span class=\"muted\">{_e(words)}</span>" if words else ""))


def claim_checks_section(checks: list[dict], site: Site = Site()) -> str:
    """What KernelIndex's reruns found about the source claims this run takes part in: its current claims,
    or, for a run a newer one has replaced in its group, those it made when it was listed (`listed_at`)."""
    if not checks:
        return ""
    rows = []
    for c in checks:
        rerun = ratio_interval(c["rerun_ratio"], c["ci_low"], c["ci_high"])
        measured = _measured_medians(c)
        sessions = c.get("sessions")
        flag = (f"<br><span class=\"flag source-artifact\">source artifact: {_e(c['source_artifact'])}</span>"
                if c.get("source_artifact") else "")
        card_match = f"<br>{term_link(c['card_match'], 1, c['card_match'].replace('_', ' '))}" if c.get("card_match") else ""
        rows.append(f"<tr><td>{_e(claim_text(c))} <span class=\"muted\">({_e(c['source_gpu'])}, ratio "
                    f"{c['source_ratio']:.3f})</span></td><td>{term_link(claim_type(c), 1)}</td>"
                    f"<td>{term_link(c['protocol'], 1)}</td><td>{_e(c['rerun_gpu'] or '—')}{card_match}</td><td>{_e(rerun)}{measured}</td>"
                    f"<td><strong>{term_link(c['verdict'], 1, outcome(c))}</strong>"
                    f"{' · ' + term_link('host-bound', 1) if c['host_bound'] else ''}"
                    f"{f' · {sessions} sessions' if sessions and sessions > 1 else ''}{flag}"
                    f"<br><span class=\"muted\">{_e(c['reason'])}</span>{_statement_link(c, site)}</td></tr>")
    listed = checks[0].get("listed_at")
    claims = (f"Each pair of implementations ranked in this run's comparison group as upstream listed it "
              f"({_listed_date(listed)}: this run and each implementation's newest run then) is a claim this run "
              "made when it was published" if listed else
              "Each pair of implementations ranked in this run's comparison group is a source claim")
    return ("<section id=\"claim-checks\"><h2>What the reruns found</h2>"
            f"<p>{claims}, re-checked on KernelIndex's GPU under two protocols "
            f"({term_link(PROTOCOL_NAMES[RERUN_FAMILY], 1)}, {term_link(PROTOCOL_NAMES[SOURCE_REPLICA_FAMILY], 1)}). "
            "Ratios are the second implementation's median over the first's; verdicts compare orders and ratios, "
            f"never absolute times across GPUs (<a href=\"../{GLOSSARY_PAGE}\">glossary</a>).</p><table><thead><tr>"
            "<th>source claim</th><th>type</th><th>protocol</th><th>rerun GPU</th><th>rerun ratio [95% CI]</th>"
            f"<th>verdict</th></tr></thead><tbody>{''.join(rows)}</tbody></table></section>")


REPLICATION_SQL = """
SELECT kernel, protocol, card, decided_claims, replicated, kept, moved, flipped, decided_replicated, decided_kept,
    decided_kept_pct
FROM verdict_replication WHERE replicated > 0 ORDER BY kernel, protocol, card
"""
# Claims whose sessions alone disagree (one held, another reversed): each session's interval, and the verdict
# that pools them with the spread between sessions.
FLIPPED_SQL = """
SELECT kernel, protocol, rerun_gpu, workload_slug, operation_mode, metric, a_provider, b_provider, verdict,
    rerun_ratio, ci_low, ci_high, between_session_sd,
    list_transform(session_intervals, lambda s: {'verdict': s.verdict, 'ratio': s.rerun_ratio, 'low': s.ci_low,
                                                 'high': s.ci_high, 'a': s.rerun_a_run_id, 'b': s.rerun_b_run_id}) AS sessions
FROM claim_checks
WHERE list_contains(list_transform(session_intervals, lambda s: s.verdict), 'held')
  AND list_contains(list_transform(session_intervals, lambda s: s.verdict), 'reversed')
ORDER BY kernel, protocol, rerun_gpu, workload_slug, operation_mode, metric, a_provider, b_provider
"""
# Each rerun of a flipped claim: its median, and the host's dispatch time for one eager torch op in its session
# (the session's launch floor).
FLIPPED_RUNS_SQL = """
SELECT run_id, median_value, unit,
    TRY_CAST(record->'environment'->'spec'->'launchFloor'->'oneElementTorchOp'->>'hostEnqueueNs' AS DOUBLE) AS dispatch_ns
FROM controlled_runs WHERE list_contains(?, run_id)
"""
ARTIFACTS_SQL = """
SELECT kernel, operation_mode, string_agg(DISTINCT gpu, ', ' ORDER BY gpu) AS gpus, count(*) AS runs,
    min(reason) AS example
FROM source_artifacts GROUP BY kernel, operation_mode ORDER BY kernel, operation_mode
"""


def _native_label(native: dict) -> str:
    """What a run's source-native metrics are, for the line that shows them unrounded."""
    quantiles = [re.fullmatch(r"(ms|us|s)_(\d+)", k) for k in native]
    if quantiles and all(quantiles):
        units = {"ms": "milliseconds", "us": "microseconds", "s": "seconds"}
        named = " and ".join(filter(None, [", ".join(f"{m[2]}th" for m in quantiles[:-1]), f"{quantiles[-1][2]}th"]))
        plural = "s" if len(quantiles) > 1 else ""
        return f"The source's own figures, unrounded: its {named} percentile{plural} in {units[quantiles[0][1]]}"
    return "The source's own figures, unrounded, under its own names"


def flip_cause(a: str, b: str, sessions: list[dict], reruns: dict[str, tuple]) -> str:
    """Which side of a flipped claim moved between its sessions (the larger spread of its medians, max / min),
    with each session's medians and host dispatch time: 'torch 1.66×, liger 1.02× (sessions: …)'."""
    def spread(side: str) -> float:
        medians = [reruns[s[side]][0] for s in sessions if s[side] in reruns and reruns[s[side]][0]]
        return max(medians) / min(medians) if medians else 1.0

    moved = sorted(((spread("a"), a), (spread("b"), b)), reverse=True)
    per_session = []
    for s in sessions:
        if s["a"] not in reruns or s["b"] not in reruns:
            continue
        (a_median, unit, dispatch), (b_median, _, _) = reruns[s["a"]], reruns[s["b"]]
        host = "" if dispatch is None else f", torch op dispatch {quantity(dispatch, 'ns')}"
        per_session.append(f"{a} {quantity(a_median, unit)}, {b} {quantity(b_median, unit)}{host}")
    return (f"{moved[0][1]} {moved[0][0]:.2f}×, {moved[1][1]} {moved[1][0]:.2f}× between sessions"
            + (f" ({'; '.join(per_session)})" if per_session else ""))


def kernel_verdict_sections(con) -> dict[str, str]:
    """{kernel: its page's sections on how its verdicts replicate across rerun sessions and which of its
    source series measured something other than their label}."""
    out: dict[str, list[str]] = defaultdict(list)
    if not (_has_view(con, "verdict_replication") and _has_view(con, "source_artifacts")):
        return {}
    rows: dict[str, list[str]] = defaultdict(list)
    for kernel, protocol, card, decided, replicated, kept, moved, flipped, dr, dk, pct in con.execute(
            REPLICATION_SQL).fetchall():
        rows[kernel].append(f"<tr><td>{_e(protocol)}</td><td>{_e(card)}</td><td>{replicated} of {decided}</td><td>{kept}</td>"
                            f"<td>{moved}</td><td>{flipped}</td><td>{dk} of {dr}"
                            f"{f' ({pct:g}%)' if pct is not None else ''}</td></tr>")
    flips: dict[str, list[str]] = defaultdict(list)
    flipped = con.execute(FLIPPED_SQL).fetchall()
    reruns = {run_id: rest for run_id, *rest in con.execute(
        FLIPPED_RUNS_SQL, [[s[side] for *_, sessions in flipped for s in sessions for side in "ab"]]).fetchall()}
    for (kernel, protocol, card, slug, mode, metric, a, b, verdict, ratio, low, high, sd, sessions) in flipped:
        each = "; ".join(f"{s['verdict']} {ratio_interval(s['ratio'], s['low'], s['high'])}" for s in sessions)
        spread = "" if sd is None else f' <span class="muted">(between sessions: sd {sd:.3f})</span>'
        flips[kernel].append(
            f"<tr><td>{_e(f'{b} vs {a}, {mode} {metric}, {slug}')}</td><td>{_e(protocol)}</td><td>{_e(card)}</td>"
            f"<td>{_e(each)}</td><td>{_e(flip_cause(a, b, sessions, reruns))}</td>"
            f"<td>{_e(verdict)} {_e(ratio_interval(ratio, low, high))}{spread}</td></tr>")
    for kernel, body in rows.items():
        flipped_note = "" if not flips[kernel] else (
            "<h3>Sessions that disagreed</h3><p>In these claims one session alone held and another alone "
            "reversed: each session's interval is narrower than the difference between the sessions, which is "
            "run-to-run variation of our own GPU that a single session cannot see. The verdict pools the sessions "
            "with the spread between them, so it claims no more than every session supports. Which side moved, "
            "each session's medians and its host's dispatch time for one eager torch op (its launch floor) say "
            "where the variation lies: a side that moved with the host's dispatch time kept the GPU waiting on the "
            "host.</p><table><thead><tr><th>claim</th><th>protocol</th><th>card</th>"
            "<th>each session: verdict, ratio [95% CI]</th><th>what moved</th><th>pooled verdict</th>"
            f"</tr></thead><tbody>{''.join(flips[kernel])}</tbody></table>")
        out[kernel].append(
            "<section id=\"replication\"><h2>Do the verdicts replicate?</h2><p>Claims measured again in an "
            "independent rerun session (own process, inputs and warm-up), and whether each session alone gives "
            "the same verdict, per card.</p><table><thead><tr><th>protocol</th><th>card</th><th>claims in 2+ sessions</th><th>kept</th>"
            "<th>moved</th><th>flipped held ↔ reversed</th><th>held/reversed kept</th></tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{flipped_note}</section>")
    for kernel, mode, gpus, runs, example in con.execute(ARTIFACTS_SQL).fetchall():
        out[kernel].append(
            f"<section class=\"source-artifacts\"><h2>Source artifacts · {_e(mode)}</h2><p class=\"flag "
            f"source-artifact\">{runs} source runs ({_e(gpus)}) measured something other than their label.</p>"
            f"<p class=\"muted\">For example: {_e(example)}. Their claims carry the flag; the reruns say what each "
            "provider really did.</p></section>")
    return {kernel: "".join(parts) for kernel, parts in out.items()}



def _statement_link(check: dict, site: Site) -> str:
    """A decided verdict's in-toto statement: its line in its kernel's bundle under the site's statements/."""
    if check["verdict"] not in DECIDED or not check.get("statement"):
        return ""
    bundle, line = check["statement"]
    return f" <a class=\"statement\" href=\"{_e(site.statement_link(bundle, line))}\">statement</a>"


def _listed_date(listed) -> str:
    return listed.strftime("%Y-%m-%d") if hasattr(listed, "strftime") else str(listed)[:10]


def run_records_sql(con, where: str = "", order: str = "r.run_id") -> str:
    """The query of what the record pages show of each run, `where` (a clause on ``r``, the runs) ordered by `order`."""
    # A home last written before these tables existed has them from its next ingest on.
    stamped, listed = table_exists(con, "publications"), table_exists(con, "listing_ranks")
    flagged = _has_view(con, "source_artifacts")
    return EXPORT_SQL.format(
        published_at="p.published_at" if stamped else "NULL",
        publications="LEFT JOIN publications p USING (run_id)" if stamped else "",
        listing_rank=("lr.rank AS listing_rank, lr.group_size AS listing_group_size, "
                      "lr.leader_run_id AS listing_leader_run_id, lr.listed_at" if listed else
                      "NULL AS listing_rank, NULL AS listing_group_size, NULL AS listing_leader_run_id, "
                      "NULL AS listed_at"),
        listing_ranks="LEFT JOIN listing_ranks lr USING (run_id)" if listed else "",
        source_artifact="sa.reason" if flagged else "NULL",
        source_artifacts="LEFT JOIN source_artifacts sa USING (run_id)" if flagged else "",
        # Only the selected runs' manifests are put together (each joins its protocol and environment).
        manifests=f"({manifests_sql(rows_of_runs('run_manifests', f'SELECT r.run_id FROM runs r {where}'))})"
        if where else "manifests",
        where=where, order=order)


def run_records(con, run_ids: list[str]) -> list[dict]:
    """What the record pages show of each of `run_ids`, by run id."""
    return records(con, run_records_sql(con, "WHERE list_contains($1, r.run_id)"), [run_ids])


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
    failed = run["status"] != "passed"
    if failed:
        rank_line = f"Not ranked: {term_link(run['status'], 1)} · {_e(level)} comparison · observed {observed}"
    elif run["rank"] is not None:
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
    if failed:
        sections.append(f"<p id=\"status\" class=\"status\"><strong>Status: {term_link(run['status'], 1)}</strong> "
                        f"— no measurement. {_e(run.get('status_reason') or '')}</p>")
    primary = (f"<p class=\"primary\"><span class=\"value\">{quantity(run['median_value'], unit, '')}</span>"
               "<span class=\"stat\">median</span></p>" if run["median_value"] is not None else
               f"<p class=\"primary\"><span class=\"stat\">No measurement: {_e(run['status'])}</span></p>")
    sections.append(
        f"<section id=\"primary\"><h2>Primary measurement</h2>{primary}"
        f"<p class=\"rank\">{rank_line}</p>{superseded}{compare}"
        + (f"<p class=\"flag source-artifact\">Source artifact: {_e(run['source_artifact'])}</p>"
           if run.get("source_artifact") else "")
        + (f"<p class=\"native\"><span class=\"muted\">{_native_label(native)}:</span> {native_line}</p>"
           if native_line else "") + "</section>")

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
    if run.get("published_as"):
        identity.append(("published before as", published_as(run["published_as"])))
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
    family = protocol.get("comparability", {}).get("family")
    if family in PROTOCOL_NAMES:
        prot.append(("protocol", term_link(PROTOCOL_NAMES[family], 1)))
    notes = protocol.get("comparability", {}).get("notes")
    sections.append("<section id=\"protocol\"><h2>Protocol</h2>" + _dl(prot)
                    + (f"<p class=\"muted\">{_e(notes)}</p>" if notes else "") + "</section>")

    env = [("gpu", _e(f"{hardware.get('product', run['gpu'])} ({hardware.get('architecture', run['architecture'])})"))]
    if hardware.get("formFactor"):
        env.append(("formFactor", _e(hardware["formFactor"])))
    env += [(k, _e(v)) for k, v in sorted(software.items())]
    sections.append("<section id=\"environment\"><h2>Environment</h2>" + _dl(env) + "</section>")
    sections.append("<section id=\"artifacts\"><h2>Artifacts</h2><p>No artifacts published with this run.</p></section>")
    sections.append(claim_checks_section(list(checks), site))
    sections.append(replications_section(site, run, attestations, quantity))
    sections.append("<section id=\"manifest\"><h2>Canonical manifest</h2><details><summary>Show manifest</summary>"
                    f"<pre>{_pretty_manifest(manifest)}</pre></details><p><a href=\"{_e(run['run_id'])}.json\">JSON</a> "
                    "(canonical JSON, RFC 8785; the run digest is the sha256 of its <code>run</code> object without its "
                    "<code>metadata</code>: docs/digests.md)</p></section>")
    sections.append(cite_section(site, run, source_title, observed))
    published = f"{run['published_at'].astimezone(datetime.timezone.utc):%Y-%m-%d}" if run.get("published_at") else "not yet"
    group_link = (f"<a href=\"../groups/{group}.html\">All results in this comparison group →</a> · "
                  if group in groups_with_pages else "")
    kernel_title = run["title"].split(" · ")[0]
    sections.append(f"<footer>Published {published} · {_e(source_title)} · "
                    f"{_e(SOURCE_LICENSES.get(run['source'], 'licence not stated'))} · {group_link}"
                    f"<a id=\"kernel-link\" href=\"../kernels/{_e(kernel_slug(run['kernel']))}.html\">All results for "
                    f"{_e(kernel_title)} →</a> · <a href=\"{_e(run['run_id'])}.json\">JSON</a></footer>")
    return page(f"Run {run['run_id'][:8]} · KernelIndex", "\n".join(sections), 1)


def card(run: dict) -> str:
    """The run's GPU as the views and claim_checks name it (``catalog.gpu_label``)."""
    return gpu_label(run["gpu"], run.get("form_factor"))


def protocol_name(run: dict) -> str:
    """The one name of the run's protocol (catalog.PROTOCOL_NAMES), from its manifest."""
    family = json.loads(run["manifest"])["protocol"]["spec"].get("comparability", {}).get("family")
    return PROTOCOL_NAMES.get(family, family or "unknown")


def group_page(key: str, ranked: list[dict], others: list[dict], workload: str,
               counts: dict[tuple[str, str], int] | None = None, history: list[dict] = ()) -> str:
    """A comparison group's page: its card and protocol, its ranked runs with a chart, the verdicts of its
    source claims (``counts``: (protocol, verdict) -> claims), their history, and its earlier runs."""
    first = (ranked or others)[0]
    title = f"{first['title'].split(' · ')[0]} · {first['operation_mode']} · {first['metric']}"
    best = ranked[0]["median_value"] if ranked else None
    table = ["<table><thead><tr><th>rank</th><th>implementation</th><th>median</th><th>p20</th><th>p80</th>"
             "<th>× #1</th><th>liger</th><th>observed</th><th>run</th></tr></thead><tbody>"]
    flagged = [r for r in ranked if r.get("source_artifact")]
    for r in ranked:
        ratio = f"{r['median_value'] / best:.3f}" if best else "—"
        flag = " <span class=\"flag source-artifact\">source artifact</span>" if r.get("source_artifact") else ""
        table.append(f"<tr><td>{r['rank']}</td><td>{_e(r['implementation'])}{flag}</td>"
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
    artifacts = ("<section id=\"source-artifacts\"><h2>Source artifacts</h2><ul>"
                 + "".join(f"<li>{_e(r['implementation'])}: {_e(r['source_artifact'])}</li>" for r in flagged)
                 + "</ul><p class=\"muted\">The source's run measured something other than its label; KernelIndex's "
                 "reruns of the claims it takes part in say what each provider really did.</p></section>"
                 if flagged else "")
    verdicts = ""
    if first["evidence_level"] == SOURCE_NATIVE:
        verdicts = ("<section id=\"verdicts\"><h2>What the reruns found</h2><p class=\"muted\">This group's source "
                    "claims by rerun protocol and verdict; each run's page gives its claims one by one.</p>"
                    f"{verdict_counts(counts or {}, 1)}</section>")
    body = (f"<h1>{_e(title)}</h1><p class=\"workload\">{_e(workload)}</p><dl><dt>GPU</dt><dd id=\"card\">"
            f"{_e(card(first))}</dd><dt>protocol</dt><dd id=\"protocol\">{term_link(protocol_name(first), 1)}</dd></dl>"
            f"<p class=\"muted\">comparison key <code>{_e(key)}</code></p>"
            f"<section id=\"chart-section\"><h2>Median with p20–p80</h2>{chart_svg(ranked)}</section>"
            f"<section id=\"runs\"><h2>Ranked runs</h2>{''.join(table)}</section>{artifacts}{verdicts}{earlier}")
    return page(f"{title} · {workload} · KernelIndex", body + verdict_history_section(list(history)), 1)




# -- export ----------------------------------------------------------------------------------------

# Runs are exported in shards of their comparison groups, each rendered in a worker process (one per CPU, up
# to EXPORT_WORKERS_MAX): an export's time divides by the CPUs. A shard holds about SHARD_TEXT_BYTES of runs'
# canonical text (a controlled run's is twice a source-native one's), read in one sorted query within
# SHARD_MEMORY: DuckDB's sort of a shard's rows (their manifests twice the runs' text, with workloads and
# implementations) takes about 25 times the runs' text, so a worker's memory follows a shard, not the
# warehouse. Small warehouses stay in one process, which starts sooner than a pool.
EXPORT_WORKERS_MAX = 4
SHARD_TEXT_BYTES = 3 * 2**20
SHARD_MEMORY = "192MB"
PARALLEL_FROM_RUNS = 20_000
FETCH_ROWS = 1_000

# The leader's fields the index and kernel pages show.
SUMMARY_FIELDS = ("kernel", "gpu", "operation_mode", "metric", "workload_slug", "implementation",
                  "median_value", "unit", "card", "protocol")

# The run ids KernelIndex published that no record has now: each has its permalink page, leading to the run.
PUBLISHED_PERMALINKS_SQL = """
SELECT p.identifier, r.run_id, r.title, p.published_at
FROM published_identifiers p JOIN runs r USING (run_id)
WHERE p.kind = 'run_id' AND regexp_full_match(p.identifier, '[0-9a-f]+')
ORDER BY p.identifier
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
    suffixes = (".html", ".json", ".js") if fmt == "html" else (".json",)
    for folder in ("runs", "groups", "kernels", "index", "search/ids", "search/kernels") if fmt == "html" else ("runs", "index"):
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
    # {statement id: (bundle, line)} of every decided claim, for the record pages' statement links
    statements: dict = dataclasses.field(default_factory=dict)


# A run's claim checks with the medians and p20-p80 spreads of the rerun pair that decided each.
CHECKS_WITH_MEDIANS_SQL = """
SELECT c.*, ra.median_value AS rerun_a_median, ra.p20_value AS rerun_a_p20, ra.p80_value AS rerun_a_p80,
    rb.median_value AS rerun_b_median, rb.p20_value AS rerun_b_p20, rb.p80_value AS rerun_b_p80, ra.unit AS rerun_unit
FROM {table} c LEFT JOIN controlled_runs ra ON ra.run_id = c.rerun_a_run_id
    LEFT JOIN controlled_runs rb ON rb.run_id = c.rerun_b_run_id
WHERE c.a_run_id {in_shard} OR c.b_run_id {in_shard}
ORDER BY c.protocol, c.a_provider, c.b_provider
"""


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
        counts_by_group: dict[str, dict[tuple[str, str], int]] = defaultdict(lambda: defaultdict(int))
        attestations_by_run: dict[str, list[dict]] = defaultdict(list)
        published_by_run: dict[str, list[dict]] = defaultdict(list)
        status_reasons: dict[str, str] = {}
        history_by_group: dict[str, list[dict]] = defaultdict(list)
        if shard.fmt == "html":
            for table in ("claim_checks", "listing_claim_checks") if table_exists(con, "listing_claim_checks") \
                    else ("claim_checks",):
                for check in _shard_records(con, shard, CHECKS_WITH_MEDIANS_SQL.format(table=table, in_shard=in_shard)):
                    check["statement"] = shard.statements.get(statement_id(check))
                    checks_by_run[check["a_run_id"]].append(check)
                    checks_by_run[check["b_run_id"]].append(check)
                    if table == "claim_checks":
                        counts_by_group[check["comparison_key"]][(check["protocol"], check["verdict"])] += 1
            if table_exists(con, "published_identifiers"):
                for entry in _shard_records(con, shard, "SELECT run_id, identifier, kind, published_at, origin FROM "
                                            f"published_identifiers WHERE run_id {in_shard} ORDER BY kind, identifier"):
                    published_by_run[entry["run_id"]].append(entry)
            status_reasons = {r["run_id"]: r["status_reason"] for r in _shard_records(
                con, shard, f"SELECT run_id, status_reason FROM controlled_runs WHERE status <> 'passed' AND run_id {in_shard}")}
            if table_exists(con, "verdict_history"):
                for change in _shard_records(con, shard, f"SELECT * FROM ({VERDICT_HISTORY_SQL}) WHERE {{shard}}"):
                    history_by_group[change["comparison_key"]].append(change)
            if table_exists(con, "attestations"):
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
                write(f"groups/{slug}.html", group_page(key, ranked, others, workload, counts_by_group.get(key),
                                                        history_by_group.get(key, [])))
                summary = dict(leader, card=card(leader), protocol=protocol_name(leader))
                summaries.append((slug, {f: summary[f] for f in SUMMARY_FIELDS}, len(ranked)))
                providers[slug] = sorted({r["provider"] for r in ranked})
            with_page = {group_slug(key)} if ranked else set()
            by_id = {r["run_id"]: r for r in members}  # a listing leader is of the same group
            for run in members:
                run.update(published_as=published_by_run.get(run["run_id"]), status_reason=status_reasons.get(run["run_id"]))
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


def export(fmt: str, directory: Path, progress: Callable[[int, int, str], None] = _default_progress,
           site: Site | None = None, workers: int | None = None, signer=None, warehouse: Warehouse | None = None) -> str:
    """Write the export of ``warehouse`` (default: KERNELINDEX_HOME's); ``site`` (default: from the
    environment, `Site.from_env`) builds permalinks and the report link; ``workers`` (default: one per CPU, up
    to EXPORT_WORKERS_MAX) render it; ``signer`` signs the statements, which an ``intoto`` export writes alone
    and an ``html`` one under ``statements/``."""
    directory = Path(directory)
    warehouse = Warehouse() if warehouse is None else warehouse
    if fmt == "intoto":
        return export_statements(directory, signer, warehouse)
    site = Site.from_env() if site is None else site
    with warehouse.reader() as con:
        generation = warehouse.db_path.resolve()
        [(total, text)] = con.execute("SELECT (SELECT count(*) FROM runs), "
                                      "(SELECT coalesce(sum(length(run)), 0) FROM run_manifests)").fetchall()
        statements = statement_positions(con, [t for t in ("claim_checks", "listing_claim_checks")
                                               if table_exists(con, t)]) if fmt == "html" else {}
    if workers is None:
        workers = 1 if total < PARALLEL_FROM_RUNS else min(EXPORT_WORKERS_MAX, len(os.sched_getaffinity(0)))
    count = max(workers, -(-text // SHARD_TEXT_BYTES))
    shards = [_Shard(str(warehouse.home), str(generation), i, count, fmt, str(directory), site, statements)
              for i in range(count)]
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
        for path, text in run_index_files(con).items():
            write(path, text)
        if fmt == "html":
            renamed = table_exists(con, "published_identifiers")
            for path, text in search_files(con, renamed).items():
                write(path, text)
            verdicts: dict[str, dict[tuple[str, str], int]] = defaultdict(dict)
            for kernel, protocol, verdict, claims in con.execute(
                    "SELECT kernel, protocol, verdict, count(*) FROM claim_checks GROUP BY ALL").fetchall():
                verdicts[kernel][(protocol, verdict)] = claims
            charts = kernel_charts(con)
            # every kernel gets a page, one whose runs are all unranked too, so every "All results for" resolves
            titles, runs = {}, {}
            for kernel, title, count in con.execute(
                    "SELECT kernel, split_part(arg_min(title, run_id), ' · ', 1), count(*) FROM runs "
                    "GROUP BY kernel ORDER BY kernel").fetchall():
                titles[kernel], runs[kernel] = title, count
            verdict_sections = kernel_verdict_sections(con)
            claim_lists = kernel_claims_sections(con)
            permalinks = records(con, PUBLISHED_PERMALINKS_SQL) if renamed else []
    if fmt == "html":
        summaries.sort(key=lambda s: s[0])
        by_kernel: dict[str, list] = defaultdict(list)
        for slug, leader, size in summaries:
            by_kernel[leader["kernel"]].append((slug, dict(leader, median_display=quantity(leader["median_value"],
                                                                                            leader["unit"])), size))
        for kernel, title in titles.items():
            write(f"kernels/{kernel_slug(kernel)}.html",
                  kernel_page(kernel, title, by_kernel.get(kernel, []),
                              charts.get(kernel, "") + verdict_sections.get(kernel, ""), verdicts.get(kernel),
                              claim_lists.get(kernel, "")))
        for permalink in permalinks:
            write(f"runs/{permalink['identifier']}.html",
                  published_permalink_page(site, permalink["identifier"], permalink))
        write("index.html", index_page(kernel_rows(summaries, providers, runs, titles), verdicts))
        write(GLOSSARY_PAGE, glossary_page())
        write("style.css", STYLE.lstrip())
    produced.update(write.produced)
    removed = _prune(directory, produced, fmt)
    written = (f"{rewritten + write.rewritten} files written, {unchanged + write.unchanged} unchanged, "
               f"{removed} stale removed")
    if fmt == "json":
        return f"exported {total} manifests and index.json to {directory} ({written})"
    # the verdicts' statements, which the record pages link, inside the site
    statements = export_statements(directory / "statements", signer, warehouse)
    return (f"exported {total} record pages, {len(summaries)} group pages, {len(titles)} kernel pages and "
            f"manifests to {directory} ({written}); {statements}")


def export_statements(directory: Path, signer=None, warehouse: Warehouse | None = None) -> str:
    """The in-toto statements of every decided claim and protocol (`site/statements.py`), current and
    listing-time, bundled per kernel (``<kernel>.intoto.jsonl``: one statement a line, or with ``signer`` its
    DSSE envelope, in id order), and ``index.json``: each statement's id, bundle, line, sha256, claim and
    verdict. Files whose bytes would not change are left untouched; those no longer produced are removed."""
    write, index, bundles = _Writer(str(directory)), [], {}
    with (Warehouse() if warehouse is None else warehouse).reader(bounded=True) as con:
        tables = ["claim_checks"] + (["listing_claim_checks"] if table_exists(con, "listing_claim_checks") else [])
        # One pass of the joins: every table's decided claims, a kernel's together, its tables in order.
        cursor = con.execute(" UNION ALL BY NAME ".join(
            f"SELECT {n} AS table_order, * FROM ({STATEMENTS_SQL.format(table=t)})" for n, t in enumerate(tables))
            + " ORDER BY kernel, table_order")
        names = [d[0] for d in cursor.description]
        rows = (dict(zip(names, row)) for batch in iter(lambda: cursor.fetchmany(4096), []) for row in batch)
        for kernel, kernel_checks in itertools.groupby(rows, key=lambda check: check["kernel"]):
            lines: dict[str, tuple[str, dict]] = {}
            for check in kernel_checks:
                sid = statement_id(check)
                if sid in lines:
                    continue
                payload = statement_bytes(check)
                line = envelope(payload, signer) if signer is not None else payload
                lines[sid] = (line.decode("utf-8"), {
                    "statement": sid, "sha256": hashlib.sha256(payload).hexdigest(),
                    "claim": check["source_order"], "protocol": check["protocol"], "verdict": check["verdict"],
                    "comparisonKey": check["comparison_key"], "runs": [check["a_run_id"], check["b_run_id"]]})
            bundle = bundle_name(kernel)
            ordered = sorted(lines.items())
            write(bundle, "".join(text + "\n" for _, (text, _) in ordered))
            bundles[kernel] = bundle
            index += [{**entry, "bundle": bundle, "line": n} for n, (_, (_, entry)) in enumerate(ordered, start=1)]
    write("index.json", json.dumps({"predicateType": PREDICATE_TYPE, "signed": signer is not None,
                                    "bundles": bundles, "statements": index}, ensure_ascii=False, indent=1) + "\n")
    produced = set(write.produced)
    removed = 0
    for entry in os.scandir(directory):
        stale = entry.name.endswith((BUNDLE_SUFFIX, ".intoto.json", ".dsse.json"))
        if stale and entry.is_file() and entry.name not in produced:
            os.unlink(entry.path)
            removed += 1
    return (f"exported {len(index)} verdict statements{', signed,' if signer else ''} in {len(bundles)} bundles to "
            f"{directory} ({write.rewritten} files written, {write.unchanged} unchanged, {removed} stale removed)")
