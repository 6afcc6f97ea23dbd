"""GroupNorm: normalization over groups of channels, with a per-channel scale and shift."""
