"""A developer tool: digests of what a build publishes, to show that a change left it byte for byte alone.

    python -m tools.published_digests --home KERNELINDEX_HOME [--export DIR ...] --out digests.json
    python -m tools.published_digests --compare before.json after.json

For a warehouse: one sha256 per table and view of its rows in a fixed order (every column, ``ORDER BY ALL``,
written as CSV by DuckDB), leaving out only the columns that record when a build ran (``BUILD_TIME_COLUMNS``).
For each export directory: one sha256 per file, and one over the sorted (path, sha256) list. ``--compare``
names every table, view and file whose digest differs, and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

# Columns that hold the wall-clock time or the machine of the build itself, not anything published from the
# sources: every table's, and those of one table.
BUILD_TIME_COLUMNS = {"published_at", "ingested_at", "fetched_at", "landed_at", "started_at", "finished_at",
                      "generation", "recorded_at", "checked_at"}
BUILD_TIME_COLUMNS_OF = {"verdict_history": {"since", "until"},
                         "snapshots": {"location"}}  # where the source was read from on the building machine


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def warehouse_digests(home: Path) -> dict[str, str]:
    """{table or view: sha256 of its ordered rows}, build-time columns left out."""
    import duckdb

    con = duckdb.connect(str(home / "kernelindex.duckdb"), read_only=True)
    names = [r[0] for r in con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' ORDER BY 1").fetchall()]
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            skipped = BUILD_TIME_COLUMNS | BUILD_TIME_COLUMNS_OF.get(name, set())
            columns = [r[0] for r in con.execute(f'DESCRIBE "{name}"').fetchall() if r[0] not in skipped]
            path = Path(tmp) / f"{name}.csv"
            select = ", ".join(f'"{c}"' for c in columns)
            con.execute(f"COPY (SELECT {select} FROM \"{name}\" ORDER BY ALL) TO '{path}' (HEADER, FORMAT csv)")
            out[name] = _sha256(path)
    con.close()
    return out


def tree_digests(root: Path, build_days: tuple[str, ...] = ()) -> dict[str, str]:
    """{file: sha256}, each of `build_days` (the days the build ran, as pages print them: a new run's
    "Published" day) replaced by one placeholder first."""
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        for day in build_days:
            data = data.replace(day.encode(), b"BUILD-DAY")
        out[str(path.relative_to(root))] = hashlib.sha256(data).hexdigest()
    return out


def summarise(home: Path | None, exports: list[Path], build_days: tuple[str, ...] = ()) -> dict:
    out: dict = {}
    if home is not None:
        out["warehouse"] = warehouse_digests(home)
    for root in exports:
        files = tree_digests(root, build_days)
        listing = "".join(f"{k}\t{v}\n" for k, v in files.items()).encode()
        out[f"export:{root.name}"] = {"files": len(files), "sha256": hashlib.sha256(listing).hexdigest(),
                                      "per_file": files}
    return out


def differences(before: dict, after: dict) -> list[str]:
    diffs = []
    for part in sorted(set(before) | set(after)):
        a, b = before.get(part), after.get(part)
        if a is None or b is None:
            diffs.append(f"{part}: only in {'after' if a is None else 'before'}")
            continue
        a, b = (a.get("per_file", a), b.get("per_file", b))
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                diffs.append(f"{part}: {key}")
    return diffs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, help="a KERNELINDEX_HOME")
    ap.add_argument("--export", type=Path, nargs="*", default=[], help="export directories")
    ap.add_argument("--out", type=Path, help="digests file to write (JSON)")
    ap.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        diffs = differences(before, after)
        print("\n".join(diffs[:200]) or "identical")
        if len(diffs) > 200:
            print(f"... {len(diffs) - 200} more")
        return 1 if diffs else 0
    summary = summarise(args.home, args.export)
    args.out.write_text(json.dumps(summary, indent=1, sort_keys=True))
    for part, value in summary.items():
        print(part, value["files"] if isinstance(value, dict) and "files" in value else len(value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
