"""The registry site around the record pages: where it lives (permalinks), where readers report problems,
the citation block, the Correctness section of a controlled run, and the per-kernel pages.

Configuration, read when an export starts: `$KERNELINDEX_SITE_URL` (the published site's root; permalinks are
built from it) and `$KERNELINDEX_TRACKER_URL` (an issue form that takes ``title`` and ``body`` query
parameters, as GitHub's ``.../issues/new`` does).
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from dataclasses import dataclass
from urllib.parse import urlencode

from kernelindex_pipeline.site.display import natural_key
from kernelindex_pipeline.site.frame import escape, page
from kernelindex_pipeline.site.glossary import term_link, verdict_counts

DEFAULT_SITE_URL = "https://kernelindex.dev"
DEFAULT_TRACKER_URL = "https://github.com/kernelindex/registry/issues/new"
ACCESS_PLACEHOLDER = "[access date]"
# Fills every access-date placeholder with the reader's date; without scripts the placeholder stays.
ACCESS_SCRIPT = ("<script>for (const e of document.querySelectorAll('.accessed')) "
                 "e.textContent = new Date().toISOString().slice(0, 10);</script>")


_e = escape


@dataclass(frozen=True)
class Site:
    url: str = DEFAULT_SITE_URL
    tracker: str = DEFAULT_TRACKER_URL

    @classmethod
    def from_env(cls) -> Site:
        return cls(url=os.environ.get("KERNELINDEX_SITE_URL") or DEFAULT_SITE_URL,
                   tracker=os.environ.get("KERNELINDEX_TRACKER_URL") or DEFAULT_TRACKER_URL)

    def permalink(self, run_id: str) -> str:
        return f"{self.url.rstrip('/')}/runs/{run_id}.html"

    @staticmethod
    def statement_link(bundle: str, line: int) -> str:
        """A verdict statement from a record page: its line in its bundle under the site's statements/, where
        `export --format intoto SITE/statements` writes them (docs/statements.md)."""
        return f"../statements/{bundle}#L{line}"

    def report_link(self, run: dict) -> str:
        """The tracker's new-issue form with the run named in the title and its permalink and digest in the body."""
        return self._form(run, f"Run {run['run_id'][:8]}: ", "What is wrong with this record:")

    def attest_link(self, run: dict) -> str:
        """The tracker's new-issue form for a reproduction or note on the run, asking for what one must carry."""
        return self._form(run, f"Reproduction or note on run {run['run_id'][:8]}",
                          "Who, when, and either a reproduction (figures, environment: GPU, driver, CUDA, "
                          "torch, triton, package versions; the command) or a note:")

    def _form(self, run: dict, title: str, prompt: str) -> str:
        body = (f"Run: {self.permalink(run['run_id'])}\nDigest: {run['run_digest']}\n"
                f"Title: {run['title']}\n\n{prompt}\n")
        return f"{self.tracker}?{urlencode({'title': title, 'body': body})}"


def cite_section(site: Site, run: dict, source_title: str, observed: str) -> str:
    permalink = site.permalink(run["run_id"])
    citation = (f"KernelIndex. \u201c{_e(run['title'])}\u201d, run {_e(run['run_id'])} ({_e(source_title)}, observed "
                f"{observed}). {_e(run['run_digest'])}. <a href=\"{_e(permalink)}\">{_e(permalink)}</a>. Accessed "
                f"<span class=\"accessed\">{ACCESS_PLACEHOLDER}</span>.")
    return ("<section id=\"cite\"><h2>How to cite</h2><p>Cite this record (permalink, digest, access date)</p>"
            f"<p class=\"cite\">{citation}</p><dl><dt>permalink</dt><dd><a href=\"{_e(permalink)}\">{_e(permalink)}"
            f"</a></dd><dt>digest</dt><dd><code>{_e(run['run_digest'])}</code></dd></dl>"
            f"<p><a id=\"report\" href=\"{_e(site.report_link(run))}\">Report an issue with this run</a></p>"
            f"</section>{ACCESS_SCRIPT}")


def correctness_section(correctness: dict) -> str:
    """A controlled run's correctness check as a table: each output and gradient's relative error against
    its tolerance, and the seeds it ran on."""
    seeds = correctness.get("seeds")
    rows = []
    for kind, label in (("outputs", "output"), ("gradients", "gradient")):
        for name, check in sorted((correctness.get(kind) or {}).items()):
            error, tolerance = check.get("rel_error"), check.get("tolerance")
            held = error is not None and tolerance is not None and error <= tolerance
            rows.append(f"<tr><td>{label}</td><td><code>{_e(name)}</code></td><td>{_fmt(error)}</td>"
                        f"<td>{_fmt(tolerance)}</td><td>{'within' if held else 'over'}</td></tr>")
    others = {k: v for k, v in correctness.items() if k not in ("outputs", "gradients", "seeds")}
    lead = ("Checked against a higher-precision reference before any timing"
            + (f", on seeds {', '.join(_e(s) for s in seeds)}" if seeds else "") + ".")
    table = ("<table><thead><tr><th>checked</th><th>name</th><th>relative error</th><th>tolerance</th><th></th>"
             f"</tr></thead><tbody>{''.join(rows)}</tbody></table>") if rows else ""
    extra = "".join(f"<p>{_e(k)}: {_e(v)}</p>" for k, v in sorted(others.items()))
    return f"<section id=\"correctness\"><h2>Correctness</h2><p>{lead}</p>{table}{extra}</section>"


def _fmt(value) -> str:
    return "—" if value is None else f"{value:.3g}" if isinstance(value, float) else _e(value)


IDENTIFIER_KINDS = {"run_id": "run id", "run_digest": "run digest", "comparison_key": "comparison key",
                    "workload_digest": "workload digest", "implementation_digest": "implementation digest",
                    "protocol_digest": "protocol digest", "environment_digest": "environment digest"}


def published_as(entries: list[dict]) -> str:
    """A run's earlier published identifiers (`published_identifiers`), each with its kind, and the day its
    record page published it or the digest version it was."""
    items = []
    for entry in entries:
        when = (f"published {entry['published_at']:%Y-%m-%d}" if entry["origin"] != "v1alpha1" and entry["published_at"]
                else entry["origin"])
        items.append(f"{_e(IDENTIFIER_KINDS.get(entry['kind'], entry['kind']))} <code>{_e(entry['identifier'])}</code> "
                     f"<span class=\"muted\">({_e(when)})</span>")
    return "<br>".join(items)


def published_permalink_page(site: Site, identifier: str, run: dict) -> str:
    """The page at a permalink KernelIndex published under an identifier no record has now: it sends the
    reader on to the record (`run`: run_id, title, published_at)."""
    target = f"{run['run_id']}.html"
    head = (f"<meta http-equiv=\"refresh\" content=\"0; url={_e(target)}\">"
            f"<link rel=\"canonical\" href=\"{_e(site.permalink(run['run_id']))}\">")
    body = (f"<h1>Run {_e(identifier)}</h1><p>Published {run['published_at']:%Y-%m-%d} as run {_e(identifier)}: "
            f"{_e(run['title'])}.</p><p>This record is <a id=\"record\" href=\"{_e(target)}\">run "
            f"{_e(run['run_id'][:8])} →</a> (run id <code>{_e(run['run_id'])}</code>); its identifiers were "
            "published under earlier rules and are kept as <code>published_identifiers</code>.</p>")
    return page(f"Run {identifier} · KernelIndex", body, 1, head)


def kernel_slug(kernel: str) -> str:
    """The kernel page's file name: the kernel's name with anything but letters, digits, ``.``, ``_`` and ``-``
    replaced (an upstream kernel name is data, not a path)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", kernel).lstrip(".") or "_"


def kernel_page(kernel: str, title: str, groups: list[tuple[str, dict, int]], charts: str = "",
                counts: dict[tuple[str, str], int] | None = None, claims: str = "") -> str:
    """The kernel's charts (already drawn), the verdicts of its source claims (``counts``: (protocol, verdict)
    -> claims) and the list of them (``claims``, drawn), then every ranked comparison group of the kernel, by
    GPU card then protocol and timed pass, each with its #1."""
    by_card: dict[str, list] = defaultdict(list)
    for slug, leader, size in groups:
        by_card[leader["card"]].append((slug, leader, size))
    parts = [f"<h1>{_e(title)}</h1><p class=\"muted\"><code>{_e(kernel)}</code> · {len(groups)} comparison groups"
             " with ranked runs</p>", charts,
             "<section id=\"verdicts\"><h2>What the reruns found</h2><p class=\"muted\">The kernel's source claims "
             f"by rerun protocol and verdict.</p>{verdict_counts(counts or {}, 1)}</section>", claims]
    for gpu in sorted(by_card):
        rows = "".join(
            f"<tr><td>{term_link(l['protocol'], 1)}</td><td>{_e(l['operation_mode'])}</td><td>{_e(l['metric'])}</td>"
            f"<td><a href=\"../groups/{slug}.html\">{_e(l['workload_slug'])}</a></td>"
            f"<td>{_e(l['implementation'])}</td><td>{_e(l['median_display'])}</td><td>{size}</td></tr>"
            for slug, l, size in sorted(by_card[gpu], key=lambda g: (g[1]["protocol"], g[1]["operation_mode"],
                                                                     g[1]["metric"], natural_key(g[1]["workload_slug"]))))
        parts.append(f"<section><h2>{_e(gpu)}</h2><table><thead><tr><th>protocol</th><th>pass</th><th>metric</th>"
                     f"<th>workload</th><th>#1</th><th>median</th><th>runs</th></tr></thead><tbody>{rows}</tbody>"
                     "</table></section>")
    return page(f"{title} · KernelIndex", "\n".join(parts), 1)


def replications_section(site: Site, run: dict, attestations: list[dict], quantity) -> str:
    """The run's attestations (reproductions with their figures and environment, notes), newest first."""
    items = []
    for a in sorted(attestations, key=lambda a: (a["attested_on"], a["attestation_id"]), reverse=True):
        head = f"<strong>{_e(a['type'])}</strong> by {_e(a['author'])}, {a['attested_on']:%Y-%m-%d}"
        body = ""
        if a["type"] == "reproduction":
            unit = run["unit"]
            figures = " · ".join(f"{name} {quantity(round(a[f'{name}_value']), unit)}"
                                 for name in ("median", "p20", "p80") if a[f"{name}_value"] is not None)
            environment = json.loads(a["environment"]) if a["environment"] else {}
            env = ", ".join(f"{k} {v}" for k, v in sorted(environment.items()) if not isinstance(v, (dict, list)))
            body += f"<p>{figures}</p><p class=\"muted\">{_e(env)}</p>"
            if a["command"]:
                body += f"<pre>{_e(a['command'])}</pre>"
        if a["note"]:
            body += f"<p>{_e(a['note'])}</p>"
        items.append(f"<li id=\"{_e(a['attestation_id'][7:23])}\">{head}{body}</li>")
    listing = f"<ul class=\"attestations\">{''.join(items)}</ul>" if items else "<p>No attestations yet.</p>"
    return ("<section id=\"replications\"><h2>Replications and notes</h2>" + listing
            + "<p class=\"muted\">Community attestations. They never change the evidence level; only a "
            "KernelIndex-controlled rerun does.</p>"
            f"<p><a id=\"attest\" href=\"{_e(site.attest_link(run))}\">Add a reproduction or note</a> "
            "<span class=\"muted\">(the format: docs/attestations.md)</span></p></section>")
