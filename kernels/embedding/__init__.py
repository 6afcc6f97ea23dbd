"""Embedding: a lookup of token ids into a table of vectors."""
