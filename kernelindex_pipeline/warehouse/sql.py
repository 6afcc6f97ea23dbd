"""SQL over a warehouse connection: rows as dicts, table facts, Arrow tables registered for a block, SQL
files loaded once, and the row-level replacement every publication writes with."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path

import duckdb


@functools.cache
def load_sql(module_file: str, name: str) -> str:
    """The text of ``name`` (a ``.sql`` file beside the module whose ``__file__`` is ``module_file``), read once."""
    return (Path(module_file).parent / name).read_text(encoding="utf-8")


def table_exists(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [name]).fetchone()[0])


@contextlib.contextmanager
def registered(con: duckdb.DuckDBPyConnection, **relations) -> Iterator[duckdb.DuckDBPyConnection]:
    """Within it, each keyword's Arrow table (or DataFrame) is a view of ``con`` under that name."""
    for name, relation in relations.items():
        con.register(name, relation)
    try:
        yield con
    finally:
        for name in relations:
            con.unregister(name)


def rows_checksum(con: duckdb.DuckDBPyConnection, relation: str) -> str:
    """Order-independent digest of the rows of a table or any other relation."""
    (value,) = con.execute(
        f"SELECT coalesce(md5(string_agg(md5(t::VARCHAR), '' ORDER BY md5(t::VARCHAR))), '') FROM {relation} t"
    ).fetchone()
    return value


def table_checksum(con: duckdb.DuckDBPyConnection, table: str) -> str:
    """Order-independent digest of a table's rows, to tell whether anything changed."""
    return f"{table}:{rows_checksum(con, table)}"


def records(con: duckdb.DuckDBPyConnection, sql: str, params=None) -> list[dict]:
    """A query's rows as dicts by column name."""
    cursor = con.execute(sql, params or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    """(name, type) of a warehouse table's columns, in order."""
    return con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = 'main' AND table_name = ? "
        "ORDER BY ordinal_position", [table]).fetchall()


# A row's digest: what tells whole rows apart, without holding wide rows (runs' records, their samples) in
# the comparison's hash table. DuckDB's 64-bit hash of the row's values, in column order: a changed row goes
# unseen only where its hash equals that of a row its key held before (about 2^-64), and it is some 15x
# cheaper than an md5 of the row's text, which wide tables (listing-time claims) spend seconds on.
ROW_DIGEST = "hash(row(*COLUMNS(*)))"


def replace_if_changed(con: duckdb.DuckDBPyConnection, table: str, query: str, params=None) -> bool:
    """Replace a table's rows with a query's, only where they differ; returns whether anything changed."""
    return replace_where(con, table, "true", query, params)


def replace_where(con: duckdb.DuckDBPyConnection, table: str, where: str, query: str, params=None,
                  key: str | None = None, compare: str = "*", materialize: bool = True) -> bool:
    """Make the rows of `table` that satisfy `where` those of `query`; returns whether anything changed.

    With `key` (an expression naming a row), only the rows whose key gained, lost or changed a row are
    deleted and written, so unchanged rows keep their place in the file, and those keys are added to
    `publication_changes` (what this publication changed, by table); without it, any difference
    replaces all the rows that satisfy `where`. `compare` names the columns that tell rows apart (a digest
    of the others, say); `materialize` False reads `query` each time rather than copying its rows (for a
    query that only reads a staged table). The cost follows the rows in `where`, not the table."""
    if key is None and compare == "*":
        compare = ROW_DIGEST
    described = table_columns(con, table)
    columns = ", ".join(name for name, _ in described)
    # In the table's own types, so that each row's digest is taken over the same values on both sides.
    typed = ", ".join(f'CAST("{name}" AS {data_type}) AS "{name}"' for name, data_type in described)
    kind = "TABLE" if materialize else "VIEW"
    con.execute(f"CREATE OR REPLACE TEMP {kind} _next AS SELECT {typed} FROM ({query})", params or [])
    # Only what tells rows apart is read of the rows there now (not a run's text, say); a row digest is taken
    # over the table's columns on both sides and kept as `_row`.
    if compare == "*":
        taken, kept = columns, "*"
    else:
        taken, kept = compare.replace(ROW_DIGEST, f"{ROW_DIGEST} AS _row"), compare.replace(ROW_DIGEST, "_row")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _previous AS SELECT {taken} FROM {table} WHERE {where}")
    [(first_rows,)] = con.execute("SELECT NOT EXISTS (SELECT 1 FROM _previous)").fetchall()
    differ = ("SELECT * FROM _next" if first_rows else  # nothing to compare with: every row is new
              f"SELECT * FROM (SELECT {taken} FROM _next EXCEPT ALL SELECT {kept} FROM _previous) "
              f"UNION ALL SELECT * FROM (SELECT {kept} FROM _previous EXCEPT ALL SELECT {taken} FROM _next)")
    if key is None:
        [(changed,)] = con.execute(f"SELECT EXISTS ({differ})").fetchall()
        if changed:
            con.execute(f"DELETE FROM {table} WHERE {where}")
            con.execute(f"INSERT INTO {table} SELECT * FROM _next")
    else:
        con.execute(f"CREATE OR REPLACE TEMP TABLE _keys AS SELECT DISTINCT {key} AS k FROM ({differ})")
        [(changed,)] = con.execute("SELECT count(*) > 0 FROM _keys").fetchall()
        if changed:
            con.execute(f"DELETE FROM {table} WHERE ({where}) AND {key} IN (SELECT k FROM _keys)")
            con.execute(f"INSERT INTO {table} SELECT * FROM _next WHERE {key} IN (SELECT k FROM _keys)")
            con.execute("INSERT INTO publication_changes SELECT ?, k::VARCHAR FROM _keys", [table])
        con.execute("DROP TABLE _keys")
    con.execute(f"DROP {kind} _next")
    con.execute("DROP TABLE _previous")
    return bool(changed)
