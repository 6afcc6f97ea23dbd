"""The two published seed records, reproduced field for field from the shipped snapshots."""

import hashlib
import json
import re
from pathlib import Path

import jcs
import pytest

from kernelindex_pipeline import cli
from kernelindex_pipeline.core.identity import published

SEEDS = Path(__file__).parent / "fixtures" / "seed-records"
LLAMA4 = "llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/2025-08-07-21-42-04"
GEGLU = "geglu/backward/huggingface/nvidia-a100-sxm4-80gb/batch8-hidden4096-intermediate11008-seq8192-bf16/2024-09-03-15-38-42"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def seed_manifest(name: str) -> dict:
    text = (SEEDS / name).read_text(encoding="utf-8")
    return json.loads(text[text.index('{\n  "run"'): text.index("Cite this record")])


# The seeds publish their protocol and environment objects, so those digests must come out exactly; they do
# not publish the workload and implementation objects their run names, so those two digests (and with them
# the run digest and the comparison key) cannot be derived from the seed and are only checked for shape.
UNPUBLISHED = ("workloadDigest", "implementationDigest")


def without_unpublished_digests(obj):
    """The manifest with the digests of objects the seed does not show replaced by a marker."""
    if isinstance(obj, dict):
        return {k: "<digest>" if k in UNPUBLISHED else without_unpublished_digests(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [without_unpublished_digests(v) for v in obj]
    return obj


def shown(home, run: str, capsys, monkeypatch) -> dict:
    monkeypatch.setenv("KERNELINDEX_HOME", str(home))
    assert cli.main(["show", run]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("seed, external_id", [("llama4_rope-backward-liger-h100.txt", LLAMA4),
                                               ("geglu-backward-huggingface-a100.txt", GEGLU)])
def test_show_reproduces_seed_manifest(shipped_warehouse, capsys, monkeypatch, seed, external_id):
    manifest = shown(shipped_warehouse.home, external_id, capsys, monkeypatch)
    assert list(manifest) == ["run", "protocol", "environment"]
    assert without_unpublished_digests(manifest) == without_unpublished_digests(seed_manifest(seed))
    spec = manifest["run"]["spec"]
    for key in UNPUBLISHED:
        assert DIGEST.match(spec[key]), key


@pytest.mark.parametrize("seed", ["llama4_rope-backward-liger-h100.txt", "geglu-backward-huggingface-a100.txt"])
def test_seed_digests_are_of_objects_without_metadata(seed):
    """The rule the seeds follow, recomputed by an independent RFC 8785 implementation (`jcs`): the run's
    protocol and environment digests are those of the objects shown, without their `metadata`."""
    manifest = seed_manifest(seed)
    spec = manifest["run"]["spec"]
    for part, key in (("protocol", "protocolDigest"), ("environment", "environmentDigest")):
        body = {k: v for k, v in manifest[part].items() if k != "metadata"}
        assert "sha256:" + hashlib.sha256(jcs.canonicalize(body)).hexdigest() == spec[key]


def test_seed_run_digest_is_shown():
    """The llama4 seed page cites its run digest (`sha256:80cfc402d26261a5d632668…`): the digest of the run
    object as shown, without its metadata, which is ours once the workload and implementation digests it
    names are the seed's."""
    manifest = seed_manifest("llama4_rope-backward-liger-h100.txt")
    text = (SEEDS / "llama4_rope-backward-liger-h100.txt").read_text(encoding="utf-8")
    assert published(manifest["run"]).digest.startswith(re.search(r"\nsha256:([0-9a-f]+)…", text).group(0)[1:-1])


def test_seed_values_and_ranks(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        rows = dict(con.execute(
            "SELECT r.external_id, (r.median_value, r.p20_value, r.p80_value, k.rank, k.group_size, r.withdrawn_upstream) "
            "FROM runs r JOIN ranks k USING (run_id) WHERE r.external_id IN (?, ?)", [LLAMA4, GEGLU]).fetchall())
    assert rows[LLAMA4] == (153632, 151904, 155808, 2, 2, False)
    assert rows[GEGLU] == (144213211, 144213211, 144213211, 2, 2, False)


def test_show_by_run_id_equals_show_by_external_id(shipped_warehouse, capsys, monkeypatch):
    with shipped_warehouse.reader() as con:
        (run_id,) = con.execute("SELECT run_id FROM runs WHERE external_id = ?", [LLAMA4]).fetchone()
    assert shown(shipped_warehouse.home, run_id, capsys, monkeypatch) == shown(shipped_warehouse.home, LLAMA4, capsys, monkeypatch)


def test_protocol_digest_is_shared_by_the_backward_pass(shipped_warehouse):
    """Both seeds time the backward pass under the same Liger harness: one protocol, one digest."""
    with shipped_warehouse.reader() as con:
        digests = {d for (d,) in con.execute("SELECT protocol_digest FROM runs WHERE external_id IN (?, ?)",
                                             [LLAMA4, GEGLU]).fetchall()}
    assert len(digests) == 1


def test_workload_definitions_carry_input_shapes(shipped_warehouse):
    with shipped_warehouse.reader() as con:
        definitions = {slug: json.loads(d) for slug, d in con.execute(
            "SELECT w.workload_slug, w.definition FROM workloads w JOIN runs r USING (workload_digest) "
            "WHERE r.external_id IN (?, ?)", [LLAMA4, GEGLU]).fetchall()}
    llama = definitions["hidden2048-kv_heads8-q_heads32-seq2048-bf16"]["spec"]
    assert {t["name"]: (t["dtype"], t["shape"]) for t in llama["inputs"]} == {
        "q": ("bf16", [1, 2048, 32, 64]), "k": ("bf16", [1, 2048, 8, 64])}
    geglu = definitions["batch8-hidden4096-intermediate11008-seq8192-bf16"]["spec"]
    assert {t["name"]: t["shape"] for t in geglu["inputs"]} == {
        "x": [8, 8192, 4096], "w_up": [11008, 4096], "w_down": [4096, 11008], "w_gate": [11008, 4096]}
    assert geglu["implied"] == {"hidden_act": "gelu_pytorch_tanh"}
