"""A kernel page's list of its decided source claims: each claim with its verdict and rerun ratio, filterable in
the page by verdict, card and protocol (the filters' state kept in the URL, as on the index)."""

from __future__ import annotations

from collections import defaultdict

from kernelindex_pipeline.site.display import natural_key, ratio_interval
from kernelindex_pipeline.site.frame import escape as _e
from kernelindex_pipeline.site.glossary import claim_text, outcome, term_link
from kernelindex_pipeline.warehouse.sql import records

DECIDED_CLAIMS_SQL = """
SELECT kernel, protocol, source_gpu AS card, operation_mode, metric, workload_slug, a_implementation,
    b_implementation, claim_type, source_a_median, source_b_median, verdict, rerun_ratio, ci_low, ci_high, a_run_id
FROM claim_checks WHERE verdict <> 'not re-checked'
"""
FILTERS = (("verdict", "verdict"), ("card", "GPU"), ("protocol", "protocol"))


def _row(claim: dict) -> str:
    ratio = ratio_interval(claim["rerun_ratio"], claim["ci_low"], claim["ci_high"])
    said = outcome(claim)
    return (f"<tr data-verdict=\"{_e(said)}\" data-card=\"{_e(claim['card'])}\" data-protocol=\"{_e(claim['protocol'])}\">"
            f"<td>{_e(claim_text(claim))}</td><td>{_e(claim['operation_mode'])} · {_e(claim['metric'])}</td>"
            f"<td>{_e(claim['workload_slug'])}</td><td>{_e(claim['card'])}</td><td>{_e(claim['protocol'])}</td>"
            f"<td>{_e(said)}</td><td class=\"nw\">{ratio}</td>"
            f"<td><a href=\"../runs/{claim['a_run_id']}.html#claim-checks\">record</a></td></tr>")


def kernel_claims_sections(con) -> dict[str, str]:
    """{kernel: its page's section listing every decided claim, with the filters}."""
    by_kernel: dict[str, list[dict]] = defaultdict(list)
    for claim in records(con, DECIDED_CLAIMS_SQL):
        by_kernel[claim["kernel"]].append(claim)
    sections = {}
    for kernel, claims in by_kernel.items():
        claims.sort(key=lambda c: (c["card"], c["protocol"], c["operation_mode"], c["metric"],
                                   natural_key(c["workload_slug"]), c["a_implementation"], c["b_implementation"]))
        options = {name: sorted({_e(outcome(c)) if name == "verdict" else _e(c[name]) for c in claims})
                   for name, _ in FILTERS}
        selects = "".join(
            f"<label>{label} <select id=\"c-{name}\" name=\"{name}\"><option value=\"\">all</option>"
            + "".join(f"<option>{value}</option>" for value in options[name]) + "</select></label> "
            for name, label in FILTERS)
        sections[kernel] = (
            f"<section id=\"claims\"><h2>Every decided claim</h2><p class=\"muted\">The {len(claims)} source claims "
            f"a rerun decided: the claim, its verdict ({term_link('held', 1, 'what the verdicts mean')}) and the "
            "rerun's ratio, second implementation's time over the first's, with its 95% interval; each leads to "
            f"the record that shows the figures.</p><form id=\"claim-filters\">{selects}"
            "<span id=\"c-count\" class=\"muted\"></span></form><table class=\"claims\"><thead><tr><th>claim</th>"
            "<th>pass · metric</th><th>workload</th><th>GPU</th><th>protocol</th><th>verdict</th>"
            f"<th>ratio [95% CI]</th><th></th></tr></thead><tbody>{''.join(_row(c) for c in claims)}</tbody></table>"
            f"{CLAIMS_SCRIPT}</section>")
    return sections


CLAIMS_SCRIPT = """<script>
(() => {
  const rows = [...document.querySelectorAll('table.claims tr[data-verdict]')];
  const names = ['verdict', 'card', 'protocol'];
  const params = new URLSearchParams(location.search);
  const apply = () => {
    const want = Object.fromEntries(names.map(n => [n, document.getElementById('c-' + n).value]));
    let shown = 0;
    for (const r of rows) {
      const keep = names.every(n => !want[n] || r.dataset[n] === want[n]);
      r.hidden = !keep; shown += keep;
    }
    document.getElementById('c-count').textContent = shown + ' of ' + rows.length + ' claims';
    const query = new URLSearchParams(names.filter(n => want[n]).map(n => [n, want[n]])).toString();
    history.replaceState(null, '', query ? '?' + query : location.pathname);
  };
  for (const n of names) {
    const select = document.getElementById('c-' + n);
    if (params.has(n)) select.value = params.get(n);
    select.addEventListener('change', apply);
  }
  apply();
})();
</script>"""
