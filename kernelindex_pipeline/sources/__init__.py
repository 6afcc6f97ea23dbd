"""Where upstream snapshots come from: a directory laid out like the shipped one, or GitHub.

Both give the same thing (`Source`): the list of upstream revisions (one per commit that changed a
benchmark CSV) and the CSV bytes of each. What a source holds is declared once (`SourceSpec`): Liger's
main-branch benchmark files (`LIGER_MAIN`) and the runs it publishes on `gh-pages` (`LIGER_GH_PAGES`).
"""

from __future__ import annotations

from kernelindex_pipeline.sources.base import (
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
from kernelindex_pipeline.sources.directory import DirectorySource
from kernelindex_pipeline.sources.github import GitHubSource
from kernelindex_pipeline.sources.http import HttpClient


def open_source(location: str, **http_options) -> Source:
    """The source behind a location: a directory path, or an http(s) URL serving GitHub's shapes.

    The location names the declaration, so `open_source(revision.location)` reads any listed revision again:
    a directory is read with the declaration whose files its INDEX.tsv lists; ``github:owner/name`` and
    ``http(s)://...`` are the main-branch files, ``github:owner/name@gh-pages`` and ``http(s)://...#gh-pages``
    the published runs (after ``@`` / ``#``: a declaration's branch or name).
    `http_options` are GitHubSource's keyword arguments; a directory source ignores them.
    """
    if location.startswith(("http://", "https://", "github:")):
        return GitHubSource(location, **http_options)
    return DirectorySource(location)


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
    "open_source",
    "screen_revisions",
    "source_spec",
    "stream_of",
    "utc_iso",
]
