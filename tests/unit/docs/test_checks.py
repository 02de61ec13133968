"""The docs' checks hold, and can fail: links and anchors (MkDocs, strict), repository paths (hack/docs_paths.py).

hack/test.sh's lint step builds the site with ``mkdocs build --strict`` and runs hack/docs_paths.py; these
tests prove both would catch a broken link, a broken anchor and a path that does not exist, using the
repository's own ``validation:`` settings, and run the path check over the real pages.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import yaml

from tests.unit.docs.conftest import ROOT, mkdocs_build


def _docs_paths() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_paths", ROOT / "hack" / "docs_paths.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docs_paths", module)
    spec.loader.exec_module(module)
    return module


docs_paths = _docs_paths()


def test_every_repository_path_the_docs_name_exists() -> None:
    problems = [problem for page in docs_paths.pages() for problem in docs_paths.missing(page)]
    assert problems == []


def test_the_path_check_finds_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "hack").mkdir()
    (tmp_path / "hack" / "there.sh").write_text("")
    (tmp_path / "tests" / "unit" / "kube").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "kube" / "test_a.py").write_text("")
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "Run `hack/there.sh up` and `hack/gone.sh`; the tests: `tests/unit/kube/test_a.py::test_x`,\n"
        "`tests/unit/test_a.py` (moved), [a link](../hack/there.sh), `tests/unit/<package>/` (a placeholder),\n"
        "`hack/{there,gone}.sh`, `tests/unit/*/test_a.py`, `kubectl rollout status deploy/operator`.\n"
        "\n"
        "```sh\n"
        "hack/missing.sh --flag\n"
        "```\n"
        "\n"
        "<!-- test: tutorial -->\n"
        "```sh\n"
        "hack/of-the-readers-project.sh\n"
        "```\n"
    )
    assert docs_paths.missing(page, tmp_path) == [
        "docs/page.md:1: hack/gone.sh",
        "docs/page.md:2: tests/unit/test_a.py",
        "docs/page.md:3: hack/{there,gone}.sh",
        "docs/page.md:6: hack/missing.sh",
    ]


def test_the_readme_links_are_checked(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("")
    readme = tmp_path / "README.md"
    readme.write_text("[here](docs/there.md#a), [gone](docs/gone.md), [web](https://example.com/x.md)\n")
    assert docs_paths.missing(readme, tmp_path) == ["README.md:1: docs/gone.md"]


def test_mkdocs_fails_the_build_on_a_broken_link_or_anchor(tmp_path: Path) -> None:
    """The repository's validation settings turn both into warnings, and --strict into a failed build."""
    ours = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    config = tmp_path / "mkdocs.yml"
    config.write_text(
        yaml.safe_dump({"site_name": "t", "validation": ours["validation"], "markdown_extensions": ["toc"]})
    )
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "other.md").write_text("# Other\n\n## A section\n")

    def build(index: str) -> tuple[int, str]:
        (docs / "index.md").write_text(f"# Home\n\n{index}\n")
        done = mkdocs_build(config, tmp_path / "site")
        return done.returncode, done.stdout + done.stderr

    assert build("[fine](other.md#a-section)")[0] == 0
    code, out = build("[gone](gone.md)")
    assert code != 0 and "'gone.md'" in out and "not found" in out
    code, out = build("[wrong anchor](other.md#no-such-section)")
    assert code != 0 and "#no-such-section" in out
    code, out = build("[own anchor](#nowhere)")
    assert code != 0 and "#nowhere" in out


def test_mkdocs_yml_validates_links_and_anchors() -> None:
    ours = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert ours["strict"] is True
    assert {key: ours["validation"][key] for key in ("unrecognized_links", "anchors", "omitted_files")} == {
        "unrecognized_links": "warn",
        "anchors": "warn",
        "omitted_files": "warn",
    }
