"""Tiled SwiGLU MLP rerun adapter, and the tiled-MLP providers it shares with tiled GeGLU."""
