"""The README and docs/ link to one another (issue 20): every relative link names a file that
exists, and every `#anchor` names a heading of the page it points into, by GitHub's rule for a
heading's anchor. So a page renamed, or a heading reworded, cannot leave a link dead. The README,
the front door, stays small: at most 20,000 bytes (its own test, below)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_BYTES = 20_000

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'(][^)]*)?\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, …


def _prose(text: str) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, numbered from 1."""
    out, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is None and opened:
            fence = opened.group(1)[0] * 3
        elif fence is not None and line.lstrip().startswith(fence):
            fence = None
        elif fence is None:
            out.append((number, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as rendered (links as their text, code as its
    characters), lower-cased, every character but letters, digits, `-`, `_` and spaces dropped,
    spaces turned into `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor; a repeated heading gets -1, -2, … as GitHub gives it."""
    seen: dict[str, int] = {}
    out = set()
    for _, line in _prose(page.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def links(page: Path) -> list[tuple[int, str]]:
    """The page's link targets, outside code blocks and code spans."""
    out = []
    for number, line in _prose(page.read_text(encoding="utf-8")):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            out.append((number, match.group(1)))
    return out


def broken(page: Path, root: Path = ROOT) -> list[str]:
    """Every relative link of `page` that names no file, or no heading of the page it points into
    (paths said relative to `root`)."""
    problems = []
    for number, target in links(page):
        if EXTERNAL.match(target) or target.startswith("//"):
            continue
        path, _, anchor = target.partition("#")
        where = f"{page.relative_to(root)}:{number}: {target}"
        dest = (page.parent / unquote(path)).resolve() if path else page
        if not dest.exists():
            problems.append(f"{where}: no such file")
        elif anchor and dest.suffix == ".md" and unquote(anchor) not in anchors(dest):
            problems.append(f"{where}: no heading with that anchor in {dest.relative_to(root)}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_names_a_file_and_heading_that_exist(page: Path) -> None:
    assert broken(page) == []


def test_every_docs_page_is_linked_from_the_index() -> None:
    index = ROOT / "docs" / "README.md"
    linked = {(index.parent / target.partition("#")[0]).resolve() for _, target in links(index)}
    unlinked = [p.name for p in PAGES if p.parent == index.parent and p != index and p.resolve() not in linked]
    assert unlinked == []


def test_the_readme_is_at_most_20_kb() -> None:
    """The front door (issue 20): what retrod is, how to start, where to read on."""
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size:,} bytes; at most {README_MAX_BYTES:,}"


def test_the_checker_sees_what_github_renders(tmp_path: Path) -> None:
    """The rules above on a page made for them: GitHub's anchors, code that is not a link, a
    repeated heading, a dead link and a dead anchor."""
    assert slug("Claude over MCP: `retrod mcp`") == "claude-over-mcp-retrod-mcp"
    assert slug("The report's JSON") == "the-reports-json"
    assert slug("Accounting rules, in brief") == "accounting-rules-in-brief"
    assert slug("Issue 19 — every figure right") == "issue-19--every-figure-right"
    assert slug("See [the docs](x.md) and snake_case") == "see-the-docs-and-snake_case"
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n## Same\n\n## Same\n\n"
                    "[ok](#same-1) [ok](#top) [dead](#nowhere) [gone](missing.md) `[code](missing.md)`\n"
                    "```\n[fenced](missing.md)\n# not a heading\n```\n[ext](https://example.com/x#y)\n",
                    encoding="utf-8")
    assert anchors(page) == {"top", "same", "same-1"}
    problems = [p.split(": ", 1)[1] for p in broken(page, tmp_path)]
    assert problems == ["#nowhere: no heading with that anchor in page.md", "missing.md: no such file"]

