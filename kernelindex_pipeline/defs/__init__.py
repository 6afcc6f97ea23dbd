"""The Dagster definitions (``dg.load_from_defs_folder`` loads every module here). They may import every
domain; nothing but the code location (``definitions``) and the command line imports them.

- ``upstream``: upstream snapshots (one dynamic partition per upstream commit, ``partitions``).
- ``warehouse``: the warehouse publication, one step; ``keys``: its asset keys, owners and freshness policy;
  ``checks``: its asset checks;
  ``verdict_reports``: what the verdict tables report; ``metadata``: table metadata for the UI, with
  ``column_docs``: column descriptions from docs/warehouse.md.
- ``reruns``: the GPU rerun asset, partitioned by kernel family and card, with the committed evidence's
  partitions.
- ``exports``: the record site and the verdict statements, exported from the live warehouse.
- ``schedules``: jobs, the nightly schedule and the new-revision sensor; ``resources``: warehouse, sources,
  signing key.
"""
