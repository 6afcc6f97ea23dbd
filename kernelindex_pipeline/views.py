"""Analyst views over the warehouse tables (documented in docs/warehouse.md)."""

VIEWS_SQL = """
"""
