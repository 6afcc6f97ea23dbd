"""The record site and the verdict statements as Dagster assets: real materializations over a real warehouse."""

import json
import os

import dagster as dg
import pytest

from conftest import BASE_REVISIONS, ingest, main_rows, query, write_snapshot_dir
from kernelindex_pipeline.defs import exports
from kernelindex_pipeline.defs.resources import SigningResource, WarehouseResource


@pytest.fixture(scope="module")
def sampled_home(tmp_path_factory, evidence_sample):
    """The first main-file revisions with the evidence sample: claim checks to state."""
    home = tmp_path_factory.mktemp("export-assets") / "home"
    source = write_snapshot_dir(tmp_path_factory.mktemp("export-assets-source"), main_rows()[:BASE_REVISIONS])
    assert ingest(home, source, KERNELINDEX_EVIDENCE=str(evidence_sample)).returncode == 0
    return home


def materialize(home, site, statements) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [exports.record_site, exports.verdict_statements], instance=dg.DagsterInstance.ephemeral(),
        resources={"warehouse": WarehouseResource(home=str(home), evidence_dir=""), "signing": SigningResource()},
        run_config={"ops": {"record_site": {"config": {"directory": str(site)}},
                            "verdict_statements": {"config": {"directory": str(statements)}}}})


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    [materialization] = result.asset_materializations_for_node(asset)
    return {key: getattr(value, "value", value) for key, value in materialization.metadata.items()}


def test_the_site_and_the_statements_are_assets_that_say_what_they_wrote(sampled_home, tmp_path):
    site, statements = tmp_path / "site", tmp_path / "statements"
    first = materialize(sampled_home, site, statements)
    assert first.success
    page, bundle = metadata(first, "record_site"), metadata(first, "verdict_statements")
    [(kernels, decided)] = query(sampled_home, "SELECT (SELECT count(DISTINCT kernel) FROM runs), "
                                 "(SELECT count(*) FROM claim_checks WHERE verdict <> 'not re-checked')")
    assert decided > 0 and (site / "index.html").is_file()
    assert page["kernel_pages"] == kernels and page["files"] == sum(len(f) for _, _, f in os.walk(site))
    # The standalone statements are the ones the site links, byte for byte (unsigned, one warehouse).
    assert (statements / "index.json").read_bytes() == (site / "statements" / "index.json").read_bytes()
    index = json.loads((statements / "index.json").read_text(encoding="utf-8"))
    assert bundle["statements"] == page["statements"] == len(index["statements"]) > 0
    assert bundle["signed"] is False and bundle["bundles"] == len(index["bundles"])
    assert sum(v for k, v in bundle.items() if k.startswith("statements_")) == bundle["statements"]
    # Again over its own output: nothing to write.
    again = materialize(sampled_home, site, statements)
    assert metadata(again, "record_site")["summary"].count("(0 files written") == 2  # pages, statements
    assert "(0 files written" in metadata(again, "verdict_statements")["summary"]


def test_the_exports_have_their_own_job_outside_the_nightly_ingest():
    from kernelindex_pipeline.definitions import build_definitions
    from kernelindex_pipeline.defs.schedules import INGEST_JOB

    defs = build_definitions()
    exported = {exports.record_site.key, exports.verdict_statements.key}
    export_job = defs.resolve_job_def(exports.EXPORT_JOB)
    assert set(export_job.asset_layer.executable_asset_keys) == exported
    assert not exported & set(defs.resolve_job_def(INGEST_JOB).asset_layer.executable_asset_keys)
    for spec in (exports.record_site, exports.verdict_statements):
        assert spec.specs_by_key[next(iter(spec.keys))].automation_condition is not None
