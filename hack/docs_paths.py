"""Every repository path the docs name exists: a check, not a promise (issue #36).

MkDocs checks the links between pages and their anchors (mkdocs.yml, ``validation:``); what it cannot see
is a page, or README.md, naming a file of the repository in backticks or a link: `tests/unit/...`, a
script under `hack/`, a results file under `bench/results/`. Tests move, scripts are renamed, and a page
that still names the old path sends its reader nowhere. This reads README.md and every page under docs/,
takes each such path (in inline code, fenced code and link targets), and reports those that do not exist.

What counts as a repository path: a word that starts with one of ``PREFIXES``. A pytest node id
(``file.py::test_name``) is checked as its file; ``{a,b}`` is expanded; a ``*`` must match something; a
path with a placeholder (``<kind>``, ``X.Y``, ``...``) is skipped. Fenced blocks a tutorial marks as run by
its test (``<!-- test: ... -->`` before the fence, see tests/integration/test_docs_pages.py) are skipped:
they name the reader's project, and their test runs them. README's relative links must name files that
exist. Run by tests/unit/docs/test_docs.py (hack/test.sh) and by hack/docs.sh; by hand:

    python hack/docs_paths.py            # exit 1 and one line per missing path
"""

from __future__ import annotations

import glob
import itertools
import re
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIXES = ("hack/", "tests/", "hybrid_operator/", "deploy/", "bench/", "images/", "molecule/", "docs/")
RUN_MARKER = re.compile(r"^<!-- test: [a-z0-9-]+(?: [a-z]+)* -->$")
_INLINE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_PLACEHOLDER = re.compile(r"<[^>]*>|\bX\.Y\b|\.\.\.|\$|%")
_TRAILING = ".,;:)'\""
_KUBECTL_NAME = re.compile(r"^deploy/[a-z0-9-]+$")


def pages(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def candidates(text: str) -> Iterator[tuple[int, str]]:
    """(line, word) for every word of inline code, fenced code and link targets (the caller keeps those that
    start with a prefix)."""
    fence = ""
    skip_block = False
    previous = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            if not fence:
                fence = stripped[:3]
                skip_block = bool(RUN_MARKER.match(previous))
            elif stripped.startswith(fence):
                fence = ""
            previous = stripped
            continue
        if stripped:
            previous = stripped
        if fence:
            if not skip_block:
                yield from ((number, word) for word in line.split())
            continue
        for match in _INLINE.finditer(line):
            yield from ((number, word) for word in match.group(1).split())
        for match in _LINK.finditer(line):
            yield number, match.group(1)


def repository_path(word: str) -> str | None:
    """The path a word names, or None when it names none (or one with a placeholder)."""
    word = word.strip(_TRAILING + "`(").split("::")[0].split("#")[0]
    word = word.removeprefix("./")
    if not word.startswith(PREFIXES) or _PLACEHOLDER.search(word):
        return None
    return word.rstrip(_TRAILING)


def exists(path: str, root: Path = ROOT) -> bool:
    """A path, its ``{a,b}`` alternatives all, or a glob that matches at least one file."""
    braces = re.search(r"\{([^{}]*)\}", path)
    if braces:
        head, tail = path[: braces.start()], path[braces.end() :]
        return all(exists(head + choice + tail, root) for choice in braces.group(1).split(","))
    if any(char in path for char in "*?["):
        return bool(glob.glob(str(root / path)))
    return (root / path).exists()


def missing(page: Path, root: Path = ROOT) -> list[str]:
    """``page:line: path`` for every repository path the page names that does not exist."""
    text = page.read_text()
    found = []
    lines = text.splitlines()
    for number, word in candidates(text):
        path = repository_path(word)
        if path is None or exists(path, root):
            continue
        if _KUBECTL_NAME.match(path) and "kubectl" in lines[number - 1]:
            continue  # `kubectl rollout status deploy/NAME`: a Deployment, not a directory
        found.append(f"{page.relative_to(root)}:{number}: {path}")
    if page.name == "README.md" and page.parent == root:
        found.extend(_readme_links(text, root))
    return list(dict.fromkeys(found))  # a README link under a prefix is found both ways


def _readme_links(text: str, root: Path) -> Iterator[str]:
    """README is not part of the site: its relative links are checked here (the site's by MkDocs)."""
    for number, line in enumerate(text.splitlines(), 1):
        for match in _LINK.finditer(line):
            target = match.group(1).split("#")[0]
            if target and "://" not in target and not (root / target).exists():
                yield f"README.md:{number}: {target}"


def main() -> int:
    problems = list(itertools.chain.from_iterable(missing(page) for page in pages()))
    for problem in problems:
        print(f"no such path: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
