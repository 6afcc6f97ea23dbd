"""Where upstream snapshots come from: a directory laid out like the shipped one, or GitHub.

Both give the same thing (`Source`): the list of upstream revisions (one per commit that changed a
benchmark CSV) and the CSV bytes of each. What a source holds is declared once (`SourceSpec`): Liger's
main-branch benchmark files (`LIGER_MAIN`) and the runs it publishes on `gh-pages` (`LIGER_GH_PAGES`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from kernelindex_pipeline.ingest.sources.base import (
    LIGER_GH_PAGES,
    LIGER_MAIN,
    SOURCE_NAME,
    SOURCES,
    UPSTREAM_PATHS,
    UPSTREAM_REPOSITORY,
    FileDeletedAtRevision,
    Revision,
    Source,
    SourceError,
    SourceSpec,
    env_number,
    key_problem,
    screen_revisions,
    source_spec,
    stream_of,
    utc_iso,
)
from kernelindex_pipeline.ingest.sources.directory import DirectorySource
from kernelindex_pipeline.ingest.sources.github import GitHubSource
from kernelindex_pipeline.ingest.sources.http import HttpClient


# Within ``listed_once``: each location's revisions, as first listed.
_LISTINGS: ContextVar[dict[str, list[Revision]] | None] = ContextVar("kernelindex_listings", default=None)


@contextlib.contextmanager
def listed_once() -> Iterator[None]:
    """Within it, each location is listed once: a source opened again for it (the ingest job fetching what the
    command found new) answers with the first listing, one view of upstream for the whole ingest."""
    token = _LISTINGS.set({})
    try:
        yield
    finally:
        _LISTINGS.reset(token)


class _ListedOnce:
    """A source whose listing comes from ``listings`` once one was made for its location."""

    def __init__(self, source: Source, listings: dict[str, list[Revision]]):
        self._source, self._listings = source, listings

    def __getattr__(self, name):
        return getattr(self._source, name)

    def list_revisions(self) -> list[Revision]:
        location = self._source.location
        if location not in self._listings:
            self._listings[location] = self._source.list_revisions()
        return list(self._listings[location])


def open_source(location: str, **http_options) -> Source:
    """The source behind a location: a directory path, or an http(s) URL serving GitHub's shapes.

    The location names the declaration, so `open_source(revision.location)` reads any listed revision again:
    a directory is read with the declaration whose files its INDEX.tsv lists; ``github:owner/name`` and
    ``http(s)://...`` are the main-branch files, ``github:owner/name@gh-pages`` and ``http(s)://...#gh-pages``
    the published runs (after ``@`` / ``#``: a declaration's branch or name).
    `http_options` are GitHubSource's keyword arguments; a directory source ignores them.
    """
    source = GitHubSource(location, **http_options) if location.startswith(("http://", "https://", "github:")) \
        else DirectorySource(location)
    listings = _LISTINGS.get()
    return source if listings is None else _ListedOnce(source, listings)


__all__ = [
    "LIGER_GH_PAGES",
    "LIGER_MAIN",
    "SOURCES",
    "SOURCE_NAME",
    "UPSTREAM_PATHS",
    "UPSTREAM_REPOSITORY",
    "DirectorySource",
    "FileDeletedAtRevision",
    "GitHubSource",
    "HttpClient",
    "Revision",
    "Source",
    "SourceError",
    "SourceSpec",
    "env_number",
    "key_problem",
    "listed_once",
    "open_source",
    "screen_revisions",
    "source_spec",
    "stream_of",
    "utc_iso",
]
