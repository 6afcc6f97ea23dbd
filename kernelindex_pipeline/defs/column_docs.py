"""Column descriptions for the catalogue, read from docs/warehouse.md's "Every table and view" (one source for
the docs and the Dagster UI): under each `### ` heading naming tables, a column named with a parenthesis,
`` `name` (what it holds)``, is described by it, and a bullet ``- `a`, `b`: what they hold`` describes the
others it names. A column a table shares with `runs` and leaves undescribed means what it means there."""

from __future__ import annotations

import functools
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs" / "warehouse.md"
NAME = re.compile(r"`([a-z_][a-z0-9_]*)`")


def _split_at_colon(text: str) -> tuple[str, str] | None:
    """(what precedes the first ": " outside parentheses, what follows it), or None without one."""
    depth = 0
    for i, char in enumerate(text):
        depth += (char == "(") - (char == ")" and depth > 0)
        if depth == 0 and text.startswith(": ", i):
            return text[:i], text[i + 2:]
    return None


def _top_level_names(text: str) -> list[str]:
    """The `names` of `text` outside parentheses."""
    out, depth = [], 0
    for char in text:
        depth += char == "("
        if depth == 0:
            out.append(char)
        depth -= char == ")" and depth > 0
    return NAME.findall("".join(out))


def _parenthesised(text: str) -> dict[str, str]:
    """{name: what the parenthesis right after `name` says}, for each `name` (…) in `text`."""
    found = {}
    for match in NAME.finditer(text):
        rest = text[match.end():]
        if not rest.startswith(" ("):
            continue
        depth = 0
        for i, char in enumerate(rest[1:], 1):
            depth += (char == "(") - (char == ")")
            if depth == 0:
                found.setdefault(match.group(1), rest[2:i])
                break
    return found


def _clean(text: str) -> str:
    return " ".join(text.replace("`", "").split()).rstrip(" .,") + "."


@functools.cache
def column_descriptions(docs: Path = DOCS) -> dict[str, dict[str, str]]:
    """{table: {column: description}} as docs/warehouse.md gives them; empty where the docs are not here."""
    if not docs.is_file():
        return {}
    text = docs.read_text(encoding="utf-8")
    start = text.find("## Every table and view")
    described: dict[str, dict[str, str]] = {}
    for section in re.split(r"^### ", text[start:], flags=re.M)[1:]:
        heading, _, body = section.partition("\n")
        tables = NAME.findall(heading)
        bullets = [" ".join(b.split()) for b in re.split(r"^- ", body, flags=re.M)[1:]]
        columns = {name: _clean(said) for name, said in _parenthesised(body).items()}
        for bullet in bullets:
            split = _split_at_colon(bullet)
            head, said = split if split else (bullet, bullet)
            if split and NAME.fullmatch(head.strip()) and head.strip().strip("`") in tables:
                continue  # a bullet listing one table's columns: they are described by their parentheses
            for name in _top_level_names(head):
                columns.setdefault(name, _clean(said))
            for clause in bullet.split("; ")[1:]:  # `metric`: ...; `unit`: ...
                if (split := _split_at_colon(clause)) and NAME.fullmatch(split[0].strip()):
                    columns.setdefault(split[0].strip().strip("`"), _clean(split[1]))
        for table in tables:
            described.setdefault(table, {}).update({k: v for k, v in columns.items() if v})
    return described


def column_description(table: str, column: str) -> str | None:
    docs = column_descriptions()
    return docs.get(table, {}).get(column) or docs.get("runs", {}).get(column)
