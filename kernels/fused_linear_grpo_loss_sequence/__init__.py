"""Fused linear GRPO loss, sequence-level importance sampling (GSPO): the clipped policy-gradient loss with a
KL penalty over an LM head, without materialized logits.

Its workloads were published with their input tensors unknown; the spec keeps them so
(``shapes_published=False``) and gives the shapes for the reruns only (``kernels.shapes.grpo``)."""

from kernels.shapes import grpo
from kernels.spec import spec

SPEC = spec("fused_linear_grpo_loss_sequence", "Fused linear GRPO loss · sequence-level importance sampling", tensors=grpo,
            shapes_published=False)
