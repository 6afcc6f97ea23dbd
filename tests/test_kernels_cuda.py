"""KernelIndex's norm backward on a CUDA device: what the CPU interpreter cannot run (skipped without CUDA).

The grid barrier of ``fused_sum`` needs every program resident at once, which only a GPU provides. Run this
file in a process of its own (``python -m pytest --noconftest tests/test_kernels_cuda.py`` on the device):
the interpreter tests set TRITON_INTERPRET for the whole process, and triton is imported here only inside
the tests so that collecting this file does not load triton before they set it.
"""

from __future__ import annotations

import dataclasses
import os

import pytest

torch = pytest.importorskip("torch")

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)
if os.environ.get("TRITON_INTERPRET") == "1":
    pytest.skip("TRITON_INTERPRET is set in this process: run this file on its own", allow_module_level=True)


def _inputs(rows, hidden, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(rows, hidden, device="cuda", generator=gen).to(dtype)
    w = (torch.randn(hidden, device="cuda", generator=gen) * 0.1 + 1).to(dtype)
    b = (torch.randn(hidden, device="cuda", generator=gen) * 0.1).to(dtype)
    dy = torch.randn(rows, hidden, device="cuda", generator=gen).to(dtype)
    return x, w, b, dy


@pytest.mark.parametrize(("is_ln", "rows", "hidden", "dtype"), [
    (False, 2048, 16384, torch.bfloat16), (True, 1024, 16384, torch.float32),
    (False, 2048, 4096, torch.bfloat16), (True, 777, 1000, torch.float32)])
def test_fused_partial_sums_match_the_separate_launch(is_ln, rows, hidden, dtype):
    """Over many resident programs and launches in a row, the barrier-fused dW (dB) agree with the separate
    launch's and dx is untouched; the barrier words are left ready for the next launch."""
    from kernels.engines.norm import launch
    from kernels.engines.norm.settings import backward_setting

    base = backward_setting(hidden, is_ln)[1]
    fused = dataclasses.replace(base, fused_sum=True, programs_per_sm=1)
    split = dataclasses.replace(fused, fused_sum=False)
    n_sm = launch.sm_count(torch.device("cuda"))
    words = launch.sync_words(torch.device("cuda", torch.cuda.current_device()))
    generation = words[1].item()
    for seed in range(4):
        x, w, b, dy = _inputs(rows, hidden, dtype, seed)
        _, mean, rstd = launch.norm_forward(x, w, b, 1e-6, is_ln)
        want = launch.norm_backward(dy, x, w, mean, rstd, is_ln, setting=split)
        got = launch.norm_backward(dy, x, w, mean, rstd, is_ln, setting=fused)
        assert torch.equal(got[0], want[0])  # the same dx kernel
        # The same fp32 partials summed in tiles of another shape: equal to rounding in the output dtype.
        tol = 8e-3 if dtype == torch.bfloat16 else 1e-5
        for g, r in zip(got[1:], want[1:]):
            if r is not None:
                assert torch.allclose(g.float(), r.float(), rtol=tol, atol=tol * r.float().abs().max().item())
    assert words.tolist() == [0, generation + 4]  # four fused launches, each through the barrier
    assert launch.all_resident(x.device, n_sm) and not launch.all_resident(x.device, n_sm + 1)


@pytest.mark.parametrize(("is_ln", "rows", "hidden", "dtype"), [
    (False, 2048, 16384, torch.bfloat16), (True, 1024, 16384, torch.float32), (False, 300, 4096, torch.bfloat16)])
def test_tma_tiled_rows_match_plain_loads(is_ln, rows, hidden, dtype):
    """The sliced backward with its loads as TMA tiles gives the plain-load kernel's dx, dW (dB)."""
    from kernels.engines.norm import launch
    from kernels.engines.norm.settings import SlicedRows

    if torch.cuda.get_device_capability()[0] < 9:
        pytest.skip("the TMA needs sm_90 or later")
    x, w, b, dy = _inputs(rows, hidden, dtype, 7)
    assert launch.tma_lines(hidden, 2, x, dy) == hidden // 512
    _, mean, rstd = launch.norm_forward(x, w, b, 1e-6, is_ln)
    tiled = SlicedRows(programs_per_sm=1, warps=8, slices=2, stages=2, tma=True)
    got = launch.norm_backward(dy, x, w, mean, rstd, is_ln, setting=tiled)
    want = launch.norm_backward(dy, x, w, mean, rstd, is_ln, setting=dataclasses.replace(tiled, tma=False))
    tol = 8e-3 if dtype == torch.bfloat16 else 1e-5
    for g, r in zip(got, want):
        if r is not None:
            assert torch.allclose(g.float(), r.float(), rtol=tol, atol=tol * r.float().abs().max().item())
