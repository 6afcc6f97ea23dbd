"""Where upstream snapshots come from: a directory laid out like the shipped one, or GitHub.

Both give the same thing: the list of upstream revisions (one per commit that changed a benchmark
CSV) and the CSV bytes of each. Nothing here parses rows; it only fetches and vouches for bytes.
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

# The upstream benchmark files KernelIndex ingests. A new file of the same format is one more line.
UPSTREAM_PATHS: tuple[str, ...] = (
    "benchmark/data/all_benchmark_data.csv",
    "benchmark/data/all_benchmark_data_cutedsl.csv",
    "benchmark/data/all_benchmark_data_cutile.csv",
)
UPSTREAM_REPOSITORY = "linkedin/Liger-Kernel"
SOURCE_NAME = "liger-kernel-bench"


class SourceError(Exception):
    """An upstream revision could not be listed or fetched; the message says why, in one line."""


class FileDeletedAtRevision(SourceError):
    """The source lists this revision of a file, but the revision deleted the file: there are no bytes to read.

    Not a fetch failure. GitHub's commit listing for a path includes the commit that removed it; the
    ingestion records such a revision as an empty snapshot (no rows), so the runs of that file are marked
    `withdrawn_upstream` from then on and the revision is never fetched again.
    """


@dataclass(frozen=True, order=True)
class Revision:
    """One upstream commit of one benchmark file."""

    committed_at: str  # ISO 8601, UTC, e.g. 2025-08-09T23:34:42+00:00 (first: revisions sort by time)
    stream: str  # the file's stem, e.g. all_benchmark_data_cutile
    commit: str  # full 40-hex commit id
    path: str  # path in the upstream repository
    location: str  # the source location that offers it (directory or URL)

    @property
    def key(self) -> str:
        """Dynamic partition key: one per upstream commit of each source file."""
        return f"{self.stream}@{self.commit[:12]}"


def stream_of(path: str) -> str:
    return Path(path).name.removesuffix(".csv")


def utc_iso(timestamp: str) -> str:
    """An ISO 8601 timestamp with any offset, as UTC."""
    parsed = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc).isoformat()


class DirectorySource:
    """A directory with INDEX.tsv (commit, committed_at, path, file) and one gzip CSV per revision."""

    def __init__(self, location: str, paths: tuple[str, ...] = UPSTREAM_PATHS):
        self.location = location
        self.root = Path(location)
        self.paths = paths

    def list_revisions(self) -> list[Revision]:
        index = self.root / "INDEX.tsv"
        try:
            rows = list(csv.DictReader(index.read_text(encoding="utf-8").splitlines(), delimiter="\t"))
        except OSError as exc:
            raise SourceError(f"cannot read {index}: {exc.strerror or exc}") from exc
        try:
            return sorted(
                Revision(utc_iso(r["committed_at"]), stream_of(r["path"]), r["commit"], r["path"], self.location)
                for r in rows
                if r["path"] in self.paths
            )
        except (KeyError, ValueError, TypeError) as exc:
            raise SourceError(f"{index} is not a revision index (commit, committed_at, path, file): {exc}") from exc

    def _file_of(self, revision: Revision) -> Path:
        for r in csv.DictReader((self.root / "INDEX.tsv").read_text(encoding="utf-8").splitlines(), delimiter="\t"):
            if r["commit"] == revision.commit and r["path"] == revision.path:
                return self.root / r["file"]
        raise SourceError(f"{revision.key} is not listed in {self.root / 'INDEX.tsv'}")

    def read(self, revision: Revision) -> bytes:
        path = self._file_of(revision)
        try:
            data = path.read_bytes()
            return gzip.decompress(data) if path.suffix == ".gz" else data
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise SourceError(f"cannot read {path}: {exc}") from exc


def open_source(location: str, **http_options):
    """The source behind a location: a directory path, or an http(s) URL serving GitHub's shapes."""
    if location.startswith(("http://", "https://", "github:")):
        from kernelindex_pipeline.github import GitHubSource

        return GitHubSource(location, **http_options)
    return DirectorySource(location)

