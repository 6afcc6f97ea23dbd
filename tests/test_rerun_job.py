"""The GPU rerun job from the CPU side: clear refusal without CUDA, partitions by kernel family."""

import json

import pytest

import kernels
from kernelindex_pipeline import cli
from kernelindex_pipeline.defs import reruns
from kernelindex_pipeline.gpu import rerun


def test_rerun_without_cuda_says_so_and_publishes_nothing(shipped_warehouse, monkeypatch, capsys, tmp_path):
    evidence = tmp_path / "evidence"
    monkeypatch.setenv("KERNELINDEX_HOME", str(shipped_warehouse.home))
    assert not rerun.cuda_available()
    assert cli.main(["rerun"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"kernelindex: {reruns.NO_CUDA}"
    assert not evidence.exists()


def test_gpu_asset_is_partitioned_by_kernel_family_and_card_with_a_device_budget():
    spec = reruns.gpu_reruns
    assert reruns.rerun_job.partitions_def == spec.partitions_def
    keys = {(k.keys_by_dimension["kernel"], k.keys_by_dimension["card"]) for k in spec.partitions_def.get_partition_keys()}
    assert keys == {(kernel, card) for kernel in kernels.FAMILIES for card in reruns.CARDS}
    assert {"nvidia-h100-80gb-hbm3", "nvidia-h200"} <= set(reruns.CARDS)
    assert reruns.rerun_partition("dyt", "NVIDIA H100 80GB HBM3").keys_by_dimension == {
        "card": "nvidia-h100-80gb-hbm3", "kernel": "dyt"}
    with pytest.raises(ValueError, match="no rerun partition for the card 'NVIDIA Z9'"):
        reruns.rerun_partition("dyt", "NVIDIA Z9")
    assert reruns.RerunConfig().device_minutes > 0 and reruns.RerunConfig().only_unchecked is False


def test_gpu_asset_is_tagged_for_a_gpu_node_and_pool():
    op = reruns.measure_reruns
    k8s = op.tags["dagster-k8s/config"]
    k8s = json.loads(k8s) if isinstance(k8s, str) else k8s
    assert k8s["container_config"]["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert op.pool == "gpu"
    job = reruns.rerun_job
    assert job.name == reruns.RERUN_JOB and job.tags["kernelindex/accelerator"] == "nvidia-gpu"
    assert reruns.gpu_reruns.tags["kernelindex/accelerator"] == "nvidia-gpu"


def test_a_launch_without_cuda_fails_in_one_line_and_leaves_the_evidence_partition_as_it_was(tmp_path):
    """What an operator meets launching a rerun partition on a CPU-only deployment: the run fails with one
    line, and the partition the committed evidence materialized stays materialized, not failed."""
    import dagster as dg

    from kernelindex_pipeline.defs.resources import WarehouseResource

    instance = dg.DagsterInstance.ephemeral()
    partition = reruns.rerun_partition("dyt", "NVIDIA H100 80GB HBM3")
    instance.report_runless_asset_event(dg.AssetMaterialization(
        reruns.gpu_reruns.key, partition=partition, description="committed rerun evidence"))
    result = reruns.rerun_job.execute_in_process(
        instance=instance, partition_key=partition, raise_on_error=False,
        resources={"warehouse": WarehouseResource(home=str(tmp_path), evidence_dir=str(tmp_path / "evidence"))})
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.error.message
    assert reruns.NO_CUDA in message and len(message.strip().splitlines()) == 1
    assert failure.step_failure_data.user_failure_data.description == reruns.NO_CUDA
    status = instance.get_status_by_partition(reruns.gpu_reruns.key, [str(partition)], reruns.RERUN_PARTITIONS)
    assert status == {str(partition): dg.AssetPartitionStatus.MATERIALIZED}
    assert not (tmp_path / "evidence").exists()


def test_matmul_ceiling_problems_are_the_square_and_each_mlp_gemm_once():
    """The session's matmul ceiling is measured on the square product and on the GEMM problems of the
    gated MLPs being rerun, so the GEMM-bound floor uses a rate measured on those very problems."""
    from kernelindex_pipeline.gpu.environment import SQUARE, matmul_problems
    from kernelindex_pipeline.gpu.targets import targets_named

    targets = targets_named("all")
    shapes = matmul_problems(targets)
    assert shapes[0] == SQUARE and len(shapes) == len(set(shapes))
    seed = next(t for t in targets if t["kernel"] == "geglu")["params"]
    tokens = seed["batch"] * seed["seq"]
    for shape in [(tokens, seed["intermediate"], seed["hidden"]), (tokens, seed["hidden"], seed["intermediate"]),
                  (seed["intermediate"], seed["hidden"], tokens)]:
        assert shape in shapes
    assert matmul_problems(targets_named("all", ["rms_norm", "rope"])) == [SQUARE]


def test_the_command_lines_instance_gives_the_gpu_pool_one_rerun_at_a_time(tmp_path):
    """Before a launch, the Dagster instance `kernelindex` makes holds one GPU rerun at a time (a pool with a
    limit), and the asset says it needs a CUDA GPU of its partition's card."""
    from kernelindex_pipeline.cli import _dagster_instance
    from kernelindex_pipeline.warehouse.store import Warehouse

    instance = _dagster_instance(Warehouse(tmp_path))
    assert instance.event_log_storage.get_concurrency_info("gpu").limit == 1
    for described in (reruns.gpu_reruns.description, reruns.measure_reruns.description, reruns.rerun_job.description):
        assert "CUDA GPU" in described and "card" in described
