"""Every version the docs state is the one the project's own files pin (issue #36: never drift).

operator-sdk's docs still said its Ansible image shipped ansible-core 2.15 long after it moved on; ours must
fail a test instead. The sources of truth:

- ``hack/versions.env``: the test bed's Kubernetes, etcd and kwok;
- ``hack/constraints/ansible-core-X.Y.txt``: each supported ansible-core minor, its exact ansible-core,
  ``ansible``, ansible-runner and openstacksdk, and the Pythons it takes (``# python:``);
- ``pyproject.toml``: ``requires-python`` and the ansible-runner range;
- ``images/base/Containerfile``: the base image's Python;
- ``hack/upstream-testdata.sh``: the ansible-operator-plugins release we compare with.

Every page under docs/ and README.md is read. A measurement states the version it ran on, which stays
true after the pins move, so docs/internals/benchmarks.md (whose every figure names its results file) is
exempt from the exact-version checks; its ansible-core minors must still be supported ones.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.docs.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MEASURED = {ROOT / "docs" / "internals" / "benchmarks.md"}


def _env() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in (ROOT / "hack" / "versions.env").read_text().splitlines())
    return {key.strip(): value.strip() for key, value in (p for p in pairs if len(p) == 2 and not p[0].startswith("#"))}


def _constraints() -> dict[str, dict[str, str]]:
    """minor -> {package: version, 'python': 'X.Y X.Y'} of each hack/constraints file."""
    sets = {}
    for path in sorted((ROOT / "hack" / "constraints").glob("ansible-core-*.txt")):
        text = path.read_text()
        pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", text, re.M))
        pins["python"] = re.search(r"^# python: *(.+)$", text, re.M).group(1)  # type: ignore[union-attr]
        sets[path.stem.removeprefix("ansible-core-")] = pins
    return sets


ENV = _env()
CONSTRAINTS = _constraints()
PINNED_CORE = {pins["ansible-core"] for pins in CONSTRAINTS.values()}


def _claims(pattern: str, *, measured: bool = False) -> list[tuple[str, str]]:
    """(page:line, the first group) for every match of ``pattern`` in the docs."""
    found = []
    for page in DOCS:
        if page in MEASURED and not measured:
            continue
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for match in re.finditer(pattern, line):
                found.append((f"{page.relative_to(ROOT)}:{number}", match.group(1)))
    return found


@pytest.mark.parametrize(
    ("name", "key"), [("Kubernetes", "KUBERNETES_VERSION"), ("etcd", "ETCD_VERSION"), ("kwok", "KWOK_VERSION")]
)
def test_the_test_beds_versions_are_hack_versions_env(name: str, key: str) -> None:
    claims = _claims(rf"\b{name}\s+\**(v\d+\.\d+\.\d+)")
    assert claims, f"no page states the {name} version any more: drop this check"
    assert [c for c in claims if c[1] != ENV[key]] == [], f"hack/versions.env pins {ENV[key]}"


def test_every_exact_ansible_core_is_a_pinned_one() -> None:
    claims = _claims(r"ansible-core\s+\**(2\.\d+\.\d+)")
    assert claims
    assert [c for c in claims if c[1] not in PINNED_CORE] == [], f"hack/constraints pins {sorted(PINNED_CORE)}"


def test_every_ansible_core_minor_named_is_supported_or_said_to_be_otherwise() -> None:
    """A minor outside the range only where the text says so (upstream's 2.15, the canary's "newer")."""
    minors = set(CONSTRAINTS)
    claims = _claims(r"ansible-core\s+\**(2\.\d+)(?![.\d])", measured=True)
    odd = [c for c in claims if c[1] not in minors]
    assert all(c[1] in ("2.15", "2.22") for c in odd), odd


def _row(page: Path, first_cell: str) -> list[str]:
    for line in page.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"{page.relative_to(ROOT)} has no table row {first_cell!r}")


VERSIONS_PAGE = ROOT / "docs" / "operating" / "versions.md"


def test_the_supported_versions_table_is_the_constraints() -> None:
    pythons = {p for pins in CONSTRAINTS.values() for p in pins["python"].split()}
    assert set(re.findall(r"3\.\d+", _row(VERSIONS_PAGE, "Python")[1])) == pythons
    assert set(re.findall(r"2\.\d+", _row(VERSIONS_PAGE, "ansible-core")[1].split("(")[0])) == set(CONSTRAINTS)
    ansible = _row(VERSIONS_PAGE, "`ansible` (the collections)")[1]
    for minor, pins in CONSTRAINTS.items():
        major = pins["ansible"].split(".")[0]
        assert re.search(rf"\b{major}\b \((?:on ansible-core )?{re.escape(minor)}\)", ansible), (minor, ansible)
    runner = {pins["ansible-runner"].rsplit(".", 1)[0] for pins in CONSTRAINTS.values()}
    assert set(re.findall(r"\d+\.\d+", _row(VERSIONS_PAGE, "ansible-runner")[1])) == runner
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert all(f'"ansible-runner>={r},' in pyproject for r in runner)


def test_each_constraints_row_is_its_file() -> None:
    for minor, pins in CONSTRAINTS.items():
        cells = next(
            [c.strip() for c in line.strip().strip("|").split("|")]
            for line in VERSIONS_PAGE.read_text().splitlines()
            if line.startswith(f"| `ansible-core-{minor}.txt`")
        )
        _file, python, core, ansible, openstacksdk = cells
        assert python == pins["python"].split()[0], (minor, python)
        assert core == pins["ansible-core"], (minor, core)
        assert ansible.split()[0] == pins["ansible"], (minor, ansible)
        assert openstacksdk == pins["openstacksdk"], (minor, openstacksdk)


def test_the_newest_set_is_what_the_pages_call_the_newest() -> None:
    newest = max(CONSTRAINTS, key=lambda minor: tuple(map(int, minor.split("."))))
    pins = CONSTRAINTS[newest]
    python = pins["python"].split()[0]
    for claim, found in _claims(r"ansible-core (\d+\.\d+\.\d+) on Python \d+\.\d+ \(our newest\)"):
        assert found == pins["ansible-core"], claim
    for claim, found in _claims(r"ansible-core \d+\.\d+\.\d+ on Python (\d+\.\d+) \(our newest\)"):
        assert found == python, claim
    containerfile = (ROOT / "images" / "base" / "Containerfile").read_text()
    image_python = re.search(r"^ARG BASE_IMAGE=.*python:(\d+\.\d+)-slim$", containerfile, re.M).group(1)  # type: ignore[union-attr]
    assert image_python == python
    for claim, found in _claims(r"python:(\d+\.\d+)-slim") + _claims(r"`hybrid-operator-base`\): Python (\d+\.\d+)"):
        assert found == image_python, claim


def test_the_python_floor_is_pyprojects() -> None:
    floor = re.search(r'^requires-python = ">=(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert floor is not None
    claims = _claims(r"Python ≥ (\d+\.\d+)")
    assert claims and claims[0][1] == floor.group(1), claims


def test_the_operator_sdk_release_is_the_one_we_fetch() -> None:
    fetched = re.search(r"ANSIBLE_OPERATOR_VERSION:-(v[\d.]+)", (ROOT / "hack" / "upstream-testdata.sh").read_text())
    assert fetched is not None
    claims = _claims(r"ansible-operator-plugins\**\s+(v\d+\.\d+\.\d+)")
    claims += _claims(r"`ansible-operator` (v\d+\.\d+\.\d+)") + _claims(r"ansible-operator-plugins@(v\d+\.\d+\.\d+)")
    assert claims
    assert [c for c in claims if c[1] != fetched.group(1)] == []


def test_the_interpreter_the_venvs_are_built_on_is_the_pinned_one() -> None:
    """hack/build-python.sh builds hack/versions.env's PYTHON_SOURCE_VERSION: the pages say that version."""
    version = ENV["PYTHON_SOURCE_VERSION"]
    claims = _claims(r"\bpython3\.\d+ (3\.\d+\.\d+)\b")
    assert claims, "no page names the interpreter hack/build-python.sh builds any more: drop this check"
    assert [c for c in claims if c[1] != version] == [], f"hack/versions.env pins Python {version}"
