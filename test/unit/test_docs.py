"""The documentation's structural rules: a short README, links that resolve, no dates in code and
every measurement table in docs/performance.md stating its command, date and CPU."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 200
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
DATE = re.compile(r"20[0-9]{2}-[0-9]{2}-[0-9]{2}")
TABLE_PROVENANCE = ("- Command:", "- Date:", "- CPU:")
CODE_REFERENCE = re.compile(r"docs/([\w-]+\.md)(?:#([\w-]+))?")


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def outside_code_blocks(text: str) -> list[str]:
    lines, in_fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if not in_fence and not line.startswith("    "):
            lines.append(line)
    return lines


def anchors_of(document: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in outside_code_blocks(document.read_text()):
        match = re.match(r"#{1,6} (.*)", line)
        if not match:
            continue
        base = github_anchor(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        anchors.add(base if count == 0 else f"{base}-{count}")
    return anchors


def relative_links(document: Path) -> list[str]:
    links = []
    for line in outside_code_blocks(document.read_text()):
        links += [t for t in LINK.findall(line) if not re.match(r"[a-z]+:", t)]
    return links


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, "move sections of README.md to docs/"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: d.name)
def test_relative_links_resolve(document):
    broken = []
    for target in relative_links(document):
        path_part, _, anchor = target.partition("#")
        resolved = (document.parent / path_part).resolve() if path_part else document
        if not resolved.exists():
            broken.append(f"{target}: no file {resolved.relative_to(ROOT)}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors_of(resolved):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    assert not broken, f"{document.name}: " + "; ".join(broken)


def test_no_dates_in_code():
    dated = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "abir").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if DATE.search(line)
    ]
    assert not dated, "dates belong in docs/performance.md, not in code: " + ", ".join(dated)


def test_code_references_to_docs_resolve():
    """Docstrings link to a doc section as `docs/file.md#anchor`; each must name a real one."""
    broken = []
    for path in sorted((ROOT / "abir").rglob("*.py")):
        for name, anchor in CODE_REFERENCE.findall(path.read_text()):
            document = ROOT / "docs" / name
            if not document.exists() or (anchor and anchor not in anchors_of(document)):
                broken.append(f"{path.relative_to(ROOT)}: docs/{name}#{anchor}")
    assert not broken, "; ".join(broken)


def tables_without_provenance(text: str) -> list[int]:
    """Line numbers of tables not preceded (since the previous table) by a command, date and CPU."""
    missing, seen, in_table = [], set(), False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("|"):
            if not in_table and not all(p in seen for p in TABLE_PROVENANCE):
                missing.append(number)
            if not in_table:
                seen = set()
            in_table = True
            continue
        in_table = False
        seen.update(p for p in TABLE_PROVENANCE if line.startswith(p))
    return missing


def test_performance_tables_state_command_date_and_cpu():
    text = (ROOT / "docs" / "performance.md").read_text()
    assert tables_without_provenance(text) == []


def test_provenance_check_catches_a_bare_table():
    assert tables_without_provenance("- Command: `x`\n- Date: 2026-01-01\n\n| a |\n|---|\n") == [4]
    assert tables_without_provenance("- Command: `x`\n- Date: d\n- CPU: c\n| a |\n\n| b |\n") == [6]


def test_anchor_of_a_heading_with_code_and_punctuation():
    assert github_anchor("Against the reference (`make bench`)") == "against-the-reference-make-bench"
    assert github_anchor("The machine's design choices") == "the-machines-design-choices"
