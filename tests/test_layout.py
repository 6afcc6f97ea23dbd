"""The code's shape: domains along the route a run takes, imported one way, no cycles (imports inside functions
count: they must not hide one), at most eight levels deep (`tools/import_graph.py`), each domain naming its
parts, and no module over ~350 lines unless its docstring says why."""

from __future__ import annotations

import ast
from pathlib import Path

from tools import import_graph

REPO = import_graph.REPO
MAX_LINES = 350
MAX_DEPTH = 8


def _modules() -> dict[str, Path]:
    return import_graph.modules()


def test_imports_run_one_way_along_the_route_without_cycles_and_at_most_eight_levels_deep():
    report = import_graph.report()
    assert not report["cycles"], report["cycles"]
    assert not report["against_the_route"], report["against_the_route"]
    assert report["depth"] <= MAX_DEPTH, sorted(report["levels"].items(), key=lambda kv: -kv[1])[:5]


def test_every_domain_says_what_it_holds_and_what_it_may_import():
    for domain in import_graph.ROUTE:
        if domain in ("", "kernels"):
            continue
        doc = ast.get_docstring(ast.parse((REPO / "kernelindex_pipeline" / domain / "__init__.py").read_text()))
        assert doc and "import" in doc, domain
        modules = {p.stem for p in (REPO / "kernelindex_pipeline" / domain).glob("*.py") if p.stem != "__init__"}
        named = {m for m in modules if f"``{m}``" in doc}
        assert named == modules, (domain, sorted(modules - named))


def test_modules_stay_small_or_say_why():
    long = []
    for name, path in _modules().items():
        lines = path.read_text(encoding="utf-8").count("\n")
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        if lines > MAX_LINES and "long because" not in doc.lower():
            long.append(f"{name}: {lines} lines")
    assert not long, long


def test_the_code_location_is_the_defs_folder():
    """Every definition comes from ``kernelindex_pipeline/defs`` through ``dg.load_from_defs_folder`` (what
    ``dg check defs`` loads); each job selects whole asset groups."""
    import dagster as dg

    from kernelindex_pipeline.definitions import PROJECT_ROOT, defs as location

    defs = location()

    loaded = dg.load_from_defs_folder(path_within_project=PROJECT_ROOT)
    repo = defs.get_repository_def()
    assert {key for a in loaded.assets for key in (a.keys if isinstance(a, dg.AssetsDefinition) else [a.key])} == \
        repo.asset_graph.get_all_asset_keys()
    assert not loaded.resources  # bound by build_definitions, to the CLI's sources and warehouse
    assert {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()} == {
        "upstream_snapshots", "run_observations", "controlled_evidence", "runs", "run_manifests",
        "comparison_ranks", "listing_ranks", "claim_checks", "version_checks", "verdict_replication", "attestations",
        "quarantine", "verdict_history", "analyst_views", "gpu_reruns", "record_site", "verdict_statements"}
    assert {s.name for s in repo.schedule_defs} == {"nightly_ingest"}
    assert {s.name for s in repo.sensor_defs} == {"new_upstream_revisions", "default_automation_condition_sensor"}
    assert len(list(repo.asset_graph.asset_check_keys)) == 9
    assert set(repo.get_top_level_resources()) == {"upstream", "warehouse", "signing"}
    groups = {}
    for key in repo.asset_graph.get_all_asset_keys():
        groups.setdefault(repo.asset_graph.get(key).group_name, set()).add(key)
    for job, wanted in (("ingest_upstream", ("ingestion", "warehouse")), ("export_site", ("publication",))):
        selected = repo.get_job(job).asset_layer.executable_asset_keys
        assert set(selected) >= set().union(*(groups[g] for g in wanted)), job
    assert "gpu_reruns" not in {k.to_user_string() for k in repo.get_job("ingest_upstream").asset_layer.executable_asset_keys}
