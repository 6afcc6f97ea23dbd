"""How a publication rewrites a derived table: only where rows differ, and it says whether anything changed."""

import duckdb
import pytest

from kernelindex_pipeline.warehouse.sql import ROW_DIGEST, replace_if_changed, replace_where

ROWS = "SELECT * FROM (VALUES (1, 'x', [{'s': 1.5}]), (2, 'y', NULL), (2, 'w', [{'s': 2.0}])) v(k, v, nested)"


@pytest.fixture()
def con():
    con = duckdb.connect()
    con.execute("CREATE TABLE t (k INTEGER, v VARCHAR, nested STRUCT(s DOUBLE)[])")
    con.execute("CREATE TABLE publication_changes (table_name VARCHAR, key VARCHAR)")
    con.execute(f"INSERT INTO t {ROWS}")
    return con


@pytest.mark.parametrize("options", [{}, {"key": "k"}, {"key": "k", "compare": f"k, {ROW_DIGEST}"}],
                         ids=["whole table", "by key", "by key and row digest"])
def test_the_same_rows_change_nothing_and_one_changed_row_rewrites_its_key(con, options):
    before = con.execute("SELECT rowid, * FROM t").fetchall()
    assert replace_where(con, "t", "true", ROWS, **options) is False
    assert con.execute("SELECT rowid, * FROM t").fetchall() == before
    assert replace_where(con, "t", "true", ROWS.replace("'y'", "'z'"), **options) is True
    assert sorted(con.execute("SELECT * FROM t").fetchall(), key=str) == sorted(
        con.execute(ROWS.replace("'y'", "'z'")).fetchall(), key=str)
    if "key" in options:  # only key 2's rows were written again, and the change is recorded under its key
        assert con.execute("SELECT rowid FROM t WHERE k = 1").fetchall() == [(0,)]
        assert con.execute("SELECT * FROM publication_changes").fetchall() == [("t", "2")]


def test_replace_if_changed_tells_an_unchanged_table(con):
    assert replace_if_changed(con, "t", ROWS) is False
    assert replace_if_changed(con, "t", "SELECT * FROM t WHERE k = 1") is True
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(1,)]


@pytest.mark.parametrize("options", [{}, {"key": "k", "compare": f"k, {ROW_DIGEST}"}], ids=["whole table", "by key"])
def test_a_query_of_other_types_than_the_tables_compares_by_value(con, options):
    """Row digests are taken in the table's types: the same values as DECIMAL where the table holds DOUBLE
    (whose hashes differ) are no change."""
    decimals = ROWS.replace("1.5", "1.5::DECIMAL(2, 1)").replace("2.0", "2.0::DECIMAL(2, 1)")
    assert replace_where(con, "t", "true", decimals, **options) is False
    assert replace_where(con, "t", "true", decimals.replace("1.5", "2.5"), **options) is True
    assert con.execute("SELECT nested FROM t WHERE k = 1").fetchall() == [([{"s": 2.5}],)]
