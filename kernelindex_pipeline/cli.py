"""`kernelindex`: ingest, show, query, export and rerun, on the warehouse under KERNELINDEX_HOME."""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import sys
import time
import warnings
from pathlib import Path

from kernelindex_pipeline.warehouse import Warehouse

_EXCEPTION_PREFIX = re.compile(r"^[A-Za-z_][\w.]*(Error|Failure|Exception): ")
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


# Pool limits are left to deployments (`dagster instance concurrency set warehouse 1`): here a killed
# ingest would keep its slot with no daemon to free it, and the warehouse's file lock already serializes
# writers.
INSTANCE_YAML = """telemetry:
  enabled: false
"""


class CliError(Exception):
    """A failure to report as one line on stderr."""


def _dagster_instance(wh: Warehouse):
    import dagster as dg

    if os.environ.get("DAGSTER_HOME"):
        return dg.DagsterInstance.get()
    home = (wh.home / "dagster").resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(INSTANCE_YAML)
    return dg.DagsterInstance.from_config(str(home))


def evidence_fingerprint(directory: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(Path(directory).glob("*.jsonl.gz")):
        h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def _failure_message(result) -> str:
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            while error.cause is not None and "Failure" not in error.cls_name:
                error = error.cause
            last = (error.message or error.cls_name).strip().splitlines()[-1]
            return f"{event.step_key}: {_EXCEPTION_PREFIX.sub('', last)}"
    return "the Dagster run failed"


def ingest(sources: list[str]) -> dict:
    """Materialize every non-GPU asset for every snapshot the sources offer that is not yet ingested."""
    warnings.filterwarnings("ignore")
    from kernelindex_pipeline.defs.resources import UpstreamResource, WarehouseResource
    from kernelindex_pipeline.defs.schedules import INGEST_JOB, range_tags
    from kernelindex_pipeline.definitions import build_definitions
    from kernelindex_pipeline.partitions import upstream_revisions
    from kernelindex_pipeline.sources import SourceError

    wh = Warehouse()
    upstream = UpstreamResource(locations=sources)
    try:
        listed = upstream.list_revisions(cache_dir=wh.home / "http-cache")
    except SourceError as exc:
        raise CliError(f"cannot list upstream revisions: {exc}") from exc
    if not listed:
        raise CliError(f"no upstream revision found in {', '.join(upstream.resolved_locations())}")
    stored, fingerprint = set(), None
    if wh.exists():
        with wh.reader() as con:
            stored = {k for (k,) in con.execute("SELECT revision_key FROM snapshots").fetchall()}
            row = con.execute("SELECT value FROM ingest_state WHERE key = 'evidence'").fetchone()
            fingerprint = row[0] if row else None
    evidence_dir = WarehouseResource().evidence_path()
    current_fingerprint = evidence_fingerprint(evidence_dir)
    new = [r.key for r in listed if r.key not in stored]
    if not new and fingerprint == current_fingerprint:
        return {"new_revisions": 0, "ran": False, "revisions": len(listed)}

    _progress(f"materializing {len(new) or len(listed)} upstream revision(s) through Dagster…")
    instance = _dagster_instance(wh)
    with wh.exclusive():  # two ingests at once must not both add the same partition keys
        known = set(instance.get_dynamic_partitions(upstream_revisions.name))
        instance.add_dynamic_partitions(upstream_revisions.name, [r.key for r in listed if r.key not in known])
    keys = list(instance.get_dynamic_partitions(upstream_revisions.name))
    start = keys.index(new[0]) if new else 0
    defs = build_definitions(locations=upstream.resolved_locations())
    result = defs.resolve_job_def(INGEST_JOB).execute_in_process(
        instance=instance, tags=range_tags(keys[start:]), run_config=QUIET_LOGS, raise_on_error=False
    )
    if not result.success:
        raise CliError(f"ingest failed, previous warehouse kept: {_failure_message(result)}")
    with wh.transaction() as con:
        con.execute("DELETE FROM ingest_state WHERE key = 'evidence'")
        con.execute("INSERT INTO ingest_state VALUES ('evidence', ?)", [current_fingerprint])
    return {"new_revisions": len(new), "ran": True, "revisions": len(listed), "run_id": result.run_id}


def show(run: str) -> str:
    with Warehouse().reader() as con:
        row = con.execute(
            "SELECT m.manifest FROM manifests m JOIN runs r USING (run_id) WHERE r.run_id = ? OR r.external_id = ?",
            [run, run]).fetchone()
    if row is None:
        raise CliError(f"no run with id or external id {run!r}")
    manifest = json.loads(row[0])
    return json.dumps({k: manifest[k] for k in ("run", "protocol", "environment")}, indent=2, ensure_ascii=False)


def query(sql: str) -> tuple[list[str], list[tuple]]:
    import duckdb

    with Warehouse().reader() as con:
        try:
            cursor = con.execute(sql)
        except duckdb.Error as exc:
            raise CliError(f"query failed: {str(exc).splitlines()[0]}") from exc
        if cursor.description is None:
            return [], []
        return [d[0] for d in cursor.description], cursor.fetchall()


def _progress(message: str) -> None:
    """A progress line on stderr, only where someone watches it (a terminal)."""
    if sys.stderr.isatty():
        print(message, file=sys.stderr, flush=True)


def _cell(value, max_width: int) -> str:
    text = "" if value is None else str(value).replace("\n", " ")
    return text if len(text) <= max_width else text[: max_width - 1] + "…"


def format_rows(names: list[str], rows: list[tuple], fmt: str, max_width: int = 60) -> str:
    """An aligned table (numbers right-aligned, long cells cut at max_width), or csv/json in full."""
    if fmt == "json":
        return json.dumps([dict(zip(names, r)) for r in rows], default=str, ensure_ascii=False, indent=1)
    if fmt == "csv":
        out = _Lines()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(names)
        writer.writerows(rows)
        return "".join(out.parts).rstrip("\n")
    cells = [[_cell(v, max_width) for v in r] for r in rows]
    widths = [max([len(n)] + [len(r[i]) for r in cells]) for i, n in enumerate(names)]
    numeric = [all(_is_number(r[i]) for r in rows if r[i] is not None) and rows for i in range(len(names))]
    def line(values):
        return "  ".join(v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))).rstrip()
    body = [line(names), "  ".join("-" * w for w in widths)] + [line(r) for r in cells]
    return "\n".join(body + [f"({len(rows)} row{'s' if len(rows) != 1 else ''})"])


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Lines:
    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)


def rerun(targets: str, kernels: list[str]) -> dict:
    warnings.filterwarnings("ignore")
    from kernelindex_pipeline.defs.reruns import NO_CUDA, RERUN_JOB, cuda_available
    from kernelindex_pipeline.definitions import build_definitions

    if not cuda_available():
        raise CliError(NO_CUDA)
    wh = Warehouse()
    result = build_definitions().resolve_job_def(RERUN_JOB).execute_in_process(
        instance=_dagster_instance(wh), raise_on_error=False,
        run_config={**QUIET_LOGS, "ops": {"gpu_reruns": {"config": {"targets": targets, "kernels": kernels}}}},
    )
    if not result.success:
        raise CliError(f"rerun failed: {_failure_message(result)}")
    return {"run_id": result.run_id}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelindex", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("ingest", help="ingest every upstream snapshot the sources offer (through Dagster)")
    p.add_argument("--source", action="append", default=[], metavar="DIR_OR_URL",
                   help="a snapshot directory, github:owner/name, or an http(s) URL (repeatable; default: shipped data)")
    p = sub.add_parser("show", help="print the canonical manifest of a run")
    p.add_argument("run", metavar="RUN", help="run id or external id")
    p = sub.add_parser("query", help="run read-only SQL on the warehouse")
    p.add_argument("sql")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table: aligned, long cells cut; csv/json: every value in full, for scripts")
    p = sub.add_parser("rerun", help="re-measure covered kernels on this machine's CUDA GPU")
    p.add_argument("--targets", choices=["seeds", "all", "leaders"], default="seeds")
    p.add_argument("--kernel", action="append", default=[], dest="kernels")
    p = sub.add_parser("export", help="export manifests (json) or static record pages (html)")
    p.add_argument("--format", choices=["json", "html"], default="json")
    p.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "ingest":
            started = time.perf_counter()
            summary = ingest(args.source)
            seconds = time.perf_counter() - started
            if summary["ran"]:
                print(f"ingested {summary['new_revisions']} new of {summary['revisions']} upstream revisions "
                      f"in {seconds:.1f} s (Dagster run {summary['run_id']})")
            else:
                print(f"nothing new: all {summary['revisions']} upstream revisions already ingested ({seconds:.1f} s)")
        elif args.command == "show":
            print(show(args.run))
        elif args.command == "query":
            names, rows = query(args.sql)
            print(format_rows(names, rows, args.format))
        elif args.command == "rerun":
            print(f"rerun published (Dagster run {rerun(args.targets, args.kernels)['run_id']})")
        elif args.command == "export":
            from kernelindex_pipeline.export import export

            print(export(args.format, args.directory))
    except CliError as exc:
        print(f"kernelindex: {exc}", file=sys.stderr)
        return 1
    except FileNotFoundError as exc:
        print(f"kernelindex: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
