"""Digests are sha256 of RFC 8785 bytes: checked on the shipped data against the `rfc8785` package, a
second implementation (`jcs`), and the Python and JavaScript snippets of docs/digests.md as they stand."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import jcs
import pytest
import rfc8785

from kernelindex_pipeline.core import catalog

from kernelindex_pipeline import cli
from kernelindex_pipeline.core.identity import API_VERSION, API_VERSION_V1ALPHA2, canonical_json, v1alpha1_json
from test_seed_records import GEGLU, LLAMA4

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "digests.md"
NODE = shutil.which("node")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
PARTS = ("run", "protocol", "environment")


def snippets(language: str) -> list[str]:
    """The fenced code blocks of docs/digests.md in `language`, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```$", DOC.read_text(encoding="utf-8"), flags=re.M | re.S)


def sha256_jcs(obj) -> str:
    """The digest by the rule docs/digests.md states: the object without its metadata, canonicalized."""
    return "sha256:" + hashlib.sha256(jcs.canonicalize({k: v for k, v in obj.items() if k != "metadata"})).hexdigest()


@pytest.fixture(scope="module")
def five_records(shipped_warehouse) -> dict[str, dict]:
    """Five runs picked by what they are: the two seed records, a v1alpha2 source-native run, a run naming
    a v1alpha2 workload, and a controlled run; each with its stored manifest text and digest."""
    queries = {
        "seed llama4_rope": ("SELECT run_id FROM runs WHERE external_id = ?", [LLAMA4]),
        "seed geglu": ("SELECT run_id FROM runs WHERE external_id = ?", [GEGLU]),
        "v1alpha2 source-native": (
            "SELECT r.run_id FROM runs r JOIN run_manifests m USING (run_id) WHERE r.evidence_level = ? "
            "AND m.run_digest_v1alpha1 IS NOT NULL AND r.workload_digest NOT IN (SELECT digest FROM digest_aliases) "
            "ORDER BY r.run_id LIMIT 1", [catalog.SOURCE_NATIVE]),
        "names a v1alpha2 workload": (
            "SELECT run_id FROM runs WHERE evidence_level = ? AND workload_digest IN "
            "(SELECT digest FROM digest_aliases WHERE kind = 'WorkloadDefinition') ORDER BY run_id LIMIT 1",
            [catalog.SOURCE_NATIVE]),
        "controlled": ("SELECT run_id FROM runs WHERE evidence_level = ? ORDER BY run_id LIMIT 1", [catalog.CONTROLLED]),
    }
    records = {}
    with shipped_warehouse.reader() as con:
        for label, (sql, params) in queries.items():
            (run_id,) = con.execute(sql, params).fetchone()
            text, run_digest, alias = con.execute(
                "SELECT v.manifest, m.run_digest, m.run_digest_v1alpha1 FROM manifests v JOIN run_manifests m "
                "USING (run_id) WHERE run_id = ?", [run_id]).fetchone()
            records[label] = {"run_id": run_id, "text": text, "run_digest": run_digest, "alias": alias}
    return records


def expected_lines(record: dict) -> list[str]:
    spec = json.loads(record["text"])["run"]["spec"]
    return [f"run {record['run_digest']}", f"protocol {spec['protocolDigest']}",
            f"environment {spec['environmentDigest']}"]


def test_the_five_records_are_what_they_were_picked_as(five_records):
    versions = {label: json.loads(r["text"])["run"]["apiVersion"] for label, r in five_records.items()}
    assert versions["seed llama4_rope"] == versions["seed geglu"] == API_VERSION
    assert versions["v1alpha2 source-native"] == versions["names a v1alpha2 workload"] == API_VERSION_V1ALPHA2
    assert five_records["seed geglu"]["alias"] is None and five_records["v1alpha2 source-native"]["alias"]
    assert "evidenceLevel" in json.loads(five_records["controlled"]["text"])["run"]["spec"]


def test_five_record_digests_recompute_with_an_independent_implementation(five_records):
    for label, record in five_records.items():
        manifest = json.loads(record["text"])
        assert sha256_jcs(manifest["run"]) == record["run_digest"], label
        spec = manifest["run"]["spec"]
        assert sha256_jcs(manifest["protocol"]) == spec["protocolDigest"], label
        assert sha256_jcs(manifest["environment"]) == spec["environmentDigest"], label


def shown_manifest(home: Path, run_id: str, directory: Path, monkeypatch, capsys) -> Path:
    """`kernelindex show RUN > manifest.json`, as docs/digests.md starts."""
    monkeypatch.setenv("KERNELINDEX_HOME", str(home))
    assert cli.main(["show", run_id]) == 0
    path = directory / f"{run_id}.json"
    path.write_text(capsys.readouterr().out, encoding="utf-8")
    return path


def test_the_documented_python_snippet_recomputes_the_five(analyst_home, five_records, tmp_path, monkeypatch, capsys):
    [python] = snippets("python")
    script = tmp_path / "digest.py"
    script.write_text(python, encoding="utf-8")
    for label, record in five_records.items():
        manifest = shown_manifest(analyst_home, record["run_id"], tmp_path, monkeypatch, capsys)
        done = subprocess.run([sys.executable, str(script), str(manifest)], capture_output=True, text=True, check=True)
        assert done.stdout.splitlines() == expected_lines(record), label


@pytest.mark.skipif(NODE is None, reason="node is not installed: the Chromium test runs the JavaScript snippet")
def test_the_documented_javascript_recomputes_the_five_in_node(analyst_home, five_records, tmp_path, monkeypatch,
                                                               capsys):
    script = tmp_path / "digest.js"
    script.write_text("\n".join(snippets("js")), encoding="utf-8")
    for label, record in five_records.items():
        manifest = shown_manifest(analyst_home, record["run_id"], tmp_path, monkeypatch, capsys)
        done = subprocess.run([NODE, str(script), str(manifest)], capture_output=True, text=True, check=True, timeout=60)
        assert done.stdout.splitlines() == expected_lines(record), label


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_the_documented_javascript_recomputes_the_five_in_chromium(five_records, tmp_path):
    canonicalizer = snippets("js")[0]  # the browser part: canonicalize and digest
    manifests = json.dumps([json.loads(r["text"]) for r in five_records.values()]).replace("</", "<\\/")
    page = tmp_path / "digests.html"
    page.write_text(f"""<!doctype html><meta charset="utf-8"><pre id="out"></pre><script>
{canonicalizer}
(async () => {{
  const lines = [];
  for (const manifest of {manifests}) for (const part of {json.dumps(PARTS)}) lines.push(part + " " + await digest(manifest[part]));
  document.getElementById("out").textContent = lines.join("\\n");
}})();
</script>""", encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom",
                               page.as_uri()], capture_output=True, text=True, check=True, timeout=90)
    shown = re.search(r'<pre id="out">(.*?)</pre>', done.stdout, flags=re.S).group(1).splitlines()
    assert shown == [line for record in five_records.values() for line in expected_lines(record)]


# Parts of a rerun record that its session's records share: each distinct one is checked once.
SESSION_PARTS = ("environment", "protocol")


def test_every_shipped_object_canonicalizes_as_rfc8785(shipped_warehouse):
    """The fast path (json.dumps where its text cannot differ) against rfc8785, on every object the
    warehouse publishes and every raw evidence record (floats such as 722.0 and 1e-06 as committed): each
    record without the environment and protocol its session's records share, and each distinct one of those;
    without its samples, and each distinct sample value where a samples list holds it (after "[" or ",",
    before "," or "]"): four million samples hold about 130 thousand values."""
    with shipped_warehouse.reader() as con:
        texts = [t for (t,) in con.execute(
            "SELECT run FROM run_manifests UNION ALL SELECT manifest FROM protocols UNION ALL SELECT manifest "
            "FROM environments UNION ALL SELECT manifest FROM implementations").fetchall()]
        definitions = [t for (t,) in con.execute("SELECT definition FROM workloads").fetchall()]
    for text in texts:  # stored as RFC 8785
        obj = json.loads(text)
        assert canonical_json(obj) == rfc8785.dumps(obj).decode() == text
    records = [json.loads(line) for path in sorted((REPO / "data" / "evidence").glob("*.jsonl.gz"))
               for line in gzip.open(path, "rt", encoding="utf-8") if line.strip()]
    shared = {json.dumps(r[part], sort_keys=True): r[part] for r in records for part in SESSION_PARTS if part in r}
    assert len(shared) < len(records) / 50  # sessions' parts, not per-record ones
    samples = {repr(v): v for r in records if isinstance(r.get("samples"), list) for v in r["samples"]}
    assert len(samples) < sum(len(r.get("samples") or ()) for r in records) / 20
    own = [{key: value for key, value in r.items() if key not in SESSION_PARTS + ("samples",)} for r in records]
    for obj in [json.loads(t) for t in definitions] + own + list(shared.values()):
        assert canonical_json(obj) == rfc8785.dumps(obj).decode()
    held = [[value, value] for value in samples.values()]
    assert canonical_json(held) == rfc8785.dumps(held).decode()


def test_canonical_numbers_and_strings_are_rfc8785():
    rng = random.Random(8785)
    numbers = [0.0, -0.0, 1e-7, 1e-6, 1e-5, 1e-4, 1e15, 1e16, 1e20, 1e21, 5e-324, 1.7976931348623157e308,
               2**53 - 1, -(2**53) + 1, 722.0, 2.177422004601313e-07]
    numbers += [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(3000)]
    numbers += [rng.uniform(-1, 1) * 10 ** rng.randint(-25, 25) for _ in range(3000)]
    numbers += [float(rng.randint(-10**6, 10**6)) * 10 ** rng.randint(-8, 22) for _ in range(3000)]
    for number in numbers:
        if number != number or number in (float("inf"), float("-inf")):
            continue
        for obj in ({"v": number}, [number, "sha256:1e5"], {"k": [1, {"x": number}]}):
            assert canonical_json(obj) == rfc8785.dumps(obj).decode(), number
    text = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    keys = {"\U0001F600": 1, "\uFFFD": 2, "\uE000": 3, "a": 4}  # UTF-16 order differs from code points here
    for obj in ({"s": text}, keys):
        assert canonical_json(obj) == rfc8785.dumps(obj).decode()
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_json({"lone surrogate": "\ud800"})
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_json({"beyond a double": 2**53})


def test_sql_numbers_are_ecmascript_numbers():
    """The SQL macro that writes source figures as RFC 8785 does, against rfc8785, from DuckDB's own text of
    each double (Python's repr)."""
    import duckdb

    from kernelindex_pipeline.runs.manifests import ECMASCRIPT_NUMBER_SQL

    rng = random.Random(8785)
    numbers = [0.15190400183200836, 2.177422004601313e-07, 722.0, 1e-7, 1e-6, 1e-5, 1e-4, 1e15, 1e16, 1e20,
               1e21, 5e-324, 1.7976931348623157e308, 123456789012345680000.0, 1.25e-5, -3.5e-6, -722.0]
    numbers += [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(3000)]
    numbers += [rng.uniform(-1, 1) * 10 ** rng.randint(-25, 25) for _ in range(3000)]
    numbers += [float(rng.randint(1, 10**6)) * 10 ** rng.randint(-8, 22) for _ in range(3000)]
    numbers = [n for n in numbers if n == n and abs(n) != float("inf") and n != 0]
    con = duckdb.connect()
    con.execute(ECMASCRIPT_NUMBER_SQL)
    written = con.execute("SELECT list_transform(?::DOUBLE[], lambda x: ecmascript_number(CAST(x AS VARCHAR)))",
                          [numbers]).fetchone()[0]
    assert [(n, w) for n, w in zip(numbers, written) if w != rfc8785.dumps(n).decode()] == []


def test_sql_written_manifests_are_the_ones_identity_publishes(shipped_warehouse):
    """Manifests are written in SQL: every one, source-native or controlled, its text, digest and v1alpha1
    digest, is what identity.published makes of the BenchmarkRun built in Python."""
    from kernelindex_pipeline.runs import manifests

    with shipped_warehouse.reader() as con:
        con.execute("CREATE TEMP TABLE scope_runs AS SELECT run_id FROM runs")
        aliases = dict(con.execute(manifests.REFERENCE_ALIASES_SQL).fetchall())
        con.execute(manifests.CONTROLLED_PARTS_SQL)
        con.execute(manifests.MANIFEST_INPUTS_SQL)
        con.execute(manifests.ECMASCRIPT_NUMBER_SQL)
        parts = con.sql("SELECT run_id, achieved, ceilings, correctness FROM _manifest_inputs "
                        "WHERE controlled").to_arrow_table()
        con.register("_page_heads", manifests.controlled_heads(parts))
        written = {r: rest for r, *rest in con.execute(
            f"SELECT run_id, run, run_digest, run_digest_v1alpha1 FROM ({manifests.MANIFESTS_SQL})",
            {"first": 1, "last": 10**9}).fetchall()}
        rows = con.sql("SELECT * FROM _manifest_inputs").to_arrow_table().to_pylist()
    assert len(written) == len(rows)
    versions = set()
    for row in rows:
        extra = manifests.controlled_spec(row) if row["controlled"] else None
        made = manifests.published_run(manifests.run_manifest(row, extra), aliases)
        assert written[row["run_id"]] == [made.text, made.digest, made.alias], row["run_id"]
        versions.add((row["controlled"], made.obj["apiVersion"]))
    assert versions == {(controlled, api) for controlled in (False, True) for api in (API_VERSION, API_VERSION_V1ALPHA2)}
    assert sum(row["controlled"] for row in rows) > 1_000 and sum(not row["controlled"] for row in rows) > 1_000


def test_sql_built_comparison_keys_are_rfc8785_digests(shipped_warehouse):
    """Source-native comparison keys are concatenated in DuckDB SQL: each must be the digest of the RFC 8785
    bytes of its comparison (a group names its environment and workload by their v1alpha1 digests)."""
    with shipped_warehouse.reader() as con:
        rows = con.execute("""
            SELECT DISTINCT r.comparison_key, r.evidence_level, coalesce(c.family, ?) AS family, r.kernel, r.metric,
                r.operation_mode, coalesce(e.digest_v1alpha1, r.environment_digest),
                coalesce(w.digest_v1alpha1, r.workload_digest)
            FROM runs r LEFT JOIN controlled_runs c ON c.run_id = r.run_id
            LEFT JOIN environments e ON e.environment_digest = r.environment_digest
            LEFT JOIN (SELECT DISTINCT workload_digest, digest_v1alpha1 FROM workloads) w
                ON w.workload_digest = r.workload_digest""",
                           [catalog.SOURCE_FAMILY]).fetchall()
    assert {level for _, level, *_ in rows} == {catalog.SOURCE_NATIVE, catalog.CONTROLLED}
    for key, _, family, kernel, metric, mode, environment, workload in rows:
        comparison = {"environment": environment, "family": family, "kernel": kernel, "metric": metric,
                      "mode": mode, "workload": workload}
        assert key == "sha256:" + hashlib.sha256(rfc8785.dumps(comparison)).hexdigest()


def test_api_version_tells_whether_a_digest_is_the_v1alpha1_one(shipped_warehouse):
    """A v1alpha1 object's RFC 8785 bytes are its json.dumps bytes (so its digest is the one v1alpha1 gave
    it); a v1alpha2 one has its v1alpha1 digest beside it."""
    with shipped_warehouse.reader() as con:
        rows = con.execute("SELECT run, run_digest_v1alpha1, run_digest FROM run_manifests UNION ALL "
                           "SELECT manifest, digest_v1alpha1, protocol_digest FROM protocols UNION ALL "
                           "SELECT definition, digest_v1alpha1, workload_digest FROM workloads").fetchall()
        aliases = dict(con.execute("SELECT digest, v1alpha1_digest FROM digest_aliases").fetchall())
    versions = set()
    for text, alias, stored in rows:
        obj = json.loads(text)
        versions.add(obj["apiVersion"])
        if obj["apiVersion"] == API_VERSION:
            assert alias is None and v1alpha1_json(obj) == canonical_json(obj)
        else:
            assert obj["apiVersion"] == API_VERSION_V1ALPHA2 and alias not in (None, stored)
            assert aliases[stored] == alias
    assert versions == {API_VERSION, API_VERSION_V1ALPHA2}



def test_a_home_derived_another_way_is_recomputed_on_the_next_ingest(base_warehouse, tmp_path):
    """A home whose derived tables came from an older DERIVED_VERSION (digests over json.dumps text, no
    v1alpha1 digests kept) is republished by `kernelindex ingest` even with nothing new upstream."""
    import duckdb
    from conftest import BASE_REVISIONS, copy_home, ingest, main_rows, query, write_snapshot_dir

    from kernelindex_pipeline.publish import steps
    from kernelindex_pipeline.warehouse.store import Warehouse

    expected = query(base_warehouse, "SELECT run_id, run_digest, run_digest_v1alpha1 FROM run_manifests ORDER BY run_id")
    assert any(alias for *_, alias in expected)
    home = copy_home(base_warehouse, tmp_path / "home")
    with duckdb.connect(str(Warehouse(home).db_path.resolve())) as con:
        con.execute("UPDATE run_manifests SET run_digest = coalesce(run_digest_v1alpha1, run_digest), "
                    "run_digest_v1alpha1 = NULL")
        con.execute("UPDATE ingest_state SET value = 'an older derived version' WHERE key = ?", [steps.DERIVED_KEY])
    # the base warehouse's own revisions: nothing new
    done = ingest(home, write_snapshot_dir(tmp_path / "source", main_rows()[:BASE_REVISIONS]))
    assert "nothing new" not in done.stdout
    assert query(home, "SELECT run_id, run_digest, run_digest_v1alpha1 FROM run_manifests ORDER BY run_id") == expected
    assert query(home, "SELECT value FROM ingest_state WHERE key = ?", [steps.DERIVED_KEY]) == [(steps.DERIVED_VERSION,)]


def test_each_workload_digest_is_one_row(default_home):
    """Sources that list one workload's parameters in different orders give one digest (RFC 8785), and
    `workloads` keeps one row for it."""
    from conftest import query

    [(rows, digests)] = query(default_home, "SELECT count(*), count(DISTINCT workload_digest) FROM workloads")
    assert rows == digests > 300
