"""Partitions: one dynamic partition per upstream commit of each benchmark file."""

import dagster as dg

upstream_revisions = dg.DynamicPartitionsDefinition(name="upstream_revisions")
