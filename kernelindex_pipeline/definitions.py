"""The KernelIndex Dagster code location: everything in the defs folder (``kernelindex_pipeline/defs``,
declared under ``[tool.dg]`` in pyproject.toml), bound to its resources."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from kernelindex_pipeline.defs.resources import SigningResource, UpstreamResource, WarehouseResource

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def build_definitions(locations: list[str] | None = None, home: str = "", evidence_dir: str = "") -> dg.Definitions:
    """Definitions bound to given sources and warehouse, else to the environment (`from_environment`)."""
    return dg.Definitions.merge(
        dg.load_from_defs_folder(path_within_project=PROJECT_ROOT),
        dg.Definitions(resources={
            "upstream": UpstreamResource.from_environment(locations=locations or []),
            "warehouse": WarehouseResource.from_environment(home=home, evidence_dir=evidence_dir),
            "signing": SigningResource.from_environment(),
        }),
    )


@dg.definitions
def defs() -> dg.Definitions:
    """The code location, built when Dagster loads it (not when the CLI imports `build_definitions`)."""
    return build_definitions()
