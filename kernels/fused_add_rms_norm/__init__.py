"""Fused residual add + RMSNorm: s = x + residual, y = RMSNorm(s), both returned."""
