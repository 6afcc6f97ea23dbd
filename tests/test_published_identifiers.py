"""Identifiers KernelIndex has published resolve to their records: the seed pages' run ids, digests and
comparison keys (as the pages show them), and the v1alpha1 digests of objects now v1alpha2, in
`published_identifiers`, through `kernelindex show` and at the published permalinks of the export."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernelindex_pipeline import cli
from kernelindex_pipeline.warehouse.store import Warehouse

SEEDS = Path(__file__).parent / "fixtures" / "seed-records"
PAGES = {"llama4_rope-backward-liger-h100.txt": "2026-08-20", "geglu-backward-huggingface-a100.txt": "2026-08-18"}


def page_identifiers(name: str) -> dict:
    """What a seed page shows of its identity: its run id, external id, publication day, and every digest
    and key it prints (shortened ones as prefixes, without their ellipsis)."""
    text = (SEEDS / name).read_text(encoding="utf-8")
    manifest = json.loads(text[text.index('{\n  "run"'): text.index("Cite this record")])
    spec = manifest["run"]["spec"]
    return {
        "run_id": re.match(r"Run ([0-9a-f]+) ·", text).group(1),
        "external_id": spec["sourceNative"]["externalId"],
        "published": re.search(r"Published (\d{4}-\d\d-\d\d)", text).group(1),
        "comparison_key": re.search(r"comparison key(sha256:[0-9a-f]+)…", text).group(1),
        "run_digest": re.search(r"\n(sha256:[0-9a-f]+)…\n", text).group(1),
        "workload_digest": spec["workloadDigest"],
        "implementation_digest": spec["implementationDigest"],
    }


def rows(home: Path, sql: str, params=None) -> list[tuple]:
    with Warehouse(home).reader() as con:
        return con.execute(sql, params or []).fetchall()


@pytest.mark.parametrize("page", list(PAGES))
def test_every_identifier_on_a_seed_page_leads_to_its_record(analyst_home, page):
    shown = page_identifiers(page)
    [(run_id,)] = rows(analyst_home, "SELECT run_id FROM runs WHERE external_id = ?", [shown["external_id"]])
    found = dict(rows(analyst_home, "SELECT kind, identifier FROM published_identifiers WHERE run_id = ? "
                                    "AND origin = 'seed record'", [run_id]))
    assert found == {k: v for k, v in shown.items() if k not in ("external_id", "published")}
    # each maps to the identifier of its kind the record has now
    current = dict(rows(analyst_home, """
        SELECT p.kind, p.current = CASE p.kind WHEN 'run_id' THEN r.run_id WHEN 'run_digest' THEN m.run_digest
            WHEN 'comparison_key' THEN r.comparison_key WHEN 'workload_digest' THEN r.workload_digest
            ELSE r.implementation_digest END
        FROM published_identifiers p JOIN runs r USING (run_id) JOIN run_manifests m USING (run_id)
        WHERE p.run_id = ? AND p.origin = 'seed record'""", [run_id]))
    assert current and all(current.values()), current
    # and keeps the day its page was first published
    [(published,)] = rows(analyst_home, "SELECT strftime(timezone('UTC', published_at), '%Y-%m-%d') FROM publications "
                                        "WHERE run_id = ?", [run_id])
    assert published == shown["published"] == PAGES[page]


def test_every_v1alpha1_digest_is_a_published_identifier(analyst_home):
    [(aliases, missing)] = rows(analyst_home, """
        SELECT count(*), count(*) FILTER (WHERE NOT EXISTS (
            SELECT 1 FROM published_identifiers p WHERE p.identifier = a.v1alpha1_digest AND p.current = a.digest
              AND p.run_id IS NOT DISTINCT FROM a.run_id AND p.origin = 'v1alpha1'))
        FROM digest_aliases a""")
    assert aliases > 0 and missing == 0


def shown(home: Path, run: str, capsys, monkeypatch) -> tuple[dict, str]:
    monkeypatch.setenv("KERNELINDEX_HOME", str(home))
    assert cli.main(["show", run]) == 0, capsys.readouterr().err
    out = capsys.readouterr()
    return json.loads(out.out), out.err


@pytest.mark.parametrize("page", list(PAGES))
def test_show_accepts_each_published_identifier(analyst_home, capsys, monkeypatch, page):
    ids = page_identifiers(page)
    record, _ = shown(analyst_home, ids["external_id"], capsys, monkeypatch)
    for kind in ("run_id", "run_digest", "comparison_key"):
        for form in (ids[kind], ids[kind] + "…"):
            manifest, note = shown(analyst_home, form, capsys, monkeypatch)
            assert manifest == record, form
            assert f"{ids[kind]} is a published {kind.replace('_', ' ')}, published {PAGES[page]}" in note


def test_show_takes_the_short_run_id_pages_show_and_says_when_nothing_matches(analyst_home, capsys, monkeypatch):
    ids = page_identifiers("llama4_rope-backward-liger-h100.txt")
    [(run_id,)] = rows(analyst_home, "SELECT run_id FROM runs WHERE external_id = ?", [ids["external_id"]])
    assert shown(analyst_home, run_id[:8], capsys, monkeypatch)[0] == shown(analyst_home, ids["run_id"], capsys, monkeypatch)[0]
    monkeypatch.setenv("KERNELINDEX_HOME", str(analyst_home))
    assert cli.main(["show", "01a0202c"]) == 1
    assert "no run with id, external id, digest or published identifier '01a0202c'" in capsys.readouterr().err


def test_the_published_permalinks_lead_to_their_records(analyst_home, html_export):
    for page, day in PAGES.items():
        ids = page_identifiers(page)
        [(run_id,)] = rows(analyst_home, "SELECT run_id FROM runs WHERE external_id = ?", [ids["external_id"]])
        permalink = (html_export / "runs" / f"{ids['run_id']}.html").read_text(encoding="utf-8")
        assert f'<meta http-equiv="refresh" content="0; url={run_id}.html">' in permalink
        assert f'<a id="record" href="{run_id}.html">' in permalink and f"Published {day}" in permalink
        record = (html_export / "runs" / f"{run_id}.html").read_text(encoding="utf-8")
        assert f"Published {day} ·" in record
        assert f"<code>{ids['run_id']}</code>" in record and f"<code>{ids['run_digest']}</code>" in record
