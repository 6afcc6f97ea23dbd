"""`kernelindex`: ingest, show, query, export and rerun, on the warehouse under KERNELINDEX_HOME.

Long because each command turns every failure an operator can meet (a full disk, an unwritable Dagster
storage, an identifier that names no run) into one line; each command is short.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import csv
import io
import json
import os
import re
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import NoReturn

from kernelindex_pipeline.warehouse.store import Warehouse, WarehouseError

from kernelindex_pipeline.warehouse.sql import records

_EXCEPTION_PREFIX = re.compile(r"^[A-Za-z_][\w.]*(Error|Failure|Exception): ")
QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


# Pool limits are left to deployments (`dagster instance concurrency set warehouse 1`): here a killed
# ingest would keep its slot with no daemon to free it, and the warehouse's file lock already serializes
# writers.
# The instance the command line makes under KERNELINDEX_HOME: on one machine each pool takes one run at a time
# (the warehouse's writer; one GPU rerun, `gpu`). A deployment sets its own: `dagster instance concurrency set
# gpu <GPUs>`.
INSTANCE_YAML = """telemetry:
  enabled: false
concurrency:
  pools:
    default_limit: 1
"""


class CliError(Exception):
    """A failure to report as one line on stderr."""


def _dagster_instance(wh: Warehouse):
    import dagster as dg

    try:
        if os.environ.get("DAGSTER_HOME"):
            return dg.DagsterInstance.get()
        home = (wh.home / "dagster").resolve()
        home.mkdir(parents=True, exist_ok=True)
        config = home / "dagster.yaml"
        if not config.exists():
            config.write_text(INSTANCE_YAML)
        return dg.DagsterInstance.from_config(str(home))
    except Exception as exc:  # noqa: BLE001 - any broken instance is reported as one line
        raise CliError(f"cannot open the Dagster instance: {str(exc).strip().splitlines()[0]}") from exc


@contextlib.contextmanager
def _sole_ingest_run(wh: Warehouse, instance, job: str):
    """While this command runs the ingest job, no other command on this home does (a lock its process holds
    while alive). An ingest run that still holds a pool slot then belongs to a killed command: its slots are
    freed and it is marked failed, so that a killed ingest never stands in the way of the next one."""
    with wh.ingest_run_lock():
        storage = instance.event_log_storage
        for run_id in storage.get_concurrency_run_ids():
            run = instance.get_run_by_id(run_id)
            if run is not None and run.job_name == job:
                storage.free_concurrency_slots_for_run(run_id)
                if not run.is_finished:
                    instance.report_run_failed(run, "its command was killed; a later ingest freed its pool slot")
        yield


@contextlib.contextmanager
def _dagster_storage(instance):
    """Dagster's run and event storage as one line where it cannot be written (a full disk, a read-only
    DAGSTER_HOME): what Dagster itself writes to stderr meanwhile is held back, and shown only once the
    block has ended without failing."""
    import sqlalchemy.exc

    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            yield
    except (sqlalchemy.exc.SQLAlchemyError, OSError) as exc:
        cause = getattr(exc, "orig", None) or exc
        reason = getattr(cause, "strerror", None) or str(cause).strip().splitlines()[0]
        with contextlib.suppress(OSError):
            reason += f" ({shutil.disk_usage(instance.root_directory).free // 1024} KiB free there)"
        raise CliError(f"cannot write Dagster's storage in {instance.root_directory}: {reason}; "
                       "previous warehouse kept") from exc
    sys.stderr.write(held.getvalue())


def _failure_message(result) -> str:
    for event in result.all_events:
        if event.is_step_failure:
            error = event.step_failure_data.error
            # Down to our own one-line error (a dg.Failure or a WarehouseError), not the library error under it.
            while error.cause is not None and "Failure" not in error.cls_name and error.cls_name != "WarehouseError":
                error = error.cause
            last = (error.message or error.cls_name).strip().splitlines()[-1]
            return f"{event.step_key}: {_EXCEPTION_PREFIX.sub('', last)}"
    return "the Dagster run failed"


def ingest(sources: list[str]) -> dict:
    """Land every revision the sources offer that is not published yet, and publish the warehouse's next
    generation, through one run of the Dagster ingest job."""
    warnings.filterwarnings("ignore")
    from kernelindex_pipeline.publish import steps
    from kernelindex_pipeline.defs.resources import UpstreamResource, WarehouseResource
    from kernelindex_pipeline.defs.schedules import INGEST_JOB, range_tags, register_revisions
    from kernelindex_pipeline.definitions import build_definitions
    from kernelindex_pipeline.ingest.sources import SourceError, listed_once

    wh = Warehouse()
    with listed_once():  # the job's fetch step reads this command's listing of upstream
        try:
            upstream = UpstreamResource.resolved(locations=sources)
            revisions = upstream.list_revisions(cache_dir=wh.home / "http-cache")
        except SourceError as exc:
            raise CliError(f"cannot list upstream revisions: {exc}") from exc
        listed = [r.key for r in revisions]
        if not listed:
            raise CliError(f"no upstream revision found in {', '.join(upstream.resolved_locations())}")
        resource = WarehouseResource.resolved()
        new = steps.news(wh, listed, resource.evidence_path(), resource.attestations_path())
        if not new.anything:
            return {"new_revisions": 0, "ran": False, "revisions": len(listed)}

        _progress(f"materializing {len(new.to_fetch) or len(listed)} upstream revision(s) through Dagster…")
        wh.prestage()  # the next generation's copy of the live file, while Dagster starts
        with wh.writer_lock():  # the first write: a home that cannot be written says so here
            instance = _dagster_instance(wh)
            with _dagster_storage(instance):
                keys = register_revisions(instance, listed)  # two ingests must not both add keys
        defs = build_definitions(locations=upstream.resolved_locations())
        with _dagster_storage(instance), _sole_ingest_run(wh, instance, INGEST_JOB):
            result = defs.resolve_job_def(INGEST_JOB).execute_in_process(
                instance=instance, tags=range_tags(new.run_keys(keys)), run_config=QUIET_LOGS, raise_on_error=False
            )
    if not result.success:
        raise CliError(f"ingest failed, previous warehouse kept: {_failure_message(result)}")
    return {"new_revisions": len(new.to_fetch), "ran": True, "revisions": len(listed), "run_id": result.run_id,
            "refused": sum(1 for r in revisions if r.refused and r.key in new.to_fetch)}


# The run a reader's identifier names: a run id or external id; an identifier KernelIndex published that is
# no record's now (`published_identifiers`: a seed page's run id, or a digest prefix as a page shows it,
# with or without its ellipsis, or the full digest it begins); a run digest; or the first 8 or more hex
# digits of one run id, as record pages show it.
RESOLVE_SQL = """
SELECT run_id, NULL AS identifier, NULL AS kind, NULL AS published_at FROM runs WHERE run_id = $q OR external_id = $q
UNION ALL
SELECT run_id, identifier, kind, published_at FROM published_identifiers
WHERE run_id IS NOT NULL AND (identifier = $q OR (identifier LIKE 'sha256:%' AND starts_with($q, identifier)))
UNION ALL
SELECT run_id, NULL, NULL, NULL FROM run_manifests WHERE run_digest = $q
UNION ALL
SELECT run_id, NULL, NULL, NULL FROM runs WHERE length($q) >= 8 AND starts_with(run_id, $q)
"""


def resolve(con, text: str) -> tuple[str, dict | None]:
    """The run id `text` names (see RESOLVE_SQL), and the published identifier it was, if one."""
    query = text.strip().removesuffix("…").removesuffix("...")
    query = query.lower() if re.fullmatch(r"(?i)(sha256:)?[0-9a-f]+", query) else query
    found = records(con, RESOLVE_SQL, {"q": query})
    runs = {f["run_id"] for f in found}
    if len(runs) != 1:
        many = f" (it begins {len(runs)} run ids)" if runs else ""
        raise CliError(f"no run with id, external id, digest or published identifier {text!r}{many}")
    return found[0]["run_id"], next((f for f in found if f["identifier"]), None)


def show(run: str) -> tuple[str, list[str]]:
    """The run's canonical manifest (JSON, for stdout) and, for the reader, the published identifier it was
    named by and one line per claim check it takes part in: its current claims, or, for a run a newer one
    has replaced in `ranks`, those it made when it was listed."""
    from kernelindex_pipeline.verdicts.claims import claims_of_run
    from kernelindex_pipeline.site.glossary import claim_text, claim_type
    from kernelindex_pipeline.verdicts.listing_claims import listing_claims_of_run

    with Warehouse().reader() as con:
        run_id, alias = resolve(con, run)
        (text,), = con.execute("SELECT manifest FROM manifests WHERE run_id = ?", [run_id]).fetchall()
        checks = claims_of_run(con, run_id) + listing_claims_of_run(con, run_id)
    manifest = json.loads(text)
    lines = []
    if alias:
        when = f", published {alias['published_at']:%Y-%m-%d}" if alias["published_at"] else ""
        lines.append(f"{alias['identifier']} is a published {alias['kind'].replace('_', ' ')}{when}: "
                     f"the record is run {run_id}")
    lines += [f"claim {claim_text(c)} ({claim_type(c)}; {c['source_gpu']}, source ratio {c['source_ratio']:.3f}"
              f"{', when listed ' + c['listed_at'][:10] if c.get('listed_at') else ''}) "
              f"under {c['protocol']}: {c['verdict']}{' (host-bound)' if c['host_bound'] else ''}"
              f"{_rerun_card(c)}: {c['reason']}"
              for c in checks]
    return json.dumps({k: manifest[k] for k in ("run", "protocol", "environment")}, indent=2, ensure_ascii=False), lines


def query(sql: str) -> tuple[list[str], list[tuple]]:
    """Run SQL in a sandboxed, read-only session: the warehouse's tables and views, nothing else."""
    import duckdb

    if not sql.strip():
        raise CliError("query is empty: give a SQL statement, e.g. \"SELECT count(*) FROM runs\"")
    with Warehouse().reader(sandboxed=True) as con:
        try:
            cursor = con.execute(sql)
        except duckdb.Error as exc:
            raise CliError(f"query failed: {str(exc).strip().splitlines()[0]}") from exc
        if cursor is None:  # only comments and semicolons
            raise CliError("query has no statement, only comments: give a SQL statement, "
                           "e.g. \"SELECT count(*) FROM runs\"")
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


def _rerun_card(check: dict) -> str:
    """' on CARD (same card)': the card whose reruns decided a claim, and how near it is to the claim's own."""
    if not check.get("rerun_gpu"):
        return ""
    match = f" ({check['card_match'].replace('_', ' ')})" if check.get("card_match") else ""
    return f" on {check['rerun_gpu']}{match}"


def rerun(kernels: list[str], device_minutes: float, only_unchecked: bool) -> list[str]:
    """One run of the GPU job per kernel family (its partition), within one device-time budget shared by
    all of them, then an ingest that publishes what they measured. Returns the Dagster run ids."""
    warnings.filterwarnings("ignore")
    import kernels
    from kernelindex_pipeline.defs.reruns import NO_CUDA, RERUN_JOB, rerun_partition
    from kernelindex_pipeline.definitions import build_definitions
    from kernelindex_pipeline.gpu.device import cuda_available

    if not cuda_available():
        raise CliError(NO_CUDA)
    known = list(kernels.FAMILIES)
    unknown = [k for k in kernels if k not in known]
    if unknown:
        raise CliError(f"no rerun adapter for {', '.join(unknown)}; covered: {', '.join(known)}")
    import torch

    device = torch.cuda.get_device_name(0)
    try:
        rerun_partition(known[0], device)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    wh, job, run_ids = Warehouse(), build_definitions().resolve_job_def(RERUN_JOB), []
    deadline = time.monotonic() + device_minutes * 60
    for kernel in kernels or known:
        left = (deadline - time.monotonic()) / 60
        if left <= 0:
            break
        result = job.execute_in_process(
            instance=_dagster_instance(wh), raise_on_error=False, partition_key=rerun_partition(kernel, device),
            run_config={**QUIET_LOGS, "ops": {"measure_reruns": {"config": {
                "device_minutes": left, "only_unchecked": only_unchecked}}}})
        if not result.success:
            raise CliError(f"rerun of {kernel} failed: {_failure_message(result)}")
        run_ids.append(result.run_id)
    published = ingest([])
    return run_ids + ([published["run_id"]] if published.get("run_id") else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernelindex", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("ingest", help="ingest every upstream snapshot the sources offer (through Dagster)")
    p.add_argument("--source", action="append", default=[], metavar="DIR_OR_URL",
                   help="a snapshot directory, github:owner/name, or an http(s) URL (repeatable; default: shipped data)")
    p = sub.add_parser("show", help="print the canonical manifest of a run")
    p.add_argument("run", metavar="RUN", help="run id, external id, run digest or published identifier")
    p = sub.add_parser("query", help="run read-only SQL on the warehouse")
    p.add_argument("sql")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table: aligned, long cells cut; csv/json: every value in full, for scripts")
    p = sub.add_parser("rerun", help="re-measure covered kernels on this machine's CUDA GPU")
    p.add_argument("--kernel", action="append", default=[], dest="kernels",
                   help="a kernel family to re-measure (repeatable; default: every covered family)")
    p.add_argument("--device-minutes", type=float, default=30.0,
                   help="device time for the whole session; what does not fit is left for the next one")
    p.add_argument("--only-unchecked", action="store_true",
                   help="only workloads awaiting a rerun (a claim not re-checked for want of rerun evidence)")
    p = sub.add_parser("export", help="export manifests (json), static record pages (html) or verdict statements (intoto)")
    p.add_argument("--format", choices=["json", "html", "intoto"], default="json",
                   help="intoto: one in-toto statement per decided claim and protocol, signed when "
                   "$KERNELINDEX_SIGNING_KEY names an Ed25519 key")
    p.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "ingest":
            started = time.perf_counter()
            summary = ingest(args.source)
            seconds = time.perf_counter() - started
            if summary["ran"]:
                refused = f" ({summary['refused']} refused, reasons in quarantine)" if summary["refused"] else ""
                print(f"ingested {summary['new_revisions']} new of {summary['revisions']} upstream revisions{refused} "
                      f"in {seconds:.1f} s (Dagster run {summary['run_id']})")
            else:
                print(f"nothing new: all {summary['revisions']} upstream revisions already ingested ({seconds:.1f} s)")
        elif args.command == "show":
            text, checks = show(args.run)
            print(text)
            for line in checks:  # for the reader at the terminal; stdout stays the manifest alone
                print(line, file=sys.stderr)
        elif args.command == "query":
            names, rows = query(args.sql)
            print(format_rows(names, rows, args.format))
        elif args.command == "rerun":
            runs = rerun(args.kernels, args.device_minutes, args.only_unchecked)
            print(f"rerun published ({len(runs)} Dagster run(s): {', '.join(runs)})")
        elif args.command == "export":
            from kernelindex_pipeline.defs.resources import SigningResource
            from kernelindex_pipeline.site.export import export

            try:
                signer = SigningResource.resolved().signer() if args.format in ("intoto", "html") else None
            except ValueError as exc:
                raise CliError(f"cannot sign with $KERNELINDEX_SIGNING_KEY: {exc}") from exc
            print(export(args.format, args.directory, signer=signer))
    except (CliError, WarehouseError, FileNotFoundError) as exc:
        print(f"kernelindex: {_one_line(exc)}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"kernelindex: {exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}", file=sys.stderr)
        return 1
    return 0


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def exit_now(code: int) -> NoReturn:
    """End the process with `code` once exit handlers have run and output is flushed, skipping the
    interpreter's teardown (half a second of freeing what the operating system reclaims anyway)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a reader that went away (`| head`) has nothing left to lose
            stream.flush()
    os._exit(code)


def run() -> NoReturn:
    """The `kernelindex` command."""
    exit_now(main())


if __name__ == "__main__":
    run()
