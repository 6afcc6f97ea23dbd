"""What every upstream source gives: the revisions of the benchmark files and the CSV bytes of each.

Nothing here parses rows; a source only fetches and vouches for bytes. Every failure is a `SourceError`
whose message is one line that says why.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

# The upstream benchmark files KernelIndex ingests. A new file of the same format is one more line.
UPSTREAM_PATHS: tuple[str, ...] = (
    "benchmark/data/all_benchmark_data.csv",
    "benchmark/data/all_benchmark_data_cutedsl.csv",
    "benchmark/data/all_benchmark_data_cutile.csv",
)
UPSTREAM_REPOSITORY = "linkedin/Liger-Kernel"
SOURCE_NAME = "liger-kernel-bench"
MiB = 2**20

Number = TypeVar("Number", int, float)


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


@runtime_checkable
class Source(Protocol):
    """A place that offers upstream revisions: a snapshot directory or an HTTP server in GitHub's shapes."""

    location: str

    def list_revisions(self) -> list[Revision]:
        """Every revision of the benchmark files this source offers, oldest first."""
        ...

    def read(self, revision: Revision) -> bytes:
        """The uncompressed CSV bytes of one revision."""
        ...


def stream_of(path: str) -> str:
    return Path(path).name.removesuffix(".csv")


def utc_iso(timestamp: str) -> str:
    """An ISO 8601 timestamp with any offset, as UTC."""
    parsed = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc).isoformat()


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def printable(text: str | os.PathLike) -> str:
    """A name fit for a one-line message: bytes that are not UTF-8 as \\xNN, control characters escaped."""
    text = os.fspath(text)
    try:
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def env_number(name: str, default: Number, kind: type[Number]) -> Number:
    """The number in environment variable `name` (a finite value >= 0), or `default` when unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    noun = "a whole number" if kind is int else "a number"
    try:
        value = kind(raw)
    except ValueError:
        raise SourceError(f"${name} is not {noun}: {one_line(raw, 40)!r}") from None
    if not math.isfinite(value) or value < 0:
        raise SourceError(f"${name} must be {noun} >= 0, not {one_line(raw, 40)!r}")
    return value
