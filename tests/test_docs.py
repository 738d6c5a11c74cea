"""The README and docs/ link to one another (issue 20): every relative link names a file that
exists, and every `#anchor` names a heading of the page it points into, by GitHub's rule for a
heading's anchor. So a page renamed, or a heading reworded, cannot leave a link dead. The README,
the front door, stays small: at most 20,000 bytes (its own test, below). And a rule cited by its
number (`accounting.md §2.6`, issue 35) anywhere in the code, the tests, the migrations or the
docs names a numbered heading of docs/accounting.md, and nothing cites a file the repository does
not hold (issue 35): a link leads to a file inside it, and no text names the design notes, the
helper scripts or the folders its first authors kept beside it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
PAGES = [README, CONTRIBUTING, *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_BYTES = 20_000
ACCOUNTING = ROOT / "docs" / "accounting.md"
CITING = [ROOT / "daemon", ROOT / "tests", ROOT / "migrations", ROOT / "docs", README, CONTRIBUTING]
CITING_SUFFIXES = {".py", ".sql", ".md", ".js", ".css", ".html", ".toml"}
# The repository's whole text, for citations of what lies outside it (issue 35).
EVERYWHERE = [*CITING, ROOT / "pyproject.toml", ROOT / ".ci", ROOT / "systemd"]
EVERYWHERE_SUFFIXES = CITING_SUFFIXES | {"", ".service", ".plist", ".sh", ".txt", ".cfg", ".ini"}
# What the repository does not hold: the design notes its rules were first written in (their
# rules are docs/accounting.md's now), notes on transcript formats and on style, a `../shared`
# folder beside a checkout, and the paths of the machine it was built on (`/work/prof/…`). A word
# in quotes is data, not a citation: `"DESIGN"` (a report must not print it), `f"/work/{name}"`
# (a test's made-up working folder); so is a path below another (`/home/runner/work/…`).
OUTSIDE = re.compile(
    r"""(?<!["'])\bDESIGN\b|\bDESIGN\b(?!["'])|\b(?:FORMATS|STYLE)\.md\b|\.\./shared\b|(?<![\w"'{}/.~…-])/work/""")

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'(][^)]*)?\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, …
SECTION_NUMBER = r"\d+(?:\.\d+)*"
NUMBERED_HEADING = re.compile(rf"^({SECTION_NUMBER})\s")  # `## 2.6 Tool calls and waste signals`
# `accounting.md §2.6`, also across a comment's line break (`accounting.md\n    # §2.6`), and the
# sections listed after it: `§2.6, §2.8`, `§2.3/§2.4`, `§2.6 and §2.8`, ranges `§2.1–2.4`, `§2.1–§2.7`.
CITATION = re.compile(
    rf"accounting\.md[\s#*/-]*§\s?({SECTION_NUMBER})"
    rf"((?:\s*(?:,|/|\band\b)\s*§\s?{SECTION_NUMBER}|\s*[–-]\s*§?\s?{SECTION_NUMBER})*)")
CITED_AFTER = re.compile(rf"§?\s?({SECTION_NUMBER})")


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
        if not dest.is_relative_to(root.resolve()):
            problems.append(f"{where}: outside the repository")
        elif not dest.exists():
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


def test_the_readme_and_the_index_link_contributing_md() -> None:
    """CONTRIBUTING.md's recipes are found from the front door and from docs/ (issue 35)."""
    for page in (README, ROOT / "docs" / "README.md"):
        assert CONTRIBUTING.resolve() in {(page.parent / t.partition("#")[0]).resolve() for _, t in links(page)}, page


def test_the_readme_is_at_most_20_kb() -> None:
    """The front door (issue 20): what retrod is, how to start, where to read on."""
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size:,} bytes; at most {README_MAX_BYTES:,}"


def numbered_sections(page: Path) -> set[str]:
    """The numbers of the page's numbered headings: `## 2.6 Tool calls…` gives `2.6`."""
    out = set()
    for _, line in _prose(page.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        number = NUMBERED_HEADING.match(heading.group(2)) if heading else None
        if number:
            out.add(number.group(1))
    return out


def cited_sections(text: str) -> list[tuple[int, str]]:
    """Every section a text cites as `accounting.md §N.M` (with the ones listed after it), with
    the line the citation starts on."""
    out = []
    for match in CITATION.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        out.append((line, match.group(1)))
        out.extend((line, more.group(1)) for more in CITED_AFTER.finditer(match.group(2)))
    return out


def citing_files(roots: list[Path], suffixes: set[str] = CITING_SUFFIXES) -> list[Path]:
    """The text files under `roots` (a file root stands for itself), the virtualenv aside, and
    not this file, whose citations are the checker's examples."""
    files: list[Path] = []
    for root in roots:
        found = [root] if root.is_file() else sorted(root.rglob("*"))
        files.extend(f for f in found if f.is_file() and f.suffix in suffixes
                     and not {".venv", "__pycache__"} & set(f.parts) and f.resolve() != Path(__file__).resolve())
    return files


def outside_citations(roots: list[Path], root: Path = ROOT) -> list[str]:
    """Every line under `roots` that cites something the repository does not hold (OUTSIDE)."""
    return [f"{path.relative_to(root)}:{number}: {line.strip()[:100]}"
            for path in citing_files(roots, EVERYWHERE_SUFFIXES)
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
            if OUTSIDE.search(line)]


def unresolved(roots: list[Path], page: Path, root: Path = ROOT) -> list[str]:
    """Every `accounting.md §N.M` citation under `roots` that names no numbered heading of `page`."""
    sections = numbered_sections(page)
    return [f"{path.relative_to(root)}:{line}: accounting.md §{number}: no heading numbered {number}"
            for path in citing_files(roots)
            for line, number in cited_sections(path.read_text(encoding="utf-8", errors="replace"))
            if number not in sections]


def test_accounting_md_numbers_the_rules() -> None:
    """The rules are numbered as they are cited (issue 35): §2 and §2.1 … §2.10, §3, §4; and the
    page's own `§N.M` references name its headings."""
    sections = numbered_sections(ACCOUNTING)
    assert sections >= {"2", *(f"2.{n}" for n in range(1, 11)), "3", "4"}
    text = ACCOUNTING.read_text(encoding="utf-8")
    assert sorted(set(re.findall(rf"§\s?({SECTION_NUMBER})", text)) - sections) == []


def test_every_accounting_md_citation_names_a_numbered_heading() -> None:
    """A comment, test, migration or page that cites `accounting.md §2.6` cites a heading that
    exists: a section renumbered or removed cannot leave a citation pointing nowhere."""
    assert unresolved(CITING, ACCOUNTING) == []


def test_nothing_cites_a_file_the_repository_does_not_hold() -> None:
    """The code, tests, migrations, docs, CI script and units cite docs/accounting.md, a migration
    or docs/decisions.md, never the design notes or a path of the machine retrod was built on."""
    assert outside_citations(EVERYWHERE) == []


def test_the_outside_checker_finds_each_form(tmp_path: Path) -> None:
    """Each form of a citation outside is found; data in quotes and paths below others are not."""
    cites = ["# DESIGN §2.8: misses", "(DESIGN 2.7)", "see DESIGN.md", "from DESIGN's text", "-- (DESIGN",
             "FORMATS.md §3", "../shared/STYLE.md", "scripts in `/work/prof/report/`", "cd /work/wt/x"]
    data = ['assert "DESIGN" not in text', 'cwd = f"/work/{name}"', "`/home/runner/work/erk/erk`",
            "two of them `…/work/app`", "alice/work/app", "accounting.md §2.8", "DESIGNER", "../shared_x"]
    (tmp_path / "a.py").write_text("\n".join(cites + data) + "\n", encoding="utf-8")
    (tmp_path / "run").write_text("cd /work/main\n", encoding="utf-8")
    (tmp_path / "x.jsonl").write_text('{"text": "DESIGN §2.8"}\n', encoding="utf-8")
    found = [p.split(": ", 1)[0] for p in outside_citations([tmp_path], tmp_path)]
    assert found == [f"a.py:{n}" for n in range(1, len(cites) + 1)] + ["run:1"]


def test_the_citation_checker_reads_every_form(tmp_path: Path) -> None:
    """Lists, ranges and a citation broken over a comment's lines are read; a bare number after a
    comma is not a section; a dead section is found and named."""
    assert [n for _, n in cited_sections("see accounting.md §2.6, §2.8 and (accounting.md §2.3/§2.4)")] == [
        "2.6", "2.8", "2.3", "2.4"]
    assert [n for _, n in cited_sections("accounting.md §2.1–2.4: and accounting.md §2.1–§2.7's")] == [
        "2.1", "2.4", "2.1", "2.7"]
    assert [n for _, n in cited_sections("x = 1  # (accounting.md\n    # §2.10 reads them), 3 rows")] == ["2.10"]
    assert [n for _, n in cited_sections("accounting.md §2.6, 12 calls; accounting.md §3.")] == ["2.6", "3"]
    page = tmp_path / "accounting.md"
    page.write_text("# Rules\n\n## 2 All\n\n## 2.1 Files\n\n```\n## 2.9 not a heading\n```\n", encoding="utf-8")
    assert numbered_sections(page) == {"2", "2.1"}
    (tmp_path / "code.py").write_text('"""accounting.md §2.1."""\n# accounting.md §2, §2.9\n', encoding="utf-8")
    (tmp_path / "skip.jsonl").write_text("accounting.md §7\n", encoding="utf-8")
    assert unresolved([tmp_path], page, tmp_path) == [
        "code.py:2: accounting.md §2.9: no heading numbered 2.9"]


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
    (tmp_path / "docs").mkdir()
    inner = tmp_path / "docs" / "inner.md"
    inner.write_text("[up](../page.md) [out](../../elsewhere.md)\n", encoding="utf-8")
    assert [p.split(": ", 1)[1] for p in broken(inner, tmp_path)] == ["../../elsewhere.md: outside the repository"]



# Commit subjects of at most 72 characters from issue 35 on (CONTRIBUTING.md's house rules): the
# commits after the one issue 35's branches started from, committed after it (so that an older
# branch merged later is not held to a rule it predates). History is not rewritten: a commit that
# landed with a longer subject is listed below with the reason, and the check goes on for the rest.
SUBJECTS_FROM = "61d0f5687aeea7791cf494830093cd22950e4b91"
SUBJECT_MAX = 72
LONG_SUBJECTS_KEPT: dict[str, str] = {  # full hash: why it stays
    "6ae33ed10fcab7f9eb5d461810ec4b66266dddd6": "75 characters: a slip the check caught after it landed",
    "4296d31e0bbe54fd0dc64ac05f6baaa3e9a0d298": "77 characters, written before this check existed (a parallel branch)",
    "1579704b4c293bb3acac8082184e04a44692fd14": "73 characters, written before this check existed (a parallel branch)",
    "9bb4fd25650aefa53221c50b2a5f57f815c3d8ff": "74 characters, landed before this check existed",
    "df69bf82e4a2180653900df8cff1bcaaa2513eb9": "a merge's subject, 76 characters, landed before this check existed",
}


def long_subjects(root: Path = ROOT, base: str = SUBJECTS_FROM) -> list[str] | None:
    """The commits after `base` (and not older than it) whose subject is longer than SUBJECT_MAX,
    as `hash subject`; None where the history cannot be read (no git, an exported tree, a shallow
    clone). A whole history without `base` is an error: the hash above would be wrong."""
    git = shutil.which("git")
    if git is None:
        return None

    def run(*args: str) -> str | None:
        done = subprocess.run([git, "-C", str(root), *args], capture_output=True, text=True, check=False)
        return done.stdout if done.returncode == 0 else None

    if run("rev-parse", "--show-toplevel") is None or run("rev-parse", "--is-shallow-repository") != "false\n":
        return None
    since, log = run("log", "-1", "--format=%ct", base), run("log", "--format=%H%x00%ct%x00%s", f"{base}..HEAD")
    if since is None or log is None:
        raise LookupError(f"{base} is not a commit of this history")
    out = []
    for line in log.splitlines():
        commit, when, subject = line.split("\0", 2)
        if int(when) >= int(since) and len(subject) > SUBJECT_MAX and commit not in LONG_SUBJECTS_KEPT:
            out.append(f"{commit[:12]} {subject}")
    return out


def test_commit_subjects_since_issue_35_are_at_most_72_characters() -> None:
    found = long_subjects()
    if found is None:
        pytest.skip("no git history here (an exported tree, or a shallow clone)")
    assert found == [], f"subjects longer than {SUBJECT_MAX} characters (CONTRIBUTING.md)"


def test_the_subject_check_reads_history(tmp_path: Path) -> None:
    """On a history made for it: a long subject after the base is found, one before it and a short
    one are not; without the base commit there is nothing to check."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")

    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",  # no signing hooks
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}

    def commit(subject: str) -> str:
        subprocess.run([git, "-C", str(tmp_path), "commit", "-q", "--allow-empty", "-m", subject],
                       check=True, env=env)
        return subprocess.run([git, "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()

    subprocess.run([git, "init", "-q", str(tmp_path)], check=True, env=env)
    commit("x" * 80 + " before the rule")
    base = commit("the rule starts here")
    commit("short and fine")
    long = "y" * (SUBJECT_MAX + 1)
    after = commit(long)
    assert long_subjects(tmp_path, base) == [f"{after[:12]} {long}"]
    with pytest.raises(LookupError):
        long_subjects(tmp_path, "0" * 40)
    shallow = tmp_path / "shallow"
    subprocess.run([git, "clone", "-q", "--depth", "1", f"file://{tmp_path}", str(shallow)], check=True, env=env)
    assert long_subjects(shallow, base) is None
