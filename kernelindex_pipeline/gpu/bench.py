"""``python -m kernelindex_pipeline.gpu.bench``: the rerun session's first command name, kept as an alias
of ``python -m kernelindex_pipeline.gpu.rerun`` (every evidence record's protocol names it)."""

from __future__ import annotations

import sys

from kernelindex_pipeline.gpu.rerun import main

if __name__ == "__main__":
    sys.exit(main())
