"""The documentation's links hold: every relative link and image points to a file that exists, every
``#anchor`` to a heading of the page it names (GitHub's slugs), and every repository path the current pages
name in backticks exists.

Pages: README.md, ARCHITECTURE.md, BENCHMARKS.md, results/README.md and docs/**/*.md. Links inside code
(fenced blocks, `spans`) are text, not links, and are not checked; nor are absolute URLs.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_PAGES = ("README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "results/README.md")
# Pages written in parallel by other work that README and docs/ already link to. A link to one of them
# passes while it is missing; once it exists it is checked like any page (this list is then inert).
EXPECTED_TO_COME = frozenset({"docs/adding-a-task.md", "docs/plugins.md"})

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target), an optional "title" after the target; the text may hold brackets.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*([^()\s]+)(?:\s+\"[^\"]*\")?\s*\)")
HTML_SOURCE = re.compile(r"<(?:img|a)\s[^>]*?(?:src|href)=\"([^\"]+)\"", re.IGNORECASE)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def pages() -> list[Path]:
    """The pages whose links are checked."""
    found = [ROOT / name for name in TOP_PAGES if (ROOT / name).exists()]
    found += sorted((ROOT / "docs").rglob("*.md"))
    return found


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, code spans blanked."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: markup dropped, lower case, punctuation dropped (word
    characters, spaces and hyphens stay), each space one hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = re.sub(r"</?[A-Za-z][^>]*>", "", text)  # HTML tags; a literal "<->" stays text
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page offers: its headings' slugs, repeats numbered -1, -2, ... as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    text = path.read_text(encoding="utf-8")
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    found.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link and image outside code."""
    found = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        found += [(number, target) for target in LINK.findall(line)]
        found += [(number, target) for target in HTML_SOURCE.findall(line)]
    return found


def broken_links(path: Path) -> list[str]:
    """What is wrong with ``path``'s links, one line each (empty when every link holds)."""
    problems = []
    where = path.relative_to(ROOT)
    for number, target in links(path):
        if not target or SCHEME.match(target) or target.startswith("//"):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        name = resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else str(resolved)
        if not resolved.exists():
            if name in EXPECTED_TO_COME and not anchor:
                continue
            problems.append(f"{where}:{number}: {target}: no such file ({name})")
            continue
        if anchor:
            if resolved.suffix != ".md" or resolved.is_dir():
                problems.append(f"{where}:{number}: {target}: an anchor into a file that is not a page")
            elif anchor not in anchors(resolved):
                problems.append(f"{where}:{number}: {target}: no heading '#{anchor}' in {name}")
    return problems


# A repository path in backticks: it starts at a top-level folder of the checkout and names no pattern.
TOP_FOLDERS = (
    "embodied_r_ros training test bench config launch docs results scripts msg srv action interfaces".split()
)
REPO_PATH = re.compile(r"`((?:" + "|".join(TOP_FOLDERS) + r")/[A-Za-z0-9_./-]+)`")
# Interface type names (`embodied_r_ros/srv/AskSpatial`) look like paths but are not.
INTERFACE_TYPE = re.compile(r"^embodied_r_ros/(msg|srv|action)/[A-Z]\w*$")


def missing_code_paths(path: Path) -> list[str]:
    """Repository paths named in ``path``'s prose (`embodied_r_ros/memory/store.py`) that do not exist."""
    problems = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        for name in REPO_PATH.findall(line):
            name = name.rstrip(".")
            if any(mark in name for mark in ("NNNN", "*", "<", "{")) or INTERFACE_TYPE.match(name):
                continue
            if not (ROOT / name).exists():
                problems.append(f"{path.relative_to(ROOT)}:{number}: `{name}` does not exist")
    return problems


@pytest.mark.parametrize("path", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_and_anchor_points_to_something_that_exists(path):
    assert broken_links(path) == []


@pytest.mark.parametrize(
    "path",
    [p for p in pages() if "history" not in p.relative_to(ROOT).parts],
    ids=lambda p: p.relative_to(ROOT).as_posix(),
)
def test_repository_paths_named_in_the_current_pages_exist(path):
    # docs/history/ is a record of earlier code at its commits: the paths it names may have moved since.
    assert missing_code_paths(path) == []


def test_the_pages_are_found_and_the_readme_links_the_docs():
    names = {p.relative_to(ROOT).as_posix() for p in pages()}
    assert {"README.md", "BENCHMARKS.md"} <= names
    readme_targets = {target.partition("#")[0] for _, target in links(ROOT / "README.md")}
    docs_pages = {n for n in names if n.startswith("docs/") and "/history/" not in n}
    assert docs_pages and docs_pages <= readme_targets


def test_the_checker_finds_broken_links_and_anchors(tmp_path, monkeypatch):
    tmp_path = tmp_path.resolve()
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text(
        "# Other page\n\n## Rotated options: the `data.rotate_options` key\n\n"
        "## Indoor <-> outdoor (issue 28)\n"
    )
    (tmp_path / "figure.png").write_bytes(b"")
    page.write_text(
        "# Title\n\n## A (small) heading, again\n\n## A (small) heading, again\n\n"
        "[ok](other.md#rotated-options-the-datarotate_options-key) ![ok](figure.png) [ok](#title)\n"
        "[ok](other.md#indoor---outdoor-issue-28) "
        "[ok](#a-small-heading-again-1) [ok](https://example.org/x.md#nowhere) `[code](nowhere.md)`\n"
        "[bad](missing.md) ![bad](figures/none.png) [bad](other.md#no-such-heading) [bad](#a-small-heading)\n"
        "```\n[in a fence](also-missing.md)\n```\n"
    )
    problems = broken_links(page)
    assert [p.split(": ")[1] for p in problems] == [
        "missing.md",
        "figures/none.png",
        "other.md#no-such-heading",
        "#a-small-heading",
    ], problems
    assert all(p.startswith("page.md:9: ") for p in problems)
