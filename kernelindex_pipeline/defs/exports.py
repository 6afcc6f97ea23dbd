"""What readers meet, as assets: the record site and the verdict statements, exported from the live warehouse.

Each re-export writes only the files whose bytes change and removes those no longer produced, so a synced
site uploads only what a publication changed. Materialized by the `export_site` job, and after each warehouse
publication where Dagster's automation sensor runs (eager: when the claim checks they read have changed).
"""

import json
import os
from pathlib import Path

import dagster as dg
from pydantic import Field

from kernelindex_pipeline.defs.keys import ATTESTATIONS, CLAIM_CHECKS, NIGHTLY, RUN_MANIFESTS, VERDICT_HISTORY
from kernelindex_pipeline.defs.resources import SigningResource, WarehouseResource

EXPORT_JOB = "export_site"
SITE_DIR, STATEMENTS_DIR = "exports/site", "exports/statements"
PUBLICATION = dict(group_name="publication", deps=[RUN_MANIFESTS, CLAIM_CHECKS, VERDICT_HISTORY, ATTESTATIONS],
                   automation_condition=dg.AutomationCondition.eager(), **NIGHTLY)


class ExportConfig(dg.Config):
    directory: str = Field(default="", description="where to write; default: the export's folder under the "
                           "warehouse home (KERNELINDEX_HOME/exports/site or /statements)")


def _target(config: ExportConfig, warehouse: WarehouseResource, default: str) -> Path:
    return Path(config.directory) if config.directory else warehouse.warehouse().home / default


def _statements_metadata(directory: Path) -> dict:
    """What the statements' index.json says: how many, in how many bundles, signed or not."""
    index = json.loads((directory / "index.json").read_text(encoding="utf-8"))
    verdicts: dict[str, int] = {}
    for entry in index["statements"]:
        verdicts[entry["verdict"]] = verdicts.get(entry["verdict"], 0) + 1
    return {"statements": len(index["statements"]), "bundles": len(index["bundles"]), "signed": index["signed"],
            **{f"statements_{verdict.replace(' ', '_')}": n for verdict, n in sorted(verdicts.items())}}


@dg.asset(kinds={"html"}, **PUBLICATION)
def record_site(config: ExportConfig, warehouse: WarehouseResource, signing: SigningResource) -> dg.MaterializeResult:
    """The static record site (`kernelindex export --format html`): a page per run, comparison group and
    kernel, the index and its search, the glossary, and the verdicts' in-toto statements under `statements/`,
    which the pages link by relative path."""
    from kernelindex_pipeline.site.export import export

    directory = _target(config, warehouse, SITE_DIR)
    summary = export("html", directory, progress=lambda *_: None, signer=signing.signer(),
                     warehouse=warehouse.warehouse())
    files = sum(len(names) for _, _, names in os.walk(directory))
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(directory)), "summary": summary, "files": files,
        "kernel_pages": len(os.listdir(directory / "kernels")),
        **_statements_metadata(directory / "statements")})


@dg.asset(kinds={"json"}, **PUBLICATION)
def verdict_statements(config: ExportConfig, warehouse: WarehouseResource,
                       signing: SigningResource) -> dg.MaterializeResult:
    """One in-toto Statement v1 per decided claim and protocol (`kernelindex export --format intoto`), bundled
    per kernel with an index.json; DSSE envelopes where the signing resource names an Ed25519 key."""
    from kernelindex_pipeline.site.export import export_statements

    directory = _target(config, warehouse, STATEMENTS_DIR)
    summary = export_statements(directory, signing.signer(), warehouse.warehouse())
    return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(directory)), "summary": summary,
                                          **_statements_metadata(directory)})


export_job = dg.define_asset_job(
    EXPORT_JOB, selection=dg.AssetSelection.groups("publication"),
    description="Export the record site and the verdict statements from the live warehouse generation.")
