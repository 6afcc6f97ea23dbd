"""A warehouse built once per test session from the snapshots shipped in data/, through the real CLI."""

import os
from pathlib import Path

import pytest

from kernelindex_pipeline import cli
from kernelindex_pipeline.warehouse import Warehouse

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


@pytest.fixture(scope="session")
def shipped_warehouse(tmp_path_factory) -> Warehouse:
    home = tmp_path_factory.mktemp("shipped-warehouse")
    assert ingest_into(home) == 0
    return Warehouse(home)
