"""Attestations: files a reader submits (a reproduction or a note), validated by `kernelindex ingest` into the
`attestations` table and shown on the run's page, never changing its evidence level or rank."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from conftest import BASE_REVISIONS, copy_home, ingest, main_rows, query, write_snapshot_dir
from shipped_warehouse import SHIPPED_UPSTREAM, ingest_into

from kernelindex_pipeline.ingest.attestations import Refused, validate

SEED = "llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/2025-08-07-21-42-04"
TODAY = dt.date(2026, 12, 4)
RUNS = {"run1": ("run1", "latency"), "sha256:abc": ("run1", "latency"), "mem1": ("mem1", "peak_memory")}


def reproduction(**changes) -> dict:
    document = {"apiVersion": "kernelindex.dev/v1alpha1", "kind": "Attestation", "run": "run1",
                "type": "reproduction", "author": "A. Reader <reader@example.org>", "date": "2026-11-30",
                "reproduction": {"unit": "us", "median": 150.2, "p20": 149.0, "p80": 152.5,
                                 "environment": {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.7.0"},
                                 "command": "python benchmark/scripts/benchmark_llama4_rope.py"}}
    for key, value in changes.items():
        if key in document["reproduction"] or key in ("unit", "median", "p20", "p80", "environment"):
            document["reproduction"][key] = value
        else:
            document[key] = value
    return document


def test_a_reproduction_is_stored_in_the_unit_of_its_metric():
    row = validate(reproduction(), RUNS, TODAY)
    assert (row["run_id"], row["metric"], row["median_value"], row["p20_value"], row["p80_value"]) == (
        "run1", "latency", 150200.0, 149000.0, 152500.0)
    assert validate(reproduction(run="sha256:abc"), RUNS, TODAY)["run_id"] == "run1"  # the run digest names it too
    memory = validate(reproduction(run="mem1", unit="MiB", median=2.0, p20=None, p80=None), RUNS, TODAY)
    assert memory["median_value"] == 2 * 2**20 and memory["p20_value"] is None
    note = validate({"apiVersion": "kernelindex.dev/v1alpha1", "kind": "Attestation", "run": "run1", "type": "note",
                     "author": "B", "date": "2026-12-01", "note": "The source ran with Liger 0.6.1."}, RUNS, TODAY)
    assert note["note"] == "The source ran with Liger 0.6.1." and note["median_value"] is None


@pytest.mark.parametrize(("changes", "reason"), [
    ({"run": "nope"}, "is not a run id or run digest"),
    ({"kind": "BenchmarkRun"}, "apiVersion and kind"),
    ({"type": "vote"}, "type must be one of"),
    ({"author": "  "}, "'author' must be a non-empty string"),
    ({"date": "2027-01-01"}, "is in the future"),
    ({"date": "yesterday"}, "ISO date"),
    ({"median": float("nan")}, "must be a finite number"),
    ({"median": -3.0}, "outside the plausible range"),
    ({"median": 0}, "outside the plausible range"),
    ({"median": True}, "must be a finite number"),
    ({"median": 9e20}, "outside the plausible range"),
    ({"unit": "furlongs"}, "is not one of"),
    ({"p20": 160.0}, "out of order"),
    ({"environment": {"torch": "2.7"}}, "must name its 'gpu'"),
    ({"type": "note"}, "'note' must be a non-empty string"),
])
def test_invalid_attestations_are_refused_with_a_reason(changes, reason):
    with pytest.raises(Refused, match=re.escape(reason)):
        validate(reproduction(**changes), RUNS, TODAY)


def test_ingest_stores_attestations_quarantines_bad_ones_and_shows_them_on_the_page(base_warehouse, tmp_path,
                                                                                   monkeypatch):
    from kernelindex_pipeline.site.export import export

    home = copy_home(base_warehouse, tmp_path / "home")
    [(run_id, level, rank)] = query(home, "SELECT r.run_id, r.evidence_level, k.rank FROM runs r JOIN ranks k "
                                          "USING (run_id) WHERE r.metric = 'latency' ORDER BY run_id LIMIT 1")
    folder = tmp_path / "attestations"
    folder.mkdir()
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    (folder / "reader.json").write_text(json.dumps(reproduction(run=run_id, date=today)), encoding="utf-8")
    (folder / "broken.json").write_text('{"kind": "Attestation", ', encoding="utf-8")
    source = write_snapshot_dir(tmp_path / "source", main_rows()[:BASE_REVISIONS])  # the revisions it holds
    assert "nothing new" not in ingest(home, source, KERNELINDEX_ATTESTATIONS=str(folder)).stdout  # they republish
    assert query(home, "SELECT run_id, type, median_value FROM attestations") == [(run_id, "reproduction", 150200.0)]
    [(reason,)] = query(home, "SELECT reason FROM quarantine WHERE revision_key = 'attestations/broken.json'")
    assert reason.startswith("not JSON")
    # an attestation changes neither the evidence level nor the rank
    assert query(home, "SELECT r.evidence_level, k.rank FROM runs r JOIN ranks k USING (run_id) WHERE run_id = ?",
                 [run_id]) == [(level, rank)]
    monkeypatch.setenv("KERNELINDEX_HOME", str(home))
    export("html", tmp_path / "site", progress=lambda *_: None)
    page = (tmp_path / "site" / "runs" / f"{run_id}.html").read_text(encoding="utf-8")
    section = re.search(r'<section id="replications">.*?</section>', page, re.S).group(0)
    assert "<strong>reproduction</strong> by A. Reader" in section and "No attestations yet" not in section
    assert "median 150.2 µs · p20 149.0 µs · p80 152.5 µs" in section and "NVIDIA H100 80GB HBM3" in section


def test_a_run_published_as_v1alpha2_is_found_by_its_v1alpha1_digest(analyst_home, tmp_path, monkeypatch):
    """The digest a reader cited before a run became v1alpha2 still names it."""
    home = copy_home(analyst_home, tmp_path / "home")
    [(run_id, old_digest)] = query(home, "SELECT run_id, v1alpha1_digest FROM digest_aliases "
                                         "WHERE kind = 'BenchmarkRun' ORDER BY run_id LIMIT 1")
    folder = tmp_path / "attestations"
    folder.mkdir()
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    (folder / "cited.json").write_text(json.dumps({
        "apiVersion": "kernelindex.dev/v1alpha1", "kind": "Attestation", "run": old_digest, "type": "note",
        "author": "A. Reader", "date": today, "note": "cited by the digest it had"}), encoding="utf-8")
    monkeypatch.setenv("KERNELINDEX_ATTESTATIONS", str(folder))
    assert ingest_into(home, "--source", str(SHIPPED_UPSTREAM)) == 0
    assert query(home, "SELECT run_id, type FROM attestations") == [(run_id, "note")]


def test_a_new_attestation_reloads_the_attestations_alone(analyst_home, evidence_sample, tmp_path):
    """An attestation changes neither evidence nor ranks: its publication loads no evidence file again and
    re-checks no claim."""
    from kernelindex_pipeline.publish import steps
    from kernelindex_pipeline.warehouse.store import Warehouse

    home = copy_home(analyst_home, tmp_path / "home")
    [(run_id,)] = query(home, "SELECT run_id FROM runs WHERE external_id = ?", [SEED])
    folder = tmp_path / "attestations"
    folder.mkdir()
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    (folder / "reader.json").write_text(json.dumps(reproduction(run=run_id, date=today)), encoding="utf-8")
    wh = Warehouse(home)
    claims_before = query(home, "SELECT count(*), sum(hash(row(*COLUMNS(*)))) FROM claim_checks")
    done = steps.publish(wh, evidence_sample, folder)
    assert done.published and done.runs.details["attestations"] == 1
    assert done.evidence.details["files"] == 0 and done.claims.details["rechecked"] == 0
    assert query(home, "SELECT run_id FROM attestations") == [(run_id,)]
    assert query(home, "SELECT count(*), sum(hash(row(*COLUMNS(*)))) FROM claim_checks") == claims_before
    # nothing new the next time
    assert not steps.news(wh, [], evidence_sample, folder).anything


def test_the_default_attestation_folder_is_committed_with_a_plain_git_add():
    """docs/attestations.md has maintainers commit attestations to ``data/attestations/``: git must not ignore
    it, though the warehouse written under ``data/`` stays ignored."""
    import shutil
    import subprocess

    from kernelindex_pipeline.defs.resources import REPO_DATA, SHIPPED_ATTESTATIONS

    repo = REPO_DATA.parent
    if shutil.which("git") is None or not (repo / ".git").exists():
        pytest.skip("not a git checkout")

    def ignored(path) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", str(path.relative_to(repo))], cwd=repo).returncode == 0

    assert not ignored(SHIPPED_ATTESTATIONS / "2026-11-30-reproduction.json")
    assert ignored(REPO_DATA / "kernelindex.duckdb")
