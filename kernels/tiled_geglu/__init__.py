"""Tiled GeGLU MLP rerun adapter."""
