"""What operators and readers see: the static pages rendered by a real headless Chromium (a screenshot whose
pixels are inspected), and the Dagster code location's descriptions, checks, schedule, sensor and
materialization metadata."""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

from kernelindex_pipeline.site.export import group_slug
from kernelindex_pipeline.warehouse.store import Warehouse

LLAMA4 = "llama4_rope/backward/liger/nvidia-h100-80gb-hbm3/hidden2048-kv_heads8-q_heads32-seq2048-bf16/2025-08-07-21-42-04"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LIGER_ORANGE = (0xD9, 0x48, 0x0F)
BASELINE_BLUE = (0x1C, 0x64, 0xC8)


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB/RGBA non-interlaced PNG, with zlib only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    bpp = 3 if colour == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line if bpp == 3 else b"".join(line[j:j + 3] for j in range(0, stride, 4))))
        prev = line
    return width, height, rows


def screenshot(page: Path, out: Path, size=(1000, 700)) -> tuple[int, int, list[bytes]]:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--hide-scrollbars", f"--user-data-dir={profile}", f"--screenshot={out}",
                        f"--window-size={size[0]},{size[1]}", page.resolve().as_uri()],
                       check=True, capture_output=True, timeout=90)
    return decode_png(out.read_bytes())


def near(pixel: tuple[int, int, int], colour: tuple[int, int, int], tolerance: int = 40) -> bool:
    return all(abs(p - c) <= tolerance for p, c in zip(pixel, colour))


def pixels(rows: list[bytes], top: int, bottom: int, left: int, right: int):
    for row in rows[top:bottom]:
        for x in range(left, min(right, len(row) // 3)):
            yield row[3 * x], row[3 * x + 1], row[3 * x + 2]


def seed(home: Path) -> dict:
    with Warehouse(home).reader() as con:
        run_id, key = con.execute("SELECT run_id, comparison_key FROM runs WHERE external_id = ?", [LLAMA4]).fetchone()
    return {"run_id": run_id, "group": group_slug(key)}


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")


@needs_chromium
def test_group_chart_renders_in_chromium(analyst_home, html_export, tmp_path):
    width, height, rows = screenshot(html_export / "groups" / f"{seed(analyst_home)['group']}.html", tmp_path / "g.png")
    assert (width, height) == (1000, 700)
    # the chart sits below the title block: Liger's (orange) and the baseline's (blue) median dots and bars
    region = list(pixels(rows, 150, 420, 200, 800))
    orange = sum(near(p, LIGER_ORANGE) for p in region)
    blue = sum(near(p, BASELINE_BLUE) for p in region)
    assert orange > 50 and blue > 50, (orange, blue)
    # the header band above it is text on white, without chart colours
    assert not any(near(p, LIGER_ORANGE) for p in pixels(rows, 0, 60, 0, 1000))


@needs_chromium
def test_record_page_renders_in_chromium(analyst_home, html_export, tmp_path):
    width, height, rows = screenshot(html_export / "runs" / f"{seed(analyst_home)['run_id']}.html", tmp_path / "r.png")
    # the large primary figure: dark text pixels under the title
    dark = sum(max(p) < 90 for p in pixels(rows, 90, 260, 0, 600))
    assert dark > 500, dark
    white = sum(min(p) > 245 for p in pixels(rows, 0, height, 0, width))
    assert white < width * height


def test_every_asset_is_described_and_checks_schedule_sensor_are_named():
    from kernelindex_pipeline.definitions import defs as location

    defs = location()

    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        assert graph.get(key).description, key
    checks = {k.name for k in graph.asset_check_keys}
    assert {"unique_run_ids", "no_orphan_ranks", "every_run_has_manifest", "digests_recompute"} <= checks
    assert defs.resolve_schedule_def("nightly_ingest").cron_schedule == "0 3 * * *"
    assert defs.resolve_sensor_def("new_upstream_revisions").job_name == "ingest_upstream"


def test_materializations_carry_schemas_counts_previews_and_revision_tags(analyst_home):
    import dagster as dg

    instance = dg.DagsterInstance.local_temp(tempdir=str((analyst_home / "dagster").resolve()),
                                             overrides={"telemetry": {"enabled": False}})
    try:
        for name in ("upstream_snapshots", "run_observations", "controlled_evidence", "runs", "run_manifests",
                     "comparison_ranks"):
            event = instance.get_latest_materialization_event(dg.AssetKey(name))
            assert event is not None, name
            metadata = event.asset_materialization.metadata
            assert "dagster/row_count" in metadata, name
            assert name == "upstream_snapshots" or "dagster/column_schema" in metadata, name
        ranks = instance.get_latest_materialization_event(dg.AssetKey("comparison_ranks")).asset_materialization.metadata
        assert "changed order" in ranks["preview"].value and "| previous_order | current_order |" in ranks["preview"].value
        run = instance.get_runs(limit=1)[0]
        assert run.tags["kernelindex/upstream_revision"] == run.tags["dagster/asset_partition_range_end"]
    finally:
        instance.dispose()


def rendered_dom(page: Path) -> str:
    """The page's DOM after its scripts ran, as headless Chromium serializes it."""
    return rendered_dom_at(page.resolve().as_uri())


@needs_chromium
def test_seed_page_cites_and_leads_to_its_kernel_in_chromium(analyst_home, html_export):
    import datetime
    import re
    from urllib.parse import parse_qs, urlsplit

    ids = seed(analyst_home)
    page = html_export / "runs" / f"{ids['run_id']}.html"
    dom = rendered_dom(page)
    with Warehouse(analyst_home).reader() as con:
        (published,) = con.execute("SELECT published_at FROM publications WHERE run_id = ?", [ids["run_id"]]).fetchone()
    assert f"Published {published:%Y-%m-%d}" in dom
    # the reader's browser fills the access date in (UTC, as the script writes it)
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    assert f'<span class="accessed">{today}</span>' in dom and "[access date]" not in dom
    assert f"https://kernelindex.dev/runs/{ids['run_id']}.html" in dom
    report = re.search(r'<a id="report" href="([^"]+)"', dom).group(1).replace("&amp;", "&")
    fields = parse_qs(urlsplit(report).query)
    assert ids["run_id"] in fields["body"][0] and fields["title"][0].startswith(f"Run {ids['run_id'][:8]}")
    # "All results for" opens the kernel's page, which lists the seed's comparison group
    href = re.search(r'<a id="kernel-link" href="([^"]+)">All results for Llama 4 rotary position embedding', dom)
    kernel_page = (page.parent / href.group(1)).resolve()
    kernel_dom = rendered_dom(kernel_page)
    assert f'href="../groups/{ids["group"]}.html"' in kernel_dom and "NVIDIA H100" in kernel_dom


@needs_chromium
def test_index_filters_narrow_the_rows_in_chromium(html_export):
    import re

    index = html_export / "index.html"
    everything = rendered_dom(index)
    total = len(re.findall(r"<tr data-kernel=", everything))
    assert f"{total} of {total} kernels" in everything
    # the filter's state travels in the URL, so the rendered page is the filtered one
    filtered = rendered_dom_at(index.resolve().as_uri() + "?kernel=llama4_rope&provider=huggingface")
    rows = re.findall(r"<tr ([^>]*)>", filtered)
    shown = [r for r in rows if "data-kernel" in r and "hidden" not in r]
    assert 0 < len(shown) < total and f"{len(shown)} of {total} kernels" in filtered
    assert all('data-kernel="llama4_rope"' in r and "huggingface" in r for r in shown)


def rendered_dom_at(url: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               f"--user-data-dir={profile}", "--dump-dom", url],
                              check=True, capture_output=True, timeout=90, text=True)
    return done.stdout
