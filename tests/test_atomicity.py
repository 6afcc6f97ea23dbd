"""Killing `kernelindex ingest` at any instant, and two ingests at once.

An ingest publishes the warehouse's next generation with one rename, so whatever instant a SIGKILL lands
on, the warehouse (every table and every Parquet file) is wholly the previous one or wholly the next one,
never a mix; and the next ingest completes to what one clean ingest gives.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import pytest
from conftest import (
    BASE_REVISIONS,
    REPO,
    cli_env,
    contract_tables,
    copy_home,
    ingest,
    kernelindex_cmd,
    main_rows,
    published_state,
    query,
    warehouse_state,
    write_snapshot_dir,
)

from kernelindex_pipeline.warehouse.store import PARQUET_TABLES, Warehouse

KILLS = 6


@pytest.fixture(scope="module")
def next_source(tmp_path_factory):
    return write_snapshot_dir(tmp_path_factory.mktemp("next-source"), main_rows()[:BASE_REVISIONS + 1])


def parquet_rows_match_tables(home) -> None:
    for table in PARQUET_TABLES:
        assert query(home, "SELECT * FROM read_parquet(?) ORDER BY ALL", [Warehouse(home).parquet(table)]) \
            == query(home, f"SELECT * FROM {table} ORDER BY ALL"), table


def start_ingest(home, source, **env) -> subprocess.Popen:
    """An ingest in a process group of its own, so that a kill reaches what it started (Dagster's log tailer
    would otherwise outlive it and hold its output open)."""
    return subprocess.Popen(kernelindex_cmd("ingest", "--source", str(source)), cwd=REPO, env=cli_env(home, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def test_sigkill_at_random_instants_leaves_the_previous_or_the_next_warehouse_whole(
        tmp_path, base_warehouse, next_warehouse, next_source):
    before = published_state(base_warehouse)
    started = time.monotonic()  # the command's whole life, as the killed ones live it
    timed = start_ingest(copy_home(base_warehouse, tmp_path / "timed"), next_source)
    _, err = timed.communicate(timeout=300)
    assert timed.returncode == 0, err
    duration = time.monotonic() - started
    after = published_state(tmp_path / "timed")
    assert before != after

    rng = random.Random(20261203)
    outcomes = []
    for n in range(KILLS):  # one random instant in each of KILLS equal slices of the run (and a little after)
        home = copy_home(base_warehouse, tmp_path / f"home-{n}")
        instant = (n + rng.random()) * duration * 1.1 / KILLS
        process = start_ingest(home, next_source)
        time.sleep(instant)
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        state = published_state(home)
        assert state in (before, after), f"kill {n} at {instant:.2f} s left a mixed warehouse"
        outcomes.append("after" if state == after else "before")
        if n % 3 == 2:  # a killed run never stands in the way of the next one
            ingest(home, next_source)
            assert published_state(home) == after
            parquet_rows_match_tables(home)
    assert "before" in outcomes, outcomes  # the kills covered the run, not only its end


def test_two_ingests_at_once_end_as_one(tmp_path, base_warehouse, next_warehouse, next_source):
    home = copy_home(base_warehouse, tmp_path / "home")
    processes = [start_ingest(home, next_source) for _ in range(2)]
    results = [(p.wait(timeout=300), *p.communicate()) for p in processes]
    for code, _, err in results:
        assert code == 0 or (err.strip().splitlines()[-1].startswith("kernelindex: ") and "Traceback" not in err), err
    assert any(code == 0 for code, _, _ in results), results
    assert contract_tables(home) == contract_tables(next_warehouse)
    parquet_rows_match_tables(home)
    state = warehouse_state(home)
    assert "nothing new" in ingest(home, next_source).stdout
    assert warehouse_state(home) == state


def test_old_generations_are_collected(tmp_path, base_warehouse):
    home = copy_home(base_warehouse, tmp_path / "home")
    for n in range(BASE_REVISIONS + 1, BASE_REVISIONS + 4):  # three publications: one generation more than kept
        ingest(home, write_snapshot_dir(tmp_path / f"source-{n}", main_rows()[:n]))
    generations = [p for p in (home / "generations").iterdir()]
    assert len(generations) == 3, generations  # the live one and the two before it
    assert os.path.realpath(home / "kernelindex.duckdb").startswith(str((home / "generations").resolve()))


def test_a_staged_generation_that_fails_its_audit_is_never_published(tmp_path, base_warehouse, next_source,
                                                                    monkeypatch, capsys):
    """Write, audit, publish: a publication whose staged generation repeats a run id (planted after its runs
    are written) fails in one line, and the previous warehouse stays live, byte for byte."""
    import hashlib

    from conftest import NO_EVIDENCE, environment

    from kernelindex_pipeline import cli
    from kernelindex_pipeline.publish import steps

    home = copy_home(base_warehouse, tmp_path / "home")
    live = Warehouse(home).db_path.resolve()
    before, before_bytes = published_state(home), hashlib.sha256(live.read_bytes()).digest()
    written = steps.update_published_identifiers

    def plant_a_duplicate(con):
        written(con)
        con.execute("INSERT INTO runs SELECT * FROM runs WHERE run_id IN "
                    "(SELECT key FROM publication_changes WHERE table_name = 'runs') LIMIT 1")

    monkeypatch.setattr(steps, "update_published_identifiers", plant_a_duplicate)
    with environment(KERNELINDEX_HOME=str(home), KERNELINDEX_SOURCES=None, DAGSTER_HOME=None,
                     KERNELINDEX_EVIDENCE=str(NO_EVIDENCE)):
        assert cli.main(["ingest", "--source", str(next_source)]) != 0
    err = capsys.readouterr().err
    assert "failed its audit, previous warehouse kept: 2 duplicate run or external ids" in err
    assert len(err.strip().splitlines()) == 1
    assert Warehouse(home).db_path.resolve() == live
    assert hashlib.sha256(live.read_bytes()).digest() == before_bytes and published_state(home) == before
    monkeypatch.undo()
    ingest(home, next_source)  # the next ingest, unplanted, publishes the revision
    assert query(home, "SELECT count(DISTINCT revision_key) FROM snapshots")[0][0] == BASE_REVISIONS + 1


def test_an_ingest_killed_holding_its_pool_slot_does_not_block_the_next(tmp_path, base_warehouse, next_source):
    """The command line's instance gives the warehouse pool one slot: an ingest killed while its step holds it
    leaves it claimed, and the next ingest frees it (and marks the dead run failed) rather than wait forever."""
    import dagster as dg

    home = copy_home(base_warehouse, tmp_path / "home")
    storage = dg.DagsterInstance.from_config(str(home / "dagster")).event_log_storage
    process = start_ingest(home, next_source)
    deadline = time.monotonic() + 120
    held = []
    while not held and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        held = storage.get_concurrency_run_ids()
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate()
    assert held, "the ingest ended without its step holding the pool's slot"
    ingest(home, next_source)
    instance = dg.DagsterInstance.from_config(str(home / "dagster"))
    assert not instance.event_log_storage.get_concurrency_run_ids()
    assert all(instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE for run_id in held)
