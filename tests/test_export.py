"""`kernelindex export`: canonical manifests per run with an index, and static record and group pages that
show the seed records' figures."""

from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path

import pytest

from kernelindex_pipeline import cli
from kernelindex_pipeline.site.export import group_slug, quantity
from kernelindex_pipeline.core.identity import canonical_json, digest
from kernelindex_pipeline.warehouse.store import Warehouse
from conftest import query

LLAMA4 = "llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/2025-08-07-21-42-04"
GEGLU = "geglu/backward/huggingface/nvidia-a100-sxm4-80gb/batch8-hidden4096-intermediate11008-seq8192-bf16/2024-09-03-15-38-42"
SECTIONS = ("Primary measurement", "Identity", "Correctness", "Workload", "Measurements", "Protocol", "Environment",
            "Artifacts", "Replications and notes", "Canonical manifest", "How to cite")


def text_of(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def run_row(home: Path, external_id: str) -> dict:
    with Warehouse(home).reader() as con:
        cursor = con.execute("SELECT r.*, m.run_digest, k.rank FROM runs r JOIN manifests m USING (run_id) "
                             "LEFT JOIN ranks k USING (run_id) WHERE external_id = ?", [external_id])
        return dict(zip([d[0] for d in cursor.description], cursor.fetchone()))


@pytest.fixture(scope="module")
def json_export(analyst_home, tmp_path_factory, monkeypatch_module):
    out = tmp_path_factory.mktemp("json-export")
    monkeypatch_module.setenv("KERNELINDEX_HOME", str(analyst_home))
    assert cli.main(["export", "--format", "json", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_quantities_read_like_the_seed_records():
    assert quantity(153632, "ns", "") == "153.6µs"
    assert quantity(151904, "ns") == "151.9 µs"
    assert quantity(144213211, "ns", "") == "144.2ms"
    assert quantity(5433344, "ns") == "5.433 ms"
    assert quantity(3 * 2**30, "bytes") == "3 GiB"


def test_json_export_has_one_canonical_manifest_per_run_and_an_index(analyst_home, json_export):
    with Warehouse(analyst_home).reader() as con:
        stored = dict(con.execute("SELECT run_id, manifest FROM manifests").fetchall())
        digests = dict(con.execute("SELECT run_id, run_digest FROM manifests").fetchall())
    files = sorted((json_export / "runs").glob("*.json"))
    assert {p.stem for p in files} == set(stored)
    contents = json.loads((json_export / "index.json").read_text(encoding="utf-8"))
    assert contents["kind"] == "RunIndexContents" and contents["runs"] == len(stored)
    entries = []
    for kernel in contents["kernels"]:
        index = json.loads((json_export / kernel["file"]).read_text(encoding="utf-8"))
        assert index["kind"] == "RunIndex" and len(index["runs"]) == kernel["runs"]
        assert {entry["kernel"] for entry in index["runs"]} == {kernel["kernel"]}
        entries += index["runs"]
    assert sorted(entry["run_id"] for entry in entries) == sorted(stored)
    for entry in entries[:200]:
        text = (json_export / entry["manifest"]).read_text(encoding="utf-8")
        assert text == stored[entry["run_id"]]
        manifest = json.loads(text)
        assert canonical_json(manifest) == text
        assert digest(manifest["run"]) == entry["run_digest"] == digests[entry["run_id"]]


def test_json_export_is_reproducible(analyst_home, json_export, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELINDEX_HOME", str(analyst_home))
    assert cli.main(["export", "--format", "json", str(tmp_path)]) == 0
    for name in ("index.json", *(f"runs/{p.name}" for p in sorted((json_export / "runs").glob("*.json"))[:50])):
        assert hashlib.sha256((tmp_path / name).read_bytes()).digest() == hashlib.sha256((json_export / name).read_bytes()).digest()


@pytest.mark.parametrize("external_id, figures", [
    (LLAMA4, ["153.6µs median", "Rank 2 in its comparison group · source-native comparison · observed 2025-08-07",
              "latency · p20 151.9 µs", "latency · p80 155.8 µs", "latency · median 153.6 µs",
              "The source's own figures, unrounded: its 20th, 50th and 80th percentiles in milliseconds: "
              "ms 20 0.15190400183200836 · ms 50 0.1536320000886917 · ms 80 0.1558080017566681",
              "workload seq = 2048 · hidden = 2048 · q_heads = 32 · kv_heads = 8 · bf16",
              "k bf16 [1, 2048, 8, 64]", "q bf16 [1, 2048, 32, 64]", "gpu NVIDIA H100 (sm_90)",
              "implementation Liger", "project Liger-Kernel", "revision unknown", "source Liger-Kernel benchmarks"]),
    (GEGLU, ["144.2ms median", "Rank 2 in its comparison group · source-native comparison · observed 2024-09-03",
             "latency · p20 144.2 ms", "latency · p80 144.2 ms",
             "workload seq = 8192 · batch = 8 · hidden = 4096 · intermediate = 11008 · bf16",
             "x bf16 [8, 8192, 4096]", "gpu NVIDIA A100 (sm_80)", "implementation Transformers",
             "project Hugging Face Transformers"]),
])
def test_seed_record_pages_show_the_seed_figures(analyst_home, html_export, external_id, figures):
    run = run_row(analyst_home, external_id)
    page = (html_export / "runs" / f"{run['run_id']}.html").read_text(encoding="utf-8")
    text = text_of(page)
    for figure in figures:
        assert figure in text, figure
    for section in SECTIONS:
        assert f"<h2>{section}</h2>" in page, section
    assert f"external id {external_id}" in text
    assert run["run_digest"] in text and "Cite this record (permalink, digest, access date)" in text
    assert "Marked passed by the source; the correctness policy was not published." in text
    assert "No artifacts published with this run." in text and "No attestations yet." in text
    # the seed page's closing lines, in the seed's order
    closing = ["Add a reproduction or note", "Canonical manifest", "Cite this record", "Report an issue with this run",
               "Published ", "All results for "]
    positions = [text.index(line) for line in closing]
    assert positions == sorted(positions), dict(zip(closing, positions))
    manifest = json.loads(html.unescape(re.search(r"<pre>(.*?)</pre>", page, re.S).group(1)))
    assert list(manifest) == ["run", "protocol", "environment"]
    assert manifest["run"]["spec"]["sourceNative"]["externalId"] == external_id


def test_compare_with_first_links_to_the_leader(analyst_home, html_export):
    run = run_row(analyst_home, LLAMA4)
    page = (html_export / "runs" / f"{run['run_id']}.html").read_text(encoding="utf-8")
    target = re.search(r'<a id="compare-with-1" href="([^"]+)">Compare with #1 →</a>', page).group(1)
    with Warehouse(analyst_home).reader() as con:
        (leader,) = con.execute("SELECT run_id FROM ranks WHERE comparison_key = ? AND rank = 1",
                                [run["comparison_key"]]).fetchone()
    assert target == f"{leader}.html" and (html_export / "runs" / target).exists()
    leader_page = (html_export / "runs" / target).read_text(encoding="utf-8")
    assert "Rank 1 in its comparison group" in text_of(leader_page) and "Compare with #1" not in leader_page
    assert f'href="../groups/{group_slug(run["comparison_key"])}.html"' in page


def test_group_page_charts_every_ranked_run(analyst_home, html_export):
    run = run_row(analyst_home, LLAMA4)
    page = (html_export / "groups" / f"{group_slug(run['comparison_key'])}.html").read_text(encoding="utf-8")
    svg = re.search(r"<svg id=\"chart\".*?</svg>", page, re.S).group(0)
    assert svg.count('class="median"') == 2 and svg.count('class="spread"') == 2
    assert "p20 151.9 µs – p80 155.8 µs" in svg
    assert f'href="../runs/{run["run_id"]}.html"' in page
    kernel = (html_export / "kernels" / "llama4_rope.html").read_text(encoding="utf-8")
    assert f'href="../groups/{group_slug(run["comparison_key"])}.html"' in kernel
    assert 'href="kernels/llama4_rope.html"' in (html_export / "index.html").read_text(encoding="utf-8")
    with Warehouse(analyst_home).reader() as con:
        (groups,) = con.execute("SELECT count(DISTINCT comparison_key) FROM ranks WHERE rank IS NOT NULL").fetchone()
    # One page per group with a ranked run, and none that would say it has none.
    pages = list((html_export / "groups").glob("*.html"))
    assert len(pages) == groups
    assert not any("No ranked runs" in p.read_text(encoding="utf-8") for p in pages)


def test_every_local_link_of_the_seed_pages_resolves(analyst_home, html_export):
    for external_id in (LLAMA4, GEGLU):
        path = html_export / "runs" / f"{run_row(analyst_home, external_id)['run_id']}.html"
        for href in re.findall(r'href="([^"]+)"', path.read_text(encoding="utf-8")):
            if not href.startswith("https://"):  # the permalink and the tracker's forms are the site's, not the export's
                target, _, fragment = href.partition("#")
                assert (path.parent / target).resolve().exists(), href
                if target.endswith(".intoto.jsonl"):  # a statement: its line in its kernel's bundle
                    lines = (path.parent / target).read_bytes().splitlines()
                    assert fragment.startswith("L") and 1 <= int(fragment[1:]) <= len(lines), href
                else:
                    assert not fragment or f'id="{fragment}"' in (path.parent / target).read_text(encoding="utf-8"), href


def test_controlled_record_shows_its_correctness_check_as_a_table(analyst_home, html_export):
    with Warehouse(analyst_home).reader() as con:
        run_id, correctness = con.execute("""
            SELECT run_id, m.manifest->>'$.run.spec.correctness' FROM runs JOIN manifests m USING (run_id)
            WHERE evidence_level = 'kernelindex-controlled' AND status = 'passed'
              AND (m.manifest->'$.run.spec.correctness.gradients') IS NOT NULL
            ORDER BY run_id LIMIT 1""").fetchone()
    page = (html_export / "runs" / f"{run_id}.html").read_text(encoding="utf-8")
    section = re.search(r'<section id="correctness">.*?</section>', page, re.S).group(0)
    checks = json.loads(correctness)
    assert "{&quot;" not in section and "<table>" in section
    for name, check in checks["gradients"].items():
        assert f"<code>{name}</code></td><td>{check['rel_error']:.3g}</td><td>{check['tolerance']:.3g}</td><td>within" \
            in section


def test_reexport_rewrites_only_what_changed_and_drops_stale_pages(base_warehouse, tmp_path, monkeypatch):
    """Re-exported over itself, the export touches no unchanged file, restores an edited page and removes a
    page it no longer produces."""
    from kernelindex_pipeline.site.export import export

    monkeypatch.setenv("KERNELINDEX_HOME", str(base_warehouse))
    out = tmp_path / "site"
    export("html", out, progress=lambda *_: None)
    [(edited_id,), (untouched_id,)] = query(base_warehouse, "SELECT run_id FROM ranks ORDER BY run_id LIMIT 2")
    edited = out / "runs" / f"{edited_id}.html"
    original = edited.read_bytes()
    edited.write_text("tampered", encoding="utf-8")
    stale = out / "groups" / "0000000000000000.html"
    stale.write_text("a group that no longer exists", encoding="utf-8")
    untouched = out / "runs" / f"{untouched_id}.html"
    before = untouched.stat().st_mtime_ns
    summary = export("html", out, progress=lambda *_: None)
    assert "(1 files written," in summary and "1 stale removed" in summary, summary
    assert edited.read_bytes() == original and not stale.exists()
    assert untouched.stat().st_mtime_ns == before


def test_an_export_in_worker_processes_writes_the_same_files(base_warehouse, tmp_path, monkeypatch):
    """Sharded over worker processes (more shards than workers), the export writes byte for byte what one
    process writes, and a JSON export over it leaves the pages alone."""
    import kernelindex_pipeline.site.export as export_module

    monkeypatch.setenv("KERNELINDEX_HOME", str(base_warehouse))
    one = tmp_path / "one"
    export_module.export("html", one, progress=lambda *_: None, workers=1)
    monkeypatch.setattr(export_module, "SHARD_TEXT_BYTES", 2**16)
    [(text,)] = query(base_warehouse, "SELECT sum(length(run)) FROM run_manifests")
    assert text > 4 * 2**16  # four shards a worker at least
    out = tmp_path / "site"
    summary = export_module.export("html", out, progress=lambda *_: None, workers=2)
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    assert all((out / f).read_bytes() == (one / f).read_bytes() for f in files), summary
    summary = export_module.export("json", out, progress=lambda *_: None, workers=2)
    assert "0 stale removed" in summary and sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file()) == files


def test_kernel_pages_sort_workloads_by_their_numbers(html_export):
    """Within a card's protocol, pass and metric, a kernel page lists workloads by their parameters' values
    (hidden1024 before hidden2048 before hidden10240), not as text."""
    from kernelindex_pipeline.site.display import natural_key

    page = (html_export / "kernels" / "rms_norm.html").read_text(encoding="utf-8")
    runs: dict[tuple, list[str]] = {}
    for card, section in enumerate(page.split("<section><h2>")[1:]):
        for protocol, mode, metric, slug in re.findall(
                r"<tr><td>(.*?)</td><td>([^<]*)</td><td>([^<]*)</td><td><a href=\"../groups/[^\"]+\">([^<]+)</a>", section):
            runs.setdefault((card, protocol, mode, metric), []).append(html.unescape(slug))
    assert runs
    assert all(slugs == sorted(slugs, key=natural_key) for slugs in runs.values())
    assert any(slugs != sorted(slugs) for slugs in runs.values())  # text order would differ
