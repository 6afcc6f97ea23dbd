"""Ingestion benchmarks: `python -m kernelindex_pipeline.bench [--history N] [--nightlies K] [--rows R] [--export]
[--real-nightly K]
[--json FILE]`.

Over both shipped sources (Liger's main-branch files and its gh-pages runs), with `--history N` their whole
history repeated N times (each copy earlier in time, under new commits and run ids):
(a) full backfill, `kernelindex ingest` into an empty home in a fresh process, Dagster included;
(b) a no-op `kernelindex ingest` (nothing new upstream);
(c) K nightlies, each finding one new revision (the newest main-branch file again as new runs, committed
    a day after the last);
(d) the DuckDB file after the nightlies against a fresh build of the same revisions;
(e) normalization throughput on a synthetic CSV of R rows built from real rows;
(f) with `--export`, `kernelindex export --format html` of the fresh build, and again over its own output;
(g) after the nightlies, an ingest that finds one new rerun session: the last evidence file again, under a
    later name (its records replace the same runs');
(h) with `--real-nightly K`, a nightly that finds the K newest real gh-pages revisions on top of the rest of
    both sources (a home built without them first);
and the peak RSS of each command (its processes together).

Long because each of these measures is a function of its own, beside the synthetic history they share.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import io
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from kernelindex_pipeline.defs.resources import SHIPPED_SOURCES, SHIPPED_UPSTREAM
from kernelindex_pipeline.ingest.normalize import Snapshot, normalize
from kernelindex_pipeline.ingest.sources import DirectorySource, Revision
from kernelindex_pipeline.warehouse.store import Warehouse

_TIMESTAMP = re.compile(rb",(\d{4})(-\d\d-\d\d \d\d:\d\d:\d\d),")
_RUN_DIRECTORY = re.compile(r"^benchmarks/([0-9a-f]{7,40})")


def shift_years(data: bytes, years: int) -> bytes:
    """A CSV's rows with their timestamps `years` later: the same measurements as new runs."""
    return _TIMESTAMP.sub(lambda m: b",%d%s," % (int(m.group(1)) + years, m.group(2)), data)


def synthetic_csv(rows: int) -> bytes:
    """Real rows of the newest shipped snapshot, repeated with shifted years so every run id is distinct."""
    source = DirectorySource(str(SHIPPED_UPSTREAM))
    newest = [r for r in source.list_revisions() if r.stream == "all_benchmark_data"][-1]
    header, body = source.read(newest).split(b"\n", 1)
    out, shift = [header], 0
    while len(out) - 1 < rows:
        out += shift_years(body, shift).rstrip(b"\n").split(b"\n")
        shift += 1
    return b"\n".join(out[: rows + 1]) + b"\n"


def _new_commit(salt: str, commit: str) -> str:
    return hashlib.sha1(f"{salt}:{commit}".encode()).hexdigest()


def _shifted(iso: str, years: int = 0, days: int = 0) -> str:
    moved = datetime.fromisoformat(iso)
    return (moved.replace(year=moved.year + years) + timedelta(days=days)).isoformat()


def _read_index(directory: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO((directory / "INDEX.tsv").read_text()), delimiter="\t"))


def _write_index(directory: Path, rows: list[dict]) -> None:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["commit", "committed_at", "path", "file"], delimiter="\t",
                            lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (directory / "INDEX.tsv").write_text(out.getvalue())


def synthetic_history(out: Path, copies: int) -> list[Path]:
    """Both shipped source directories under `out`, with `copies - 1` later copies of their whole history:
    copy k moves every revision and every row's timestamp k years back, under new commit ids (and, for
    gh-pages, new run directories), so that no revision lies past the ingest's clock. Returns the
    directories."""
    made = []
    for shipped in SHIPPED_SOURCES:
        directory = out / shipped.name
        directory.mkdir(parents=True)
        rows = _read_index(shipped)
        history = []
        for k in range(copies):
            for row in rows:
                path = _RUN_DIRECTORY.sub(lambda m: f"benchmarks/{_new_commit(str(k), m.group(1))[:7]}", row["path"]) \
                    if k else row["path"]
                name = f"copy{k}__{row['file']}" if row["file"] else ""
                if name:
                    data = gzip.decompress((shipped / row["file"]).read_bytes())
                    (directory / name).write_bytes(gzip.compress(shift_years(data, -k), compresslevel=1, mtime=0))
                history.append({"commit": _new_commit(str(k), row["commit"]) if k else row["commit"],
                                "committed_at": _shifted(row["committed_at"], -k), "path": path, "file": name})
        _write_index(directory, history)
        for extra in shipped.glob("*.json"):
            (directory / extra.name).write_bytes(extra.read_bytes())
        made.append(directory)
    return made


def add_nightly_revision(main: Path, n: int, copies: int) -> None:
    """One more revision of the main-branch file, committed a day after the newest: its newest snapshot as
    new runs (every row `copies + n - 1` years back, a year no copy of history uses)."""
    rows = _read_index(main)
    newest = max((r for r in rows if r["file"] and r["path"].endswith("/all_benchmark_data.csv")),
                 key=lambda r: r["committed_at"])
    years = -(copies + n - 1)
    name = f"nightly{n}.csv.gz"
    data = gzip.decompress((main / newest["file"]).read_bytes())
    (main / name).write_bytes(gzip.compress(shift_years(data, years), compresslevel=1, mtime=0))
    latest = max(r["committed_at"] for r in rows)
    rows.append({"commit": _new_commit(f"nightly{n}", newest["commit"]),
                 "committed_at": _shifted(latest, days=1), "path": newest["path"], "file": name})
    _write_index(main, rows)


def _tree_rss_kib(pid: int) -> int:
    """The summed RSS of a process and its descendants now (Linux /proc)."""
    total, pending = 0, [pid]
    while pending:
        pid = pending.pop()
        try:
            total += int(re.search(r"VmRSS:\s+(\d+)", Path(f"/proc/{pid}/status").read_text()).group(1))
            for task in os.listdir(f"/proc/{pid}/task"):
                pending += map(int, Path(f"/proc/{pid}/task/{task}/children").read_text().split())
        except (FileNotFoundError, ProcessLookupError, AttributeError):
            pass  # it ended meanwhile
    return total


def _cli(home: Path, sources: list[Path], *args: str, evidence: Path | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one `kernelindex` command in a fresh process (`evidence`: its evidence
    folder, else the shipped one). The peak is the larger of the process's own and its process tree's summed
    RSS, sampled every 20 ms (an export renders in worker processes)."""
    env = {**os.environ, "KERNELINDEX_HOME": str(home), "KERNELINDEX_SOURCES": ",".join(map(str, sources))}
    if evidence is not None:
        env["KERNELINDEX_EVIDENCE"] = str(evidence)
    env.pop("DAGSTER_HOME", None)
    code = ("import resource, sys; from kernelindex_pipeline.cli import exit_now, main; rc = main(sys.argv[1:]); "
            "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); exit_now(rc)")
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.DEVNULL,
                                   stderr=err, text=True)
        tree_kib = 0
        while process.poll() is None:
            tree_kib = max(tree_kib, _tree_rss_kib(process.pid))
            time.sleep(0.02)
        seconds = time.perf_counter() - started
        err.seek(0)
        stderr = err.read()
    if process.returncode != 0:
        raise SystemExit(f"kernelindex {' '.join(args)} failed: {stderr.strip()}")
    own_kib = int(re.search(r"RSS (\d+)", stderr).group(1))
    return seconds, max(own_kib, tree_kib) / 1024


# The floor a backfill is compared with: the same bytes landed with plain DuckDB and nothing else, in a process
# of its own that imports DuckDB alone (each source's files in one table, every column text; each evidence
# record as one JSON value). Prints the rows landed.
LAND_RAW = """
import json, sys
import duckdb
job = json.load(sys.stdin)
con = duckdb.connect(job["db"])
con.execute("SET enable_progress_bar = false")
for n, files in enumerate(job["sources"]):
    con.execute(f"CREATE TABLE source_{n} AS SELECT * FROM read_csv(?, union_by_name = true, all_varchar = true, "
                "filename = true)", [files])
con.execute("CREATE TABLE evidence AS SELECT * FROM read_ndjson_objects(?, filename = true)", [job["evidence"]])
tables = [f"source_{n}" for n in range(len(job["sources"]))] + ["evidence"]
print(con.execute("SELECT " + " + ".join(f"(SELECT count(*) FROM {t})" for t in tables)).fetchall()[0][0])
con.close()
"""


def _raw_floor(sources: list[Path]) -> tuple[float, int]:
    """(wall seconds, rows) of LAND_RAW over the sources' files and the shipped evidence, in a fresh process
    timed as the backfill is."""
    from kernelindex_pipeline.defs.resources import SHIPPED_EVIDENCE

    with tempfile.TemporaryDirectory() as tmp:
        job = {"db": str(Path(tmp) / "raw.duckdb"), "evidence": sorted(map(str, SHIPPED_EVIDENCE.glob("*.jsonl.gz"))),
               "sources": [[str(d / row["file"]) for row in _read_index(d) if row["file"]] for d in sources]}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", LAND_RAW], input=json.dumps(job), capture_output=True, text=True,
                              check=True)
        return time.perf_counter() - started, int(done.stdout)


def _db_bytes(home: Path) -> int:
    return Warehouse(home).db_path.resolve().stat().st_size


def _runs(home: Path) -> int:
    with Warehouse(home).reader() as con:
        return con.execute("SELECT count(*) FROM runs").fetchall()[0][0]


def measure_history(copies: int, nightlies: int, export: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        sources = synthetic_history(Path(tmp) / "sources", copies)
        home = Path(tmp) / "home"
        results = {"history": copies}
        results["backfill_s"], results["backfill_rss_mb"] = _cli(home, sources, "ingest")
        results["raw_floor_s"], results["raw_rows"] = _raw_floor(sources)
        results["runs"] = _runs(home)
        results["noop_s"], results["noop_rss_mb"] = _cli(home, sources, "ingest")
        times, rss = [], []
        for n in range(1, nightlies + 1):
            add_nightly_revision(sources[0], n, copies)
            seconds, mb = _cli(home, sources, "ingest")
            times.append(seconds)
            rss.append(mb)
        results.update(nightly_s=times, nightly_median_s=statistics.median(times), nightly_rss_mb=max(rss),
                       db_after_nightlies_mb=_db_bytes(home) / 2**20)
        results["evidence_s"], results["evidence_rss_mb"] = _new_session(home, sources, Path(tmp) / "evidence")
        fresh = Path(tmp) / "fresh"
        _cli(fresh, sources, "ingest")
        results["db_fresh_mb"] = _db_bytes(fresh) / 2**20
        if export:
            site = Path(tmp) / "site"
            results["export_s"], results["export_rss_mb"] = _cli(fresh, sources, "export", "--format", "html", str(site))
            results["export_files"] = sum(len(files) for _, _, files in os.walk(site))
            results["export_mb"] = sum(f.stat().st_size for f in site.rglob("*") if f.is_file()) / 2**20
            results["reexport_s"], results["reexport_rss_mb"] = _cli(fresh, sources, "export", "--format", "html",
                                                                     str(site))
    return results


def hold_back_newest(directory: Path, count: int) -> list[dict]:
    """Take a source directory's `count` newest revisions out of its index; returns its whole index as it was."""
    rows = _read_index(directory)
    newest = sorted(rows, key=lambda r: r["committed_at"])[-count:]
    _write_index(directory, [r for r in rows if r not in newest])
    return rows


def measure_real_nightly(count: int) -> dict:
    """(h): the nightly that finds the `count` newest gh-pages revisions, timed as (c) is."""
    with tempfile.TemporaryDirectory() as tmp:
        sources = synthetic_history(Path(tmp) / "sources", 1)
        whole = hold_back_newest(sources[1], count)
        home = Path(tmp) / "home"
        _cli(home, sources, "ingest")
        _write_index(sources[1], whole)
        seconds, mb = _cli(home, sources, "ingest")
    return {"real_nightly_revisions": count, "real_nightly_s": seconds, "real_nightly_rss_mb": mb}


def _new_session(home: Path, sources: list[Path], folder: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of the ingest that finds one new evidence file beside the shipped ones."""
    from kernelindex_pipeline.defs.resources import SHIPPED_EVIDENCE

    folder.mkdir()
    shipped = sorted(SHIPPED_EVIDENCE.glob("*.jsonl.gz"))
    for path in shipped:
        (folder / path.name).symlink_to(path)
    (folder / "zz-bench-session.jsonl.gz").write_bytes(shipped[-1].read_bytes())
    return _cli(home, sources, "ingest", evidence=folder)


def normalize_file(path: Path, repeats: int = 3) -> dict:
    """Normalize one CSV file in this process (median of `repeats` timings, after a warm-up), and peak RSS."""
    data = path.read_bytes()
    revision = Revision("2026-01-01T00:00:00+00:00", "synthetic", "0" * 40, "benchmark/data/synthetic.csv", "bench")
    normalize([Snapshot(revision, data[: data.index(b"\n", 100_000) + 1])])  # warm imports and DuckDB
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = normalize([Snapshot(revision, data)])
        times.append(time.perf_counter() - started)
        rows = result.rows_in
        assert result.observations.num_rows + result.quarantine.num_rows == rows
        del result  # one repetition's output in memory at a time
    seconds = statistics.median(times)
    return {"rows": rows, "normalize_s": seconds, "normalize_runs_s": times, "rows_per_s": rows / seconds,
            "normalize_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def measure_normalization(rows: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        csv_path = Path(tmp) / "synthetic.csv"
        csv_path.write_bytes(synthetic_csv(rows))
        done = subprocess.run([sys.executable, "-m", "kernelindex_pipeline.bench", "--normalize-only", str(csv_path)],
                              capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def report(results: dict) -> str:
    lines = [f"history x{results['history']}: {results['runs']:,} runs"]
    lines.append(f"(a) full backfill, Dagster included : {results['backfill_s']:7.2f} s   peak RSS {results['backfill_rss_mb']:.0f} MiB")
    lines.append(f"    raw landing floor (plain DuckDB): {results['raw_floor_s']:7.2f} s   {results['raw_rows']:,} rows; "
                 f"backfill / floor {results['backfill_s'] / results['raw_floor_s']:.1f}x")
    lines.append(f"(b) no-op ingest                    : {results['noop_s']:7.2f} s   peak RSS {results['noop_rss_mb']:.0f} MiB")
    runs = ", ".join(f"{s:.2f}" for s in results["nightly_s"])
    lines.append(f"(c) nightly, one new revision       : {results['nightly_median_s']:7.2f} s median ({runs})   "
                 f"peak RSS {results['nightly_rss_mb']:.0f} MiB")
    ratio = results["db_after_nightlies_mb"] / results["db_fresh_mb"]
    lines.append(f"(d) DuckDB file after {len(results['nightly_s'])} nightlies   : {results['db_after_nightlies_mb']:.1f} MiB, "
                 f"a fresh build {results['db_fresh_mb']:.1f} MiB ({ratio:.2f}x)")
    if "evidence_s" in results:
        lines.append(f"(g) one new rerun session            : {results['evidence_s']:7.2f} s   peak RSS "
                     f"{results['evidence_rss_mb']:.0f} MiB")
    if "export_s" in results:
        lines.append(f"(f) export --format html             : {results['export_s']:7.2f} s   peak RSS "
                     f"{results['export_rss_mb']:.0f} MiB, {results['export_files']:,} files, "
                     f"{results['export_mb']:,.0f} MiB; again, nothing changed: {results['reexport_s']:.2f} s")
    if "real_nightly_s" in results:
        lines.append(f"(h) nightly, {results['real_nightly_revisions']} newest gh-pages revisions: "
                     f"{results['real_nightly_s']:7.2f} s   peak RSS {results['real_nightly_rss_mb']:.0f} MiB")
    if "rows_per_s" in results:
        lines.append(f"(e) normalization, {results['rows']:,} rows: {results['rows_per_s']:,.0f} rows/s "
                     f"(median of 3), peak RSS {results['normalize_rss_mb']:.0f} MiB")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelindex_pipeline.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--history", type=int, default=1, help="copies of the shipped history (default 1)")
    parser.add_argument("--nightlies", type=int, default=5)
    parser.add_argument("--rows", type=int, default=0, help="also time normalization of a synthetic CSV this long")
    parser.add_argument("--export", action="store_true", help="also time `kernelindex export --format html` of "
                        "the fresh build, into a new folder and again over it")
    parser.add_argument("--real-nightly", type=int, default=0, metavar="K",
                        help="also time a nightly that finds the K newest real gh-pages revisions")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--normalize-only", type=Path, metavar="CSV", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.normalize_only:
        print(json.dumps(normalize_file(args.normalize_only)))
        return 0
    results = measure_history(args.history, args.nightlies, args.export)
    if args.real_nightly:
        results.update(measure_real_nightly(args.real_nightly))
    if args.rows:
        results.update(measure_normalization(args.rows))
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
