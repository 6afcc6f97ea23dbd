"""The code location's configuration: directories come from environment variables as `dg.EnvVar`, which a
run resolves when it starts, and an unset variable leaves the shipped default."""

from __future__ import annotations

import dagster as dg

from kernelindex_pipeline.defs.resources import (SHIPPED_ATTESTATIONS, SHIPPED_GH_PAGES, SHIPPED_UPSTREAM,
                                                 UpstreamResource, WarehouseResource)
from kernelindex_pipeline.definitions import build_definitions


def test_directories_are_bound_to_their_environment_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNELINDEX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("KERNELINDEX_SOURCES", "first, second")
    monkeypatch.setenv("KERNELINDEX_ATTESTATIONS", str(tmp_path / "notes"))
    resources = build_definitions().resources
    warehouse, upstream = resources["warehouse"], resources["upstream"]
    assert isinstance(warehouse.home, dg.EnvVar) and warehouse.home.env_var_name == "KERNELINDEX_HOME"
    assert isinstance(upstream.sources, dg.EnvVar)

    resolved = warehouse.process_config_and_initialize()
    assert resolved.warehouse().home == tmp_path / "home"
    assert resolved.attestations_path() == tmp_path / "notes"
    assert upstream.process_config_and_initialize().resolved_locations() == ["first", "second"]
    # the CLI reads the same values outside a run
    assert WarehouseResource.resolved().warehouse().home == tmp_path / "home"
    assert WarehouseResource.resolved().attestations_path() == tmp_path / "notes"
    assert UpstreamResource.resolved().resolved_locations() == ["first", "second"]


def test_given_values_win_and_unset_variables_leave_the_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv("KERNELINDEX_SOURCES", raising=False)
    monkeypatch.delenv("KERNELINDEX_ATTESTATIONS", raising=False)
    monkeypatch.setenv("KERNELINDEX_HOME", str(tmp_path / "from-env"))
    resources = build_definitions(locations=["only"], home=str(tmp_path / "given")).resources
    assert resources["warehouse"].process_config_and_initialize().warehouse().home == tmp_path / "given"
    assert resources["upstream"].process_config_and_initialize().resolved_locations() == ["only"]
    assert WarehouseResource.resolved().attestations_path() == SHIPPED_ATTESTATIONS
    assert build_definitions().resources["upstream"].process_config_and_initialize().resolved_locations() == [
        str(SHIPPED_UPSTREAM), str(SHIPPED_GH_PAGES)]


def test_the_signing_key_is_bound_to_its_environment_variable(monkeypatch, tmp_path):
    """$KERNELINDEX_SIGNING_KEY names the Ed25519 key that signs verdict statements; unset, none signs."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from kernelindex_pipeline.defs.resources import SigningResource

    assert SigningResource.resolved().signer() is None
    pem = tmp_path / "key.pem"
    pem.write_bytes(Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    monkeypatch.setenv("KERNELINDEX_SIGNING_KEY", str(pem))
    signing = build_definitions().resources["signing"]
    assert isinstance(signing.key_file, dg.EnvVar) and signing.key_file.env_var_name == "KERNELINDEX_SIGNING_KEY"
    assert signing.process_config_and_initialize().signer().public_key.keytype == "ed25519"
