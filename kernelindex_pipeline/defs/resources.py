"""Resources: the warehouse under KERNELINDEX_HOME and the upstream source(s)."""


import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from kernelindex_pipeline.sources import Revision, SourceError, env_number, open_source
from kernelindex_pipeline.warehouse import Warehouse

REPO_DATA = Path(__file__).resolve().parents[2] / "data"
SHIPPED_UPSTREAM = REPO_DATA / "upstream" / "liger-kernel"
SHIPPED_GH_PAGES = REPO_DATA / "upstream" / "liger-kernel-gh-pages"
SHIPPED_SOURCES = (SHIPPED_UPSTREAM, SHIPPED_GH_PAGES)
SHIPPED_EVIDENCE = REPO_DATA / "evidence"
SHIPPED_ATTESTATIONS = REPO_DATA / "attestations"


def _or_env(value, name: str, default, kind):
    return value if value is not None else env_number(name, default, kind)


class WarehouseResource(dg.ConfigurableResource):
    """The embedded DuckDB + Parquet warehouse; `home` empty means $KERNELINDEX_HOME, else ./data."""

    home: str = Field(default="", description="Warehouse directory (default: $KERNELINDEX_HOME or ./data)")
    evidence_dir: str = Field(default="", description="Directory of committed rerun evidence (*.jsonl.gz)")
    attestations_dir: str = Field(default="", description="Directory of attestation files (*.json, "
                                  "docs/attestations.md); default: $KERNELINDEX_ATTESTATIONS, else data/attestations")

    def warehouse(self) -> Warehouse:
        return Warehouse(self.home or None)

    def evidence_path(self) -> Path:
        return Path(self.evidence_dir) if self.evidence_dir else SHIPPED_EVIDENCE

    def attestations_path(self) -> Path:
        return Path(self.attestations_dir or os.environ.get("KERNELINDEX_ATTESTATIONS") or SHIPPED_ATTESTATIONS)


class UpstreamResource(dg.ConfigurableResource):
    """Upstream benchmark snapshots: directories laid out like data/upstream/liger-kernel, or GitHub URLs."""

    locations: list[str] = Field(
        default_factory=list,
        description="Directories or URLs (github:owner/name, http(s)://...); default: $KERNELINDEX_SOURCES "
        "(comma-separated), else the shipped snapshots",
    )
    # HTTP knobs; unset means the environment variable named beside it, else the default there (read when
    # a source is opened, so a bad value is a one-line SourceError where sources fail, not at import).
    timeout_s: float | None = Field(default=None, description="$KERNELINDEX_HTTP_TIMEOUT_S, else 30")
    max_retries: int | None = Field(default=None, description="$KERNELINDEX_HTTP_RETRIES, else 5")
    backoff_s: float | None = Field(default=None, description="$KERNELINDEX_HTTP_BACKOFF_S, else 1")
    max_bytes: int | None = Field(default=None, description="$KERNELINDEX_HTTP_MAX_BYTES, else 64 MiB")
    token_env: str = "GITHUB_TOKEN"

    def resolved_locations(self) -> list[str]:
        if self.locations:
            return list(self.locations)
        configured = os.environ.get("KERNELINDEX_SOURCES", "")
        return [s.strip() for s in configured.split(",") if s.strip()] or [str(SHIPPED_UPSTREAM)]

    def _source(self, location: str, cache_dir: Path | None = None):
        options = {
            "timeout_s": _or_env(self.timeout_s, "KERNELINDEX_HTTP_TIMEOUT_S", 30.0, float),
            "max_retries": _or_env(self.max_retries, "KERNELINDEX_HTTP_RETRIES", 5, int),
            "backoff_s": _or_env(self.backoff_s, "KERNELINDEX_HTTP_BACKOFF_S", 1.0, float),
            "max_bytes": _or_env(self.max_bytes, "KERNELINDEX_HTTP_MAX_BYTES", 64 * 2**20, int),
            "token_env": self.token_env, "cache_dir": cache_dir}
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

    def read_references(self, cache_dir: Path | None = None) -> list[tuple[str, str, bytes]]:
        """(source, path, bytes) of each location's reference file (`SourceSpec.reference_file`) it has."""
        found = []
        for location in self.resolved_locations():
            source = self._source(location, cache_dir)
            data = source.read_reference()
            if data is not None:
                found.append((source.spec.name, source.spec.reference_file, data))
        return found


__all__ = ["SourceError", "UpstreamResource", "WarehouseResource"]
