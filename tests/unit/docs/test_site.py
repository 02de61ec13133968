"""The site's stable addresses: what the alerts and ``hybrid-operator check`` link to exists in the built site.

The alerts' ``runbook`` annotations (deploy/prometheus/rules.yaml) and the porting warnings of ``check``
(``hybrid_operator/project/porting.py``) are full URLs on the published site. The address is pinned
here: changing mkdocs.yml's ``site_url`` (or moving a page) breaks these tests, not the links in a
running cluster's alerts. Each URL is mapped to the built page and its anchor must be an element id there.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from hybrid_operator.project import porting
from tests.unit.docs.conftest import ROOT

SITE_URL = "https://hybrid-operator.dev/"


def _ids(site: Path, url: str) -> set[str]:
    """The element ids of the built page at ``url`` (a page of SITE_URL, directory URLs)."""
    assert url.startswith(SITE_URL), url
    page = site / url.removeprefix(SITE_URL).split("#")[0] / "index.html"
    assert page.is_file(), f"{url}: no page {page.relative_to(site)} in the built site"
    return set(re.findall(r'\bid="([^"]+)"', page.read_text()))


def test_the_site_url_is_pinned() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["site_url"] == SITE_URL
    assert config["use_directory_urls"] is True


def test_every_alert_links_to_an_anchor_of_the_built_runbook_page(site: Path) -> None:
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "rules.yaml").read_text())
    alerts = [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
    assert len(alerts) >= 10
    for alert in alerts:
        url = alert["annotations"]["runbook"]
        page, _, anchor = url.partition("#")
        assert anchor == alert["alert"].lower()
        assert anchor in _ids(site, page), f"{alert['alert']}: {url} is no anchor of the built site"


def test_every_porting_warning_links_to_an_anchor_of_the_built_porting_page(site: Path) -> None:
    ids = _ids(site, porting.PAGE)
    for pitfall in porting.PITFALLS:
        assert pitfall.anchor in ids, f"{porting.PAGE}#{pitfall.anchor} is no anchor of the built site"
    assert "docs/" + porting.PAGE.removeprefix(SITE_URL).rstrip("/") + ".md" == porting.SOURCE


def test_every_page_is_in_the_navigation(site: Path) -> None:
    """A page left out of mkdocs.yml's nav is built but linked from nowhere: list it there."""
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"]
    listed: set[str] = set()
    stack: list[object] = list(nav)
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            listed.add(item)
    pages = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert sorted(pages - listed) == []
    assert all((site / (page.removesuffix(".md").removesuffix("index")) / "index.html").is_file() for page in pages)
