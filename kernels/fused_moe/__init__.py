"""Fused mixture-of-experts rerun adapter."""
