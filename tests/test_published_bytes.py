"""What a build publishes changes only on purpose: the tables and views of a small warehouse (three main-branch
revisions and one committed rerun session) and its JSON and HTML exports, digested by
`tools/published_digests.py`, equal the digests recorded in `fixtures/published-digests.json`.

The recorded digests were written by the code before the pipeline was grouped by domain, so this test is the
proof that the move changed no published byte; the bootstrap intervals' (and the claims' and statements' that
carry them) were written again once the intervals stopped depending on the CPU's numpy kernels, on a machine
without AVX-512, whose results they kept. A change meant to alter what is published rewrites them
(`python tests/test_published_bytes.py --write`), and the fixture's diff names every table and file it touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIXTURE = HERE / "fixtures" / "published-digests.json"
REVISIONS = 3
EVIDENCE = "h200-2026-12-03-c6c1a9460685.jsonl.gz"


def published(work: Path) -> dict:
    """Build the small warehouse under ``work`` in fresh processes, export it, and digest both."""
    sys.path[:0] = [str(REPO), str(HERE)]
    from conftest import main_rows, write_snapshot_dir

    from tools.published_digests import summarise

    source = write_snapshot_dir(work / "source", main_rows()[:REVISIONS])
    (work / "evidence").mkdir()
    os.link(REPO / "data" / "evidence" / EVIDENCE, work / "evidence" / EVIDENCE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KERNELINDEX_", "DAGSTER_"))}
    env.update(KERNELINDEX_HOME=str(work / "home"), KERNELINDEX_EVIDENCE=str(work / "evidence"),
               KERNELINDEX_ATTESTATIONS=str(work / "no-attestations"), PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "kernelindex_pipeline.cli"]
    started = datetime.now(timezone.utc).date().isoformat()
    for args in (["ingest", "--source", str(source)], ["export", "--format", "json", str(work / "json")],
                 ["export", "--format", "html", str(work / "html")]):
        subprocess.run(command + args, cwd=REPO, env=env, check=True, capture_output=True, timeout=600)
    # A new run's page prints the day it was first published: the day of the build, whichever day that is.
    build_days = tuple({started, datetime.now(timezone.utc).date().isoformat()})
    return summarise(work / "home", [work / "json", work / "html"], build_days)


def test_a_build_publishes_the_recorded_bytes(tmp_path):
    from tools.published_digests import differences

    recorded = json.loads(FIXTURE.read_text())
    now = published(tmp_path)
    assert now["warehouse"], "no table was digested"
    diffs = differences(recorded, now)
    assert not diffs, f"{len(diffs)} published tables or files differ from the recorded ones: {diffs[:20]}"


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        FIXTURE.write_text(json.dumps(published(Path(tmp)), indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")
