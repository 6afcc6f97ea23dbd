"""What the site shows of verdicts beyond a record page's claims: a group's verdict history."""

from __future__ import annotations

from kernelindex_pipeline.site.frame import escape as _e

# Each claim's verdicts over time, oldest first, for the group pages.
VERDICT_HISTORY_SQL = """
SELECT comparison_key, protocol, a_provider, b_provider, verdict, since, until FROM verdict_history
ORDER BY comparison_key, a_provider, b_provider, protocol, since
"""


def verdict_history_section(history: list[dict]) -> str:
    """The verdicts the group's claims have had, and since when (`verdict_history`); the claims whose
    verdict changed come first."""
    if not history:
        return ""
    claims: dict[tuple, list[dict]] = {}
    for row in history:
        claims.setdefault((row["a_provider"], row["b_provider"], row["protocol"]), []).append(row)
    rows = []
    for (a, b, protocol), verdicts in sorted(claims.items(), key=lambda c: (len(c[1]) == 1, c[0])):
        held = "; ".join(f"<strong>{_e(v['verdict'])}</strong> since {v['since']:%Y-%m-%d}"
                         + (f" until {v['until']:%Y-%m-%d}" if v["until"] is not None else "") for v in verdicts)
        rows.append(f"<tr><td>{_e(a)} &lt; {_e(b)}</td><td>{_e(protocol)}</td><td>{held}</td></tr>")
    changed = sum(len(v) > 1 for v in claims.values())
    return ("<section id=\"verdict-history\"><h2>Verdict history</h2><p>What the reruns said of each claim in "
            f"this group, and since when: {changed} of {len(claims)} claim checks changed verdict.</p>"
            "<table><thead><tr><th>claim</th><th>protocol</th><th>verdicts</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>")
