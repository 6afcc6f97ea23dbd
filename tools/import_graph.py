"""A developer tool: the project's import graph, its depth, its cycles and the imports that run against the route.

    python -m tools.import_graph [--levels]

Every import counts, also one inside a function. A module's level is one more than the highest level of the
project modules it imports (a module importing none is level 1); the depth is the highest level in
``kernelindex_pipeline``. Its domains follow the route a run takes (``ROUTE``): a module may import its own
domain and earlier ones, never a later one.
"""

from __future__ import annotations

import argparse
import ast
import functools
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("kernelindex_pipeline", "kernels")
PIPELINE = "kernelindex_pipeline"
# The pipeline's domains in the order a run passes them; the package's own top-level modules (the command
# line, the bench, the definitions) come last. `kernels` (the kernel library) comes before all of them.
ROUTE = ("kernels", "core", "warehouse", "ingest", "gpu", "runs", "verdicts", "publish", "site", "defs", "")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = list(path.relative_to(REPO).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Project modules ``name`` imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):  # a package's own parents
                out.add(target)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    state: dict[str, int] = {}
    found = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(g[node]):
            if state.get(nxt) == 1:
                found.append(trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for name in sorted(g):
        if name not in state:
            visit(name, [name])
    return found


def levels(g: dict[str, set[str]]) -> dict[str, int]:
    @functools.cache
    def level(name: str) -> int:
        return 1 + max((level(m) for m in g[name]), default=0)

    return {name: level(name) for name in g}


def domain(name: str) -> str:
    if not name.startswith(PIPELINE):
        return "kernels"
    parts = name.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ROUTE) else ""


def against_the_route(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where a module imports a later domain than its own."""
    order = {d: i for i, d in enumerate(ROUTE)}
    return sorted((a, b) for a, targets in g.items() for b in targets if order[domain(b)] > order[domain(a)])


def report() -> dict:
    g = graph()
    lv = levels(g) if not cycles(g) else {}
    pipeline = {n: v for n, v in lv.items() if n.startswith(PIPELINE)}
    return {"modules": len([n for n in g if n.startswith(PIPELINE)]), "depth": max(pipeline.values(), default=0),
            "cycles": cycles(g), "against_the_route": against_the_route(g), "levels": pipeline}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", action="store_true", help="list every pipeline module with its level")
    args = ap.parse_args(argv)
    r = report()
    print(f"modules {r['modules']}, depth {r['depth']}, cycles {len(r['cycles'])}, "
          f"imports against the route {len(r['against_the_route'])}")
    for cycle in r["cycles"]:
        print("cycle:", " -> ".join(cycle))
    for a, b in r["against_the_route"]:
        print(f"against the route: {a} imports {b}")
    if args.levels:
        for name, level in sorted(r["levels"].items(), key=lambda kv: (kv[1], kv[0])):
            print(level, name)
    return 1 if r["cycles"] or r["against_the_route"] else 0


if __name__ == "__main__":
    sys.exit(main())
