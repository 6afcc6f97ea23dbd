"""Snapshots from a directory: INDEX.tsv (commit, committed_at, path, file) and one gzip CSV per revision.

Which source a directory holds (its `SourceSpec`: main-branch files or gh-pages runs) follows from the paths
INDEX.tsv lists, unless given: the declaration whose files it lists (a directory may not mix two); none
listed reads as the main-branch source (an empty listing). Under a declaration with `removals`, a row with an
empty `file` is the commit that removed the path upstream: `read` raises `FileDeletedAtRevision`.

The directory is untrusted input. A `file` entry is read only when it names a regular file inside the
directory (no `..`, no absolute path, no symlink that leads out); decompression is streamed and stops at
`max_bytes` (default 256 MiB, `$KERNELINDEX_MAX_SNAPSHOT_BYTES`); names and INDEX.tsv must be UTF-8.
"""

from __future__ import annotations

import csv
import gzip
import io
import logging
import os
import stat
import zlib
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath, PureWindowsPath

from kernelindex_pipeline.ingest.sources.base import (
    LIGER_MAIN,
    SOURCES,
    FileDeletedAtRevision,
    MiB,
    Revision,
    SourceError,
    SourceSpec,
    env_number,
    printable,
    screen_revisions,
    utc_iso,
)

log = logging.getLogger(__name__)

INDEX_NAME = "INDEX.tsv"
INDEX_COLUMNS = ("commit", "committed_at", "path", "file")
MAX_SNAPSHOT_BYTES = 256 * MiB
_CHUNK = MiB
# O_NONBLOCK: opening a FIFO must not wait for a writer (anything but a regular file is refused after).
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class _Entry:
    revision: Revision
    file: str  # the `file` column, relative to the directory
    line: int  # its line in INDEX.tsv


class DirectorySource:
    """A directory with INDEX.tsv (commit, committed_at, path, file) and one gzip CSV per revision."""

    def __init__(self, location: str, paths: tuple[str, ...] | None = None, *, spec: SourceSpec | None = None,
                 max_bytes: int | None = None):
        """`spec`: the declaration to read the directory with (default: recognised from INDEX.tsv's paths);
        `paths`: other exact paths for a declaration of exact paths (the main-branch one by default)."""
        self.location = location
        self.root = Path(location)
        if paths is not None:
            spec = (spec or LIGER_MAIN).with_paths(paths)
        self._spec: SourceSpec | None = spec
        if max_bytes is None:
            max_bytes = env_number("KERNELINDEX_MAX_SNAPSHOT_BYTES", MAX_SNAPSHOT_BYTES, int)
        if not max_bytes >= 1:
            raise SourceError(f"the snapshot size cap must be at least 1 byte, not {max_bytes!r} "
                              "($KERNELINDEX_MAX_SNAPSHOT_BYTES)")
        self.max_bytes = int(max_bytes)
        try:
            location.encode("utf-8")
        except UnicodeEncodeError:
            raise SourceError(f"the snapshot directory name is not UTF-8: {printable(location)}") from None
        self._entries: dict[tuple[str, str], _Entry] | None = None

    def __repr__(self) -> str:
        return f"DirectorySource('{printable(self.location)}')"

    @property
    def spec(self) -> SourceSpec:
        """The declaration this directory is read with (recognised from INDEX.tsv when not given)."""
        if self._spec is None:
            self._index()
        return self._spec

    @property
    def paths(self) -> tuple[str, ...]:
        """The exact paths of the declaration (empty for a declaration by pattern)."""
        return self.spec.paths

    # -- the source interface -------------------------------------------------------------------------

    def list_revisions(self) -> list[Revision]:
        return sorted(entry.revision for entry in self._index().values())

    def read(self, revision: Revision) -> bytes:
        entry = self._index().get((revision.commit, revision.path))
        if entry is None:
            raise SourceError(f"{revision.key} is not listed in {printable(self.root / INDEX_NAME)}")
        if entry.revision.refused:
            return b""  # nothing of a refused revision is taken in
        return self._bytes(entry)

    def _bytes(self, entry: _Entry) -> bytes:
        revision = entry.revision
        if not entry.file and self.spec.removals:
            raise FileDeletedAtRevision(f"{revision.key}: commit {revision.commit[:12]} removed {revision.path} "
                                        f"({INDEX_NAME} line {entry.line}: no file)")
        path = self._file_of(entry)
        what = f"{revision.key}: {printable(path)}"
        with self._open_regular(path, what) as handle:
            if entry.file.endswith(".gz"):
                return self._gunzip(handle, what)
            return self._read_capped(handle, what)

    def read_reference(self) -> bytes | None:
        name = PurePosixPath(self.spec.reference_file).name
        if not name or not (self.root / name).exists():
            return None
        what = f"{self.spec.name}'s {name}: {printable(self.root / name)}"
        with self._open_regular(self._inside(name, what), what) as handle:
            return self._read_capped(handle, what)

    # -- INDEX.tsv, read once per source --------------------------------------------------------------

    def _index(self) -> dict[tuple[str, str], _Entry]:
        """The entries of the declaration's files, keyed by (commit, path), screened (`screen_revisions`). Lines
        listing one pair twice are one revision where their files hold the same bytes, else it is refused."""
        if self._entries is None:
            entries: dict[tuple[str, str], _Entry] = {}
            for entry in self._read_index():
                pair = (entry.revision.commit, entry.revision.path)
                first = entries.setdefault(pair, entry)
                if first is not entry and not first.revision.refused and self._differ(first, entry):
                    why = (f"{INDEX_NAME} lines {first.line} and {entry.line} list commit {pair[0]} of {pair[1]} "
                           f"with different files ('{printable(first.file)}', '{printable(entry.file)}'): "
                           "refused, since either could be the revision")
                    entries[pair] = replace(first, revision=replace(first.revision, refused=why))
            screened = screen_revisions(entry.revision for entry in entries.values())
            self._entries = {(r.commit, r.path): replace(entries[r.commit, r.path], revision=r) for r in screened}
        return self._entries

    def _differ(self, a: _Entry, b: _Entry) -> bool:
        """Whether two entries of one revision give different bytes (a removal and a file differ)."""
        if a.file == b.file:
            return False
        removal = self.spec.removals
        if removal and not (a.file and b.file):
            return bool(a.file) != bool(b.file)
        return self._bytes(a) != self._bytes(b)

    def _read_index(self) -> list[_Entry]:
        index = self.root / INDEX_NAME
        shown = printable(index)
        path = self._inside(INDEX_NAME, shown)
        with self._open_regular(path, shown) as handle:
            data = handle.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise SourceError(f"{shown} is over the {self.max_bytes}-byte cap ($KERNELINDEX_MAX_SNAPSHOT_BYTES)")
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SourceError(_not_utf8(shown, data, exc.start)) from None
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter="\t")
        try:
            missing = [c for c in INDEX_COLUMNS if c not in (reader.fieldnames or ())]
            if missing:
                raise SourceError(f"{shown} is not a revision index ({', '.join(INDEX_COLUMNS)}): "
                                  f"no column {', '.join(missing)}")
            rows = [(reader.line_num, row) for row in reader]
        except csv.Error as exc:
            raise SourceError(f"{shown} line {reader.line_num}: not a TSV row ({exc})") from None
        spec = self._spec or self._recognise(shown, [row["path"] for _, row in rows if row["path"] is not None])
        self._spec = spec
        entries = []
        skipped = set()
        for line, row in rows:
            if row["path"] is None or not spec.matches(row["path"]):
                if row["path"] is not None and spec.looks_like(row["path"]):
                    skipped.add(row["path"])
                continue
            if any(row[c] is None for c in INDEX_COLUMNS):
                raise SourceError(f"{shown} line {line}: fewer than {len(INDEX_COLUMNS)} columns")
            try:
                committed_at = utc_iso(row["committed_at"])
            except ValueError:
                raise SourceError(f"{shown} line {line}: committed_at '{printable(row['committed_at'])}' "
                                  "is not an ISO 8601 time") from None
            revision = spec.revision(committed_at, row["commit"], row["path"], self.location)
            entries.append(_Entry(revision, row["file"], line))
        if skipped:
            log.warning("%s: skipped %d %s path(s) whose run directory does not parse: %s", shown,
                        len(skipped), spec.name, ", ".join(printable(p) for p in sorted(skipped)[:5]))
        return entries

    @staticmethod
    def _recognise(shown: str, paths: list[str]) -> SourceSpec:
        """The declaration whose files INDEX.tsv lists; the main-branch one when it lists none."""
        found = [spec for spec in SOURCES if any(spec.matches(p) for p in paths)]
        if len(found) > 1:
            raise SourceError(f"{shown} lists files of several sources ({', '.join(s.name for s in found)}): "
                              "keep one source per directory")
        return found[0] if found else LIGER_MAIN

    # -- files inside the directory -------------------------------------------------------------------

    def _file_of(self, entry: _Entry) -> Path:
        where = f"{entry.revision.key}: file entry '{printable(entry.file)}' ({INDEX_NAME} line {entry.line})"
        return self._inside(entry.file, where)

    def _inside(self, name: str, where: str) -> Path:
        """The real path of `name` under the directory; a SourceError when it is, or leads, anywhere else."""
        if not name:
            raise SourceError(f"{where} is empty")
        if "\0" in name:
            raise SourceError(f"{where} contains a NUL character")
        pure = PurePosixPath(name)
        if pure.is_absolute() or PureWindowsPath(name).is_absolute() or ".." in pure.parts:
            raise SourceError(f"{where} points outside {printable(self.root)}: refused")
        try:
            root = self.root.resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise SourceError(f"cannot read the snapshot directory {printable(self.root)}: {_strerror(exc)}") from None
        try:
            real = (root / name).resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise SourceError(f"{where}: cannot read it: {_strerror(exc)}") from None
        if not real.is_relative_to(root):
            raise SourceError(f"{where} resolves outside {printable(self.root)} (a symlink): refused")
        return real

    @staticmethod
    def _open_regular(path: Path, what: str) -> io.BufferedReader:
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError as exc:
            raise SourceError(f"cannot read {what}: {_strerror(exc)}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise SourceError(f"cannot read {what}: not a regular file")
        return open(fd, "rb")

    def _read_capped(self, handle: io.BufferedReader, what: str) -> bytes:
        data = handle.read(self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise SourceError(f"{what} is over the {self.max_bytes}-byte cap ($KERNELINDEX_MAX_SNAPSHOT_BYTES)")
        return data

    def _gunzip(self, handle: io.BufferedReader, what: str) -> bytes:
        """The decompressed bytes, streamed: stops as soon as they pass `max_bytes`."""
        out = io.BytesIO()
        try:
            with gzip.GzipFile(fileobj=handle, mode="rb") as stream:
                while chunk := stream.read(_CHUNK):
                    if out.tell() + len(chunk) > self.max_bytes:
                        raise SourceError(f"{what} decompresses to more than the {self.max_bytes}-byte cap "
                                          "($KERNELINDEX_MAX_SNAPSHOT_BYTES)")
                    out.write(chunk)
        except EOFError:
            raise SourceError(f"{what} is a truncated gzip file") from None
        except (gzip.BadGzipFile, zlib.error) as exc:
            raise SourceError(f"{what} is not a valid gzip file ({exc})") from None
        except OSError as exc:
            raise SourceError(f"cannot read {what}: {_strerror(exc)}") from None
        return out.getvalue()


def _strerror(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return printable(str(exc))


def _not_utf8(shown: str, data: bytes, offset: int) -> str:
    """Where INDEX.tsv stops being UTF-8; when it is in the `file` column, the entry that is not a UTF-8 name."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    line_end = data.find(b"\n", offset)
    line = data[line_start: len(data) if line_end < 0 else line_end].rstrip(b"\r")
    number = data.count(b"\n", 0, offset) + 1
    header = data.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", "replace").lstrip("\ufeff").split("\t")
    column = data.count(b"\t", line_start, offset)
    if number > 1 and column < len(header) and header[column] == "file":
        name = os.fsdecode(line.split(b"\t")[column])
        return f"{shown} line {number}: file entry '{printable(name)}' is not a UTF-8 name: refused"
    return f"{shown} is not UTF-8 (line {number}, byte 0x{data[offset]:02x})"
