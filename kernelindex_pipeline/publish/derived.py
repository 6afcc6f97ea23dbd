"""The derived tables of one publication, recomputed only where it reaches.

`mark_scope` names the revisions, runs and comparison groups a publication can change; the updates read
those scope tables (runs/history.py, runs/manifests.py, runs/ranking.py, verdicts/claims.py, ingest/evidence.py) and write only the rows
that differ (`replace_where`), so a nightly costs what its revision adds, not the size of history.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from kernelindex_pipeline.core import catalog

from kernelindex_pipeline.verdicts import claims

from kernelindex_pipeline.ingest import csvfile, evidence
from kernelindex_pipeline.ingest.attestations import load_attestations
from kernelindex_pipeline.runs.history import CONFLICTS_SQL, DELETED, LISTED, REFUSED, RUNS_SQL, UNLISTED
from kernelindex_pipeline.verdicts.listing_claims import listing_claim_checks
from kernelindex_pipeline.runs.manifests import write_manifests
from kernelindex_pipeline.runs.published import PUBLISHED_IDENTIFIERS_SQL, SEED_RECORD, SEED_RECORDS, seed_rows
from kernelindex_pipeline.runs.ranking import RANKS_SQL, add_listing_ranks
from kernelindex_pipeline.verdicts.history import record_verdicts
from kernelindex_pipeline.warehouse.store import Warehouse
from kernelindex_pipeline.warehouse.sql import ROW_DIGEST, registered, replace_if_changed, replace_where


@dataclass
class StepResult:
    rows: int
    changed: bool
    details: dict = field(default_factory=dict)


def mark_scope(con: duckdb.DuckDBPyConnection, new_keys: Sequence[str], evidence_changed: bool,
               everything: bool, evidence_kernels: Sequence[str] | None = None) -> int:
    """Name what this publication can change, as temporary tables the derived queries read:

    - `scope_revisions`: the revisions (and reference files) published now;
    - `scope_runs`: the runs they list, the runs the previous newest listing of each stream they touch
      listed (their withdrawal may change), and the controlled runs when the evidence changed;
    - `scope_groups`: the comparison groups of those runs (`update_runs` adds the groups of new runs), and,
      when the evidence changed, every group.

    Evidence that only added files (`evidence_kernels` given) puts in scope the controlled runs they hold
    (`c_loaded`) and the groups of the kernels it can settle a claim of, not all of history. With
    `everything` (an empty home, or one whose derived tables were built another way) the scope is all
    of history. Returns the number of runs in scope."""
    if everything:
        con.execute("CREATE OR REPLACE TEMP TABLE scope_revisions AS "
                    "SELECT revision_key FROM snapshots UNION SELECT revision_key FROM snapshot_quarantine")
    else:
        con.execute("CREATE OR REPLACE TEMP TABLE scope_revisions AS SELECT unnest(?::VARCHAR[]) AS revision_key",
                    [list(new_keys)])
    added = evidence_kernels is not None and evidence_changed and not everything
    reload = (evidence_changed or everything) and not added
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE scope_runs AS
        WITH touched AS (
            SELECT DISTINCT stream FROM snapshots WHERE revision_key IN (SELECT revision_key FROM scope_revisions)
        ), previous_newest AS (
            SELECT arg_max(revision_key, committed_at) AS revision_key FROM snapshots
            WHERE stream IN (SELECT stream FROM touched)
              AND revision_key NOT IN (SELECT revision_key FROM scope_revisions)
              AND coalesce(state, '{LISTED}') IN ('{LISTED}', '{DELETED}')
            GROUP BY stream
        )
        SELECT run_id FROM observations
        WHERE revision_key IN (SELECT revision_key FROM scope_revisions)
           OR revision_key IN (SELECT revision_key FROM previous_newest)
        UNION SELECT run_id FROM controlled_runs WHERE $reload
        UNION SELECT run_id FROM runs WHERE $reload AND evidence_level = '{catalog.CONTROLLED}'
        {"UNION SELECT run_id FROM c_loaded" if added else ""}
        UNION SELECT run_id FROM runs WHERE $everything""", {"reload": reload, "everything": everything})
    # Changed evidence can settle any source claim of its kernels (verdicts/claims.py), and widens the
    # intervals of the kernels whose spread between sessions it moves: it puts their groups in scope.
    con.execute("CREATE OR REPLACE TEMP TABLE scope_groups AS SELECT DISTINCT comparison_key FROM runs "
                "WHERE run_id IN (SELECT run_id FROM scope_runs) OR $reload OR list_contains($kernels, kernel)",
                {"reload": reload, "kernels": list(evidence_kernels or [])})
    [(count,)] = con.execute("SELECT count(*) FROM scope_runs").fetchall()
    return count


# Revision-level records in `quarantine`: revisions registered but no longer listed upstream, and revisions
# the source refused (their reason in `problem`).
REVISION_QUARANTINE_SQL = f"""
SELECT coalesce(source_file, stream) AS source, commit AS source_revision, 0 AS line_number,
    CASE state WHEN '{UNLISTED}' THEN 'upstream no longer lists this revision: nothing was fetched, no run withdrawn'
        ELSE problem END AS reason, '' AS raw_line, revision_key
FROM snapshots WHERE state IN ('{UNLISTED}', '{REFUSED}')
"""


IN_SCOPE = "run_id IN (SELECT run_id FROM scope_runs)"
SCOPE_SLICE_RUNS = 200_000
# Source runs of the groups in scope whose listing-time claims are checked together: their rows (Arrow, then
# Python while each claim takes its own verdict) are what a long history's backfill holds at its peak.
LISTING_SLICE_RUNS = 200_000
IN_SCOPE_GROUPS = "comparison_key IN (SELECT comparison_key FROM scope_groups)"
# The quarantine rows a publication recomputes: its revisions' lines and conflicts, the evidence files'
# refusals and the attestation files' (appended again by `load_attestation_files`).
QUARANTINE_IN_SCOPE = ("revision_key IN (SELECT revision_key FROM scope_revisions) OR revision_key IS NULL "
                       "OR revision_key LIKE 'evidence/%' OR revision_key LIKE 'attestations/%'")


def _in_slices(con: duckdb.DuckDBPyConnection, scope: str, key: str, work: int, per_slice: int) -> Iterator[int]:
    """Narrow the scope table `scope` to one slice (by the hash of its column `key`) per iteration, as many
    slices as `work` (rows the scope stands for) needs for at most `per_slice` of it each, then restore it: a
    backfill of a long history is built a slice at a time, so memory follows the slice. Yields the number of
    slices."""
    slices = -(-work // per_slice)
    if slices <= 1:
        yield 1
        return
    whole = f"_{scope}_whole"
    con.execute(f"CREATE OR REPLACE TEMP TABLE {whole} AS SELECT * FROM {scope}")
    for part in range(slices):
        con.execute(f"DELETE FROM {scope}")
        con.execute(f"INSERT INTO {scope} SELECT * FROM {whole} WHERE hash({key}) % $slices = $part",
                    {"slices": slices, "part": part})
        yield slices
    con.execute(f"DELETE FROM {scope}")
    con.execute(f"INSERT INTO {scope} SELECT * FROM {whole}")
    con.execute(f"DROP TABLE {whole}")


def update_runs(con: duckdb.DuckDBPyConnection, wh: Warehouse) -> StepResult:
    """The `runs` rows in scope from their observations and controlled runs; the `quarantine` rows of the
    revisions in scope and of the evidence files."""
    changed = False
    [(in_scope,)] = con.execute("SELECT count(*) FROM scope_runs").fetchall()
    for _ in _in_slices(con, "scope_runs", "run_id", in_scope, SCOPE_SLICE_RUNS):
        changed |= replace_where(con, "runs", IN_SCOPE, f"SELECT * FROM ({RUNS_SQL}) ORDER BY run_id", key="run_id")
    con.execute(f"INSERT INTO scope_groups SELECT DISTINCT comparison_key FROM runs WHERE {IN_SCOPE} "
                "EXCEPT SELECT comparison_key FROM scope_groups")
    conflicts = con.sql(CONFLICTS_SQL).to_arrow_table()
    with registered(con, conflicts=_conflicts_with_lines(wh, con, conflicts)):
        changed |= replace_where(
            con, "quarantine", QUARANTINE_IN_SCOPE,
            "SELECT source, source_revision, line_number, reason, raw_line, revision_key FROM snapshot_quarantine "
            "WHERE revision_key IN (SELECT revision_key FROM scope_revisions) "
            "UNION ALL SELECT source, source_revision, line_number, reason, raw_line, revision_key FROM conflicts "
            "UNION ALL SELECT source, source_revision, line_number, reason, raw_line, revision_key FROM evidence_quarantine "
            f"UNION ALL SELECT * FROM ({REVISION_QUARANTINE_SQL}) WHERE revision_key IN (SELECT revision_key FROM scope_revisions)",
        )
    [(count,)] = con.execute("SELECT count(*) FROM runs").fetchall()
    [(quarantined,)] = con.execute("SELECT count(*) FROM quarantine").fetchall()
    return StepResult(count, changed, {"quarantined": quarantined})


def _conflicts_with_lines(wh: Warehouse, con, conflicts: pa.Table) -> pa.Table:
    """Attach the raw line of each conflicting listing from the stored snapshot bytes."""
    rows = conflicts.to_pylist()
    shas = dict(con.execute("SELECT revision_key, sha256 FROM snapshots").fetchall()) if rows else {}
    by_revision: dict[str, list[dict]] = {}
    for row in rows:
        by_revision.setdefault(row["revision_key"], []).append(row)
    for key, listed in by_revision.items():
        lines = csvfile.Lines.of(wh.load_raw(shas[key]))
        for row, text in zip(listed, csvfile.raw_lines(lines, [r["line_number"] for r in listed])):
            row["raw_line"] = text
    return pa.Table.from_pylist(rows, schema=pa.schema([
        ("source", pa.string()), ("source_revision", pa.string()), ("line_number", pa.int64()), ("reason", pa.string()),
        ("revision_key", pa.string()), ("raw_line", pa.string())]))


class _RunLookup:
    """`attestations.RunLookup` in the warehouse, one attestation at a time (attestations name a few runs;
    history holds many)."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    def get(self, target: str) -> tuple[str, str] | None:
        found = self.con.execute("SELECT r.run_id, r.metric FROM runs r JOIN run_manifests m USING (run_id) "
                                 "WHERE ? IN (r.run_id, m.run_digest, m.run_digest_v1alpha1) LIMIT 1", [target]).fetchall()
        return found[0] if found else None


def load_attestation_files(con: duckdb.DuckDBPyConnection, directory: Path | None) -> int:
    """`attestations` from the attestation files; each refused file becomes a `quarantine` row."""
    accepted, refused = load_attestations(directory, _RunLookup(con))
    with registered(con, a_new=accepted):
        replace_if_changed(con, "attestations", "SELECT * FROM a_new ORDER BY attestation_id")
    with registered(con, a_refused=refused):
        con.execute("""
            INSERT INTO quarantine BY NAME
            SELECT 'attestations' AS source, sha256 AS source_revision, 0 AS line_number, reason, raw AS raw_line,
                'attestations/' || file AS revision_key
            FROM a_refused""").fetchall()
    return accepted.num_rows


def update_manifests(con: duckdb.DuckDBPyConnection) -> StepResult:
    """The manifests of the runs in scope (a run's manifest never depends on its withdrawal, so the others
    stand as they are)."""
    con.execute("CREATE OR REPLACE TEMP TABLE _manifests AS SELECT * FROM run_manifests WHERE false")
    write_manifests(con, "_manifests")
    # The run digest covers the whole manifest (the protocol and environment through their digests).
    changed = replace_where(con, "run_manifests", IN_SCOPE, "SELECT * FROM _manifests", key="run_id",
                            compare="run_id, run_digest", materialize=False)
    con.execute("DROP TABLE _manifests")
    [(count,)] = con.execute("SELECT count(*) FROM run_manifests").fetchall()
    return StepResult(count, changed, {"first_published": record_first_publications(con)})


def record_first_publications(con: duckdb.DuckDBPyConnection) -> int:
    """Stamp each run published for the first time (only a run in scope can be) with this publication's
    time, or the day its record page was published where it was published before (SEED_RECORDS); a run's
    stamp, once written, never changes (a record page's "Published" date), even if the run is withdrawn and
    listed again, except to move back to the day a record page first published it."""
    con.execute("CREATE OR REPLACE TEMP TABLE first_published AS SELECT * FROM (VALUES "
                + ", ".join("(?, timezone('UTC', ?::TIMESTAMP))" for _ in SEED_RECORDS) + ") f(run_id, published_at)",
                [value for r in SEED_RECORDS for value in (r.current_run_id, r.published_on)])
    [(added,)] = con.execute(f"""
        INSERT INTO publications
        SELECT r.run_id, coalesce(f.published_at, date_trunc('second', get_current_timestamp())), r.source
        FROM runs r LEFT JOIN first_published f USING (run_id)
        WHERE r.{IN_SCOPE}
          AND r.run_id IN (SELECT run_id FROM run_manifests WHERE {IN_SCOPE})
          AND r.run_id NOT IN (SELECT run_id FROM publications WHERE {IN_SCOPE})
    """).fetchall()
    # Stamps written before they named their run's source (the Parquet parts are per stamp and source).
    con.execute("UPDATE publications SET source = r.source FROM runs r "
                "WHERE publications.source IS NULL AND publications.run_id = r.run_id").fetchall()
    # A run stamped later than its record page was first published moves to its part of that day.
    con.execute("""
        INSERT INTO publication_changes
        SELECT 'publications', run_id FROM publications JOIN first_published f USING (run_id)
        WHERE publications.published_at > f.published_at""").fetchall()
    con.execute("UPDATE publications SET published_at = f.published_at FROM first_published f "
                "WHERE publications.run_id = f.run_id AND publications.published_at > f.published_at").fetchall()
    con.execute("DROP TABLE first_published")
    return added


def update_published_identifiers(con: duckdb.DuckDBPyConnection) -> bool:
    """`published_identifiers`: every identifier published that is no record's now, with the record it
    leads to (runs/published.py). A run's earlier digest changes only with its manifest: those of the runs
    in scope are written again, with the seed records' and the identifiers that name no run."""
    where = f"run_id IS NULL OR origin = '{SEED_RECORD}' OR {IN_SCOPE}"
    with registered(con, seed_identifiers=pa.Table.from_pylist(seed_rows())):
        changed = replace_where(con, "published_identifiers", where,
                                f"SELECT * FROM ({PUBLISHED_IDENTIFIERS_SQL}) WHERE {where} ORDER BY kind, identifier")
    return changed


def update_ranks(con: duckdb.DuckDBPyConnection) -> StepResult:
    """Ranks and reproductions of the comparison groups in scope; listing ranks of the runs in scope. The runs
    ranked before stay in `_ranked_before` for the listing-time claims."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE _ranked_before AS SELECT run_id FROM ranks WHERE {IN_SCOPE_GROUPS}")
    changed = replace_where(con, "ranks", IN_SCOPE_GROUPS, f"SELECT * FROM ({RANKS_SQL}) ORDER BY run_id",
                            key="comparison_key")
    group_runs = f"SELECT run_id FROM runs WHERE {IN_SCOPE_GROUPS}"
    changed |= replace_where(con, "reproductions",
                             f"controlled_run_id IN ({group_runs}) OR source_run_id IN ({group_runs})",
                             f"SELECT * FROM ({evidence.REPRODUCTIONS_SQL}) ORDER BY ALL", key="source_run_id")
    listed = add_listing_ranks(con)
    changed |= listed > 0
    [(count,)] = con.execute("SELECT count(*) FROM ranks").fetchall()
    [(groups,)] = con.execute("SELECT count(DISTINCT comparison_key) FROM ranks").fetchall()
    return StepResult(count, changed, {"groups": groups, "listing_ranks": listed})


# A group's claims read its ranks, and the claims its replaced runs made when listed its listing ranks: with the
# evidence as it was, a group in scope whose ranks (listings) this publication left unchanged keeps them.
RANKS_CHANGED = "SELECT key FROM publication_changes WHERE table_name = 'ranks'"
LISTINGS_CHANGED = (f"{RANKS_CHANGED} UNION SELECT comparison_key FROM runs "
                    "WHERE run_id IN (SELECT key FROM publication_changes WHERE table_name = 'listing_ranks')")


# The source runs whose place in `ranks` this publication moved (`_ranked_before`: the runs ranked in the groups
# in scope before it), and those it stamped a listing rank of.
LISTINGS_MOVED = """
SELECT * FROM ((SELECT run_id FROM _ranked_before EXCEPT SELECT run_id FROM ranks)
    UNION (SELECT run_id FROM ranks WHERE comparison_key IN (SELECT comparison_key FROM scope_groups)
           EXCEPT SELECT run_id FROM _ranked_before)
    UNION SELECT key FROM publication_changes WHERE table_name = 'listing_ranks')
"""


@contextlib.contextmanager
def narrowed_scope(con: duckdb.DuckDBPyConnection, groups: str | None):
    """`scope_groups` narrowed to the groups the query `groups` names (None: as it is), restored afterwards."""
    if groups is None:
        yield
        return
    con.execute("CREATE OR REPLACE TEMP TABLE _whole_scope AS SELECT * FROM scope_groups")
    con.execute(f"DELETE FROM scope_groups WHERE comparison_key NOT IN ({groups})")
    try:
        yield
    finally:
        con.execute("DELETE FROM scope_groups")
        con.execute("INSERT INTO scope_groups SELECT * FROM _whole_scope")
        con.execute("DROP TABLE _whole_scope")


def update_claims(con: duckdb.DuckDBPyConnection, evidence_changed: bool = True, spread: dict | None = None) -> StepResult:
    """Claim checks of the comparison groups in scope whose ranks changed, or all of them where the evidence
    changed (each bootstrap interval computed only for inputs not bootstrapped before), their checks at the source's Liger release,
    the verdict history, and the listing-time claims of the replaced runs of the groups whose listings changed.
    `spread`: `claims.session_spread(con)` where the caller has read it."""
    if spread is None:
        spread = claims.session_spread(con)  # once for the three claim tables
    with narrowed_scope(con, None if evidence_changed else RANKS_CHANGED):
        checked = claims.claim_checks(con, spread=spread)
        with registered(con, cc_new=checked):
            changed = replace_where(con, "claim_checks", IN_SCOPE_GROUPS, "SELECT * FROM cc_new ORDER BY ALL",
                                    key="comparison_key")
        claims.reflag_source_artifacts(con)
        with registered(con, vc_new=claims.version_checks(con, checked, spread)):
            changed |= replace_where(con, "version_checks", IN_SCOPE_GROUPS, "SELECT * FROM vc_new ORDER BY ALL",
                                     key="comparison_key")
        history = record_verdicts(con)
    # With the evidence as it was, a listing-time claim changes only where it names a run that this publication
    # replaced in `ranks`, put back there, or stamped a listing rank of.
    moved = None
    if not evidence_changed:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _listings_moved AS {LISTINGS_MOVED}")
        moved = "SELECT run_id FROM _listings_moved"
    with narrowed_scope(con, None if evidence_changed else LISTINGS_CHANGED):
        [(listed,)] = con.execute(f"SELECT count(*) FROM runs WHERE {IN_SCOPE_GROUPS} "
                                  f"AND evidence_level = '{catalog.SOURCE_NATIVE}'").fetchall()
        for slices in _in_slices(con, "scope_groups", "comparison_key", listed, LISTING_SLICE_RUNS):
            with registered(con, lc_new=listing_claim_checks(con, spread, moved)):
                changed |= replace_where(con, "listing_claim_checks",
                                         IN_SCOPE_GROUPS + (f" AND (a_run_id IN ({moved}) OR b_run_id IN ({moved}))"
                                                            if moved else ""),
                                         "SELECT * FROM lc_new ORDER BY ALL", key="comparison_key",
                                         compare=f"comparison_key, {ROW_DIGEST}")
    [(count,)] = con.execute("SELECT count(*) FROM claim_checks").fetchall()
    return StepResult(count, changed or history["verdicts_changed"] > 0,
                      {"rechecked": checked.num_rows, "listing_slices": slices, **history})
