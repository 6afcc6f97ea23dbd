"""The warehouse against its two daily users and bad input: readers during an ingest, the DuckDB CLI, the
sandboxed query, files that cannot be parsed, back-dated and vanished revisions, and one-line failures."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from conftest import (
    BASE_REVISIONS,
    REPO,
    assert_clear_failure,
    cli_env,
    copy_home,
    index_rows,
    ingest,
    kernelindex_cmd,
    main_rows,
    published_state,
    query,
    read_snapshot,
    run_cli,
    warehouse_state,
    write_snapshot_dir,
)

from kernelindex_pipeline.warehouse.store import Warehouse

from kernelindex_pipeline.warehouse.sql import table_checksum

DUCKDB_CLI = shutil.which("duckdb", path=str(Path(sys.executable).parent)) or shutil.which("duckdb")
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(scope="module")
def next_source(tmp_path_factory):
    return write_snapshot_dir(tmp_path_factory.mktemp("next-source"), main_rows()[:BASE_REVISIONS + 1])


def counts(home: Path) -> tuple:
    return query(home, "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM ranks), "
                       "(SELECT count(*) FROM runs WHERE withdrawn_upstream)")[0]


# -- readers and the writer ---------------------------------------------------------------------------

# Reads until the test says the ingest is over (the stop file), then once more; at most 300 s.
READER = """
import duckdb, json, os, sys, time
path, mode, stop = sys.argv[1], sys.argv[2], sys.argv[3]
seen, con = [], duckdb.connect(path, read_only=True) if mode == "held" else None
deadline, last = time.monotonic() + 300, False
while not last and time.monotonic() < deadline:
    last = os.path.exists(stop)
    c = con or duckdb.connect(path, read_only=True)
    runs, orphans = c.execute("SELECT count(*), count(*) FILTER (WHERE run_id NOT IN (SELECT run_id FROM manifests)) "
                              "FROM runs").fetchall()[0]
    seen.append([runs, orphans])
    if con is None:
        c.close()
    time.sleep(0.05)
print(json.dumps(seen))
"""


@pytest.mark.parametrize("mode", ["held", "polling"])
def test_readers_never_block_the_ingest_and_never_see_a_mix(mode, tmp_path, base_warehouse, next_warehouse,
                                                             next_source):
    home = copy_home(base_warehouse, tmp_path / "home")
    old_runs, new_runs = counts(home)[0], counts(next_warehouse)[0]
    stop = tmp_path / "ingest-done"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(home / "kernelindex.duckdb"), mode, str(stop)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # the reader is in before the ingest starts
    result = ingest(home, next_source)
    stop.touch()
    assert "ingested" in result.stdout
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    seen = json.loads(out)
    assert all(orphans == 0 for _, orphans in seen), seen  # never runs without their manifests
    if mode == "held":  # an open session keeps reading the warehouse it opened
        assert {runs for runs, _ in seen} == {old_runs}
    else:  # each new session sees one whole warehouse, the new one once it is published
        assert {runs for runs, _ in seen} == {old_runs, new_runs} and seen[-1][0] == new_runs
    assert counts(home)[0] == new_runs


@pytest.mark.skipif(DUCKDB_CLI is None, reason="the duckdb CLI (pip install duckdb-cli) is not installed")
def test_the_duckdb_cli_reads_the_warehouse_while_an_ingest_runs(tmp_path, base_warehouse, next_source):
    home = copy_home(base_warehouse, tmp_path / "home")
    version = subprocess.run([DUCKDB_CLI, "--version"], capture_output=True, text=True).stdout
    session = subprocess.Popen([DUCKDB_CLI, "-readonly", str(home / "kernelindex.duckdb")], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    session.stdin.write("SELECT count(*) AS runs FROM runs;\n")
    session.stdin.flush()
    time.sleep(0.5)
    ingest(home, next_source)  # while the CLI session holds the file open
    out, err = session.communicate("SELECT count(*) AS leaders FROM leaderboard WHERE rank = 1;\n", timeout=60)
    assert session.returncode == 0 and "Error" not in err, (version, err)
    assert "runs" in out and "leaders" in out
    fresh = subprocess.run([DUCKDB_CLI, "-readonly", "-csv", str(home / "kernelindex.duckdb"), "-c",
                            "SELECT count(*) FROM runs"], capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stderr
    assert int(fresh.stdout.split()[-1]) == counts(home)[0]


# -- the sandboxed query ------------------------------------------------------------------------------

# SQL that would reach past the warehouse or change it, each refused in one line.
ESCAPES = [
    "COPY (SELECT 1) TO '{home}/tables/runs.parquet'",
    "COPY runs TO '{tmp}/anywhere.csv'",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM read_parquet('{home}/tables/runs.parquet')",
    "ATTACH '{tmp}/new.duckdb' AS other (READ_WRITE)",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "RESET lock_configuration",
    "DROP VIEW leaderboard",
    "CREATE TABLE x AS SELECT 1",
]


def test_query_reaches_nothing_but_the_warehouse(tmp_path, base_warehouse):
    before = warehouse_state(base_warehouse)
    for sql in ESCAPES:
        result = run_cli(base_warehouse, "query", sql.format(home=base_warehouse, tmp=tmp_path))
        reason = assert_clear_failure(result)
        assert reason.startswith("kernelindex: query failed:"), sql
        assert not any(tmp_path.iterdir()), sql
    assert warehouse_state(base_warehouse) == before


# -- no silent loss, no rewritten history -------------------------------------------------------------

def _base_plus(tmp_path, base_warehouse, name: str, data: bytes | None, committed_at: str | None = None,
               raw_file: bytes | None = None) -> tuple[Path, Path]:
    """A copy of the base warehouse and a source listing the base revisions plus one more revision whose
    content is `data` (gzipped) or the exact file bytes `raw_file`."""
    rows = main_rows()[:BASE_REVISIONS]
    extra = {**main_rows()[BASE_REVISIONS], "commit": "f" * 40, "file": f"{name}.csv.gz"}
    if committed_at:
        extra["committed_at"] = committed_at
    source = write_snapshot_dir(tmp_path / "source", rows + [extra], {extra["file"]: data or b""})
    if raw_file is not None:
        (source / extra["file"]).write_bytes(raw_file)
    return copy_home(base_warehouse, tmp_path / "home"), source


UNPARSEABLE = {
    "zero-bytes": (None, b""),
    "gzip-of-empty": (b"", None),
    "not-utf8-header": (b"\xff\xfe" + read_snapshot(main_rows()[0]), None),
}


@pytest.mark.parametrize("kind", list(UNPARSEABLE))
def test_a_file_that_cannot_be_parsed_is_a_quarantined_revision_not_a_withdrawal(kind, tmp_path, base_warehouse):
    data, raw = UNPARSEABLE[kind]
    home, source = _base_plus(tmp_path, base_warehouse, kind, data, raw_file=raw)
    before = counts(home)
    result = run_cli(home, "ingest", "--source", str(source))
    if result.returncode:  # a file the source itself refuses (not gzip) fails the ingest, warehouse unchanged
        assert_clear_failure(result)
        assert counts(home) == before
        return
    assert counts(home) == before  # no run withdrawn, none lost
    ((state, problem),) = query(home, "SELECT state, problem FROM snapshots WHERE commit = ?", ["f" * 40])
    assert state == "unparseable" and problem
    quarantined = query(home, "SELECT count(*), any_value(reason) FROM quarantine WHERE source_revision = ?",
                        ["f" * 40])[0]
    assert quarantined[0] >= 1 and quarantined[1] == problem


def test_other_line_breaks_and_a_byte_order_mark_land_as_the_lf_file(tmp_path, base_warehouse, next_warehouse):
    """The next revision as LF, then the same bytes with CRLF, lone-CR line breaks and a byte-order mark, each a
    later revision: every copy lists exactly the runs the LF one does, with their values; none conflicts."""
    lf = read_snapshot(main_rows()[BASE_REVISIONS]).replace(b"\r\n", b"\n")
    copies = {"lf": lf, "crlf": lf.replace(b"\n", b"\r\n"), "lone-cr": lf.replace(b"\n", b"\r"),
              "bom-crlf": b"\xef\xbb\xbf" + lf.replace(b"\n", b"\r\n")}
    base = main_rows()[:BASE_REVISIONS]
    at = main_rows()[BASE_REVISIONS]["committed_at"][:-len("00:00+00:00")]
    rows = base + [{**base[-1], "commit": f"{n + 1:x}" * 40, "committed_at": f"{at}{n:02d}:00+00:00",
                    "file": f"{name}.csv.gz"} for n, name in enumerate(copies)]
    home = copy_home(base_warehouse, tmp_path / "home")
    ingest(home, write_snapshot_dir(tmp_path / "source", rows, {f"{name}.csv.gz": data for name, data in copies.items()}))
    listed = {}
    for n, name in enumerate(copies):
        listed[name] = query(home, "SELECT run_id, line_number, median_value, p20_value, p80_value FROM observations "
                                   "WHERE revision_key = ? ORDER BY line_number", [f"all_benchmark_data@{f'{n + 1:x}' * 12}"])
    assert listed["lf"] and all(runs == listed["lf"] for runs in listed.values())
    assert query(home, "SELECT state, count(*) FROM snapshots GROUP BY ALL") == [("listed", BASE_REVISIONS + 4)]
    with Warehouse(home).reader() as con, Warehouse(next_warehouse).reader() as reference:
        assert table_checksum(con, "ranks") == table_checksum(reference, "ranks")
    assert query(home, "SELECT count(*) FROM quarantine WHERE reason LIKE 'conflicts%'") == query(
        next_warehouse, "SELECT count(*) FROM quarantine WHERE reason LIKE 'conflicts%'")


def test_a_value_below_the_timer_resolution_is_quarantined_not_ranked(tmp_path, base_warehouse):
    lines = read_snapshot(main_rows()[BASE_REVISIONS]).decode().splitlines()
    header = lines[0].split(",")
    # the quantile columns come before the only column with commas inside (the config)
    speed = next(line.split(",") for line in lines[1:] if line.split(",")[header.index("metric_name")] == "speed")
    for name in ("y_value_50", "y_value_20", "y_value_80"):
        speed[header.index(name)] = "1e-07"
    home, source = _base_plus(tmp_path, base_warehouse, "tiny", f"{lines[0]}\n{','.join(speed)}\n".encode())
    ingest(home, source)
    reasons = [r for (r,) in query(home, "SELECT reason FROM quarantine WHERE source_revision = ?", ["f" * 40])]
    assert len(reasons) == 1 and "below the timer's resolution" in reasons[0], reasons
    assert query(home, "SELECT count(*) FROM runs WHERE median_value < 1000 AND metric = 'latency'") == [(0,)]


def test_a_back_dated_revision_never_changes_a_published_value(tmp_path, base_warehouse):
    text = read_snapshot(main_rows()[BASE_REVISIONS - 1]).decode().splitlines()
    header = text[0].split(",")
    changed = [text[0]]
    for line in text[1:]:  # the quantile columns come before the only column with commas inside (the config)
        cells = line.split(",")
        if cells[header.index("metric_name")] == "speed":
            for name in ("y_value_20", "y_value_50", "y_value_80"):
                cells[header.index(name)] = repr(float(cells[header.index(name)]) * 0.5)
        changed.append(",".join(cells))
    home, source = _base_plus(tmp_path, base_warehouse, "back-dated", ("\n".join(changed) + "\n").encode(),
                              committed_at="2020-01-01T00:00:00+00:00")
    published_before = query(home, "SELECT r.run_id, r.median_value, m.run_digest FROM runs r JOIN manifests m "
                                   "USING (run_id) ORDER BY 1")
    ingest(home, source)
    published_after = dict((rid, (median, run_digest)) for rid, median, run_digest in query(
        home, "SELECT r.run_id, r.median_value, m.run_digest FROM runs r JOIN manifests m USING (run_id)"))
    for rid, median, run_digest in published_before:
        assert published_after[rid] == (median, run_digest), rid
    conflicts = query(home, "SELECT count(*) FROM quarantine WHERE source_revision = ? AND reason LIKE 'conflicts%'",
                      ["f" * 40])
    assert conflicts[0][0] > 0  # the late listing is the conflict, not the published one


def test_a_revision_upstream_stops_listing_is_recorded_not_a_blocker(tmp_path, base_warehouse):
    home, source = _base_plus(tmp_path, base_warehouse, "vanishing", None, raw_file=b"not a gzip file")
    assert_clear_failure(run_cli(home, "ingest", "--source", str(source)))  # registered, then failed
    before = counts(home)
    write_snapshot_dir(tmp_path / "later", main_rows()[:BASE_REVISIONS + 1])  # lists the real next revision
    ingest(home, tmp_path / "later")
    (reason,) = query(home, "SELECT reason FROM quarantine WHERE starts_with(?, source_revision)", ["f" * 40])[0]
    assert "no longer lists" in reason  # the vanished revision, recorded
    assert counts(home) != before  # the real next revision landed
    assert "nothing new" in ingest(home, tmp_path / "later").stdout


# -- one-line reasons ---------------------------------------------------------------------------------

@pytest.fixture
def read_only_home(tmp_path, analyst_home):
    """A copy of the analyst warehouse on a read-only mount (root), or with its write bits cleared (others)."""
    home = copy_home(analyst_home, tmp_path / "home")
    if IS_ROOT:  # root ignores file modes: make the file system itself read-only
        bound = subprocess.run(["mount", "--bind", str(home), str(home)], capture_output=True, text=True)
        if bound.returncode:
            pytest.skip(f"cannot bind-mount here: {bound.stderr.strip()}")
        subprocess.run(["mount", "-o", "remount,ro,bind", str(home)], check=True)
        yield home
        subprocess.run(["umount", "-l", str(home)], check=False)
    else:
        paths = [p for p in [home, *home.rglob("*")] if not p.is_symlink()]
        for path in paths:
            path.chmod(path.stat().st_mode & ~0o222)
        yield home
        for path in paths:
            path.chmod(path.stat().st_mode | 0o200)


def test_a_read_only_home_still_answers_queries_shows_and_exports(tmp_path, read_only_home):
    home = read_only_home
    assert run_cli(home, "query", "SELECT count(*) FROM runs").returncode == 0
    assert run_cli(home, "show", "llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-"
                                 "seq2048-bf16/2025-08-07-21-42-04").returncode == 0
    assert run_cli(home, "export", "--format", "json", str(tmp_path / "export")).returncode == 0
    newer = {**main_rows()[-1], "commit": "f" * 40, "committed_at": "2030-01-01T00:00:00+00:00"}
    source = write_snapshot_dir(tmp_path / "source", [*index_rows(), newer])
    reason = assert_clear_failure(run_cli(home, "ingest", "--source", str(source)))
    assert "read-only" in reason.lower() or "cannot write" in reason.lower()


def test_export_into_a_path_under_a_file_is_one_line(tmp_path, analyst_home):
    (tmp_path / "a-file").write_text("x")
    reason = assert_clear_failure(run_cli(analyst_home, "export", "--format", "json", str(tmp_path / "a-file" / "out")))
    assert "a-file" in reason


def test_a_bad_http_setting_is_one_line(tmp_path, analyst_home):
    reason = assert_clear_failure(run_cli(tmp_path / "home", "ingest", KERNELINDEX_HTTP_TIMEOUT_S="abc"))
    assert "KERNELINDEX_HTTP_TIMEOUT_S" in reason


@contextlib.contextmanager
def home_with_room(tmp_path: Path, warehouse: Path, free_bytes: int):
    """A copy of `warehouse` on a tmpfs with about `free_bytes` left, and a function that grows the tmpfs by
    a number of bytes (root only: the test skips elsewhere)."""
    if not IS_ROOT:
        pytest.skip("mounting a size-limited tmpfs needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    size = sum(p.stat().st_size for p in warehouse.rglob("*") if p.is_file() and not p.is_symlink()) + free_bytes
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.strip()}")

    def grow(more: int) -> None:
        subprocess.run(["mount", "-o", f"remount,size={size + more}", str(mount)], check=True)
    try:
        yield copy_home(warehouse, mount / "home"), grow
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_fails_the_ingest_with_its_cause_and_keeps_the_warehouse(tmp_path, base_warehouse, next_source):
    with home_with_room(tmp_path, base_warehouse, 6 * 2**20) as (home, _):
        before = published_state(home)
        reason = assert_clear_failure(run_cli(home, "ingest", "--source", str(next_source)))
        assert "no space left on device" in reason.lower()
        assert published_state(home) == before
        assert not list((home / "generations").glob(".staging-*"))  # nothing half-built left behind


@pytest.mark.parametrize("free_kib", [64, 200])
def test_a_nearly_full_disk_before_the_warehouse_step_is_one_line_and_loses_nothing(
        free_kib, tmp_path, base_warehouse, next_source, next_warehouse):
    """So little room that Dagster's own run and event storage cannot be written, then room again."""
    with home_with_room(tmp_path, base_warehouse, free_kib * 1024) as (home, grow):
        before = published_state(home)
        result = run_cli(home, "ingest", "--source", str(next_source))
        reason = assert_clear_failure(result)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr[-3000:]
        assert "Dagster" in reason and ("disk" in reason or "space" in reason)  # its instance or its storage
        assert published_state(home) == before
        grow(256 * 2**20)
        ingest(home, next_source)
        with Warehouse(home).reader() as con, Warehouse(next_warehouse).reader() as reference:
            for table in ("runs", "ranks", "quarantine"):
                assert table_checksum(con, table) == table_checksum(reference, table), table


def test_readers_need_no_lock_file(analyst_home):
    with Warehouse(analyst_home).reader() as con:
        assert con.execute("SELECT count(*) FROM runs").fetchall()[0][0] > 0


@pytest.mark.skipif(DUCKDB_CLI is None, reason="the duckdb CLI (pip install duckdb-cli) is not installed")
def test_the_readme_ways_in_work_as_written(analyst_home):
    """Every command of the README's "For analysts" block, run on a built warehouse."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("## For analysts", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in block.strip().splitlines() if line.strip()]
    assert len(commands) >= 4
    tools = {"duckdb": DUCKDB_CLI, "python": sys.executable,
             "kernelindex": f"{sys.executable} -m kernelindex_pipeline.cli"}
    for command in commands:
        tool, rest = command.split(" ", 1)
        line = f"{tools[tool]} {rest.replace('data/', f'{analyst_home}/')}"
        done = subprocess.run(line, shell=True, cwd=REPO, env=cli_env(analyst_home), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0 and done.stdout.strip(), (command, done.stderr[-2000:])


def test_a_home_whose_runs_text_is_not_compressed_is_migrated_with_every_record_unchanged(tmp_path, base_warehouse):
    """A home written before the runs' text was stored zstd-compressed gets the compressed column at its next
    publication, each published manifest byte for byte as it was."""
    import duckdb

    home, source = _base_plus(tmp_path, base_warehouse, "next", read_snapshot(main_rows()[BASE_REVISIONS]))
    db = Warehouse(home).db_path.resolve()
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE plain AS SELECT * FROM run_manifests; DROP TABLE run_manifests; "
                "ALTER TABLE plain RENAME TO run_manifests; CHECKPOINT")
    con.close()
    before = dict(query(home, "SELECT run_id, manifest FROM manifests"))
    ingest(home, source)
    [(declared,)] = query(home, "SELECT sql FROM duckdb_tables() WHERE table_name = 'run_manifests'")
    assert "COMPRESSION ZSTD" in declared.upper()
    assert {c for (c,) in query(home, "SELECT DISTINCT compression FROM pragma_storage_info('run_manifests') "
                                      "WHERE column_name = 'run' AND segment_type = 'VARCHAR'")} == {"ZSTD"}
    after = dict(query(home, "SELECT run_id, manifest FROM manifests"))
    assert len(after) > len(before) and all(after[rid] == text for rid, text in before.items())


def test_the_next_generation_starts_from_the_copy_prestaged_of_the_live_one_and_never_a_stale_one(
        tmp_path, base_warehouse, next_source, next_warehouse):
    """`kernelindex ingest` copies the live DuckDB file while Dagster starts (`Warehouse.prestage`); the
    publication takes that copy when it is of the generation still live, and discards copies of older
    generations and half-made ones."""
    home = copy_home(base_warehouse, tmp_path / "home")
    wh = Warehouse(home)
    live = wh.db_path.resolve()
    stale = wh.generations_dir / ".prestaged-20000101T000000-00000000"
    half_made = wh.generations_dir / ".prestaging-0123"
    for folder in (stale, half_made):
        folder.mkdir()
        (folder / "kernelindex.duckdb").write_bytes(b"not a warehouse")
    wh.prestage()
    wh.await_prestage()
    prestaged = wh.generations_dir / f".prestaged-{live.parent.name}" / "kernelindex.duckdb"
    assert prestaged.read_bytes() == live.read_bytes()
    # marked, to tell the prestaged copy from a copy the publication would make itself
    with duckdb.connect(str(prestaged)) as con:
        con.execute("CREATE TABLE prestage_marker AS SELECT 1 AS x")
    ingest(home, next_source)
    assert query(home, "SELECT count(*) FROM prestage_marker") == [(1,)]
    assert not [p.name for p in wh.generations_dir.glob(".*")]
    with Warehouse(home).reader() as con, Warehouse(next_warehouse).reader() as reference:
        for table in ("runs", "ranks", "quarantine", "claim_checks"):
            assert table_checksum(con, table) == table_checksum(reference, table), table
