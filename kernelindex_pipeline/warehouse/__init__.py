"""The warehouse: where every later domain reads and writes. It may import ``core``.

- ``store``: the DuckDB file and its Parquet copies under KERNELINDEX_HOME, published a generation at a time.
- ``schema``: the tables (the contract's and the pipeline's own, ``schema.sql``) and the columns added since a
  home was written.
- ``views``: the analyst views (``views.sql``, docs/warehouse.md) and the queries the claim checks share.
- ``sql``: SQL over a connection: rows as dicts, table facts, Arrow tables registered for a block, ``.sql``
  files loaded once, and the row-level replacement every publication writes with.
"""
