"""The dashboard's own choices as data: a source's reference file (Liger gh-pages' ``golden_commits.json``,
the run its dashboard treats as the reference per kernel) lands in `golden_commits`.

The file as upstream writes it::

    {"description": "...", "default_commit": "c1bdc24",
     "golden_commits": {"cross_entropy": "0701bab", "dyt_beta=False": "0701bab", ...}}

A key is a kernel name, or a kernel name and one benchmark setting (``dyt_beta=False``: kernel ``dyt``,
setting ``beta=False``). A file that is not such an object is refused whole (one quarantine row, the
previous `golden_commits` rows kept); an entry whose value is not a commit id is refused alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from kernelindex_pipeline.ingest.normalize import KERNEL_SETTING, QUARANTINE_SCHEMA
from kernelindex_pipeline.warehouse.sql import registered

if TYPE_CHECKING:
    from kernelindex_pipeline.warehouse.store import Warehouse

COMMIT = re.compile(r"[0-9a-f]{7,40}")

GOLDEN_SCHEMA = pa.schema([
    ("source", pa.string()), ("golden_key", pa.string()), ("kernel", pa.string()), ("setting", pa.string()),
    ("benchmarked_commit", pa.string()), ("default_commit", pa.string()), ("file_sha256", pa.string())])


def parse_golden(data: bytes) -> tuple[dict, list[tuple[str, str]]]:
    """``{"entries": {key: commit}, "default": commit or None}`` and the refused entries as (entry text,
    reason); a ValueError when the file as a whole is not a golden-commits object."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("golden_commits"), dict):
        raise ValueError("not an object with a 'golden_commits' object")
    default = document.get("default_commit")
    if default is not None and not (isinstance(default, str) and COMMIT.fullmatch(default)):
        raise ValueError(f"default_commit is not a commit id: {json.dumps(default)[:80]}")
    entries, refused = {}, []
    for key, commit in document["golden_commits"].items():
        if isinstance(commit, str) and COMMIT.fullmatch(commit) and key.strip():
            entries[key] = commit
        else:
            refused.append((json.dumps({key: commit})[:300], f"golden commit of {key[:80]!r} is not a commit id"))
    return {"entries": entries, "default": default}, refused


def golden_rows(source: str, sha: str, parsed: dict) -> list[dict]:
    rows = []
    for key, commit in sorted(parsed["entries"].items()):
        keyed = KERNEL_SETTING.fullmatch(key)
        rows.append({"source": source, "golden_key": key, "kernel": keyed["kernel"] if keyed else key,
                     "setting": f"{keyed['name']}={keyed['value']}" if keyed else None, "benchmarked_commit": commit,
                     "default_commit": parsed["default"], "file_sha256": sha})
    return rows


def record_references(con: duckdb.DuckDBPyConnection, wh: Warehouse, landed: Sequence[dict]) -> list[str]:
    """Take each landed reference file whose bytes are new into `golden_commits` (replacing that source's
    rows) and its refused parts into `snapshot_quarantine`; returns the keys of the files taken in (their
    quarantine rows' `revision_key`)."""
    known = set(con.execute("SELECT source, path, sha256 FROM reference_files").fetchall())
    taken = []
    for record in landed:
        source, path, sha = record["source"], record["path"], record["sha256"]
        if (source, path, sha) in known:
            continue
        key = f"{source}:{path}@{sha[:12]}"
        taken.append(key)
        data = wh.load_raw(sha)
        try:
            parsed, refused = parse_golden(data)
        except ValueError as exc:
            refused, parsed = [(data[:300].decode("utf-8", errors="replace"), f"{path}: {exc}")], None
        if parsed is not None:
            con.execute("DELETE FROM golden_commits WHERE source = ?", [source]).fetchall()
            with registered(con, golden_new=pa.Table.from_pylist(golden_rows(source, sha, parsed), schema=GOLDEN_SCHEMA)):
                con.execute("INSERT INTO golden_commits BY NAME SELECT * FROM golden_new").fetchall()
        quarantined = [{"revision_key": key, "source": source, "source_revision": sha, "line_number": 0,
                        "reason": reason, "raw_line": text} for text, reason in refused]
        if quarantined:
            with registered(con, refused=pa.Table.from_pylist(quarantined, schema=QUARANTINE_SCHEMA)):
                con.execute("INSERT INTO snapshot_quarantine BY NAME SELECT * FROM refused").fetchall()
        con.execute("INSERT INTO reference_files VALUES (?, ?, ?, ?, ?)",
                    [source, path, sha, "accepted" if parsed is not None else "refused",
                     None if parsed is not None else refused[0][1]]).fetchall()
    return taken
