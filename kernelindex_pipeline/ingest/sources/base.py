"""What every upstream source gives: the revisions of the benchmark files and the CSV bytes of each.

Nothing here parses rows; a source only fetches and vouches for bytes. Every failure is a `SourceError`
whose message is one line that says why.
"""

from __future__ import annotations

import math
import os
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
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
KEY_DIGITS = 12  # a revision key names its commit by this many hex digits
# How far past the ingest's clock a commit time may lie (clock skew, a time zone written wrong); later, the
# revision is refused: as its file's newest listing it would withdraw every run it does not list.
FUTURE_TOLERANCE = timedelta(days=1)

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
    source: str = SOURCE_NAME  # the name of the declaration (`SourceSpec.name`) it was listed under
    benchmarked_commit: str | None = None  # gh-pages runs: the Liger commit benchmarked (short, as in the path)
    release: str | None = None  # gh-pages release runs: e.g. "0.6.4"; None otherwise
    refused: str | None = None  # why the revision cannot be taken in (`screen_revisions`): it has no rows

    @property
    def key(self) -> str:
        """Dynamic partition key: one per upstream commit of each source file, e.g.
        ``all_benchmark_data@0400d313c0ff`` (main) or ``gh-pages/0a62700-v0.6.4@ba133a77ec3d`` (gh-pages). A
        refused revision is keyed by its full commit id, which no other revision's key can equal."""
        return f"{self.stream}@{self.commit if self.refused else self.commit[:KEY_DIGITS]}"


# Characters a revision key may use. Dagster stores dynamic partition keys as given, but refuses "...", tabs,
# newlines and other control characters in static ones, reads "..." as a range, "," as a list separator and
# "[", "]" as range brackets when partitions are selected (UI, CLI, backfills), and "|" joins multi-partition
# keys. A key here is one of [A-Za-z0-9._/@-], with no "..", no leading "/" or "." and exactly one "@".
_SAFE_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*@[0-9A-Za-z]{1,40}")


def key_problem(key: str) -> str | None:
    """Why `key` is no safe Dagster partition key (None when it is)."""
    if len(key) > 200:
        return "longer than 200 characters"
    if not _SAFE_KEY.fullmatch(key):
        return "not of the form <stream>@<commit>, with a stream of letters, digits and . _ / -"
    if ".." in key or "//" in key or key.split("@")[0].endswith("/"):
        return "contains '..', '//' or an empty path segment"
    return None


@dataclass(frozen=True)
class SourceSpec:
    """The declaration of one upstream source: which repository and branch, which files, and how a file's
    path becomes a stream (and, for published runs, the Liger commit and release it benchmarked).

    Files are either the exact `paths` or every path matching `pattern`, a path with one ``*`` standing for
    one path segment (the run directory); that segment must fullmatch `run`, a regex with a ``commit`` and an
    optional ``release`` group (a matching path whose segment does not is skipped). The stream of an exact
    path is its file stem (``all_benchmark_data``); of a pattern path, `stream_prefix` + the run directory
    (``gh-pages/0a62700-v0.6.4``). `removals`: a snapshot-directory row with an empty ``file`` records the
    commit that removed the path upstream (`FileDeletedAtRevision`); without it an empty ``file`` is an error.
    `reference_file`: the branch's file naming the reference run per kernel (gh-pages' ``golden_commits.json``),
    read as the branch holds it now; a snapshot directory keeps it under its base name.
    """

    name: str
    repository: str
    branch: str
    paths: tuple[str, ...] = ()
    pattern: str = ""
    run: str = ""
    stream_prefix: str = ""
    removals: bool = False
    reference_file: str = ""

    def __post_init__(self):
        if bool(self.paths) == bool(self.pattern):
            raise ValueError(f"source {self.name!r}: give either exact paths or a pattern")
        if self.pattern and (self.pattern.count("*") != 1 or not self.run):
            raise ValueError(f"source {self.name!r}: a pattern has one '*' (a path segment) and a run regex")

    @property
    def _pattern_parts(self) -> tuple[str, str]:
        head, _, tail = self.pattern.partition("*")
        return head, tail

    def _segment(self, path: str) -> str | None:
        """The run directory of a pattern path (None when the path is not one of this source's)."""
        head, tail = self._pattern_parts
        if not (path.startswith(head) and path.endswith(tail)) or len(path) <= len(head) + len(tail):
            return None
        segment = path[len(head): len(path) - len(tail)]
        return segment if "/" not in segment else None

    def _run(self, path: str) -> re.Match | None:
        segment = self._segment(path)
        return re.fullmatch(self.run, segment) if segment is not None else None

    def matches(self, path: str) -> bool:
        """Whether `path` is one of this source's files."""
        if self.paths:
            return path in self.paths
        return self._run(path) is not None

    def looks_like(self, path: str) -> bool:
        """Whether `path` has the shape of this source's files (a pattern path whose run name may not parse)."""
        return path in self.paths if self.paths else self._segment(path) is not None

    def select(self, paths) -> tuple[str, ...]:
        """This source's files among `paths`: exact paths in declaration order, pattern paths sorted."""
        if self.paths:
            found = set(paths)
            return tuple(p for p in self.paths if p in found)
        return tuple(sorted({p for p in paths if self.matches(p)}))

    def stream_of(self, path: str) -> str:
        if self.paths:
            return stream_of(path)
        return self.stream_prefix + self._segment(path)

    def benchmarked(self, path: str) -> tuple[str | None, str | None]:
        """(benchmarked Liger commit, release) named by a pattern path; (None, None) for exact paths."""
        match = self._run(path) if not self.paths else None
        if match is None:
            return None, None
        groups = match.groupdict()
        return groups.get("commit"), groups.get("release")

    def revision(self, committed_at: str, commit: str, path: str, location: str) -> Revision:
        """The revision of `path` at `commit`, as this source names it."""
        benchmarked, release = self.benchmarked(path)
        revision = Revision(committed_at, self.stream_of(path), commit, path, location, self.name, benchmarked,
                            release)
        problem = None if self.paths else key_problem(revision.key)  # exact paths: keys as they always were
        if problem:
            raise SourceError(f"revision key {printable(revision.key)!r} of {printable(path)} is {problem}")
        return revision

    def with_paths(self, paths) -> SourceSpec:
        """The same declaration with other exact paths (only for a declaration of exact paths)."""
        return replace(self, paths=tuple(paths)) if self.paths else self


# The two upstream sources KernelIndex knows: Liger's main-branch benchmark files and its published runs.
LIGER_MAIN = SourceSpec(name=SOURCE_NAME, repository=UPSTREAM_REPOSITORY, branch="main", paths=UPSTREAM_PATHS)
LIGER_GH_PAGES = SourceSpec(
    name="liger-kernel-gh-pages",
    repository=UPSTREAM_REPOSITORY,
    branch="gh-pages",
    pattern="benchmarks/*/benchmark.csv",
    run=r"(?P<commit>[0-9a-f]{7,40})(?:-v(?P<release>[0-9]+(?:\.[0-9A-Za-z]+)*))?",
    stream_prefix="gh-pages/",
    removals=True,
    reference_file="benchmarks/golden_commits.json",
)
SOURCES: tuple[SourceSpec, ...] = (LIGER_MAIN, LIGER_GH_PAGES)


def source_spec(name_or_branch: str, repository: str | None = None) -> SourceSpec:
    """The declaration named `name_or_branch` (a name, or a branch of `repository`); SourceError if none."""
    for spec in SOURCES:
        if name_or_branch == spec.name:
            return spec
    for spec in SOURCES:
        if name_or_branch == spec.branch and (repository is None or repository.lower() == spec.repository.lower()):
            return spec
    known = ", ".join(f"{s.name} ({s.repository}@{s.branch})" for s in SOURCES)
    raise SourceError(f"no source declared as {printable(name_or_branch)!r}"
                      f"{f' for {printable(repository)}' if repository else ''}; declared: {known}")


@runtime_checkable
class Source(Protocol):
    """A place that offers upstream revisions: a snapshot directory or an HTTP server in GitHub's shapes."""

    location: str

    def list_revisions(self) -> list[Revision]:
        """Every revision of the benchmark files this source offers, oldest first."""
        ...

    def read(self, revision: Revision) -> bytes:
        """The uncompressed CSV bytes of one revision (none of a refused one)."""
        ...

    def read_reference(self) -> bytes | None:
        """The bytes of the declaration's `reference_file` as the branch holds it now (the dashboard's
        reference run per kernel); None where the declaration names none or the branch lacks it."""
        ...


def screen_revisions(revisions: Iterable[Revision], now: datetime | None = None) -> list[Revision]:
    """The revisions, oldest first, each that cannot be taken in refused with its reason: commits of one file
    whose keys (their first KEY_DIGITS hex digits) are equal, so that neither is taken for the other, and
    commits dated after `now` (the ingest's clock) by more than FUTURE_TOLERANCE."""
    revisions = list(revisions)
    latest = (now or datetime.now(timezone.utc)) + FUTURE_TOLERANCE
    commits = defaultdict(set)
    for revision in revisions:
        if not revision.refused:
            commits[revision.key].add(revision.commit)
    screened = []
    for revision in revisions:
        others = sorted(commits[revision.key] - {revision.commit}) if not revision.refused else []
        reason = revision.refused
        if others:
            reason = (f"commit {revision.commit} shares its revision key {revision.key} (the first {KEY_DIGITS} hex "
                      f"digits) with commit {others[0]}: refused, so that neither is taken for the other")
        elif not reason and datetime.fromisoformat(revision.committed_at) > latest:
            reason = (f"committed_at {revision.committed_at} is more than {FUTURE_TOLERANCE.days} day(s) after this "
                      "ingest's clock: refused, since as the newest listing of its file it would withdraw every "
                      "run it does not list")
        screened.append(replace(revision, refused=reason) if reason != revision.refused else revision)
    return sorted(screened)


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
