"""Identity rules of the contract: canonical JSON, digests, slugs, ids. Pure functions, no Dagster."""

from __future__ import annotations

import hashlib
import json
import re

API_VERSION = "kernelindex.dev/v1alpha1"


def canonical_json(obj) -> str:
    """Sorted keys, no whitespace, UTF-8 kept as is: the text every digest is taken of."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(obj) -> str:
    return digest_of_text(canonical_json(obj))


def digest_of_text(canonical: str) -> str:
    """The digest of an object already in canonical JSON."""
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def slugify(text: str) -> str:
    """Lower-case, every run of other characters folded to one '-' (as in metadata names)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def manifest_name(prefix: str, external_id: str) -> str:
    """A run's metadata.name: the prefixed slug of its external id, cut at 100 characters."""
    return f"{prefix}-{slugify(external_id)}"[:100]


def run_id(source: str, external_id: str) -> str:
    """Stable run id: the same source and external id always give the same id."""
    return hashlib.sha256(f"{source}:{external_id}".encode("utf-8")).hexdigest()[:16]
