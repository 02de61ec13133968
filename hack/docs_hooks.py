"""MkDocs hooks for the docs site (mkdocs.yml names this file; hack/docs.sh and hack/test.sh build the site).

The benchmark plots live beside the results they were drawn from (``bench/results/``, written by
``python -m bench --plot``), outside ``docs/``. Rather than copying them (a copy drifts from the run it
belongs to), the build serves each at ``bench-results/<name>``, so ``internals/benchmarks.md`` shows them
as ``../../bench-results/<name>`` and MkDocs checks those links like any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent


def on_files(files: Files, config: Any) -> Files:
    for plot in sorted((ROOT / "bench" / "results").glob("*.png")):
        files.append(File.generated(config, f"bench-results/{plot.name}", abs_src_path=str(plot)))
    return files
