"""Qwen2-VL multimodal rotary position embedding (M-RoPE): temporal, height and width sections of RoPE."""
