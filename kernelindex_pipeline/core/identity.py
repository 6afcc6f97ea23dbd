"""Identity rules of the contract: canonical JSON, digests, slugs, ids. Pure functions, no Dagster.

Every digest is `sha256:` of the RFC 8785 (JSON Canonicalization Scheme) bytes of an object without its
`metadata` (names and titles for people, as the seed records digest them). Objects were first published as
v1alpha1, digested over Python's `json.dumps` text; an object whose RFC 8785 bytes are not those is
published as v1alpha2, so its apiVersion says its digest is not the one v1alpha1 gave it, and that older
digest is kept beside it (`Published.v1alpha1_digest`). docs/digests.md tells readers how to recompute a
digest.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass

import rfc8785

API_VERSION = "kernelindex.dev/v1alpha1"
API_VERSION_V1ALPHA2 = "kernelindex.dev/v1alpha2"

# Where Python's compact json.dumps text can differ from RFC 8785, each searched for on its own (a pattern
# that starts with a literal is searched fast). Floats that end in ".0" or have an exponent (ECMAScript
# writes 722, 0.000001, 1e-7 where Python writes 722.0, 1e-06, 1e-07) are rewritten in the text; for an
# integer too long to be exact in a double (after '":', ',' or '['), characters beyond the Basic
# Multilingual Plane (RFC 8785 sorts keys by UTF-16 code units, Python by code points) or lone surrogates,
# rfc8785 writes the whole object. A match inside a string only costs the slower, still exact, path.
_FLOAT_FORMS = (re.compile(r"\.0[,\]}]"), re.compile(r"e[+-][0-9]"))
_OTHER_DIFFERENCES = tuple(re.compile(pattern) for pattern in (r'":-?[0-9]{16}', r",-?[0-9]{16}", r"\[-?[0-9]{16}"))
_BEYOND_BMP = re.compile("[\ud800-\U0010ffff]")  # searched only in text that is not all ASCII
_STRING = re.compile(r'("[^"\\]*(?:\\.[^"\\]*)*")')
_FLOAT = re.compile(r"-?[0-9]+(?:\.0(?![0-9])|(?:\.[0-9]+)?e[+-][0-9]+)")
# A whole number written with ".0" and at most 15 digits, which a double holds exactly: ECMAScript writes
# its digits alone (the bulk of a rerun's samples), so no per-number call is needed. Zero's sign aside.
_WHOLE_FLOAT = re.compile(r"(?<=[:,\[])(0|-?[1-9][0-9]{0,14})\.0(?=[,\]}])")
_V1ALPHA1_PREFIX = f'{{"apiVersion":"{API_VERSION}",'
_V1ALPHA2_PREFIX = f'{{"apiVersion":"{API_VERSION_V1ALPHA2}",'


def v1alpha1_json(obj) -> str:
    """The canonical JSON of v1alpha1: Python's json.dumps with sorted keys and no whitespace."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def ecmascript_number(number: float) -> str:
    """ECMAScript's Number::toString, as RFC 8785 writes numbers, from the shortest digits that read back
    as `number` (what repr gives)."""
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    mantissa, _, exponent = repr(abs(number)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    point = len(whole) + int(exponent or 0) - (len(whole) + len(fraction) - len(digits))  # 0.digits x 10**point
    digits = digits.rstrip("0")
    if len(digits) <= point <= 21:
        return sign + digits + "0" * (point - len(digits))
    if 0 < point <= 21:
        return sign + digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    power = f"e{'+' if point > 0 else '-'}{abs(point - 1)}"
    return sign + digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + power


def _rfc8785_text(obj, text: str) -> str:
    """The RFC 8785 text of `obj`, given its json.dumps `text` (the same for most objects)."""
    if text[:1] not in ("{", "[") or any(pattern.search(text) for pattern in _OTHER_DIFFERENCES) \
            or (not text.isascii() and _BEYOND_BMP.search(text)):
        return rfc8785.dumps(obj).decode("utf-8")
    if not any(pattern.search(text) for pattern in _FLOAT_FORMS):
        return text
    parts = _STRING.split(text)  # strings at odd places: the numbers are in the text between them
    between = _WHOLE_FLOAT.sub(r"\1", "\0".join(parts[0::2]))
    between = _FLOAT.sub(lambda m: ecmascript_number(float(m.group(0))), between)
    parts[0::2] = between.split("\0")  # json.dumps escapes NUL, so it joins and splits unambiguously
    return "".join(parts)


def canonical_json(obj) -> str:
    """The RFC 8785 text of an object."""
    return _rfc8785_text(obj, v1alpha1_json(obj))


def canonical_texts(obj) -> tuple[str, str]:
    """The RFC 8785 text of an object and its v1alpha1 text."""
    text = v1alpha1_json(obj)
    return _rfc8785_text(obj, text), text


def digested_part(obj):
    """What a digest is taken of: the object without its `metadata`."""
    if isinstance(obj, dict) and "metadata" in obj:
        return {key: value for key, value in obj.items() if key != "metadata"}
    return obj


def digest(obj) -> str:
    return digest_of_text(canonical_json(digested_part(obj)))


def digest_of_text(canonical: str) -> str:
    """The digest of an object already in canonical JSON."""
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Published:
    """An object as published: with its apiVersion, its canonical text and digest, and the digest v1alpha1
    gave it (the digest itself unless the object is v1alpha2)."""

    obj: dict
    text: str
    digest: str
    v1alpha1_digest: str

    @property
    def alias(self) -> str | None:
        """The v1alpha1 digest where it is not the digest (a v1alpha2 object), else None."""
        return self.v1alpha1_digest if self.v1alpha1_digest != self.digest else None


def published(obj: dict, renamed: dict[str, str] | None = None) -> Published:
    """`obj`, written as v1alpha1, as published: as it is where its RFC 8785 bytes are its v1alpha1 bytes,
    else as v1alpha2. `renamed` maps digests `obj` names to the ones v1alpha1 named them by (a run whose
    protocol or workload is v1alpha2). An object naming another apiVersion is digested as it is."""
    part = digested_part(obj)
    if obj.get("apiVersion") != API_VERSION:
        text = canonical_json(part)
        return Published(obj, _with_metadata(obj, text), digest_of_text(text), digest_of_text(text))
    current = v1alpha1_json(part)
    old = current
    for digest_now, digest_then in (renamed or {}).items():
        # Digests are hex strings of one length that JSON writes as they are: the keys stay where they sort.
        old = old.replace(json.dumps(digest_now), json.dumps(digest_then))
    text = _rfc8785_text(part, current)
    if text == old:
        return Published(obj, _with_metadata(obj, old), digest_of_text(old), digest_of_text(old))
    obj = {**obj, "apiVersion": API_VERSION_V1ALPHA2}
    if text.startswith(_V1ALPHA1_PREFIX):  # apiVersion sorts first: only it changes
        text = _V1ALPHA2_PREFIX + text[len(_V1ALPHA1_PREFIX):]
    else:
        text = canonical_json(digested_part(obj))
    return Published(obj, _with_metadata(obj, text), digest_of_text(text), digest_of_text(old))


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be")


def _prefix(members: tuple[tuple[str, object], ...]) -> str:
    """'{' and the canonical text of the members that sort before `metadata`."""
    return "{" + ",".join(f"{canonical_json(key)}:{canonical_json(value)}" for key, value in members)


_string_prefix = functools.lru_cache(maxsize=64)(_prefix)  # an object's apiVersion and kind: a handful of them


def _with_metadata(obj: dict, text: str) -> str:
    """The RFC 8785 text of `obj`, given `text`, that of `obj` without its metadata: the metadata member
    goes in where its key sorts, so the rest of the object is not written again."""
    if "metadata" not in obj:
        return text
    before = sorted((key for key in obj if _utf16(key) < _utf16("metadata")), key=_utf16)
    members = tuple((key, obj[key]) for key in before)
    prefix = (_string_prefix if all(isinstance(value, str) for _, value in members) else _prefix)(members)
    if not text.startswith(prefix):
        return canonical_json(obj)
    member = '"metadata":' + canonical_json(obj["metadata"])
    rest = text[len(prefix):]  # "," or "}" after a member; the members (or "}") right after "{"
    if before:
        return prefix + "," + member + rest
    return "{" + member + ("}" if rest == "}" else "," + rest)


def slugify(text: str) -> str:
    """Lower-case, every run of other characters folded to one '-' (as in metadata names)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def manifest_name(prefix: str, external_id: str) -> str:
    """A run's metadata.name: the prefixed slug of its external id, cut at 100 characters."""
    return f"{prefix}-{slugify(external_id)}"[:100]


def run_id(source: str, external_id: str) -> str:
    """Stable run id: the same source and external id always give the same id."""
    return hashlib.sha256(f"{source}:{external_id}".encode("utf-8")).hexdigest()[:16]
