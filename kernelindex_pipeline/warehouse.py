"""The embedded warehouse: one DuckDB file plus Parquet copies of its contract tables under KERNELINDEX_HOME.

Writers take an exclusive file lock and change DuckDB inside one transaction, so a failed or killed run
leaves the previous warehouse as it was. Parquet files are written to a temporary name and renamed.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import duckdb

from kernelindex_pipeline.views import VIEWS_SQL

CONTRACT_TABLES = ("runs", "ranks", "manifests", "quarantine")

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS snapshots (
    revision_key VARCHAR, source VARCHAR, stream VARCHAR, source_file VARCHAR, commit VARCHAR,
    committed_at TIMESTAMPTZ, sha256 VARCHAR, bytes BIGINT, location VARCHAR);
CREATE TABLE IF NOT EXISTS observations (
    run_id VARCHAR, dim_key UBIGINT, revision_key VARCHAR, line_number BIGINT, observed_at TIMESTAMP,
    liger_version VARCHAR, median_value BIGINT, p20_value BIGINT, p80_value BIGINT,
    source_p20 DOUBLE, source_p50 DOUBLE, source_p80 DOUBLE);
CREATE TABLE IF NOT EXISTS run_keys (
    dim_key UBIGINT, kernel_name VARCHAR, kernel_provider VARCHAR, kernel_operation_mode VARCHAR,
    metric_name VARCHAR, metric_unit VARCHAR, x_name VARCHAR, x_value VARCHAR, extra_benchmark_config_str VARCHAR,
    gpu_name VARCHAR, workload_slug VARCHAR, workload_digest VARCHAR, kernel_title VARCHAR, known_kernel BOOLEAN,
    gpu VARCHAR, form_factor VARCHAR, architecture VARCHAR, environment_digest VARCHAR, implementation VARCHAR,
    project VARCHAR, implementation_digest VARCHAR, metric VARCHAR, gpu_slug VARCHAR, protocol_digest VARCHAR,
    id_prefix VARCHAR, id_suffix VARCHAR, title VARCHAR, comparison_key VARCHAR, evidence_level VARCHAR,
    source VARCHAR);
CREATE TABLE IF NOT EXISTS snapshot_quarantine (
    revision_key VARCHAR, source VARCHAR, source_revision VARCHAR, line_number BIGINT, reason VARCHAR,
    raw_line VARCHAR);
CREATE TABLE IF NOT EXISTS workloads (
    workload_digest VARCHAR, kernel VARCHAR, workload_slug VARCHAR, definition VARCHAR,
    shapes_known BOOLEAN);
CREATE TABLE IF NOT EXISTS protocols (protocol_digest VARCHAR, name VARCHAR, manifest VARCHAR);
CREATE TABLE IF NOT EXISTS environments (environment_digest VARCHAR, name VARCHAR, manifest VARCHAR);
CREATE TABLE IF NOT EXISTS implementations (implementation_digest VARCHAR, provider VARCHAR, manifest VARCHAR);
CREATE TABLE IF NOT EXISTS controlled_runs (
    run_id VARCHAR, external_id VARCHAR, name VARCHAR, title VARCHAR, kernel VARCHAR,
    operation_mode VARCHAR, provider VARCHAR, implementation VARCHAR, project VARCHAR, metric VARCHAR, unit VARCHAR,
    median_value BIGINT, p20_value BIGINT, p80_value BIGINT, gpu VARCHAR, form_factor VARCHAR, architecture VARCHAR,
    workload_slug VARCHAR, observed_at TIMESTAMP, evidence_level VARCHAR, source VARCHAR, status VARCHAR,
    comparison_key VARCHAR, protocol_digest VARCHAR, workload_digest VARCHAR, environment_digest VARCHAR,
    implementation_digest VARCHAR, evidence_file VARCHAR, record JSON);
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR, external_id VARCHAR, name VARCHAR, title VARCHAR, kernel VARCHAR,
    operation_mode VARCHAR, provider VARCHAR, implementation VARCHAR, project VARCHAR, metric VARCHAR, unit VARCHAR,
    median_value BIGINT, p20_value BIGINT, p80_value BIGINT, gpu VARCHAR, form_factor VARCHAR, architecture VARCHAR,
    workload_slug VARCHAR, observed_at TIMESTAMP, evidence_level VARCHAR, source VARCHAR,
    first_seen_revision VARCHAR, last_seen_revision VARCHAR, withdrawn_upstream BOOLEAN, comparison_key VARCHAR,
    protocol_digest VARCHAR, workload_digest VARCHAR, environment_digest VARCHAR, implementation_digest VARCHAR,
    liger_version VARCHAR, status VARCHAR, known_kernel BOOLEAN, source_p20 DOUBLE, source_p50 DOUBLE,
    source_p80 DOUBLE, source_unit VARCHAR);
CREATE TABLE IF NOT EXISTS manifests (run_id VARCHAR, manifest VARCHAR, run_digest VARCHAR);
CREATE TABLE IF NOT EXISTS ranks (
    run_id VARCHAR, comparison_key VARCHAR, rank BIGINT, group_size BIGINT, evidence_level VARCHAR);
CREATE TABLE IF NOT EXISTS quarantine (
    source VARCHAR, source_revision VARCHAR, line_number BIGINT, reason VARCHAR, raw_line VARCHAR,
    revision_key VARCHAR);
CREATE TABLE IF NOT EXISTS evidence_quarantine (
    revision_key VARCHAR, source VARCHAR, source_revision VARCHAR, line_number BIGINT, reason VARCHAR,
    raw_line VARCHAR);
CREATE TABLE IF NOT EXISTS ingest_state (key VARCHAR, value VARCHAR);
CREATE TABLE IF NOT EXISTS reproductions (
    controlled_run_id VARCHAR, source_run_id VARCHAR, kernel VARCHAR, operation_mode VARCHAR, metric VARCHAR,
    provider VARCHAR, workload_slug VARCHAR, source_gpu VARCHAR, controlled_median BIGINT, source_median BIGINT,
    ratio_of_medians DOUBLE, source_order VARCHAR, controlled_order VARCHAR, order_held BOOLEAN);
"""


def default_home() -> Path:
    return Path(os.environ.get("KERNELINDEX_HOME") or "data")


class Warehouse:
    """Paths and connections of one KERNELINDEX_HOME."""

    def __init__(self, home: str | os.PathLike | None = None):
        self.home = Path(home) if home else default_home()

    @property
    def db_path(self) -> Path:
        return self.home / "kernelindex.duckdb"

    @property
    def tables_dir(self) -> Path:
        return self.home / "tables"

    @property
    def raw_dir(self) -> Path:
        return self.home / "raw" / "sha256"

    def exists(self) -> bool:
        return self.db_path.exists()

    @contextlib.contextmanager
    def _lock(self, mode: int = fcntl.LOCK_EX) -> Iterator[None]:
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.home / ".writer.lock", "a") as handle:
            fcntl.flock(handle, mode)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def exclusive(self):
        """The writers' lock alone, for short writes beside the warehouse (the Dagster instance's partitions)."""
        return self._lock()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One writer at a time; everything inside commits together or not at all."""
        with self._lock():
            con = duckdb.connect(str(self.db_path))
            try:
                con.execute(SCHEMA_SQL)
                if VIEWS_SQL.strip():
                    con.execute(VIEWS_SQL)
                con.execute("BEGIN TRANSACTION")
                self._exports = []
                try:
                    yield con
                    _test_pause_before_commit(self)
                    con.execute("COMMIT")
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                finally:
                    exports, self._exports = self._exports, None
                self._write_parquet(con, exports)  # only what committed reaches the Parquet copies
            finally:
                con.close()

    @contextlib.contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection; waits for a writer in another process to finish its transaction (DuckDB
        refuses to open a file another process holds open for writing)."""
        if not self.exists():
            raise FileNotFoundError(f"no warehouse at {self.db_path}: run `kernelindex ingest` first")
        with self._lock(fcntl.LOCK_SH):
            con = duckdb.connect(str(self.db_path), read_only=True)
            try:
                yield con
            finally:
                con.close()

    # -- raw snapshot bytes, content-addressed ------------------------------------------------------

    def store_raw(self, data: bytes) -> str:
        """Keep a snapshot's bytes under their sha256 before anything parses them; returns the hex digest."""
        sha = hashlib.sha256(data).hexdigest()
        path = self.raw_path(sha)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(gzip.compress(data, compresslevel=6, mtime=0))
            os.replace(tmp, path)
        return sha

    def raw_path(self, sha: str) -> Path:
        return self.raw_dir / sha[:2] / f"{sha}.csv.gz"

    def load_raw(self, sha: str) -> bytes:
        data = gzip.decompress(self.raw_path(sha).read_bytes())
        if hashlib.sha256(data).hexdigest() != sha:
            raise ValueError(f"raw snapshot {sha} does not match its digest")
        return data

    # -- Parquet copies -----------------------------------------------------------------------------

    def export_parquet(self, con: duckdb.DuckDBPyConnection, tables: tuple[str, ...] = CONTRACT_TABLES) -> None:
        """Bring each table's Parquet copy up to date; inside a transaction, once it has committed."""
        if getattr(self, "_exports", None) is not None:
            self._exports.extend(t for t in tables if t not in self._exports)
        else:
            self._write_parquet(con, tables)

    def _write_parquet(self, con: duckdb.DuckDBPyConnection, tables) -> None:
        """Write each table whose Parquet copy is missing or differs to a temporary file, then rename it over
        the previous one (so a copy left stale by a kill between commit and rename is repaired next time)."""
        self.tables_dir.mkdir(parents=True, exist_ok=True)
        for table in tables:
            final = self.tables_dir / f"{table}.parquet"
            if final.exists() and _checksum_of(con, f"read_parquet('{final}')") == _checksum_of(con, table):
                continue
            tmp = final.with_name(f".{table}.{os.getpid()}.parquet.tmp")
            con.execute(f"COPY (SELECT * FROM {table} ORDER BY ALL) TO '{tmp}' (FORMAT parquet)")
            os.replace(tmp, final)


def _test_pause_before_commit(wh: Warehouse) -> None:
    """Test-only: with KERNELINDEX_TEST_PAUSE_BEFORE_COMMIT=<function>, a transaction opened by that function
    (e.g. rebuild_runs) writes `.test-paused` under home and sleeps before COMMIT, so a test can kill the
    process with every write of the step done and none committed."""
    wanted = os.environ.get("KERNELINDEX_TEST_PAUSE_BEFORE_COMMIT")
    if not wanted:
        return
    import sys
    import time

    frame, names = sys._getframe(1), set()
    while frame is not None:
        names.add(frame.f_code.co_name)
        frame = frame.f_back
    if wanted in names:
        (wh.home / ".test-paused").write_text(wanted)
        time.sleep(600)


def _checksum_of(con: duckdb.DuckDBPyConnection, relation: str) -> str:
    (value,) = con.execute(
        f"SELECT coalesce(md5(string_agg(md5(t::VARCHAR), '' ORDER BY md5(t::VARCHAR))), '') FROM {relation} t"
    ).fetchone()
    return value


def table_checksum(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """Order-independent digest of a table's rows, to tell whether anything changed."""
    return f"{table}:{_checksum_of(con, table)}"


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    """(name, type) of a warehouse table's columns, in order."""
    return con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'main' AND table_name = ? "
        "ORDER BY ordinal_position", [table]).fetchall()


def replace_if_changed(con: duckdb.DuckDBPyConnection, table: str, query: str, params=None) -> bool:
    """Replace a table's rows with a query's, only where they differ; returns whether anything changed."""
    columns = ", ".join(name for name, _ in table_columns(con, table))
    con.execute(f"CREATE OR REPLACE TEMP TABLE _next AS SELECT {columns} FROM ({query})", params or [])
    (differs,) = con.execute(
        f"SELECT EXISTS (SELECT * FROM _next EXCEPT ALL SELECT * FROM {table}) "
        f"OR EXISTS (SELECT * FROM {table} EXCEPT ALL SELECT * FROM _next)"
    ).fetchone()
    if differs:
        con.execute(f"DELETE FROM {table}")
        con.execute(f"INSERT INTO {table} SELECT * FROM _next")
    con.execute("DROP TABLE _next")
    return bool(differs)
