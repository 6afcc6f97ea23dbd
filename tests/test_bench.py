"""The synthetic history the ingest benchmark measures: real revisions, repeated earlier in time as new ones,
every one of them a revision the ingest takes."""

import gzip

from kernelindex_pipeline.bench import add_nightly_revision, synthetic_history
from kernelindex_pipeline.defs.resources import SHIPPED_SOURCES
from kernelindex_pipeline.ingest.sources import DirectorySource
from kernelindex_pipeline.ingest.sources.base import screen_revisions


def test_each_copy_of_history_is_new_revisions_of_the_same_rows_earlier_in_time(tmp_path):
    made = synthetic_history(tmp_path, 2)
    for shipped, copy in zip(SHIPPED_SOURCES, made):
        original = DirectorySource(str(shipped)).list_revisions()
        doubled = DirectorySource(str(copy)).list_revisions()
        assert len(doubled) == 2 * len(original)
        assert len({r.key for r in doubled}) == len(doubled)  # every copy under its own commits
        first = original[0]  # the oldest revision of either source lists its file
        data = DirectorySource(str(shipped)).read(first)
        [earlier] = [r for r in doubled if r.committed_at[:4] == str(int(first.committed_at[:4]) - 1)
                     and r.committed_at[4:10] == first.committed_at[4:10]]
        shifted = DirectorySource(str(copy)).read(earlier)  # copy 1: a year earlier, its rows' timestamps too
        assert shifted.count(b"\n") == data.count(b"\n") and shifted != data


def test_a_nightly_revision_is_the_newest_main_file_committed_next(tmp_path):
    main, _ = synthetic_history(tmp_path, 2)
    before = DirectorySource(str(main)).list_revisions()
    add_nightly_revision(main, 1, 2)
    after = screen_revisions(DirectorySource(str(main)).list_revisions())
    assert len(after) == len(before) + 1
    assert not [r.refused for r in after if r.refused]  # none past the ingest's clock
    newest = max(after, key=lambda r: r.committed_at)
    assert newest.key not in {r.key for r in before} and newest.stream == "all_benchmark_data"
    assert newest.committed_at > max(r.committed_at for r in before)
    rows = gzip.decompress((main / "nightly1.csv.gz").read_bytes())
    assert rows.split(b"\n", 1)[0].startswith(b"kernel_name,")


def test_the_peak_rss_of_a_command_counts_its_worker_processes():
    """An export renders in worker processes: the RSS the benchmark reports sums the whole process tree."""
    import subprocess
    import sys
    import time

    from kernelindex_pipeline.bench import _tree_rss_kib

    child = "b = bytearray(160 * 2**20); print('ready', flush=True); import time; time.sleep(5)"
    parent = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        time.sleep(0.1)
        assert _tree_rss_kib(parent.pid) >= 160 * 1024
    finally:
        parent.kill()  # the child ends by itself
        parent.wait()


def test_holding_back_the_newest_revisions_takes_them_out_of_the_index_until_it_is_put_back(tmp_path):
    """The real-revision nightly (h) builds a home without the newest gh-pages revisions, then finds them."""
    from kernelindex_pipeline.bench import _read_index, _write_index, hold_back_newest

    sources = synthetic_history(tmp_path / "sources", 1)
    whole = hold_back_newest(sources[1], 2)
    kept = _read_index(sources[1])
    newest = sorted(whole, key=lambda r: r["committed_at"])[-2:]
    assert len(kept) == len(whole) - 2 and not [r for r in newest if r in kept]
    assert max(r["committed_at"] for r in kept) <= min(r["committed_at"] for r in newest)
    _write_index(sources[1], whole)
    assert _read_index(sources[1]) == whole
