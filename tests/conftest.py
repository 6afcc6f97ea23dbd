"""Shared helpers for the ingestion tests: snapshot directories, the `kernelindex` CLI in a subprocess,
and a fingerprint of everything a warehouse holds (every table's checksum, every Parquet file's bytes)."""

from __future__ import annotations

import atexit
import contextlib
import csv
import fcntl
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest

from kernelindex_pipeline.warehouse.store import CONTRACT_TABLES, Warehouse

from kernelindex_pipeline.warehouse.sql import rows_checksum, table_checksum

REPO = Path(__file__).resolve().parent.parent
SNAPSHOTS = REPO / "data" / "upstream" / "liger-kernel"
MAIN_PATH = "benchmark/data/all_benchmark_data.csv"
INDEX_FIELDS = ("commit", "committed_at", "path", "file")

# Fast HTTP retries for every CLI the tests start (the knobs UpstreamResource reads).
FAST_HTTP = {"KERNELINDEX_HTTP_BACKOFF_S": "0.02", "KERNELINDEX_HTTP_RETRIES": "4", "KERNELINDEX_HTTP_TIMEOUT_S": "5"}


def index_rows(root: Path = SNAPSHOTS) -> list[dict]:
    """INDEX.tsv rows, oldest first."""
    from kernelindex_pipeline.ingest.sources import utc_iso

    with open(root / "INDEX.tsv", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return sorted(rows, key=lambda r: (utc_iso(r["committed_at"]), r["path"]))


def main_rows() -> list[dict]:
    """The main benchmark file's revisions, oldest first."""
    return [r for r in index_rows() if r["path"] == MAIN_PATH]


def write_snapshot_dir(root: Path, rows: list[dict], contents: dict[str, bytes] | None = None) -> Path:
    """A directory source: INDEX.tsv listing rows; each file copied from the shipped snapshots, or written
    (gzipped) from `contents[file]` when given."""
    root.mkdir(parents=True, exist_ok=True)
    contents = contents or {}
    with open(root / "INDEX.tsv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=INDEX_FIELDS, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row[k] for k in INDEX_FIELDS})
            target = root / row["file"]
            if row["file"] in contents:
                target.write_bytes(gzip.compress(contents[row["file"]], mtime=0))
            elif not target.exists():
                target.write_bytes((SNAPSHOTS / row["file"]).read_bytes())
    return root


def read_snapshot(row: dict) -> bytes:
    return gzip.decompress((SNAPSHOTS / row["file"]).read_bytes())


# The CLI the tests start reads no rerun evidence unless a test passes KERNELINDEX_EVIDENCE: checking every
# committed session's claims costs most of a small ingest, and the tests of sources and of the warehouse's
# safety are about what a revision brings. The shared builds (analyst_home, default_home) read the evidence.
NO_EVIDENCE = Path(tempfile.mkdtemp(prefix="kernelindex-no-evidence-"))
atexit.register(shutil.rmtree, NO_EVIDENCE, ignore_errors=True)


# The variables a test's `kernelindex` does not take from the test's own environment.
NOT_INHERITED = ("KERNELINDEX_", "DAGSTER_", "GITHUB_TOKEN")


def cli_env(home: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(NOT_INHERITED)}
    return {**env, **FAST_HTTP, "KERNELINDEX_HOME": str(home), "KERNELINDEX_EVIDENCE": str(NO_EVIDENCE), **extra}


def kernelindex_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "kernelindex_pipeline.cli", *args]


def run_cli(home: Path, *args: str, timeout: float = 180, **env) -> subprocess.CompletedProcess:
    """`kernelindex ARGS` in a fresh process, as an operator runs it."""
    return subprocess.run(kernelindex_cmd(*args), cwd=REPO, env=cli_env(home, **env), capture_output=True,
                          text=True, timeout=timeout)


def ingest(home: Path, *sources, **env) -> subprocess.CompletedProcess:
    """`kernelindex ingest --source S...` into `home`, run to success, in this process (the environment
    `run_cli` gives a new one): the same Dagster job, without starting Python and importing Dagster again.
    The tests of what the command's process does (its exit status and last line, a kill) start it as a
    process (`run_cli`, `start_ingest`)."""
    from kernelindex_pipeline import cli

    args = ["ingest", *(a for s in sources for a in ("--source", str(s)))]
    unset = {k: None for k in os.environ if k.startswith(NOT_INHERITED)}
    out, err = io.StringIO(), io.StringIO()
    with environment(**{**unset, **cli_env(home, **env)}), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err), contextlib.chdir(REPO):
        code = cli.main(args)
    result = subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())
    assert result.returncode == 0, f"ingest failed ({result.returncode}):\n{result.stderr[-4000:]}"
    return result


def assert_clear_failure(result: subprocess.CompletedProcess) -> str:
    """Non-zero exit, no traceback (Python's or Dagster's "Stack Trace"), and the reason on one line, last."""
    assert result.returncode != 0, result.stdout
    for marker in ("Traceback", "Stack Trace", '  File "'):
        assert marker not in result.stderr, result.stderr[-4000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("kernelindex: "), result.stderr[-4000:]
    return lines[-1]


def all_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [t for (t,) in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' AND table_type = 'BASE TABLE' "
        "ORDER BY 1").fetchall()]


def warehouse_state(home: Path) -> dict[str, str]:
    """Checksum of every DuckDB table and of every Parquet copy's rows, and sha256 of every raw snapshot."""
    wh = Warehouse(home)
    state = {}
    with wh.reader() as con:
        for table in all_tables(con):
            state[f"table:{table}"] = table_checksum(con, table)
        for path in sorted(wh.tables_dir.iterdir()):  # a table's Parquet copy: one file, or a folder of parts
            files = path.resolve() / "*.parquet" if path.is_dir() else path.resolve()
            state[f"parquet:{path.name.removesuffix('.parquet')}"] = rows_checksum(con, f"read_parquet('{files}')")
    for path in sorted(wh.raw_dir.rglob("*")):
        if path.is_file():
            state[f"file:{path.relative_to(home)}"] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


def published_state(home: Path) -> dict[str, str]:
    """What a publication changes: every table and every Parquet copy (raw bytes and landed records are
    content-addressed inputs, kept for the next ingest whatever happens). Of `publications`, which runs are
    stamped, not when; of `verdict_history`, which verdicts each claim held and holds, not since when: two
    ingests of the same revisions publish at different instants."""
    state = {k: v for k, v in warehouse_state(home).items() if k.startswith(("table:", "parquet:"))}
    with Warehouse(home).reader() as con:
        if "table:publications" in state:
            state["table:publications"] = rows_checksum(con, "(SELECT run_id FROM publications)")
        if "table:verdict_history" in state:
            state["table:verdict_history"] = rows_checksum(
                con, "(SELECT * EXCLUDE (since, until), until IS NULL AS open FROM verdict_history)")
    return state


def contract_tables(home: Path) -> dict[str, str]:
    with Warehouse(home).reader() as con:
        return {t: table_checksum(con, t) for t in CONTRACT_TABLES}


def query(home: Path, sql: str, params=None) -> list[tuple]:
    with Warehouse(home).reader() as con:
        return con.execute(sql, params or []).fetchall()


def built_once(tmp_path_factory, name: str, build) -> Path:
    """A directory `build` fills once per test session, whichever worker asks first; the other workers wait
    for it and share it (read it, never write it)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above each worker's own
    target, done = root / f"shared-{name}", root / f"shared-{name}.done"
    with open(root / f"shared-{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            build(target)
            done.touch()
    return target


@contextlib.contextmanager
def environment(**values: str | None):
    """os.environ with `values` set (None: unset), restored afterwards."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in values.items():
            if value is None:
                patch.delenv(name, raising=False)
            else:
                patch.setenv(name, value)
        yield


# Five committed rerun sessions of every kind (an own-card H100 session, a release check, a replication, two
# older H200 sessions): claims of each verdict, version checks and replications, at a fifth of the cost of all.
EVIDENCE_SAMPLE = ("h100-2026-12-06-74c35547a4b8-own-card-7", "h100-2026-12-06-74c35547a4b8-liger-0.7.0",
                   "h100-2026-12-06-b175f195cb62-replication", "h200-2026-12-02", "h200-2026-12-03-norms")


@pytest.fixture(scope="session")
def evidence_sample(tmp_path_factory) -> Path:
    """An evidence directory holding the EVIDENCE_SAMPLE sessions (one for every worker)."""
    from kernelindex_pipeline.defs.resources import SHIPPED_EVIDENCE

    def build(folder):
        for name in EVIDENCE_SAMPLE:
            shutil.copy(SHIPPED_EVIDENCE / f"{name}.jsonl.gz", folder)
    return built_once(tmp_path_factory, "evidence-sample", build)


@pytest.fixture(scope="session", autouse=True)
def sampled_evidence_by_default(evidence_sample):
    """In-process ingests read the EVIDENCE_SAMPLE sessions unless a test names other evidence: the default
    build alone reads every committed session."""
    with environment(KERNELINDEX_EVIDENCE=str(evidence_sample)):
        yield


@pytest.fixture(scope="session")
def full_directory_warehouse(analyst_home) -> Path:
    """The warehouse built once from the shipped snapshot directory (the reference for equality tests)."""
    return analyst_home


BASE_REVISIONS = 3  # the first three main-file revisions: small, and the third is dropped rows by the fourth


def copy_home(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target


@pytest.fixture(scope="session")
def base_warehouse(tmp_path_factory) -> Path:
    """A warehouse of the first BASE_REVISIONS main-file revisions (directory source); copy it, never write it."""
    def build(home):
        ingest(home, write_snapshot_dir(tmp_path_factory.mktemp("base-source"), main_rows()[:BASE_REVISIONS]))
    return built_once(tmp_path_factory, "base-warehouse", build)


@pytest.fixture(scope="session")
def next_warehouse(tmp_path_factory) -> Path:
    """One backfill of the first BASE_REVISIONS + 1 main-file revisions (directory source)."""
    def build(home):
        ingest(home, write_snapshot_dir(tmp_path_factory.mktemp("next-source"), main_rows()[:BASE_REVISIONS + 1]))
    return built_once(tmp_path_factory, "next-warehouse", build)


# -- analyst views, export, CLI and UI tests (tests/test_views.py, test_export.py, test_cli.py, test_ui.py) --

@pytest.fixture(scope="session")
def analyst_home(tmp_path_factory, evidence_sample) -> Path:
    """KERNELINDEX_HOME of a warehouse built once, in-process, by `kernelindex ingest` from the shipped
    main-branch files (the source the seed records were published from, and the one docs/warehouse.md's
    examples describe) and the EVIDENCE_SAMPLE sessions. `default_home` is the default build: both shipped
    sources and every committed session."""
    from shipped_warehouse import SHIPPED_UPSTREAM, ingest_into

    def build(home):
        with environment(DAGSTER_HOME=None, KERNELINDEX_EVIDENCE=str(evidence_sample)):
            assert ingest_into(home, "--source", str(SHIPPED_UPSTREAM)) == 0
    return built_once(tmp_path_factory, "analyst-warehouse", build)


@pytest.fixture(scope="session")
def default_home(tmp_path_factory) -> Path:
    """KERNELINDEX_HOME of the default build, once: `kernelindex ingest` with no source takes both shipped
    sources (the main-branch files and the gh-pages runs) and the committed rerun evidence."""
    from shipped_warehouse import ingest_into

    def build(home):
        with environment(KERNELINDEX_SOURCES=None, KERNELINDEX_EVIDENCE=None, DAGSTER_HOME=None):
            assert ingest_into(home) == 0
    return built_once(tmp_path_factory, "default-warehouse", build)


@pytest.fixture(scope="session")
def shipped_warehouse(analyst_home) -> Warehouse:
    """The same warehouse, as a Warehouse."""
    return Warehouse(analyst_home)


@pytest.fixture(scope="session")
def default_warehouse(default_home) -> Warehouse:
    """The default build, as a Warehouse: every committed rerun session (the analyst warehouse reads a sample)."""
    return Warehouse(default_home)


@pytest.fixture(scope="session")
def html_export(analyst_home, tmp_path_factory) -> Path:
    """`kernelindex export --format html` of the analyst warehouse."""
    from kernelindex_pipeline import cli

    def build(out):
        with environment(KERNELINDEX_HOME=str(analyst_home)):
            assert cli.main(["export", "--format", "html", str(out)]) == 0
    return built_once(tmp_path_factory, "html-export", build)


# The shared homes that take longest to build, split between the first two workers, each building its own at
# the start: a worker otherwise waits, idle, for the one the other is building.
SHARED_HOMES_BY_WORKER = {"gw0": ("default_home",), "gw1": ("analyst_home", "html_export")}


@pytest.fixture(scope="session", autouse=True)
def shared_homes_built_side_by_side(request):
    """Under pytest-xdist, build this worker's share of SHARED_HOMES_BY_WORKER before its first test, where
    the session's tests use them."""
    wanted = SHARED_HOMES_BY_WORKER.get(os.environ.get("PYTEST_XDIST_WORKER", ""), ())
    used = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
    for name in wanted:
        if name in used:
            request.getfixturevalue(name)


# The test files that take longest, longest first (`pytest --durations=0`, summed per file): under
# `--dist loadfile --no-loadscope-reorder` the workers take files in collection order, so the long ones start
# first and the short ones fill the end, rather than one long file running alone at the end.
LONGEST_FIRST = ("test_atomicity.py", "test_warehouse_safety.py", "test_incremental.py", "test_kernels_interpret.py",
                 "test_live_ingest.py", "test_gh_pages_ingest.py", "test_digests.py", "test_ingest.py",
                 "test_site_index.py", "test_adapters_losses.py", "test_adapters_mlps.py", "test_fuzz_ingest.py",
                 "test_export_assets.py", "test_published_bytes.py", "test_adapters_attention.py",
                 "test_site_pages.py", "test_export.py", "test_claim_checks.py")


def pytest_collection_modifyitems(items):
    order = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: order.get(item.path.name, len(order)))
