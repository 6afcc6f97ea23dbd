"""What comes in: upstream snapshots, rerun evidence and attestations, read into rows. It may import ``core`` and
``warehouse``.

- ``sources``: where snapshots come from (a directory laid out like the shipped one, GitHub, any HTTP base URL).
- ``csvfile``: CSV bytes -> records; ``normalize``: records -> run observations and quarantine rows.
- ``references``: a source's own reference files (gh-pages' golden commits).
- ``evidence``: one rerun record -> a controlled run; reproductions.
- ``evidence_files``: evidence files (gzipped JSONL), read in batches in SQL -> controlled runs and refusals.
- ``attestations``: readers' attestation files.
"""
