"""Dynamic Tanh (DyT): y = gamma * tanh(alpha * x) + beta, a normalization-free stand-in for LayerNorm."""
