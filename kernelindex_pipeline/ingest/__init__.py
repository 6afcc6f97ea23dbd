"""What comes in: upstream snapshots, rerun evidence and attestations, read into rows. It may import ``core`` and
``warehouse``.

- ``sources``: where snapshots come from (a directory laid out like the shipped one, GitHub, any HTTP base URL).
- ``csvfile``: CSV bytes -> records; ``normalize``: records -> run observations and quarantine rows.
- ``references``: a source's own reference files (gh-pages' golden commits).
- ``evidence``: rerun records (gzipped JSONL) -> controlled runs and reproductions.
- ``attestations``: readers' attestation files.
"""
