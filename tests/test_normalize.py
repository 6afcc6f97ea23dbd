"""Normalization of crafted upstream rows: identity rules and a clear reason for every refused row."""



import pytest

from kernelindex_pipeline.ingest.normalize import UPSTREAM_COLUMNS, Snapshot, normalize
from kernelindex_pipeline.ingest.sources import Revision

HEADER = ",".join(UPSTREAM_COLUMNS)
GOOD = ('llama4_rope,liger,backward,speed,ms,H,hidden size,2048,0.1536320000886917,0.15190400183200836,'
        '0.1558080017566681,"{""dtype"": ""torch.bfloat16"", ""seq_len"": 2048, ""num_q_heads"": 32, '
        '""num_kv_heads"": 8}",NVIDIA H100 80GB HBM3,2025-08-07 21:42:04,0.6.1')
REVISION = Revision("2025-08-09T23:34:42+00:00", "all_benchmark_data", "a" * 40,
                    "benchmark/data/all_benchmark_data.csv", "test")


def run(*lines: str, header: str = HEADER):
    return normalize([Snapshot(REVISION, ("\n".join([header, *lines]) + "\n").encode("utf-8"))])


def variant(**changes) -> str:
    """GOOD with some columns replaced (values given already CSV-quoted where needed)."""
    import csv
    import io

    row = next(csv.reader([GOOD]))
    fields = dict(zip(UPSTREAM_COLUMNS, row))
    fields.update(changes)
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow([fields[c] for c in UPSTREAM_COLUMNS])
    return out.getvalue()


def test_good_row_gets_contract_identity():
    result = run(GOOD)
    assert result.quarantine.num_rows == 0
    (obs,) = result.observations.to_pylist()
    assert (obs["median_value"], obs["p20_value"], obs["p80_value"]) == (153632, 151904, 155808)
    assert obs["source_p50"] == 0.1536320000886917 and obs["line_number"] == 2
    (dims,) = result.dims.to_pylist()
    assert dims["id_prefix"] == "llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/"
    assert dims["title"] == "Llama 4 rotary position embedding · liger · backward"
    assert (dims["gpu"], dims["form_factor"], dims["architecture"]) == ("NVIDIA H100", "80GB HBM3", "sm_90")


@pytest.mark.parametrize("changes, reason", [
    ({"y_value_50": "nan"}, "NaN or infinite"),
    ({"y_value_80": "inf"}, "NaN or infinite"),
    ({"y_value_20": "-0.1"}, "zero or negative"),
    ({"y_value_50": "0"}, "zero or negative"),
    ({"y_value_50": "fast"}, "not a number"),
    ({"y_value_50": "0.1", "y_value_20": "0.2"}, "quantiles out of order"),
    ({"y_value_50": "9e9", "y_value_20": "9e9", "y_value_80": "9e9"}, "absurd value"),
    ({"y_value_50": "1e-07", "y_value_20": "1e-07", "y_value_80": "1e-07"}, "below the timer's resolution"),
    ({"metric_name": "memory", "metric_unit": "MB", "y_value_20": "1e-07"}, "rounds to 0 bytes"),
    ({"metric_unit": "us"}, "unknown metric or unit"),
    ({"kernel_operation_mode": "sideways"}, "unknown operation mode"),
    ({"timestamp": "yesterday"}, "timestamp is not"),
    ({"gpu_name": "NVIDIA Imaginary 9000"}, "unknown GPU"),
    ({"extra_benchmark_config_str": "{not json"}, "not valid JSON"),
    ({"extra_benchmark_config_str": "[1, 2]"}, "not a JSON object"),
    ({"extra_benchmark_config_str": '{"seq_len": [1, 2]}'}, "not a scalar"),
    ({"extra_benchmark_config_str": '{"seq_len": 100000000000000000000}'}, "beyond 2**53"),
    ({"x_value": "100000000000000000000"}, "beyond 2**53"),
    ({"kernel_name": "Llama Rope!"}, "not a lower-case identifier"),
    ({"kernel_name": "llama4_rope_seq=a b"}, "not a lower-case identifier"),
    ({"kernel_name": "llama4_rope_seq=1024"}, "kernel_name sets seq = 1024 where extra_benchmark_config_str has 2048"),
    ({"kernel_provider": ""}, "missing value"),
])
def test_bad_row_is_quarantined_with_reason_and_good_rows_still_land(changes, reason):
    result = run(GOOD.replace("21:42:04", "21:42:05"), variant(**changes))
    assert result.observations.num_rows == 1
    (q,) = result.quarantine.to_pylist()
    assert reason in q["reason"] and q["line_number"] == 3
    assert q["raw_line"] == variant(**changes)
    assert (q["source"], q["source_revision"]) == (REVISION.path, REVISION.commit)


def test_malformed_line_blank_line_and_duplicate():
    result = run(GOOD, "", "only,three,fields", GOOD)
    reasons = {q["line_number"]: q["reason"] for q in result.quarantine.to_pylist()}
    assert "malformed CSV line" in reasons[4]
    assert reasons[5] == "duplicate of line 2 (same run identity)"
    assert [o["line_number"] for o in result.observations.to_pylist()] == [2]


def test_schema_drift_quarantines_every_line_with_a_whole_file_reason():
    header = HEADER.replace("y_value_50", "y_median")
    result = run(GOOD, GOOD, header=header)
    assert result.observations.num_rows == 0
    assert [q["line_number"] for q in result.quarantine.to_pylist()] == [2, 3]
    assert all("schema drift: missing column(s) y_value_50" in q["reason"] for q in result.quarantine.to_pylist())
    assert result.unparseable[REVISION.key].startswith("schema drift: missing column(s) y_value_50")


def test_parseable_file_has_no_unparseable_entry():
    assert run(GOOD).unparseable == {}


def test_shuffled_columns_are_read_by_name():
    columns = list(UPSTREAM_COLUMNS)[::-1]
    import csv
    import io

    row = dict(zip(UPSTREAM_COLUMNS, next(csv.reader([GOOD]))))
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow([row[c] for c in columns])
    result = run(out.getvalue(), header=",".join(columns))
    assert result.observations.column("median_value").to_pylist() == [153632]


def test_invalid_utf8_is_quarantined_not_fatal():
    data = (HEADER + "\n" + GOOD + "\n" + GOOD.replace("21:42:04", "21:42:09") + "\n").encode()
    broken = data.replace(b"liger,backward", b"lig\xff\xfe,backward", 1)
    result = normalize([Snapshot(REVISION, broken)])
    assert result.observations.num_rows == 1
    (q,) = result.quarantine.to_pylist()
    assert "UTF-8" in q["reason"] or "identifier" in q["reason"]


def test_a_setting_in_the_kernel_name_is_a_workload_parameter():
    """Upstream's "dyt_beta=True" is kernel dyt with beta true, where the config leaves beta out too."""
    row = variant(kernel_name="dyt_beta=True", kernel_provider="liger", kernel_operation_mode="forward",
                  x_name="hidden_size", x_value="1024", extra_benchmark_config_str='{"BT": 4096, "dtype": "torch.bfloat16"}')
    result = run(row, row.replace("dyt_beta=True", "dyt_beta=False"))
    assert result.quarantine.num_rows == 0
    assert sorted(d["id_prefix"] for d in result.dims.to_pylist()) == [
        "dyt/forward/liger/nvidia-h100-80gb-hbm3/beta-false-hidden1024-tokens4096-bf16/",
        "dyt/forward/liger/nvidia-h100-80gb-hbm3/beta-true-hidden1024-tokens4096-bf16/"]
    assert {d["kernel"] for d in result.dims.to_pylist()} == {"dyt"}
    assert {d["kernel_name"] for d in result.dims.to_pylist()} == {"dyt_beta=True", "dyt_beta=False"}


def test_unknown_kernel_ingests_with_generic_workload():
    result = run(variant(kernel_name="brand_new_kernel"))
    (dims,) = result.dims.to_pylist()
    assert dims["known_kernel"] is False
    (workload,) = result.workloads.to_pylist()
    assert workload["shapes_known"] is False and '"inputs": "unknown"' in workload["definition"]


def test_memory_rows_get_bytes_and_their_own_identity():
    memory = variant(metric_name="memory", metric_unit="MB", y_value_50="52.89111328125", y_value_20="52.89111328125",
                     y_value_80="52.89111328125")
    result = run(GOOD, memory)
    assert result.quarantine.num_rows == 0
    values = sorted(result.observations.column("median_value").to_pylist())
    assert values == [153632, round(52.89111328125 * 2**20)]
    suffixes = {d["id_suffix"] for d in result.dims.to_pylist()}
    assert suffixes == {"", "/peak_memory"}


