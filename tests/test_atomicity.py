"""Killing `kernelindex ingest` mid-write, and two ingests at once.

The kill lands inside a step's transaction, with all of that step's writes done and none committed (the
test-only KERNELINDEX_TEST_PAUSE_BEFORE_COMMIT hook pauses there). What is committed stays exactly as it
was, the Parquet copies included, and the next ingest completes to the tables one clean ingest gives.
"""

from __future__ import annotations

import os
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
    query,
    warehouse_state,
    write_snapshot_dir,
)

from kernelindex_pipeline.warehouse import CONTRACT_TABLES


@pytest.fixture(scope="module")
def next_source(tmp_path_factory):
    return write_snapshot_dir(tmp_path_factory.mktemp("next-source"), main_rows()[:BASE_REVISIONS + 1])


def committed(state: dict) -> dict:
    """Tables and Parquet files (raw snapshot files are content-addressed: an unreferenced extra is harmless)."""
    return {k: v for k, v in state.items() if not k.startswith("file:raw/")}


def parquet_rows_match_tables(home) -> None:
    for table in CONTRACT_TABLES:
        assert query(home, "SELECT * FROM read_parquet(?) ORDER BY ALL", [str(home / "tables" / f"{table}.parquet")]) \
            == query(home, f"SELECT * FROM {table} ORDER BY ALL"), table


# The contract tables a kill inside each step leaves at their previous version (that step's and the later ones').
UNTOUCHED = {
    "record_snapshots": CONTRACT_TABLES,
    "normalize_snapshots": CONTRACT_TABLES,
    "rebuild_runs": CONTRACT_TABLES,
    "rebuild_ranks": ("ranks",),
}


def start_ingest(home, source, **env) -> subprocess.Popen:
    return subprocess.Popen(kernelindex_cmd("ingest", "--source", str(source)), cwd=REPO, env=cli_env(home, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("step", ["record_snapshots", "normalize_snapshots", "rebuild_runs", "rebuild_ranks"])
def test_sigkill_inside_a_step_keeps_the_committed_warehouse_and_the_next_ingest_completes(
        step, tmp_path, base_warehouse, next_warehouse, next_source):
    home = copy_home(base_warehouse, tmp_path / "home")
    before = warehouse_state(home)
    process = start_ingest(home, next_source, KERNELINDEX_TEST_PAUSE_BEFORE_COMMIT=step)
    marker = home / ".test-paused"
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the ingest never reached the step"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.communicate()
    marker.unlink()

    after = warehouse_state(home)  # readable, and
    if step == "record_snapshots":  # nothing committed yet: everything as it was
        assert committed(after) == committed(before)
    reference = contract_tables(next_warehouse)
    for table in CONTRACT_TABLES:
        if table in UNTOUCHED[step]:  # the killed step's tables and the later ones: the previous version
            assert after[f"table:{table}"] == before[f"table:{table}"], table
            assert after[f"file:tables/{table}.parquet"] == before[f"file:tables/{table}.parquet"], table
        else:  # other steps may have committed it: wholly the previous or wholly the new version
            assert after[f"table:{table}"] in (before[f"table:{table}"], reference[table]), table
    parquet_rows_match_tables(home)  # the Parquet copies hold what is committed, nothing else
    for key, value in before.items():  # no stored snapshot lost
        if key.startswith("file:raw/"):
            assert after[key] == value

    result = ingest(home, next_source)
    assert "ingested" in result.stdout  # not "nothing new": the interrupted run is redone
    assert contract_tables(home) == contract_tables(next_warehouse)
    parquet_rows_match_tables(home)
    assert query(home, "SELECT count(*) FROM observations") == query(next_warehouse, "SELECT count(*) FROM observations")


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
