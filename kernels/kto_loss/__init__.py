"""Fused linear KTO loss: an unpaired preference loss over an LM head and a frozen reference head."""

from kernels._shapes import preference
from kernels._spec import spec

SPEC = spec("kto_loss", "Fused linear KTO loss", tensors=preference)
