"""The asset keys of the warehouse publication, named once for the assets, their checks and their metadata, and
the owners and freshness policy of what the nightly produces."""

from datetime import timedelta

import dagster as dg

RUN_OBSERVATIONS = dg.AssetKey("run_observations")
CONTROLLED_EVIDENCE = dg.AssetKey("controlled_evidence")
RUNS = dg.AssetKey("runs")
RUN_MANIFESTS = dg.AssetKey("run_manifests")
COMPARISON_RANKS = dg.AssetKey("comparison_ranks")
LISTING_RANKS = dg.AssetKey("listing_ranks")
CLAIM_CHECKS = dg.AssetKey("claim_checks")
VERSION_CHECKS = dg.AssetKey("version_checks")
VERDICT_REPLICATION = dg.AssetKey("verdict_replication")
ATTESTATIONS = dg.AssetKey("attestations")
QUARANTINE = dg.AssetKey("quarantine")
VERDICT_HISTORY = dg.AssetKey("verdict_history")
ANALYST_VIEWS = dg.AssetKey("analyst_views")

# Who answers for the warehouse's tables, and how fresh the nightly keeps them: it runs at 03:00 UTC, so a
# table last published more than a day and an hour ago (warn) or two hours ago (fail) missed a night.
OWNERS = ["team:kernelindex"]
NIGHTLY = {"owners": OWNERS, "freshness_policy": dg.FreshnessPolicy.time_window(
    fail_window=timedelta(hours=26), warn_window=timedelta(hours=25))}
