"""The code's shape: no import cycles between the project's modules (imports inside functions count: they
must not hide one), and no module over ~350 lines unless its docstring says why."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("kernelindex_pipeline", "kernels")
MAX_LINES = 350


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules `name` imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):  # a package's own parents
                out.add(target)
    return out


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, cycles


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
    assert {key for a in loaded.assets for key in a.keys} == repo.asset_graph.get_all_asset_keys()
    assert not loaded.resources  # bound by build_definitions, to the CLI's sources and warehouse
    assert {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()} == {
        "upstream_snapshots", "run_observations", "controlled_evidence", "runs", "run_manifests",
        "comparison_ranks", "listing_ranks", "claim_checks", "version_checks", "verdict_replication", "attestations",
        "gpu_reruns"}
    assert {s.name for s in repo.schedule_defs} == {"nightly_ingest"}
    assert {s.name for s in repo.sensor_defs} == {"new_upstream_revisions"}
    assert len(list(repo.asset_graph.asset_check_keys)) == 9
    assert set(repo.get_top_level_resources()) == {"upstream", "warehouse", "signing"}
    groups = {}
    for key in repo.asset_graph.get_all_asset_keys():
        groups.setdefault(repo.asset_graph.get(key).group_name, set()).add(key)
    for job, wanted in (("ingest_upstream", ("ingestion", "warehouse")), ("gpu_reruns_job", ("gpu", "warehouse"))):
        selected = repo.get_job(job).asset_layer.executable_asset_keys
        assert set(selected) >= set().union(*(groups[g] for g in wanted)), job
    assert "gpu_reruns" not in {k.to_user_string() for k in repo.get_job("ingest_upstream").asset_layer.executable_asset_keys}
