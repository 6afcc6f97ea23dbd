"""Fused linear KTO loss: an unpaired preference loss over an LM head and a frozen reference head."""

from kernels.shapes import preference
from kernels.spec import spec

SPEC = spec("kto_loss", "Fused linear KTO loss", tensors=preference)
