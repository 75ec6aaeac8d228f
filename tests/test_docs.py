"""The documentation stays readable by whom it is for: README a short user guide, each package's README a
map of the package, and every relative link in the docs (README.md, docs/, bench/README.md, the package maps)
leading to a file (and heading) that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import REPO

README_MAX = 400  # lines: the user guide; what needs more goes to docs/
PACKAGE_README_MAX = 40  # lines: a contributor's map of one package
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def documents() -> list[Path]:
    """README.md, every page under docs/, bench/README.md and the package maps: the files a reader
    follows links through."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), REPO / "bench" / "README.md",
            *sorted((REPO / "acr_cli").rglob("README.md"))]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def relative_links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t)]  # no http:, mailto:


def test_the_readme_is_a_short_user_guide():
    assert lines(REPO / "README.md") <= README_MAX


def test_each_package_readme_is_a_short_map():
    readmes = sorted((REPO / "acr_cli").rglob("README.md"))
    assert REPO / "acr_cli" / "README.md" in readmes
    too_long = {str(p.relative_to(REPO)): lines(p) for p in readmes if lines(p) > PACKAGE_README_MAX}
    assert not too_long, f"package READMEs over {PACKAGE_README_MAX} lines: {too_long}"


@pytest.mark.parametrize("doc", documents(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_somewhere(doc):
    broken = []
    for target in relative_links(doc):
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert not broken, f"{doc.relative_to(REPO)}: " + "; ".join(broken)


def test_the_docs_pages_exist_and_the_readme_links_each():
    readme = set(relative_links(REPO / "README.md"))
    for page in sorted((REPO / "docs").glob("*.md")):
        assert any(t.partition("#")[0] == f"docs/{page.name}" for t in readme), f"README does not link docs/{page.name}"
    assert {"commands.md", "routing.md", "safety.md", "team-memory.md"} <= {p.name for p in (REPO / "docs").glob("*.md")}
