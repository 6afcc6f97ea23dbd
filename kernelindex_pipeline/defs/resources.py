"""Resources: the warehouse under KERNELINDEX_HOME and the upstream source(s).

Their directory settings come from environment variables through `dg.EnvVar` (`from_environment`), so the
UI shows which variable configures a resource and a run reads it when it starts; an unset variable leaves
the shipped default."""

import os
from pathlib import Path
from typing import ClassVar

import dagster as dg
from pydantic import Field

from kernelindex_pipeline.ingest.sources import Revision, SourceError, env_number, open_source, screen_revisions
from kernelindex_pipeline.warehouse.store import Warehouse

REPO_DATA = Path(__file__).resolve().parents[2] / "data"
SHIPPED_UPSTREAM = REPO_DATA / "upstream" / "liger-kernel"
SHIPPED_GH_PAGES = REPO_DATA / "upstream" / "liger-kernel-gh-pages"
SHIPPED_SOURCES = (SHIPPED_UPSTREAM, SHIPPED_GH_PAGES)
SHIPPED_EVIDENCE = REPO_DATA / "evidence"
SHIPPED_ATTESTATIONS = REPO_DATA / "attestations"


def _or_env(value, name: str, default, kind):
    return value if value is not None else env_number(name, default, kind)


class _FromEnvironment(dg.ConfigurableResource):
    ENVIRONMENT: ClassVar[dict[str, str]] = {}  # field -> the environment variable that configures it

    @classmethod
    def _bound(cls, given: dict, bind):
        """This resource with the non-empty `given` fields, and `bind(variable)` for each other field in
        `ENVIRONMENT` whose variable is set."""
        given = {field: value for field, value in given.items() if value}
        bound = {field: bind(variable) for field, variable in cls.ENVIRONMENT.items()
                 if field not in given and os.environ.get(variable)}
        return cls(**bound, **given)

    @classmethod
    def from_environment(cls, **given):
        """Each set variable bound to its field as `dg.EnvVar`, which a run resolves when it starts."""
        return cls._bound(given, dg.EnvVar)

    @classmethod
    def resolved(cls, **given):
        """`from_environment` with its variables read now, for use outside a Dagster run (the CLI): the
        values a run would resolve, without starting Dagster's instance to resolve them."""
        return cls._bound(given, os.environ.__getitem__)


class WarehouseResource(_FromEnvironment):
    """The embedded DuckDB + Parquet warehouse; `home` empty means ./data."""

    ENVIRONMENT = {"home": "KERNELINDEX_HOME", "evidence_dir": "KERNELINDEX_EVIDENCE",
                   "attestations_dir": "KERNELINDEX_ATTESTATIONS"}

    home: str = Field(default="", description="Warehouse directory ($KERNELINDEX_HOME; default ./data)")
    evidence_dir: str = Field(default="", description="Directory of committed rerun evidence (*.jsonl.gz; "
                              "$KERNELINDEX_EVIDENCE; default data/evidence)")
    attestations_dir: str = Field(default="", description="Directory of attestation files (*.json, "
                                  "docs/attestations.md; $KERNELINDEX_ATTESTATIONS; default data/attestations)")

    def warehouse(self) -> Warehouse:
        return Warehouse(self.home or None)

    def evidence_path(self) -> Path:
        return Path(self.evidence_dir) if self.evidence_dir else SHIPPED_EVIDENCE

    def attestations_path(self) -> Path:
        return Path(self.attestations_dir) if self.attestations_dir else SHIPPED_ATTESTATIONS


class SigningResource(_FromEnvironment):
    """The key that signs verdict statements (`kernelindex export --format intoto`): an Ed25519 private key
    in a PEM file; none configured means statements are written unsigned."""

    ENVIRONMENT = {"key_file": "KERNELINDEX_SIGNING_KEY"}

    key_file: str = Field(default="", description="PEM file of an Ed25519 private key ($KERNELINDEX_SIGNING_KEY; "
                          "default: none, statements unsigned)")

    def signer(self):
        """A securesystemslib signer of the key, or None without one."""
        from kernelindex_pipeline.site.statements import load_signer

        return load_signer(self.key_file) if self.key_file else None


class UpstreamResource(_FromEnvironment):
    """Upstream benchmark snapshots: directories laid out like data/upstream/liger-kernel, or GitHub URLs."""

    ENVIRONMENT = {"sources": "KERNELINDEX_SOURCES"}

    locations: list[str] = Field(
        default_factory=list,
        description="Directories or URLs (github:owner/name, http(s)://...); default: `sources`",
    )
    sources: str = Field(default="", description="Comma-separated directories or URLs, used when `locations` "
                         "is empty ($KERNELINDEX_SOURCES; default: the shipped main-branch snapshots and gh-pages runs)")
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
        return [s.strip() for s in self.sources.split(",") if s.strip()] or [str(p) for p in SHIPPED_SOURCES]

    def _source(self, location: str, cache_dir: Path | None = None):
        options = {
            "timeout_s": _or_env(self.timeout_s, "KERNELINDEX_HTTP_TIMEOUT_S", 30.0, float),
            "max_retries": _or_env(self.max_retries, "KERNELINDEX_HTTP_RETRIES", 5, int),
            "backoff_s": _or_env(self.backoff_s, "KERNELINDEX_HTTP_BACKOFF_S", 1.0, float),
            "max_bytes": _or_env(self.max_bytes, "KERNELINDEX_HTTP_MAX_BYTES", 64 * 2**20, int),
            "token_env": self.token_env, "cache_dir": cache_dir}
        return open_source(location, **options)

    def list_revisions(self, cache_dir: Path | None = None) -> list[Revision]:
        """Every revision the locations offer, oldest first: one commit of one file once (the first location's),
        screened again over all locations, so that two locations' commits sharing a key are both refused
        rather than one taken for the other."""
        offered: dict[tuple[str, str], Revision] = {}
        for location in self.resolved_locations():
            for revision in self._source(location, cache_dir).list_revisions():
                offered.setdefault((revision.stream, revision.commit), revision)
        return screen_revisions(offered.values())

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


__all__ = ["SigningResource", "SourceError", "UpstreamResource", "WarehouseResource"]
