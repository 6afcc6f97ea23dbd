"""Where upstream snapshots come from: a directory laid out like the shipped one, or GitHub.

Both give the same thing (`Source`): the list of upstream revisions (one per commit that changed a
benchmark CSV) and the CSV bytes of each.
"""

from __future__ import annotations

from kernelindex_pipeline.sources.base import (
    SOURCE_NAME,
    UPSTREAM_PATHS,
    UPSTREAM_REPOSITORY,
    FileDeletedAtRevision,
    Revision,
    Source,
    SourceError,
    env_number,
    stream_of,
    utc_iso,
)
from kernelindex_pipeline.sources.directory import DirectorySource
from kernelindex_pipeline.sources.github import GitHubSource
from kernelindex_pipeline.sources.http import HttpClient


def open_source(location: str, **http_options) -> Source:
    """The source behind a location: a directory path, or an http(s) URL serving GitHub's shapes.

    `http_options` are GitHubSource's keyword arguments; a directory source ignores them.
    """
    if location.startswith(("http://", "https://", "github:")):
        return GitHubSource(location, **http_options)
    return DirectorySource(location)


__all__ = [
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
    "env_number",
    "open_source",
    "stream_of",
    "utc_iso",
]
