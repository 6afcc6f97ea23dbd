"""Megatron cross entropy's rerun adapter: the per-token loss [seq, batch] of
logits [seq, batch, vocab] (Megatron-LM's layout) against integer targets, unreduced.

The workloads follow Liger-Kernel's ``benchmark/scripts/benchmark_megatron_cross_entropy.py``: logits drawn
from a standard normal (bfloat16 upstream, which its runs do not record), targets drawn uniformly from the
vocabulary, the loss left per token (its benchmark backpropagates the sum). Its current script compares, at
a tensor-parallel size ``tensor_parallel``:

- ``liger``: ``liger_kernel.megatron.LigerMegatronCrossEntropy`` (Liger's vocab-parallel Triton kernel);
- ``megatron-fused``: Megatron-Core's ``fused_vocab_parallel_cross_entropy``, its eager path's steps put
  through ``megatron.core.jit.jit_fuser`` (torch.compile from PyTorch 2.2, so a compiled provider whose
  compile is checked, ``catalog.COMPILED_PROVIDERS``);
- ``megatron-unfused``: Megatron-Core's eager ``vocab_parallel_cross_entropy``;

its first script named the fused path ``megatron`` and added ``torch``, ``F.cross_entropy`` over the
logits upcast to float32. The Megatron providers need ``megatron-core`` and, as upstream's do, a process
group even at one rank: a single-rank group is made when none exists (NCCL on CUDA, Gloo otherwise). This
single-device rerun takes ``tensor_parallel`` 1 only.

Liger's forward writes the logits' gradient into the logits tensor and Megatron's subtracts the row
maximum from it in place, so repeated forwards over one pass see those values; upstream's benchmark reuses
its tensor the same way. Megatron's backward turns its saved softmax into the gradient in place, so one
forward takes one backward (``BACKWARD_CONSUMES_GRAPH``); upstream's script therefore times its backward
rows as forward and backward together, for every provider.
"""

from __future__ import annotations

import importlib
import inspect

import torch
import torch.nn.functional as F

from kernels.adapter import Adapter, Built, Unavailable
from kernels.providers import fresh_dynamo, liger_attr, liger_label, version_label
from kernels.spec import DTYPE_BYTES
from kernels.tensors import RERUN_BYTES, RERUN_DTYPES, generator, input_shapes, leaf, per_mode, randn



def per_token(logits, target):
    seq, batch, vocab = logits.shape
    return F.cross_entropy(logits.reshape(-1, vocab), target.reshape(-1), reduction="none").reshape(seq, batch)


def megatron(name: str, module: str):
    try:
        return getattr(importlib.import_module(module), name)
    except Exception as exc:  # noqa: BLE001 - without megatron-core there is no megatron provider
        raise Unavailable(f"megatron-core not importable: {exc}") from exc


def single_rank_group(device: torch.device):
    """The default process group, made for one rank in this process (an in-memory store, no network) where
    none exists; Megatron's cross entropy queries its rank and size even at one rank."""
    import torch.distributed as dist

    if not dist.is_available():
        raise Unavailable("torch.distributed is not available, and Megatron's cross entropy needs a process group")
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, store=dist.HashStore(), rank=0, world_size=1)
    if dist.get_world_size() != 1:
        raise Unavailable(f"a process group of {dist.get_world_size()} ranks exists; this rerun takes one")
    return dist.group.WORLD


def one_rank_model_parallel() -> None:
    """Megatron's model-parallel state at one tensor-parallel rank, over the default group, where none is set
    up: releases whose unfused cross entropy takes no process group read it from there."""
    from megatron.core import parallel_state

    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(tensor_model_parallel_size=1)


class MegatronCrossEntropy(Adapter):
    KERNEL = "megatron_cross_entropy"
    OUTPUT_NAMES = ("loss",)
    GRAD_INPUTS = ("logits",)
    REFERENCE_DTYPE = torch.float64
    BACKWARD_CONSUMES_GRAPH = True

    def dims(self, params) -> tuple[int, int, int]:
        """(seq, batch, vocab); a ValueError for a tensor-parallel size this single-device rerun cannot take."""
        tp = int(params.get("tensor_parallel", 1))
        if tp != 1:
            raise ValueError(f"{self.KERNEL}: tensor_parallel {tp} needs {tp} devices; this rerun takes "
                             "tensor_parallel 1")
        seq, batch, vocab = input_shapes(self.KERNEL, params)["logits"]
        return seq, batch, vocab

    def make_inputs(self, params, dtype, seed, device) -> dict[str, torch.Tensor]:
        seq, batch, vocab = self.dims(params)
        gen = generator(seed, device)
        logits = randn((seq, batch, vocab), RERUN_DTYPES[dtype], gen, device)
        target = torch.randint(vocab, (seq, batch), generator=gen, device=device, dtype=torch.int64)
        return {"logits": logits, "target": target}

    def reference(self, inputs, params) -> tuple[torch.Tensor]:
        return (per_token(inputs["logits"], inputs["target"]),)

    def _loss_pass(self, loss_of, inputs, label: str) -> Built:
        """A pass of ``loss_of(logits, target)`` over a fresh leaf copy of the logits."""
        logits, target = leaf(inputs["logits"]), inputs["target"]
        return self.built(lambda: (loss_of(logits, target),), {"logits": logits}, label)

    def _liger(self, provider, inputs, params) -> Built:
        cls = liger_attr(inputs["logits"], "megatron", "LigerMegatronCrossEntropy", package="liger_kernel",
                         what="liger_kernel.megatron")
        ce = cls()
        # At one rank upstream's process group only skips the all-reduces, as None does.
        return self._loss_pass(lambda logits, target: ce(logits, target, tp_group=None), inputs,
                               liger_label("LigerMegatronCrossEntropy", "Triton"))

    def _megatron_fused(self, provider, inputs, params) -> Built:
        fused = megatron("fused_vocab_parallel_cross_entropy", "megatron.core.fusions.fused_cross_entropy")
        group = single_rank_group(inputs["logits"].device)
        fresh_dynamo()
        return self._loss_pass(lambda logits, target: fused(logits, target, group), inputs,
                               f"megatron-core {version_label('megatron-core')} fused_vocab_parallel_cross_entropy "
                               "(steps compiled by megatron.core.jit.jit_fuser)")

    def _megatron_unfused(self, provider, inputs, params) -> Built:
        unfused = megatron("vocab_parallel_cross_entropy", "megatron.core.tensor_parallel.cross_entropy")
        group = single_rank_group(inputs["logits"].device)
        if "tp_group" in inspect.signature(unfused).parameters:
            loss_of = lambda logits, target: unfused(logits, target, 0.0, group)  # noqa: E731
        else:
            one_rank_model_parallel()
            loss_of = lambda logits, target: unfused(logits, target, 0.0)  # noqa: E731
        return self._loss_pass(loss_of, inputs,
                               f"megatron-core {version_label('megatron-core')} vocab_parallel_cross_entropy (unfused)")

    def _torch(self, provider, inputs, params) -> Built:
        return self._loss_pass(lambda logits, target: per_token(logits.float(), target), inputs,
                               f"PyTorch {torch.__version__} F.cross_entropy over float32 logits, reduction='none'")

    BUILDERS = {"liger": _liger, "megatron-fused": _megatron_fused, "megatron-unfused": _megatron_unfused,
                "megatron": _megatron_fused, "torch": _torch}

    def bytes_moved(self, params, dtype, mode) -> int:
        """Forward reads logits and targets and writes the per-token loss (float32 from every provider); backward reads the logits,
        targets and the loss's gradient and writes the logits' gradient; full reads and writes each once."""
        seq, batch, vocab = self.dims(params)
        tokens = seq * batch
        logits, loss = tokens * vocab * RERUN_BYTES[dtype], tokens * DTYPE_BYTES["fp32"]
        reads = logits + tokens * DTYPE_BYTES["int64"] + loss
        return {"forward": reads, "backward": reads + logits, "full": reads + loss + logits}[mode]

    def flops(self, params, mode) -> int:
        """Per logit: forward 4 (running max, subtract, exp, sum); backward 3 (exp, divide by the sum, scale)."""
        seq, batch, vocab = self.dims(params)
        n = seq * batch * vocab
        return per_mode(4 * n, 3 * n, mode)


ADAPTER = MegatronCrossEntropy()
