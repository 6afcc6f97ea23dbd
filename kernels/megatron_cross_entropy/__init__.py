"""Megatron-LM vocab-parallel cross entropy rerun adapter."""
