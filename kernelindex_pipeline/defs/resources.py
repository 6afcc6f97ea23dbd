"""Resources: the warehouse under KERNELINDEX_HOME and the upstream source(s)."""


import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from kernelindex_pipeline.sources import Revision, SourceError, open_source
from kernelindex_pipeline.warehouse import Warehouse

REPO_DATA = Path(__file__).resolve().parents[2] / "data"
SHIPPED_UPSTREAM = REPO_DATA / "upstream" / "liger-kernel"
SHIPPED_EVIDENCE = REPO_DATA / "evidence"


def _env_number(name: str, default, kind):
    """A number from the environment, or the default when the variable is unset or empty."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return kind(value)
    except ValueError:
        raise SourceError(f"${name} is not a number: {value!r}") from None


class WarehouseResource(dg.ConfigurableResource):
    """The embedded DuckDB + Parquet warehouse; `home` empty means $KERNELINDEX_HOME, else ./data."""

    home: str = Field(default="", description="Warehouse directory (default: $KERNELINDEX_HOME or ./data)")
    evidence_dir: str = Field(default="", description="Directory of committed rerun evidence (*.jsonl.gz)")

    def warehouse(self) -> Warehouse:
        return Warehouse(self.home or None)

    def evidence_path(self) -> Path:
        return Path(self.evidence_dir) if self.evidence_dir else SHIPPED_EVIDENCE


class UpstreamResource(dg.ConfigurableResource):
    """Upstream benchmark snapshots: directories laid out like data/upstream/liger-kernel, or GitHub URLs."""

    locations: list[str] = Field(
        default_factory=list,
        description="Directories or URLs (github:owner/name, http(s)://...); default: $KERNELINDEX_SOURCES "
        "(comma-separated), else the shipped snapshots",
    )
    # HTTP knobs; each default can be changed with an environment variable (e.g. a faster backoff in tests,
    # a larger size cap for a bigger upstream file).
    timeout_s: float = Field(default_factory=lambda: _env_number("KERNELINDEX_HTTP_TIMEOUT_S", 30.0, float))
    max_retries: int = Field(default_factory=lambda: _env_number("KERNELINDEX_HTTP_RETRIES", 5, int))
    backoff_s: float = Field(default_factory=lambda: _env_number("KERNELINDEX_HTTP_BACKOFF_S", 1.0, float))
    max_bytes: int = Field(default_factory=lambda: _env_number("KERNELINDEX_HTTP_MAX_BYTES", 64 * 2**20, int))
    token_env: str = "GITHUB_TOKEN"

    def resolved_locations(self) -> list[str]:
        if self.locations:
            return list(self.locations)
        configured = os.environ.get("KERNELINDEX_SOURCES", "")
        return [s.strip() for s in configured.split(",") if s.strip()] or [str(SHIPPED_UPSTREAM)]

    def _source(self, location: str, cache_dir: Path | None = None):
        options = {"timeout_s": self.timeout_s, "max_retries": self.max_retries, "backoff_s": self.backoff_s,
                   "max_bytes": self.max_bytes, "token_env": self.token_env, "cache_dir": cache_dir}
        return open_source(location, **options)

    def list_revisions(self, cache_dir: Path | None = None) -> list[Revision]:
        """Every revision the locations offer, oldest first; one key is listed once (first location wins)."""
        seen: dict[str, Revision] = {}
        for location in self.resolved_locations():
            for revision in self._source(location, cache_dir).list_revisions():
                seen.setdefault(revision.key, revision)
        return sorted(seen.values())

    def read(self, revision: Revision) -> bytes:
        return self._source(revision.location).read(revision)


__all__ = ["SourceError", "UpstreamResource", "WarehouseResource"]
