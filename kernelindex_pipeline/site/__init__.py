"""What readers meet: the record site, its exports and the verdict statements. It reads the warehouse and may
import every earlier domain; nothing of the pipeline imports it but the command line and the Dagster definitions.

- ``export``: ``kernelindex export`` (JSON manifests, HTML pages, in-toto statements).
- ``frame``: the page frame every page is drawn in, with ``escape``.
- ``pages``: permalinks, report links and the record page's parts; ``index``: the index page and search;
  ``glossary``: the glossary and how pages word a claim; ``verdict_pages``: a group's verdict history;
  ``kernel_claims``: a kernel page's list of decided claims.
- ``display``: how values read; ``charts``, ``chart_styles``, ``chart_ticks``: the inline SVG charts.
- ``statements``: in-toto statements of verdicts, bundled per kernel.
"""
