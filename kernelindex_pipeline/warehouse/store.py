"""The embedded warehouse: one DuckDB file plus Parquet copies of its tables under KERNELINDEX_HOME.

A warehouse is published in *generations*. A writer builds the next generation beside the live one
(a copy of the live DuckDB file, changed, then its Parquet set written) and publishes it with one atomic
rename of the `current` link; `kernelindex.duckdb` and `tables/` are fixed links through `current`. The
copy can be made ahead, while other work runs (`prestage`). So:

- a failure or kill at any instant leaves the previous generation, byte for byte, as the live one;
- readers take no lock and never block the writer: a session keeps reading the generation it opened
  (its files stay on disk for two more publications), a new session opens the newest;
- the DuckDB file and its Parquet copies change together, never one without the other.

Writers take turns through an exclusive file lock (`.writer.lock`); nothing else is locked.

Long because the publication protocol (stage, change, compact, write the Parquet set, fsync, rename,
collect old generations) is one sequence whose order is the guarantee; it reads best in one place.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gzip
import hashlib
import json
import os
import re
import shutil
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from kernelindex_pipeline.warehouse.schema import apply_schema, manifests_sql, rows_of_runs
from kernelindex_pipeline.warehouse.views import VIEWS_SQL, workload_params_view

CONTRACT_TABLES = ("runs", "ranks", "manifests", "quarantine")
# Every table with a Parquet copy under tables/: the contract tables and what analysts join them with.
PARQUET_TABLES = CONTRACT_TABLES + ("reproductions", "claim_checks", "version_checks")
# Tables that grow with history have their Parquet copy in parts, `tables/<table>/published-<epoch>-<source>.parquet`,
# one per first publication and source of the runs it holds (`publications`, which never changes): a
# publication writes the parts holding rows it changed (`publication_changes`) and links the others from the
# previous generation, so its cost follows what it changed. (A new revision of one source re-lists that
# source's runs, whose last-seen revision changes: per source, their part is the only old one rewritten.)
# Each parted copy maps to the table whose changed keys say which parts to write.
PARTED_TABLES = {"runs": "runs", "manifests": "run_manifests"}
PART_KEY = "epoch(p.published_at)::BIGINT, p.source"
PART_ROW_GROUP_BYTES = "16MB"

# New files are written in the storage format of DuckDB 1.4, which every DuckDB since reads: the CLI
# analysts install from the package registry (duckdb-cli 1.5.x) cannot open DuckDB 2.0's own format.
STORAGE_VERSION = "v1.4.0"
# Generations kept besides the live one, so a reader part-way through a Parquet set or a session opened
# just before a publication still finds its files.
GENERATIONS_KEPT = 2
# DuckDB's memory in the pipeline's own connections: the next generation's while it is built (beyond it,
# it spills to disk) and the reads that describe and check it afterwards.
PIPELINE_MEMORY = "384MB"
# Compact the next generation (rewrite it table by table) once this share of its blocks is free: the file
# then stays within about this share of a fresh build's size.
COMPACT_FREE_SHARE = 0.08

# A read-only session that reaches nothing but the warehouse: no files, no network, no extensions, and
# no way to switch any of that back on.
SANDBOX = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}


class WarehouseError(Exception):
    """The warehouse could not be read or published; the message says why, in one line."""


def default_home() -> Path:
    return Path(os.environ.get("KERNELINDEX_HOME") or "data")


@dataclass
class Staging:
    """The next generation while it is built: its DuckDB connection, and whether anything changed."""

    con: duckdb.DuckDBPyConnection
    path: Path
    changed: bool = False
    details: dict = field(default_factory=dict)


class Warehouse:
    """Paths, readers and the one write path of one KERNELINDEX_HOME."""

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

    @property
    def landing_dir(self) -> Path:
        """Fetched revisions waiting to be published: one JSON record each (see `land`)."""
        return self.home / "landing"

    @property
    def generations_dir(self) -> Path:
        return self.home / "generations"

    @property
    def current(self) -> Path:
        return self.home / "current"

    def exists(self) -> bool:
        return self.db_path.exists()

    def parquet(self, table: str) -> str:
        """What `read_parquet` takes for a table's Parquet copy: its file, or the glob of its parts."""
        return str(self.tables_dir / (f"{table}/*.parquet" if table in PARTED_TABLES else f"{table}.parquet"))

    # -- readers ------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def reader(self, sandboxed: bool = False, bounded: bool = False,
               generation: Path | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-only connection to the live generation (or to `generation`, a live one's resolved file that
        another session pinned); `sandboxed` also shuts out files, extensions and configuration changes (for
        SQL someone else wrote); `bounded` caps DuckDB's memory as a publication's is (for the pipeline's own
        reads after a publication, whose cost must not follow history)."""
        if not self.exists():
            raise FileNotFoundError(f"no warehouse at {self.db_path}: run `kernelindex ingest` first")
        path = generation or self.db_path.resolve()  # pin one generation for the whole session
        try:
            config = {**(SANDBOX if sandboxed else {}), **({"memory_limit": PIPELINE_MEMORY} if bounded else {})}
            con = duckdb.connect(str(path), read_only=True, config=config)
        except duckdb.Error as exc:
            raise WarehouseError(f"cannot open {self.db_path}: {_first_line(exc)}") from exc
        try:
            yield con
        finally:
            con.close()

    # -- the write path -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _home_lock(self, name: str) -> Iterator[None]:
        """An exclusive lock on the file `name` in the home, held while the body runs (and while this process
        lives: a killed holder releases it)."""
        try:
            self.home.mkdir(parents=True, exist_ok=True)
            handle = open(self.home / name, "a")
        except OSError as exc:
            raise WarehouseError(f"cannot write to {self.home}: {exc.strerror or exc}") from exc
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def writer_lock(self) -> contextlib.AbstractContextManager[None]:
        """One writer at a time (ingests, partition registration); readers never take it."""
        return self._home_lock(".writer.lock")

    def ingest_run_lock(self) -> contextlib.AbstractContextManager[None]:
        """One ingest job run at a time on this home (held across the run, which takes the writer lock inside)."""
        return self._home_lock(".ingest-run.lock")

    @contextlib.contextmanager
    def publish(self) -> Iterator[Staging]:
        """Build the next generation from a copy of the live one (the one `prestage` made, where it made one
        of the generation live now), then make it live with one rename.

        The body changes `staging.con` and sets `staging.changed`; nothing is published when it stays
        False or the body raises. A failure says what failed and why, and leaves the live generation as it was."""
        with self.writer_lock():
            self.await_prestage()
            prestaged = self._prestaged_path()
            self._discard_unpublished(keep=prestaged)
            path = self.generations_dir / f".staging-{uuid.uuid4().hex}"
            try:
                db = path / "kernelindex.duckdb"
                if prestaged is not None and prestaged.is_dir():
                    os.rename(prestaged, path)
                else:
                    path.mkdir(parents=True)
                    if self.exists():
                        shutil.copyfile(self.db_path.resolve(), db)
                con = _connect_staging(db)
            except (OSError, duckdb.Error) as exc:
                shutil.rmtree(path, ignore_errors=True)
                raise WarehouseError(f"cannot stage the next warehouse in {self.generations_dir}: {_reason(exc)}") from exc
            try:
                apply_schema(con)
                con.execute(VIEWS_SQL)
                staging = Staging(con, path)
                yield staging
                staging.con.execute(workload_params_view(staging.con))
                if staging.changed:
                    con = staging.con = _compact_if_sparse(con, db)
                    previous = self.current.resolve() / "tables" if self.current.is_symlink() else None
                    _write_parquet_set(con, path / "tables", previous)
                con.execute("CHECKPOINT")
                con.close()
                shutil.rmtree(path / "spill", ignore_errors=True)
                if staging.changed:
                    self._make_live(path)
            except BaseException as exc:
                with contextlib.suppress(Exception):
                    con.close()
                shutil.rmtree(path, ignore_errors=True)
                if isinstance(exc, (OSError, duckdb.Error)) and not isinstance(exc, FileNotFoundError):
                    raise WarehouseError(f"publishing the warehouse failed, previous warehouse kept: "
                                         f"{_reason(exc)}") from exc
                raise
            finally:
                shutil.rmtree(path, ignore_errors=True)  # published generations have been renamed away
        self._collect_generations()

    def prestage(self) -> None:
        """Start copying the live generation's DuckDB file for the next publication, in a thread of this
        process, so that the copy (I/O) overlaps the work before the publication (CPU) rather than adding
        to it. A live generation never changes, so a copy named after it is a copy of what is live while
        that name is; the copy takes the name only once complete and on disk. Returns at once."""
        target, key = self._prestaged_path(), self.home.resolve()
        if target is None or target.exists() or key in _PRESTAGING:
            return
        live = self.generations_dir / target.name.removeprefix(".prestaged-") / self.db_path.name
        thread = threading.Thread(target=_prestage, args=(live, target), name="prestage", daemon=True)
        _PRESTAGING[key] = thread
        thread.start()

    def await_prestage(self) -> None:
        """Wait for this process's `prestage` of this home, if one runs."""
        thread = _PRESTAGING.pop(self.home.resolve(), None)
        if thread is not None:
            thread.join()

    def _prestaged_path(self) -> Path | None:
        """Where `prestage` puts its copy of the live generation's file: a folder named after that generation
        (the file copied is found from the name, so the two always agree)."""
        if not self.current.is_symlink() or not self.exists():
            return None
        return self.generations_dir / f".prestaged-{self.current.resolve().name}"

    def _make_live(self, staged: Path) -> None:
        """Rename the staged generation into place, then swap `current` to it: the one atomic step."""
        _fsync_tree(staged)
        name = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"
        final = self.generations_dir / name
        os.rename(staged, final)
        link = self.home / f".current-{uuid.uuid4().hex}"
        os.symlink(Path("generations") / name, link)
        self._ensure_fixed_links()
        os.replace(link, self.current)
        _fsync_dir(self.home)

    def _ensure_fixed_links(self) -> None:
        """`kernelindex.duckdb` and `tables` point through `current`; a home written before generations
        existed has them as a plain file and directory, moved aside here once."""
        for name in ("kernelindex.duckdb", "tables"):
            path = self.home / name
            if path.is_symlink():
                continue
            if path.exists():
                legacy = self.generations_dir / f"legacy-{uuid.uuid4().hex[:8]}-{name}"
                os.rename(path, legacy)
            wal = self.home / "kernelindex.duckdb.wal"
            if name == "kernelindex.duckdb" and wal.exists():
                wal.unlink()
            os.symlink(Path("current") / name, path)

    def _discard_unpublished(self, keep: Path | None = None) -> None:
        """Staging left by a writer that died (the lock says no writer is running now), and copies `prestage`
        made or is making, but `keep` (the live generation's)."""
        if self.generations_dir.is_dir():
            for path in self.generations_dir.glob(".*"):
                if path.name.startswith((".staging-", ".prestaging-", ".prestaged-")) and path != keep:
                    shutil.rmtree(path, ignore_errors=True)
        for link in self.home.glob(".current-*"):
            link.unlink(missing_ok=True)

    def _collect_generations(self) -> None:
        if not self.generations_dir.is_dir() or not self.current.is_symlink():
            return
        live = self.current.resolve().name
        older = sorted((p for p in self.generations_dir.iterdir() if not p.name.startswith(".") and p.name != live),
                       key=lambda p: p.stat().st_mtime, reverse=True)
        for path in older[GENERATIONS_KEPT:]:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    # -- fetched bytes and landed revisions ---------------------------------------------------------

    def store_raw(self, data: bytes) -> str:
        """Keep a snapshot's bytes under their sha256 before anything parses them; returns the hex digest."""
        sha = hashlib.sha256(data).hexdigest()
        path = self.raw_path(sha)
        if not path.exists():
            _atomic_write(path, gzip.compress(data, compresslevel=6, mtime=0))
        return sha

    def raw_path(self, sha: str) -> Path:
        return self.raw_dir / sha[:2] / f"{sha}.csv.gz"

    def load_raw(self, sha: str) -> bytes:
        data = gzip.decompress(self.raw_path(sha).read_bytes())
        if hashlib.sha256(data).hexdigest() != sha:
            raise ValueError(f"raw snapshot {sha} does not match its digest")
        return data

    def land(self, record: dict) -> None:
        """Record a fetched revision (its snapshot row, bytes already stored) for the next publication."""
        name = urllib.parse.quote(record["revision_key"], safe="@")  # gh-pages keys hold slashes
        _atomic_write(self.landing_dir / f"{name}.json",
                      json.dumps(record, sort_keys=True, default=str).encode())

    def landed(self) -> list[dict]:
        return _read_records(self.landing_dir)

    def land_reference(self, record: dict) -> None:
        """Record a source's reference file as last fetched (bytes already stored): one per source and path."""
        name = urllib.parse.quote(f"{record['source']}/{record['path']}", safe="")
        _atomic_write(self.landing_dir / "references" / f"{name}.json",
                      json.dumps(record, sort_keys=True, default=str).encode())

    def landed_references(self) -> list[dict]:
        return _read_records(self.landing_dir / "references")


# This process's `prestage` threads, by home.
_PRESTAGING: dict[Path, threading.Thread] = {}


def _prestage(live: Path, target: Path) -> None:
    partial = target.with_name(f".prestaging-{uuid.uuid4().hex}")
    try:
        partial.mkdir(parents=True)
        copy = partial / live.name
        shutil.copyfile(live, copy)
        with open(copy, "rb") as handle:
            os.fsync(handle.fileno())
        os.rename(partial, target)
        _fsync_dir(target.parent)
    except OSError:  # a publication copies the file itself
        shutil.rmtree(partial, ignore_errors=True)


def _read_records(directory: Path) -> list[dict]:
    if not directory.is_dir():
        return []
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.json"))]


def _connect_staging(db: Path) -> duckdb.DuckDBPyConnection:
    """The next generation's connection: the storage format readers open, and DuckDB's memory capped so
    that what a publication holds spills to the staging folder rather than growing with history."""
    con = duckdb.connect(str(db), config={
        "storage_compatibility_version": STORAGE_VERSION, "memory_limit": PIPELINE_MEMORY,
        "temp_directory": str(db.parent / "spill"), "preserve_insertion_order": False})
    con.execute("SET enable_progress_bar = false")
    return con


def _compact_if_sparse(con: duckdb.DuckDBPyConnection, db: Path) -> duckdb.DuckDBPyConnection:
    """Rewrite the staged file table by table once replaced rows have left much of it free, so the file
    tracks what it holds rather than how often it was rewritten; returns the connection to use next."""
    con.execute("CHECKPOINT")
    [(total, free)] = con.execute("SELECT total_blocks, free_blocks FROM pragma_database_size()").fetchall()
    if not total or free / total < COMPACT_FREE_SHARE:
        return con
    compact = db.with_name("compact.duckdb")
    con.execute(f"ATTACH '{compact}' AS compact (STORAGE_VERSION '{STORAGE_VERSION}')")
    [(name,)] = con.execute("SELECT current_database()").fetchall()
    con.execute(f'COPY FROM DATABASE "{name}" TO compact')
    con.execute("DETACH compact")
    con.close()
    os.replace(compact, db)
    return _connect_staging(db)


def _write_parquet_set(con: duckdb.DuckDBPyConnection, directory: Path, previous: Path | None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for table in PARQUET_TABLES:
        if table in PARTED_TABLES:
            _write_parts(con, table, PARTED_TABLES[table], directory / table, previous / table if previous else None)
        else:
            con.execute(f"COPY (SELECT * FROM {table} ORDER BY ALL) TO '{directory / table}.parquet' (FORMAT parquet)")


def _write_parts(con: duckdb.DuckDBPyConnection, table: str, changes: str, directory: Path,
                 previous: Path | None) -> None:
    """A table's Parquet parts (see PARTED_TABLES): those holding a row this publication changed are
    written, the others hard-linked from the previous generation's."""
    directory.mkdir()
    # Every run has one manifest and one stamp: the stamps name the parts of both tables.
    parts = con.execute(f"SELECT DISTINCT {PART_KEY} FROM publications p").fetchall()
    changed = set(con.execute(
        f"SELECT DISTINCT {PART_KEY} FROM publications p "
        "WHERE run_id IN (SELECT key FROM publication_changes WHERE table_name = ?)", [changes]).fetchall())
    # A run whose stamp moved left the part it was in: every part is written again.
    [(moved,)] = con.execute("SELECT count(*) > 0 FROM publication_changes WHERE table_name = 'publications'").fetchall()
    if moved:
        changed = set(parts)
    for stamp, source in parts:
        part = directory / f"published-{stamp}-{re.sub(r'[^A-Za-z0-9_-]', '_', source or '')}.parquet"
        kept = previous / part.name if previous is not None and (stamp, source) not in changed else None
        if kept is not None and kept.is_file():
            os.link(kept, part)
        else:
            # Unsorted, in small row groups: a part of a history's manifests is gigabytes of text, which a
            # sort or a default row group (122,880 rows) would hold in memory at once. Bounded in bytes too:
            # 16,384 manifests of a history's gh-pages part took over 250 MB to write, 16 MB groups under 180 MB.
            in_part = f"SELECT run_id FROM publications p WHERE ({PART_KEY}) IS NOT DISTINCT FROM (?, ?)"
            rows = (manifests_sql(rows_of_runs("run_manifests", in_part)) if table == "manifests"
                    else f"SELECT * FROM {rows_of_runs(table, in_part)}")
            con.execute(f"COPY ({rows}) TO '{part}' (FORMAT parquet, ROW_GROUP_SIZE 16384, "
                        f"ROW_GROUP_SIZE_BYTES '{PART_ROW_GROUP_BYTES}')", [stamp, source])


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _fsync_tree(root: Path) -> None:
    for path in [*root.rglob("*"), root]:
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        elif path.is_dir():
            _fsync_dir(path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _reason(exc: BaseException) -> str:
    """A one-line cause, naming a full disk as such."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC or "No space left" in str(exc):
        return "no space left on device"
    if isinstance(exc, OSError):
        return f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}"
    return _first_line(exc)
