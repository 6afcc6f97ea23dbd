"""Both shipped sources in one warehouse: the main-branch files and Liger's gh-pages per-commit runs."""

from __future__ import annotations

import gzip
import html
import json
import os
import re

import pytest
from conftest import NO_EVIDENCE, environment, query
from test_claim_checks import assert_unrecorded_compiles_decide_nothing
from test_export import text_of
from test_ui import needs_chromium
from shipped_warehouse import REPO, SHIPPED_UPSTREAM, ingest_into

from kernelindex_pipeline import cli
from kernelindex_pipeline.site.export import group_slug, record_page, run_records
from kernelindex_pipeline.verdicts import rule
from kernelindex_pipeline.warehouse.store import Warehouse

GH_PAGES = REPO / "data" / "upstream" / "liger-kernel-gh-pages"
SEED = "llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/2025-08-07-21-42-04"


@pytest.fixture(scope="module")
def both_home(default_home):
    """The default build: `kernelindex ingest` with no source takes both shipped sources."""
    assert {s for (s,) in query(default_home, "SELECT DISTINCT source FROM snapshots")} == {
        "liger-kernel-bench", "liger-kernel-gh-pages"}
    return default_home


def pages(home, *run_ids: str) -> dict[str, str]:
    """The record pages of these runs as the export writes them, as text (their groups have pages)."""
    with Warehouse(home).reader() as con:
        records = {r["run_id"]: r for r in run_records(con, list(run_ids))}
        (leaders,) = con.execute("SELECT list(DISTINCT leader_run_id) FROM listing_ranks WHERE list_contains(?, run_id)",
                                 [list(run_ids)]).fetchone()
        listing_leaders = {r["run_id"]: r for r in run_records(con, leaders)}
    groups = {group_slug(r["comparison_key"]) for r in records.values()}
    return {rid: record_page(r, None, groups, listing_leader=listing_leaders.get(r["listing_leader_run_id"]))
            for rid, r in records.items()}


def test_the_seed_keeps_the_rank_upstream_listed_it_at_and_leads_to_the_current_ranking(both_home):
    """Newer gh-pages runs of Liger have replaced the llama4_rope seed's run in `ranks`; its page keeps
    "Rank 2" and its #1 as upstream listed it (`listing_ranks`), and leads to the group's current ranking."""
    [(run_id, key, rank, size, leader, current)] = query(
        both_home, "SELECT r.run_id, r.comparison_key, l.rank, l.group_size, l.leader_run_id, k.rank FROM runs r "
                   "JOIN listing_ranks l USING (run_id) LEFT JOIN ranks k USING (run_id) WHERE r.external_id = ?",
        [SEED])
    assert (rank, size, current) == (2, 2, None)
    [(now_first,)] = query(both_home, "SELECT run_id FROM ranks WHERE comparison_key = ? AND rank = 1", [key])
    assert leader != now_first
    shown = pages(both_home, run_id, leader)
    text = text_of(shown[run_id])
    assert "Rank 2 in its comparison group · source-native comparison · observed 2025-08-07" in text
    assert "a newer Liger run represents Liger in the group's current ranking" in text
    assert f'href="../groups/{group_slug(key)}.html"' in shown[run_id]
    target = re.search(r'<a id="compare-with-1" href="([^"]+)">Compare with #1 →</a>', shown[run_id]).group(1)
    assert target == f"{leader}.html"
    leader_text = text_of(shown[leader])
    assert "Rank 1 in its comparison group" in leader_text
    assert "This run was #1 in its comparison group when listed." in leader_text


def test_listing_ranks_agree_with_ranks_where_no_newer_run_took_the_place(both_home):
    """A run still ranked had, when first listed, the rank it has now unless its group changed since: in the
    shipped data, for nearly all of them; and every source run has a listing row."""
    [(ranked, same)] = query(both_home, "SELECT count(*), count(*) FILTER (WHERE l.rank = k.rank "
                                        "AND l.group_size = k.group_size) FROM ranks k JOIN listing_ranks l USING (run_id)")
    assert ranked > 0 and same / ranked > 0.95
    assert query(both_home, "SELECT count(*) FROM runs WHERE evidence_level = 'source-native' AND status = 'passed' "
                            "AND median_value IS NOT NULL AND run_id NOT IN (SELECT run_id FROM listing_ranks)") == [(0,)]


def test_the_integrity_checks_pass_with_both_sources_and_the_warnings_say_why(both_home):
    """Ids, ranks, manifests and digests hold, the quarantine stays under its threshold, and `kernels/` knows
    every kernel the sources name (one it did not know would be a warning naming it)."""
    from kernelindex_pipeline.defs import checks
    from kernelindex_pipeline.warehouse.store import Warehouse

    with Warehouse(both_home).reader() as con:
        for check in (checks.unique_run_ids, checks.no_orphan_ranks, checks.every_run_has_manifest,
                      checks.digests_recompute, checks.quarantine_rate):
            assert check(con).passed, check.name
        # every kernel the shipped sources name has a spec (DPO loss and PolyNorm the last): no warning on day one
        unknown = checks.unknown_kernels(con)
    assert unknown.passed and unknown.metadata["unknown_kernels"].value == "none"


def _data_lines() -> int:
    total = 0
    for path in GH_PAGES.glob("*.csv.gz"):
        lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
        total += sum(1 for line in lines[1:] if line.strip())
    return total


def test_every_gh_pages_line_is_a_run_listing_or_quarantined(both_home):
    (listed,) = query(both_home, "SELECT count(*) FROM run_listings WHERE source = 'liger-kernel-gh-pages'")[0]
    (refused,) = query(both_home, "SELECT count(*) FROM quarantine q JOIN snapshots s USING (revision_key) "
                                  "WHERE s.source = 'liger-kernel-gh-pages'")[0]
    assert listed + refused == _data_lines()


def test_dyt_lines_are_runs_of_kernel_dyt_with_the_setting_their_kernel_name_gives(both_home):
    """gh-pages names DyT's benchmarks `dyt_beta=True` and `dyt_beta=False`: every such line is a listing of
    a run of kernel `dyt` whose workload has that beta (and the beta tensor only when it is on)."""
    lines = 0
    for path in GH_PAGES.glob("*.csv.gz"):
        lines += sum(1 for line in gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
                     if line.startswith("dyt_beta="))
    assert lines > 0
    assert query(both_home, "SELECT count(*) FROM run_listings l JOIN runs r USING (run_id) "
                            "WHERE l.source = 'liger-kernel-gh-pages' AND r.kernel = 'dyt'") == [(lines,)]
    assert query(both_home, "SELECT count(*) FROM runs WHERE kernel LIKE '%=%' OR external_id LIKE '%=%'") == [(0,)]
    workloads = query(both_home, "SELECT DISTINCT r.workload_slug, w.definition FROM runs r JOIN workloads w "
                                 "USING (workload_digest) WHERE r.kernel = 'dyt'")
    betas = set()
    for slug, definition in workloads:
        spec = json.loads(definition)["spec"]
        beta = spec["parameters"]["beta"]
        betas.add(beta)
        assert slug.startswith(f"beta-{str(beta).lower()}-")
        assert ("beta" in {t["name"] for t in spec["inputs"]}) == beta
    assert betas == {True, False}
    golden = json.loads((GH_PAGES / "golden_commits.json").read_text(encoding="utf-8"))["golden_commits"]
    compared = query(both_home, "SELECT DISTINCT workload_slug[:10], golden_commit FROM golden_vs_newest "
                                "WHERE kernel = 'dyt'")
    assert sorted(compared) == [("beta-false", golden["dyt_beta=False"]), ("beta-true-", golden["dyt_beta=True"])]


def test_a_measurement_in_both_sources_is_one_run_ranked_once(both_home):
    rows = query(both_home, "SELECT run_id, list(DISTINCT source ORDER BY source) FROM run_listings "
                            "GROUP BY 1 HAVING count(DISTINCT source) = 2 LIMIT 50")
    assert rows, "no measurement appears in both sources"
    ids = [r for r, _ in rows]
    assert query(both_home, "SELECT count(*), count(DISTINCT run_id) FROM runs WHERE list_contains(?, run_id)",
                 [ids]) == [(len(ids), len(ids))]
    assert query(both_home, "SELECT count(*) - count(DISTINCT run_id) FROM ranks") == [(0,)]


def test_gh_pages_runs_know_their_commit_release_and_removal(both_home):
    sources = dict(query(both_home, "SELECT source, count(*) FROM snapshots GROUP BY 1"))
    assert sources["liger-kernel-gh-pages"] == 46 and sources["liger-kernel-bench"] == 38
    assert query(both_home, "SELECT count(*) FROM snapshots WHERE state = 'deleted'") == [(5,)]
    (release_runs,) = query(both_home, "SELECT count(*) FROM runs WHERE release IS NOT NULL")[0]
    (with_commit,) = query(both_home, "SELECT count(*) FROM runs WHERE source = 'liger-kernel-gh-pages' "
                                      "AND benchmarked_commit IS NULL")[0]
    assert release_runs > 0 and with_commit == 0
    removed = query(both_home, "SELECT count(*) FILTER (WHERE NOT r.withdrawn_upstream) FROM runs r "
                               "WHERE r.run_id IN (SELECT run_id FROM run_listings l JOIN snapshots s ON "
                               "s.stream = l.stream AND s.state = 'deleted') AND r.run_id NOT IN "
                               "(SELECT run_id FROM run_listings WHERE source = 'liger-kernel-bench')")
    assert removed == [(0,)]  # a run of a removed gh-pages run, listed nowhere else, is withdrawn


def test_the_seed_manifest_is_unchanged_by_the_second_source(both_home, analyst_home, monkeypatch, capsys):
    shown = []
    for home in (analyst_home, both_home):
        monkeypatch.setenv("KERNELINDEX_HOME", str(home))
        assert cli.main(["show", SEED]) == 0
        shown.append(json.loads(capsys.readouterr().out))
    assert shown[0] == shown[1]


def test_golden_commits_land_as_data_and_the_view_compares_golden_with_newest(both_home):
    shipped = json.loads((GH_PAGES / "golden_commits.json").read_text(encoding="utf-8"))
    rows = query(both_home, "SELECT golden_key, kernel, setting, benchmarked_commit, default_commit FROM golden_commits")
    assert {key: commit for key, _, _, commit, _ in rows} == shipped["golden_commits"]
    assert {default for *_, default in rows} == {shipped["default_commit"]}
    assert ("dyt_beta=False", "dyt", "beta=False") in [r[:3] for r in rows]
    compared = query(both_home, "SELECT kernel, golden_commit, golden_run_id, newest_run_id, newest_commit "
                                "FROM golden_vs_newest WHERE kernel = 'rms_norm'")
    assert compared and {golden for _, golden, *_ in compared} == {shipped["golden_commits"]["rms_norm"]}
    # each side is a gh-pages listing of the commit the view names
    for _, golden, golden_run, newest_run, newest in compared[:20]:
        listed = {c for (c,) in query(both_home, "SELECT DISTINCT benchmarked_commit FROM run_listings "
                                                 "WHERE run_id = ? AND source = 'liger-kernel-gh-pages'", [golden_run])}
        assert any(c.startswith(golden) for c in listed)
        assert newest in {c for (c,) in query(both_home, "SELECT benchmarked_commit FROM run_listings WHERE run_id = ?",
                                               [newest_run])}


def _gh_pages_subset(root, lines: int, golden: bytes):
    """A copy of the shipped gh-pages directory listing only its first `lines` revisions, with `golden` as
    its golden_commits.json."""
    import shutil

    shutil.copytree(GH_PAGES, root, dirs_exist_ok=True)
    index = (GH_PAGES / "INDEX.tsv").read_text(encoding="utf-8").splitlines()
    (root / "INDEX.tsv").write_text("\n".join(index[:1 + lines]) + "\n", encoding="utf-8")
    (root / "golden_commits.json").write_bytes(golden)
    return root


def test_a_broken_golden_file_is_quarantined_and_a_fixed_one_replaces_nothing_else(tmp_path):
    home = tmp_path / "home"
    source = _gh_pages_subset(tmp_path / "gh", 1, b'{"golden_commits": {"rms_norm": "0701bab"')
    with environment(KERNELINDEX_EVIDENCE=str(NO_EVIDENCE)):  # the golden file is the source's alone
        assert ingest_into(home, "--source", str(source)) == 0
    assert query(home, "SELECT count(*) FROM golden_commits") == [(0,)]
    [(reason,)] = query(home, "SELECT reason FROM quarantine WHERE revision_key LIKE 'liger-kernel-gh-pages:%'")
    assert reason.startswith("benchmarks/golden_commits.json: not JSON")
    (runs,) = query(home, "SELECT count(*) FROM runs")[0]
    assert runs > 0  # the revisions themselves are ingested
    # the next nightly finds a new revision and a fixed file: one bad entry refused alone
    _gh_pages_subset(source, 2, json.dumps({"default_commit": "c1bdc24", "golden_commits": {
        "rms_norm": "0701bab", "geglu": "not a commit"}}).encode())
    with environment(KERNELINDEX_EVIDENCE=str(NO_EVIDENCE)):
        assert ingest_into(home, "--source", str(source)) == 0
    assert query(home, "SELECT golden_key, benchmarked_commit FROM golden_commits") == [("rms_norm", "0701bab")]
    reasons = [r for (r,) in query(home, "SELECT reason FROM quarantine WHERE revision_key LIKE 'liger-kernel-gh-pages:%' "
                                         "ORDER BY reason")]
    assert reasons == ["benchmarks/golden_commits.json: not JSON: Expecting ',' delimiter: line 1 column 42 (char 41)",
                       "golden commit of 'geglu' is not a commit id"]
    assert query(home, "SELECT state FROM reference_files ORDER BY state") == [("accepted",), ("refused",)]


@pytest.mark.parametrize(("data", "problem"), [
    (b"[1, 2]", "not an object with a 'golden_commits' object"),
    (b'{"golden_commits": []}', "not an object with a 'golden_commits' object"),
    (b'{"golden_commits": {}, "default_commit": "../etc"}', "default_commit is not a commit id"),
    (b"\xff\xfe", "not JSON"),
    (b"[" * 100_000, "not JSON"),
])
def test_golden_files_that_are_not_golden_commits_are_refused_whole(data, problem):
    from kernelindex_pipeline.ingest.references import parse_golden

    with pytest.raises(ValueError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        parse_golden(data)


def test_the_documented_gh_pages_queries_return_rows(both_home):
    import re

    doc = (REPO / "docs" / "warehouse.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sql gh-pages\n(.*?)```", doc, flags=re.S)
    assert blocks
    for sql in blocks:
        assert query(both_home, sql), sql


def test_a_workload_whose_runs_leave_out_the_scripts_batch_is_a_rerun_target(both_home):
    """gh-pages runs of Qwen2-VL M-RoPE from before upstream's refactor leave out the script's batch of 1: their
    published inputs stay unknown, and their reruns build that batch (the spec's harness defaults)."""
    from kernelindex_pipeline.gpu import targets as T
    from kernelindex_pipeline.gpu import workloads as W

    with Warehouse(both_home).reader() as con:
        chosen = T.warehouse_targets(con, ["qwen2vl_mrope"])
        definitions = [json.loads(d)["spec"] for (d,) in con.execute(
            "SELECT DISTINCT w.definition FROM runs r JOIN workloads w USING (workload_digest) "
            "WHERE r.kernel = 'qwen2vl_mrope' AND r.comparison_key IN (SELECT comparison_key FROM ranks)").fetchall()]
    batchless = [d["parameters"] for d in definitions if "batch" not in d["parameters"]]
    assert batchless, "the shipped data has no qwen2vl_mrope workload without its batch"
    assert all(d["inputs"] == "unknown" for d in definitions if "batch" not in d["parameters"])
    assert all(W.input_bytes("qwen2vl_mrope", p, "bf16") for p in batchless)
    assert all(p in [t["params"] for t in chosen] for p in batchless)


def test_no_label_in_the_default_build_contradicts_its_own_interval(both_home):
    assert query(both_home, (REPO / "docs" / "verdict-consistency.sql").read_text()) == []
    rows = query(both_home, "SELECT source_ratio, verdict, ci_low, ci_high FROM claim_checks")
    assert sum(v != "not re-checked" for _, v, _, _ in rows) > 1000
    assert all(rule.consistent(*row) for row in rows)


def test_the_source_dyt_torch_compile_series_is_named_a_source_artifact(both_home):
    """Upstream's DyT torch.compile series times as eager PyTorch (within half a percent) at some shapes
    while far from it at others: dynamo fell back to eager there. Its claims say so; the rest of the
    series, where it compiled, is not flagged."""
    flagged = query(both_home, "SELECT DISTINCT kernel, a_provider, b_provider, source_artifact FROM claim_checks "
                               "WHERE source_artifact IS NOT NULL")
    [(torch_compile_claims,)] = query(both_home, "SELECT count(DISTINCT (a_run_id, b_run_id)) FROM claim_checks "
                                                 "WHERE kernel = 'dyt' AND 'torch_compile' IN (a_provider, b_provider)")
    dyt = [(a, b, reason) for k, a, b, reason in flagged if k == "dyt"]
    compiled = {k for k, _, _, reason in flagged if "torch.compile fell back" in reason}
    assert dyt and compiled == {"dyt"}
    assert all("torch_compile" in (a, b) and reason.startswith("torch.compile fell back to eager in the source")
               for a, b, reason in dyt)
    [(flagged_claims,)] = query(both_home, "SELECT count(DISTINCT (a_run_id, b_run_id)) FROM claim_checks "
                                           "WHERE source_artifact IS NOT NULL AND kernel = 'dyt'")
    assert 0 < flagged_claims < torch_compile_claims


def test_the_source_megatron_cross_entropy_backward_rows_are_named_for_what_they_timed(both_home):
    """Upstream's Megatron cross-entropy script times its backward rows as forward and backward together. Every
    claim on those rows says so, once, under both protocols; no other pass of that kernel is flagged."""
    rows = query(both_home, "SELECT operation_mode, protocol, source_artifact, count(*) FROM claim_checks "
                            "WHERE kernel = 'megatron_cross_entropy' GROUP BY ALL")
    backward = {(protocol, why): n for mode, protocol, why, n in rows if mode == "backward"}
    assert {protocol for protocol, _ in backward} == {"kernelindex-device-time", "source-replica"}
    assert all(why is not None and why.startswith("pass_includes_forward: the script re-runs the forward in every "
                                                  "backward repetition") and ";" not in why
               for _, why in backward)
    assert all(why is None for mode, _, why, _ in rows if mode != "backward")


def test_dyt_torch_compile_reruns_without_their_graphs_decide_nothing(both_home):
    assert_unrecorded_compiles_decide_nothing(both_home, {"dyt", "embedding"})


def test_record_and_kernel_pages_name_the_source_artifact(both_home):
    from kernelindex_pipeline.site.export import kernel_verdict_sections

    with Warehouse(both_home).reader() as con:
        sections = kernel_verdict_sections(con)
        (run_id,) = con.execute("SELECT run_id FROM source_artifacts WHERE gpu = 'NVIDIA H200' AND kernel = 'dyt' "
                                "AND operation_mode = 'forward' ORDER BY run_id LIMIT 1").fetchone()
        flagged = {k for (k,) in con.execute("SELECT DISTINCT kernel FROM source_artifacts").fetchall()}
    assert "source-artifact" in sections["dyt"] and "Source artifacts · forward" in sections["dyt"]
    assert "Source artifacts · backward" in sections["megatron_cross_entropy"]
    # the kernels whose source series the script table or the compiled twins flag, and no other
    assert {kernel for kernel, html in sections.items() if "source-artifact" in html} == flagged
    assert {"kto_loss", "jsd", "megatron_rms_norm"} <= flagged
    page = pages(both_home, run_id)[run_id]
    assert "Source artifact: torch.compile fell back to eager in the source: torch_compile timed within" in page


def export_group_of(home, run_id: str, directory) -> None:
    """The record and group pages of `run_id`'s comparison group, written by the export's own shard code (a
    shard holding few groups besides it)."""
    from kernelindex_pipeline.site.export import _export_shard, _Shard
    from kernelindex_pipeline.site.pages import Site
    from kernelindex_pipeline.site.statements import statement_positions

    wh, count = Warehouse(home), 4096
    [(index,)] = query(home, "SELECT hash(comparison_key) % ? FROM runs WHERE run_id = ?", [count, run_id])
    with wh.reader() as con:
        statements = statement_positions(con, ["claim_checks", "listing_claim_checks"])
    _export_shard(_Shard(str(home), str(wh.db_path.resolve()), index, count, "html", str(directory), Site(),
                         statements))


def test_the_seed_page_and_show_answer_the_claim_it_made_when_listed(both_home, monkeypatch, capsys, tmp_path):
    """No current claim names the replaced seed run; its page and `kernelindex show` give the verdicts of the
    claim it made when the main-branch file listed it (huggingface < liger, its listing-time group),
    re-checked by the reruns of its workload under both protocols."""
    [(run_id, key)] = query(both_home, "SELECT run_id, comparison_key FROM runs WHERE external_id = ?", [SEED])
    assert query(both_home, "SELECT count(*) FROM claim_checks WHERE ? IN (a_run_id, b_run_id)", [run_id]) == [(0,)]
    listed = query(both_home, "SELECT protocol, source_order, verdict, rerun_ratio, listed_at::DATE::VARCHAR, "
                              "rerun_gpu, card_match, ci_low, ci_high, source_ratio "
                              "FROM listing_claim_checks WHERE b_run_id = ? ORDER BY protocol", [run_id])
    assert [(p, o, d) for p, o, _, _, d, *_ in listed] == [
        ("kernelindex-device-time", "huggingface < liger", "2025-08-09"),
        ("source-replica", "huggingface < liger", "2025-08-09")]
    # re-checked on its own card, an H100 80GB HBM3, with a verdict its interval gives
    device = listed[0]
    assert device[5:7] == ("NVIDIA H100 80GB HBM3 SXM", "same_card")
    assert rule.consistent(device[9], device[2], device[7], device[8])
    monkeypatch.setenv("KERNELINDEX_HOME", str(both_home))
    assert cli.main(["show", SEED]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "when listed 2025-08-09" in line]
    assert [line.split(" under ")[1].split(":")[0] for line in lines] == [p for p, *_ in listed]
    export_group_of(both_home, run_id, tmp_path)
    text = text_of((tmp_path / "runs" / f"{run_id}.html").read_text())
    assert "a claim this run made when it was published" in text
    for protocol, _, verdict, ratio, _, gpu, match, *_ in listed:
        assert f"{protocol} {gpu} {match.replace('_', ' ')} {ratio:.3f}" in text and verdict in text
    group = text_of((tmp_path / "groups" / f"{group_slug(key)}.html").read_text())
    assert "Verdict history" in group and "since" in group


def test_every_replaced_source_run_that_ranked_when_listed_has_its_claims(both_home):
    """Each source run a newer one replaced in `ranks`, in a group of two or more when it was listed, takes part
    in listing-time claims under both protocols, each with a verdict or a reason."""
    [(missing, unexplained)] = query(both_home, """
        WITH sides AS (SELECT a_run_id AS run_id, protocol FROM listing_claim_checks
                       UNION ALL SELECT b_run_id, protocol FROM listing_claim_checks),
             protocols AS (SELECT run_id, count(DISTINCT protocol) AS n FROM sides GROUP BY run_id)
        SELECT (SELECT count(*) FROM listing_ranks l LEFT JOIN protocols p USING (run_id)
                WHERE l.rank IS NOT NULL AND l.group_size > 1 AND l.run_id NOT IN (SELECT run_id FROM ranks)
                  AND coalesce(p.n, 0) < 2),
               (SELECT count(*) FROM listing_claim_checks WHERE verdict IS NULL OR coalesce(reason, '') = '')""")
    assert (missing, unexplained) == (0, 0)


@pytest.fixture(scope="module")
def statements(both_home, tmp_path_factory):
    """`kernelindex export --format intoto` of the default build, signed with a throwaway Ed25519 key:
    (the site folder it was written under, the statements' folder, the key's public half, the key's file)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from securesystemslib.signer import SSlibKey

    site = tmp_path_factory.mktemp("site")
    key = Ed25519PrivateKey.generate()
    pem = site.parent / "signing-key.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    env = {"KERNELINDEX_HOME": str(both_home), "KERNELINDEX_SIGNING_KEY": str(pem)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        assert cli.main(["export", "--format", "intoto", str(site / "statements")]) == 0
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    return site, site / "statements", SSlibKey.from_crypto(key.public_key()), pem


def bundle_line(folder, entry, read: dict | None = None) -> bytes:
    """The line an index entry names: its statement's DSSE envelope in its kernel's bundle (`read`: the lines
    of the bundles read so far, by name)."""
    read = {} if read is None else read
    if entry["bundle"] not in read:
        read[entry["bundle"]] = (folder / entry["bundle"]).read_bytes().split(b"\n")
    return read[entry["bundle"]][entry["line"] - 1]


def test_intoto_export_bundles_one_signed_statement_per_decided_claim_and_protocol(both_home, statements):
    import hashlib

    import rfc8785
    from securesystemslib.dsse import Envelope
    from securesystemslib.exceptions import VerificationError

    from kernelindex_pipeline.core.identity import digest
    from kernelindex_pipeline.site.statements import PREDICATE_TYPE, load_signer
    from kernelindex_pipeline.site.statements import envelope as signed_envelope

    _, folder, public, pem = statements
    signer = load_signer(pem)
    decided = query(both_home, "SELECT sum(n) FROM (SELECT count(*) AS n FROM claim_checks WHERE verdict <> "
                               "'not re-checked' UNION ALL SELECT count(*) FROM listing_claim_checks "
                               "WHERE verdict <> 'not re-checked')")[0][0]
    contents = json.loads((folder / "index.json").read_text())
    index = contents["statements"]
    bundles = sorted(folder.glob("*.intoto.jsonl"))
    # one bundle per kernel with a decided claim, one line per statement: files by the dozen, not by the 10,000
    assert [b.name for b in bundles] == sorted(contents["bundles"].values()) and len(bundles) < 40
    assert len(index) == sum(len(b.read_bytes().splitlines()) for b in bundles) == decided
    assert not list(folder.glob("*.intoto.json")) and not list(folder.glob("*.dsse.json"))
    # every subject's digest is its run's manifest digest, which recomputes from the manifest's run object
    by_run = dict(query(both_home, "SELECT run_id, run_digest FROM run_manifests"))
    sample = index[:: max(1, len(index) // 300)]
    manifests = dict(query(both_home, "SELECT run_id, manifest FROM manifests WHERE list_contains(?, run_id)",
                           [sorted({r for e in sample for r in e["runs"]})]))
    read = {}
    for entry in sample:
        envelope = Envelope.from_dict(json.loads(bundle_line(folder, entry, read)))
        assert envelope.verify([public], 1)
        payload = envelope.payload
        assert hashlib.sha256(payload).hexdigest() == entry["sha256"]
        assert rfc8785.dumps(json.loads(payload)) == payload  # canonical bytes
        # signatures are deterministic (Ed25519): signed again, the line is the same, so a re-export with
        # nothing changed writes nothing (the unsigned re-export: tests/test_export_assets.py)
        assert signed_envelope(payload, signer) == bundle_line(folder, entry, read)
        statement = json.loads(payload)
        assert statement["_type"] == "https://in-toto.io/Statement/v1" and statement["predicateType"] == PREDICATE_TYPE
        assert len(statement["subject"]) == 4
        for subject in statement["subject"]:
            run_id = subject["name"].removeprefix("runs/")
            assert "sha256:" + subject["digest"]["sha256"] == by_run[run_id]
        for run_id in entry["runs"]:
            assert digest(json.loads(manifests[run_id])["run"]) == by_run[run_id]
    # a tampered statement fails verification
    entry = next(e for e in index if e["verdict"] == "reversed")
    envelope = json.loads(bundle_line(folder, entry, read))
    tampered = json.loads(base64_decode(envelope["payload"]))
    tampered["predicate"]["verdict"] = "held"
    envelope["payload"] = base64_encode(rfc8785.dumps(tampered))
    with pytest.raises(VerificationError, match="Accepted signatures do not match threshold"):
        Envelope.from_dict(envelope).verify([public], 1)


def base64_decode(text: str) -> bytes:
    import base64

    return base64.b64decode(text)


def base64_encode(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def test_the_seed_page_links_its_verdicts_statements(both_home, statements):
    """Each verdict on the seed's page links its statement inside the exported site: its line in its kernel's
    bundle under `statements/`, where the intoto export of the same warehouse wrote it."""
    site, folder, *_ = statements
    [(run_id,)] = query(both_home, "SELECT run_id FROM runs WHERE external_id = ?", [SEED])
    export_group_of(both_home, run_id, site)
    page = (site / "runs" / f"{run_id}.html").read_text()
    links = re.findall(r'<a class="statement" href="([^"]+)">statement</a>', page)
    [(decided,)] = query(both_home, "SELECT count(*) FROM listing_claim_checks c JOIN runs r ON r.run_id = c.b_run_id "
                                    "WHERE r.external_id = ? AND c.verdict <> 'not re-checked'", [SEED])
    assert len(links) == decided >= 1  # one per decided verdict
    for link in links:
        # inside the exported site: the bundle the intoto export wrote, at the line of this run's statement
        target, line = link.removeprefix("../").split("#L")
        envelope = json.loads((site / target).read_bytes().split(b"\n")[int(line) - 1])
        statement = json.loads(base64_decode(envelope["payload"]))
        assert f"runs/{run_id}" in {s["name"] for s in statement["subject"]}
        assert statement["predicate"]["claim"]["b"]["runId"] == run_id


# Loads a page into a frame `width` CSS px wide and writes, into its own DOM, the boxes of each chart's x tick
# labels as the browser laid them out.
TICKS_HARNESS = """<!doctype html><html><body style="margin:0">
<iframe id="page" src="{url}" style="width:{width}px;height:900px;border:0"></iframe>
<script>
document.getElementById('page').addEventListener('load', event => {{
  const doc = event.target.contentWindow.document;
  const charts = [...doc.querySelectorAll('svg.chart')].map(svg => [...svg.querySelectorAll('text.x-tick')].map(t => {{
    const b = t.getBoundingClientRect();
    return {{text: t.textContent, left: b.left, right: b.right, top: b.top, bottom: b.bottom}};
  }}));
  const out = document.createElement('output');
  out.id = 'ticks';
  out.textContent = JSON.stringify(charts);
  document.body.append(out);
}});
</script></body></html>"""


def tick_boxes(page, width: int) -> list[list[dict]]:
    import html

    from test_site_pages import measured

    return measured(TICKS_HARNESS.format(url=html.escape(page.resolve().as_uri()), width=width), "ticks", page)


@needs_chromium
def test_dense_sweep_tick_labels_never_overlap_on_a_phone_or_a_desktop(both_home, tmp_path):
    """DyT's scaling charts sweep hidden 1024 to 16384 on a log axis, whose largest values crowd together: in
    Chromium, at 390 and 1280 px, no two x tick labels of a chart touch, and each chart keeps its ends."""
    from kernelindex_pipeline.site.charts import kernel_charts
    from kernelindex_pipeline.site.frame import STYLE
    from kernelindex_pipeline.site.pages import kernel_page

    with Warehouse(both_home).reader() as con:
        charts = kernel_charts(con)["dyt"]
    (tmp_path / "kernels").mkdir()
    (tmp_path / "style.css").write_text(STYLE)
    page = tmp_path / "kernels" / "dyt.html"
    page.write_text(kernel_page("dyt", "DyT", [], charts))
    assert "7168" in charts and "16384" in charts
    for width in (390, 1280):
        boxes = tick_boxes(page, width)
        assert boxes and all(len(chart) >= 2 for chart in boxes), boxes
        for chart in boxes:
            assert chart[-1]["text"] == "16384" or not chart[-1]["text"].isdigit(), chart
            for left, right in zip(chart, chart[1:]):
                apart = left["right"] <= right["left"] or left["bottom"] <= right["top"]
                assert apart, (width, left, right)


def test_the_megatron_reruns_in_float32_decide_nothing_and_the_bfloat16_ones_decide(both_home):
    """The first Megatron reruns (H200) built float32 tensors; upstream's scripts build bfloat16 ones. The
    float32 reruns decide no claim, and where no bfloat16 rerun exists each claim says why and waits for one;
    the bfloat16 reruns (on the claims' own H100 card) decide their claims."""
    rows = query(both_home, "SELECT kernel, protocol, verdict, reason_code, awaiting_rerun, count(*) "
                            "FROM claim_checks WHERE kernel LIKE 'megatron%' GROUP BY ALL")
    assert {k for k, *_ in rows} == {"megatron_rms_norm", "megatron_cross_entropy"}
    decided_by = query(both_home, "SELECT r.tensor_dtype, count(*) FROM claim_checks c JOIN controlled_runs r "
                                  "ON r.run_id = c.rerun_a_run_id WHERE c.kernel LIKE 'megatron%' "
                                  "AND c.verdict <> 'not re-checked' GROUP BY ALL")
    assert [dtype for dtype, _ in decided_by] == ["bf16"]  # no verdict on a float32 rerun
    assert query(both_home, "SELECT count(*) FROM controlled_runs WHERE kernel LIKE 'megatron%' "
                            "AND tensor_dtype = 'fp32'")[0][0] > 0
    device = {(k, v, code, awaiting) for k, p, v, code, awaiting, _ in rows if p == "kernelindex-device-time"}
    for kernel in ("megatron_cross_entropy", "megatron_rms_norm"):
        assert any(k == kernel and v == "held" for k, v, _, _ in device), kernel
    # a claim with no bfloat16 rerun of its workload waits for one; backward rows that time forward and
    # backward together (the script table) are a source artifact
    assert all(awaiting for _, _, code, awaiting in device if code == "other_dtype")
    assert ("megatron_cross_entropy", "not re-checked", "source_artifact", False) in device


def test_each_claim_is_checked_on_its_own_card_first_and_cards_never_pool(both_home):
    """H100 80GB HBM3 claims are re-checked on H100 80GB HBM3 reruns, H200 claims on H200 ones (same_card);
    another card decides only where neither the card nor its model was re-measured; a verdict's sessions are
    all of the card it names, and its statement says which."""
    from kernelindex_pipeline.site.statements import STATEMENTS_SQL, statement

    rows = query(both_home, "SELECT source_gpu, rerun_gpu, card_match, count(*) FROM claim_checks "
                            "WHERE rerun_gpu IS NOT NULL GROUP BY ALL")
    same = {(s, r) for s, r, m, _ in rows if m == "same_card"}
    assert ("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 SXM") in same and ("NVIDIA H200", "NVIDIA H200 SXM") in same
    assert all(m == "same_card" for s, r, m, _ in rows if s in ("NVIDIA H100 80GB HBM3", "NVIDIA H200")
               and r.startswith(s))
    # where a same-card session measured the pair, no claim is decided on another card
    [(other_while_own,)] = query(both_home, """
        SELECT count(*) FROM claim_checks c WHERE c.card_match = 'other_card' AND EXISTS (
            SELECT 1 FROM controlled_runs a JOIN controlled_runs b USING (evidence_file, session, kernel, operation_mode,
                                                                         metric, workload_digest, family)
            JOIN runs s ON s.run_id = c.a_run_id
            WHERE a.provider = c.a_provider AND b.provider = c.b_provider
              AND a.gpu = s.gpu || coalesce(' ' || s.form_factor, '') AND a.liger_version = c.rerun_release
              AND (c.protocol = 'kernelindex-device-time') = (a.family = 'kernelindex_rerun')
              AND a.kernel = c.kernel AND a.operation_mode = c.operation_mode AND a.metric = c.metric
              AND a.workload_digest = s.workload_digest AND a.status = 'passed' AND b.status = 'passed')""")
    assert other_while_own == 0
    [(mixed,)] = query(both_home, """
        SELECT count(*) FROM (SELECT c.comparison_key, c.a_run_id, c.b_run_id, c.protocol
                              FROM claim_checks c, unnest(c.session_intervals) AS s(i)
                              JOIN controlled_runs r ON r.run_id = i.rerun_a_run_id
                              GROUP BY ALL HAVING count(DISTINCT r.gpu) > 1)""")
    assert mixed == 0
    with Warehouse(both_home).reader() as con:
        cursor = con.execute(STATEMENTS_SQL.format(table="claim_checks") + " LIMIT 1")
        check = dict(zip([d[0] for d in cursor.description], cursor.fetchone()))
    assert statement(check)["predicate"]["cardMatch"] == check["card_match"] in ("same_card", "same_model", "other_card")


def test_a_replica_verdict_that_this_host_decided_awaits_a_host_that_can_decide_it(both_home):
    rows = query(both_home, "SELECT protocol, verdict, awaiting_rerun, reason FROM claim_checks "
                            "WHERE reason_code = 'host_bound_here'")
    # awaiting, unless no rerun could settle the workload (its parameters give no input shapes)
    assert rows and {(p, v) for p, v, _, _ in rows} == {("source-replica", "not re-checked")}
    assert sum(a for _, _, a, _ in rows) > len(rows) / 2
    assert all("under the replica against" in r and "bare metal: 3.8 µs" in r for *_, r in rows)


def test_a_claim_whose_source_measured_something_else_is_a_named_source_artifact_never_a_reversal(both_home):
    """KTO's benchmark sums Liger's log-probabilities where its reference averages them; upstream's SimPO
    'huggingface' provider computes the CPO loss (core/source_scripts.json): their claims get no verdict."""
    rows = query(both_home, "SELECT kernel, verdict, reason_code, source_artifact FROM claim_checks "
                            "WHERE kernel IN ('kto_loss', 'fused_linear_simpo_loss') AND source_artifact LIKE 'different_quantity%'")
    assert {k for k, *_ in rows} == {"kto_loss", "fused_linear_simpo_loss"}
    assert {(v, c) for _, v, c, _ in rows} == {("not re-checked", "source_artifact")}
    [(reversed_artifacts,)] = query(both_home, "SELECT count(*) FROM claim_checks WHERE verdict = 'reversed' "
                                               "AND source_artifact SIMILAR TO '(different_quantity|pass_includes_forward|other_pass|forward_computes_gradients).*'")
    assert reversed_artifacts == 0


def test_kernel_pages_explain_the_sessions_that_disagreed(both_home):
    """A claim whose sessions alone flip between held and reversed is listed on its kernel's page with each
    session's interval, which side moved between sessions (each session's medians) and the verdict that pools
    them."""
    from kernelindex_pipeline.site.display import quantity
    from kernelindex_pipeline.site.export import FLIPPED_SQL, kernel_verdict_sections

    with Warehouse(both_home).reader() as con:
        sections = kernel_verdict_sections(con)
        flipped = con.execute(FLIPPED_SQL).fetchall()
        medians = dict(con.execute("SELECT run_id, median_value FROM controlled_runs").fetchall())
    assert flipped
    assert {k for k, section in sections.items() if "Sessions that disagreed" in section} == {row[0] for row in flipped}
    for kernel, _, _, _, _, _, a, b, verdict, ratio, low, high, _sd, sessions in flipped:
        section = html.unescape(sections[kernel])
        assert f"{verdict} {ratio:.3f} [{low:.3f}, {high:.3f}]" in section
        assert all(f"{s['verdict']} {s['ratio']:.3f} [{s['low']:.3f}, {s['high']:.3f}]" in section for s in sessions)
        spread = {side: max(medians[s[key]] for s in sessions) / min(medians[s[key]] for s in sessions)
                  for side, key in ((a, "a"), (b, "b"))}
        moved = max(spread, key=spread.get)
        assert f"{moved} {spread[moved]:.2f}×" in section
        assert all(f"{a} {quantity(medians[s['a']], 'ns')}, {b} {quantity(medians[s['b']], 'ns')}" in section
                   for s in sessions)


def test_a_verdict_shows_both_medians_with_units_and_says_its_ratio_in_words(both_home, tmp_path):
    """The seed's listing-time claim on its record page: each rerun's median and p20-p80 spread in µs, and
    "Transformers took 0.895× Liger's time"-style words for the ratio."""
    from kernelindex_pipeline.site.display import quantity

    [(run_id,)] = query(both_home, "SELECT run_id FROM runs WHERE external_id = ?", [SEED])
    [(a, b, ratio, a_ns, a_p20, a_p80, b_ns)] = query(
        both_home, "SELECT c.a_implementation, c.b_implementation, c.rerun_ratio, ra.median_value, ra.p20_value, "
                   "ra.p80_value, rb.median_value FROM listing_claim_checks c "
                   "JOIN controlled_runs ra ON ra.run_id = c.rerun_a_run_id "
                   "JOIN controlled_runs rb ON rb.run_id = c.rerun_b_run_id "
                   "WHERE c.b_run_id = ? AND c.protocol = 'kernelindex-device-time'", [run_id])
    export_group_of(both_home, run_id, tmp_path)
    page = html.unescape((tmp_path / "runs" / f"{run_id}.html").read_text(encoding="utf-8"))
    assert quantity(a_ns, "ns").endswith("µs")
    assert f"{a} {quantity(a_ns, 'ns')} (p20-p80 {quantity(a_p20, 'ns')}-{quantity(a_p80, 'ns')})" in page
    assert f"{b} {quantity(b_ns, 'ns')}" in page
    assert f"{b} took {ratio:.3f}× {a}'s time" in page


def test_a_provider_unavailable_at_a_release_awaits_a_rerun_only_where_a_later_session_there_built_it(both_home):
    """A provider recorded `unavailable` at the source's release is settled there, unless a later session with
    that release built it (the earlier session's harness could not import it): then a rerun at that release
    settles the claim, and the release's targets list its workload."""
    from kernelindex_pipeline.gpu.targets import release_targets

    rows = query(both_home, """
        SELECT v.kernel, v.source_liger_version, v.awaiting_rerun, v.reason LIKE '%a later session at this release built it%',
            r.workload_digest,
            EXISTS (SELECT 1 FROM controlled_runs c WHERE c.kernel = v.kernel AND c.liger_version = v.source_liger_version
                    AND c.status = 'passed' AND c.provider = regexp_extract(v.reason, ': (\\S+) unavailable on the rerun', 1))
        FROM version_checks v JOIN runs r ON r.run_id = v.a_run_id
        WHERE v.version_effect = 'not_run' AND v.reason LIKE '%unavailable on the rerun%'""")
    built = [r for r in rows if r[5]]
    never = [r for r in rows if not r[5]]
    assert built and never
    assert all(awaiting and said for _, _, awaiting, said, _, _ in built)
    assert not any(awaiting or said for _, _, awaiting, said, _, _ in never)
    with Warehouse(both_home).reader() as con:
        targets = release_targets(con)
    listed = {(release, d) for release, ts in targets.items() for t in ts for d in t["workload_digests"]}
    assert {(release, d) for _, release, *_, d, _ in built} <= listed
