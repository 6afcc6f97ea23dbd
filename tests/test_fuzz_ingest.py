"""Mutated real upstream CSVs through the real pipeline (`kernelindex ingest` on a directory source).

Each seeded round adds a few damaged revisions (byte flips, dropped and shuffled columns, huge numbers,
NaN, negative values, unicode names, broken JSON, truncation, blank lines, duplicated rows, stray carriage
returns and quotes, CRLF or lone-CR line breaks, a byte-order mark) after a clean warehouse, and checks: the ingest succeeds; every data line of every
revision is an observation (hence a run) or a quarantine row with a reason; nothing of the clean
warehouse is lost or changed.
"""

from __future__ import annotations

import csv
import io
import random

import pytest
from conftest import BASE_REVISIONS, copy_home, main_rows, query, read_snapshot, run_cli, write_snapshot_dir

ROUNDS = (20240903, 20250809, 20260616)
MUTATED_PER_ROUND = 4
RUN_COLUMNS = ("run_id, external_id, kernel, operation_mode, provider, metric, unit, median_value, p20_value, "
               "p80_value, gpu, workload_slug, observed_at, first_seen_revision, comparison_key, liger_version")

UNICODE = ["rope_🚀", "ライガー", "líger", "NVIDIA H100 80GB HBM3 ✓", "\u200b", "naïve_kernel", "Ω"]
HUGE = ["1e308", "1e400", "-1e400", "99999999999999999999999999", "3.6e6", "1.7976931348623157e308", "4e12"]
ODD = ["NaN", "nan", "inf", "-inf", "-0.5", "-1", "0", "", "abc", "0x10", "1,5", " 1.0 "]
BROKEN_JSON = ['{"hidden_size": 4096', '{"dtype": "torch.bfloat16",}', "{'a': 1}", "[1, 2]", "null", "",
               '{"hidden_size": NaN}', '{"hidden_size": 1e400}', '{"hidden_size": "abc"}', '{"B": -3, "T": 1e30}',
               '{"x": {"nested": 1}}', '{"dtype": 5}', '{"hidden_size": true}', "[" * 2000]


def _table(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"))))


def _text(table: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(table)
    return out.getvalue().encode("utf-8")


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, list[str]]:
    """A damaged copy of a real snapshot and the names of the damage done."""
    table = _table(data)
    header, body = table[0], table[1:]
    done = []
    col = {name: i for i, name in enumerate(header)}

    def some_rows(fraction=0.05):
        return rng.sample(range(len(body)), max(1, int(len(body) * fraction * rng.random())))

    field_mutations = {
        "huge numbers": (["y_value_50", "y_value_20", "y_value_80", "x_value"], HUGE),
        "NaN, infinite, negative, empty values": (["y_value_50", "y_value_20", "y_value_80", "x_value"], ODD),
        "unicode in names": (["kernel_name", "kernel_provider", "gpu_name", "x_name", "kernel_operation_mode"], UNICODE),
        "broken JSON": (["extra_benchmark_config_str"], BROKEN_JSON),
        "bad timestamps": (["timestamp"], ["2025-13-01 00:00:00", "yesterday", "", "2025-02-30 25:61:61"]),
    }
    for name in rng.sample(sorted(field_mutations), rng.randint(1, len(field_mutations))):
        columns, values = field_mutations[name]
        for i in some_rows():
            body[i][col[rng.choice(columns)]] = rng.choice(values)
        done.append(name)
    if rng.random() < 0.3:
        for i in some_rows(0.02):  # swap quantiles
            body[i][col["y_value_20"]], body[i][col["y_value_80"]] = body[i][col["y_value_80"]], body[i][col["y_value_20"]]
        done.append("quantiles out of order")
    if rng.random() < 0.4:
        for i in some_rows():
            body.insert(i, list(body[i]))
        done.append("duplicated rows")
    if rng.random() < 0.25:
        order = list(range(len(header)))
        rng.shuffle(order)
        header, body = [header[i] for i in order], [[r[i] for i in order] for r in body]
        done.append("shuffled columns")
    if rng.random() < 0.15:
        drop = rng.randrange(len(header))
        done.append(f"dropped column {header[drop]}")
        header, body = header[:drop] + header[drop + 1:], [r[:drop] + r[drop + 1:] for r in body]
    out = bytearray(_text([header] + body))

    lines = bytes(out).split(b"\n")
    if rng.random() < 0.4:
        for _ in range(rng.randint(1, 6)):
            lines.insert(rng.randrange(1, len(lines)), rng.choice([b"", b"   ", b"\r", b"\t"]))
        done.append("blank lines")
    if rng.random() < 0.3:
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(1, len(lines))
            cut = rng.randrange(len(lines[i]) + 1)
            lines[i] = lines[i][:cut] + rng.choice([b"\r", b'"', b",", b"\x00", b"\\", b'""']) + lines[i][cut:]
        done.append("stray carriage returns, quotes, commas, NULs")
    if rng.random() < 0.3:
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(1, len(lines))
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        done.append("lines cut short")
    newline = rng.choice([b"\n", b"\n", b"\r\n", b"\r"])
    if newline != b"\n":
        done.append("CRLF line breaks" if newline == b"\r\n" else "lone-CR line breaks")
    out = bytearray(newline.join(lines))
    if rng.random() < 0.6:
        for _ in range(rng.randint(1, 40)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        done.append("random byte flips")
    if rng.random() < 0.3:
        out = out[: rng.randrange(len(out) // 2, len(out))]
        done.append("truncated file")
    if rng.random() < 0.3:
        out = b"\xef\xbb\xbf" + out
        done.append("byte-order mark")
    return bytes(out), done


def data_lines(data: bytes) -> int:
    """Lines after the header that hold anything but whitespace (blank lines are not rows). Lines end as the
    header does: in a carriage return not followed by a line feed, else in a line feed (a CR before it dropped)."""
    lf, cr = data.find(b"\n"), data.find(b"\r")
    newline = "\r" if cr >= 0 and (lf < 0 or cr < lf - 1) else "\n"
    lines = data.decode("utf-8", errors="replace").split(newline)[1:]
    return sum(1 for line in lines if line.strip())


@pytest.mark.parametrize("seed", ROUNDS)
def test_mutated_snapshots_lose_no_line_and_nothing_stored(seed, tmp_path, base_warehouse):
    rng = random.Random(seed)
    clean = main_rows()[:BASE_REVISIONS]
    home = copy_home(base_warehouse, tmp_path / "home")
    kept = query(home, f"SELECT {RUN_COLUMNS} FROM runs ORDER BY run_id")
    rows, contents, damage = list(clean), {}, {}
    for n in range(MUTATED_PER_ROUND):
        commit = f"{rng.getrandbits(160):040x}"
        name = f"fuzz_{seed}_{n}.csv.gz"
        contents[name], damage[commit] = mutate(read_snapshot(rng.choice(clean)), rng)
        rows.append({"commit": commit, "committed_at": f"2024-10-02T0{n}:00:00+00:00", "path": clean[0]["path"],
                     "file": name})
    source = write_snapshot_dir(tmp_path / "source", rows, contents)

    result = run_cli(home, "ingest", "--source", str(source))
    assert result.returncode == 0, f"{damage}\n{result.stderr[-3000:]}"

    for row in rows[BASE_REVISIONS:]:
        key = f"all_benchmark_data@{row['commit'][:12]}"
        (accepted,), = query(home, "SELECT count(*) FROM observations WHERE revision_key = ?", [key])
        (refused,), = query(home, "SELECT count(*) FROM snapshot_quarantine WHERE revision_key = ?", [key])
        (in_quarantine,), = query(home, "SELECT count(*) FROM quarantine WHERE revision_key = ? "
                                        "AND reason NOT LIKE 'conflicts with%'", [key])
        lines = data_lines(contents[row["file"]])
        assert accepted + refused == lines, (damage[row["commit"]], accepted, refused, lines)
        assert in_quarantine == refused
        numbers = query(home, "SELECT line_number FROM observations WHERE revision_key = ? UNION ALL "
                              "SELECT line_number FROM snapshot_quarantine WHERE revision_key = ?", [key, key])
        assert len({n for (n,) in numbers}) == lines  # each line in exactly one place
    assert query(home, "SELECT count(*) FROM observations WHERE run_id NOT IN (SELECT run_id FROM runs)") == [(0,)]
    assert query(home, "SELECT count(*) FROM quarantine WHERE reason IS NULL OR trim(reason) = ''") == [(0,)]
    kept_ids = tuple(r[0] for r in kept)
    still = query(home, f"SELECT {RUN_COLUMNS} FROM runs WHERE list_contains(?, run_id) ORDER BY run_id",
                  [list(kept_ids)])
    assert still == kept  # every run of the clean warehouse, with the values first published
