"""Fused linear KTO loss: an unpaired preference loss over an LM head and a frozen reference head."""
