"""One publication of the warehouse: the steps that land new revisions and evidence and recompute what they
reach. It may import every earlier domain (``core`` to ``verdicts``).

- ``steps``: the warehouse steps as plain functions, each one generation.
- ``derived``: the derived tables of a publication, recomputed only where it reaches.
- ``audit``: what a staged generation must keep before it goes live.
"""
