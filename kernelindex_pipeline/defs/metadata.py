"""Metadata the UI shows for warehouse tables: row counts, column schemas, markdown previews."""


import dagster as dg

from kernelindex_pipeline.defs.column_docs import column_description
from kernelindex_pipeline.warehouse.sql import table_columns


def column_schema(con, relation: str) -> dg.TableSchema:
    """A table's or view's columns, each with its type and its description from docs/warehouse.md."""
    return dg.TableSchema(columns=[dg.TableColumn(name, kind, description=column_description(relation, name))
                                   for name, kind in table_columns(con, relation)])


def table_metadata(con, table: str, preview_sql: str | None = None, limit: int = 10) -> dict:
    (rows,) = con.execute(f"SELECT count(*) FROM {table}").fetchone()
    metadata = {
        "dagster/row_count": dg.MetadataValue.int(int(rows)),
        "dagster/column_schema": column_schema(con, table),
    }
    if preview_sql:
        metadata["preview"] = dg.MetadataValue.md(markdown_table(con, preview_sql, limit))
    return metadata


def markdown_table(con, sql: str, limit: int = 10, params: list | None = None) -> str:
    """The first `limit` rows of a query as a markdown table (what the UI's preview renders)."""
    cursor = con.execute(f"SELECT * FROM ({sql}) LIMIT {int(limit)}", params or [])
    names = [d[0] for d in cursor.description]
    rows = cursor.fetchall()
    if not rows:
        return "_no rows_"
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join("" if v is None else str(v).replace("|", "\\|") for v in row) + " |" for row in rows]
    return "\n".join(lines)


def views_metadata(con) -> dict:
    """Each analyst view's columns (``columns/<view>``)."""
    views = [v for (v,) in con.execute("SELECT table_name FROM information_schema.tables "
                                       "WHERE table_schema = 'main' AND table_type = 'VIEW' ORDER BY 1").fetchall()]
    return {"views": len(views), **{f"columns/{v}": dg.MetadataValue.table_schema(column_schema(con, v)) for v in views}}
