"""Running `kernelindex ingest` in-process against a given KERNELINDEX_HOME, and the shipped snapshots."""

import os
from pathlib import Path

from kernelindex_pipeline import cli

REPO = Path(__file__).resolve().parents[1]
SHIPPED_UPSTREAM = REPO / "data" / "upstream" / "liger-kernel"


def ingest_into(home: Path, *args: str) -> int:
    """Run `kernelindex ingest` in-process with KERNELINDEX_HOME=home."""
    previous = os.environ.get("KERNELINDEX_HOME")
    os.environ["KERNELINDEX_HOME"] = str(home)
    try:
        return cli.main(["ingest", *args])
    finally:
        if previous is None:
            os.environ.pop("KERNELINDEX_HOME", None)
        else:
            os.environ["KERNELINDEX_HOME"] = previous
