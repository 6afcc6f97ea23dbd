"""Ingestion benchmarks: `python -m kernelindex_pipeline.bench [--rows N] [--json FILE]`.

(a) full backfill of every shipped snapshot through `kernelindex ingest` (Dagster included), wall seconds;
(b) normalization throughput on a synthetic CSV of N rows (default 1,000,000) built from real rows;
(c) `kernelindex ingest` again with no new upstream revision, wall seconds;
(d) peak RSS of each.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelindex_pipeline.defs.resources import SHIPPED_UPSTREAM
from kernelindex_pipeline.normalize import Snapshot, normalize
from kernelindex_pipeline.sources import DirectorySource, Revision

TARGETS = {"backfill_s": 20.0, "rows_per_s": 500_000, "noop_ingest_s": 5.0, "peak_rss_mb": 1536}
_TIMESTAMP = re.compile(rb",(\d{4})(-\d\d-\d\d \d\d:\d\d:\d\d),")


def synthetic_csv(rows: int) -> bytes:
    """Real rows of the newest shipped snapshot, repeated with shifted years so every run id is distinct."""
    source = DirectorySource(str(SHIPPED_UPSTREAM))
    newest = [r for r in source.list_revisions() if r.stream == "all_benchmark_data"][-1]
    header, body = source.read(newest).split(b"\n", 1)
    lines = body.rstrip(b"\n").split(b"\n")
    out = [header]
    shift = 0
    while len(out) - 1 < rows:
        out += [_TIMESTAMP.sub(lambda m: b",%d%s," % (int(m.group(1)) + shift, m.group(2)), line) for line in lines]
        shift += 1
    return b"\n".join(out[: rows + 1]) + b"\n"


def _cli(home: Path, *args: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one `kernelindex` command in a fresh process."""
    env = {**os.environ, "KERNELINDEX_HOME": str(home)}
    env.pop("DAGSTER_HOME", None)
    code = ("import resource, sys; from kernelindex_pipeline.cli import main; rc = main(sys.argv[1:]); "
            "print('RSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(rc)")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"kernelindex {' '.join(args)} failed: {done.stderr.strip()}")
    rss_kib = int(re.search(r"RSS (\d+)", done.stderr).group(1))
    return seconds, rss_kib / 1024


def measure(rows: int) -> dict:
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        results["backfill_s"], results["backfill_rss_mb"] = _cli(home, "ingest")
        results["noop_ingest_s"], results["noop_rss_mb"] = _cli(home, "ingest")
        csv_path = Path(tmp) / "synthetic.csv"
        csv_path.write_bytes(synthetic_csv(rows))
        done = subprocess.run([sys.executable, "-m", "kernelindex_pipeline.bench", "--normalize-only", str(csv_path)],
                              capture_output=True, text=True, check=True)
        results.update(json.loads(done.stdout))
    results["peak_rss_mb"] = max(results["backfill_rss_mb"], results["noop_rss_mb"], results["normalize_rss_mb"])
    return results


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


def report(results: dict) -> str:
    ok = {
        "backfill_s": results["backfill_s"] <= TARGETS["backfill_s"],
        "rows_per_s": results["rows_per_s"] >= TARGETS["rows_per_s"],
        "noop_ingest_s": results["noop_ingest_s"] <= TARGETS["noop_ingest_s"],
        "peak_rss_mb": results["peak_rss_mb"] <= TARGETS["peak_rss_mb"],
    }
    lines = [
        f"(a) full backfill, 38 snapshots, Dagster included : {results['backfill_s']:8.2f} s    target <= 20 s    {'ok' if ok['backfill_s'] else 'MISSED'}",
        f"(b) normalization, {results['rows']:,} rows (median of 3):  {results['rows_per_s']:11,.0f} rows/s  target >= 500,000  {'ok' if ok['rows_per_s'] else 'MISSED'}",
        f"(c) ingest with no new upstream revision       : {results['noop_ingest_s']:8.2f} s    target <= 5 s     {'ok' if ok['noop_ingest_s'] else 'MISSED'}",
        f"(d) peak RSS (backfill / no-op / normalization): {results['backfill_rss_mb']:.0f} / {results['noop_rss_mb']:.0f} / "
        f"{results['normalize_rss_mb']:.0f} MiB  target <= 1536 MiB  {'ok' if ok['peak_rss_mb'] else 'MISSED'}",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelindex_pipeline.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--normalize-only", type=Path, metavar="CSV", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.normalize_only:
        print(json.dumps(normalize_file(args.normalize_only)))
        return 0
    results = measure(args.rows)
    print(report(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
